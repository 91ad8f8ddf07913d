"""Convergence time of a run from its held-out history.

Definition. Let (s_1, r_1), ..., (s_m, r_m) be the held-out evaluations in step order (`heldout/reward` at optimizer
step s_j) and MA_j = mean(r_{max(1, j-w+1)}, ..., r_j) the trailing moving average over `window` = w evaluations.
With F = MA_m (the final moving average), the convergence step is s_k for the smallest k such that
|MA_j - F| <= band for every j >= k: the step after which the smoothed held-out reward stays within `band`
(absolute, in reward units) of its final value.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

DEFAULT_WINDOW = 3
DEFAULT_BAND = 0.05


@dataclass(frozen=True)
class Convergence:
    step: int | None
    final_moving_average: float | None
    window: int
    band: float
    evaluations: int

    def as_json(self) -> dict:
        return asdict(self)


def moving_average(values: list[float], window: int) -> list[float]:
    """Trailing moving average: entry j is the mean of values[max(0, j - window + 1) : j + 1]."""
    return [float(np.mean(values[max(0, j - window + 1) : j + 1])) for j in range(len(values))]


def convergence_step(history: list[tuple[int, float]], window: int = DEFAULT_WINDOW, band: float = DEFAULT_BAND
                     ) -> Convergence:
    """The convergence step of `history` [(step, held-out reward)] (module docstring); None without evaluations."""
    if window < 1 or band < 0:
        raise ValueError(f"window must be >= 1 and band >= 0, got window={window}, band={band}")
    history = sorted(history)
    if not history:
        return Convergence(None, None, window, band, 0)
    steps = [s for s, _ in history]
    smooth = moving_average([r for _, r in history], window)
    final = smooth[-1]
    k = len(smooth) - 1
    while k > 0 and abs(smooth[k - 1] - final) <= band:
        k -= 1
    return Convergence(steps[k], final, window, band, len(history))
