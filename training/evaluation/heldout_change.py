"""How far the final held-out evaluation moved from the step-0 one, paired per held-out row, with 95% intervals:
what the console, `run_summary.json` (`heldout_change`) and `reward_curve.png` report at the end of a run.

A held-out row (a prompt, an SCM) is the independent unit: its sampled episodes share it, so each row's metric is
first averaged over its episodes. The change is the mean over rows of (final - start), with its Student-t 95%
interval over the rows both evaluations scored. An interval that includes 0 is said in words: no detectable change.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

import numpy as np

from training.analysis.stats import unit_means
from training.evaluation.episodes import t_interval

DIRECTIONS = ("higher", "lower")


@dataclass(frozen=True)
class MetricChange:
    metric: str
    better: str  # "higher" or "lower"
    start: float
    final: float
    diff: float
    ci95: tuple[float, float] | None
    rows: int
    verdict: str

    def as_json(self) -> dict:
        return asdict(self)

    def short(self) -> str:
        """One line for a figure: metric, start -> final, the change with its interval, the verdict's first words."""
        interval = "n/a" if self.ci95 is None else f"[{self.ci95[0]:+.3f}, {self.ci95[1]:+.3f}]"
        return (f"{self.metric}: {self.start:.3f} -> {self.final:.3f} ({self.diff:+.3f}, 95% CI {interval}, "
                f"{self.rows} rows): {self.verdict.split(' (')[0]}")

    def sentence(self) -> str:
        interval = "n/a" if self.ci95 is None else f"[{self.ci95[0]:+.3f}, {self.ci95[1]:+.3f}]"
        return (f"{self.metric} ({self.better} is better): {self.start:.3f} -> {self.final:.3f}, change "
                f"{self.diff:+.3f}, 95% CI {interval} over {self.rows} held-out rows: {self.verdict}")


def row_means(records: Iterable[tuple[int, float | None]]) -> dict[int, float]:
    """Per row, the mean of its values; None (an unscorable episode) is left out, and a row with none left is
    absent."""
    kept = [(row, value) for row, value in records if value is not None]
    if not kept:
        return {}
    rows, means = unit_means([v for _, v in kept], [r for r, _ in kept])
    return dict(zip(rows, means.tolist(), strict=True))


def paired_change(metric: str, better: str, start: dict[int, float], final: dict[int, float]) -> MetricChange:
    """The change of `metric` over the rows present in both evaluations."""
    if better not in DIRECTIONS:
        raise ValueError(f"{metric}: better must be one of {DIRECTIONS}, got {better!r}")
    rows = sorted(set(start) & set(final))
    if not rows:
        raise ValueError(f"{metric}: the two held-out evaluations share no scored row")
    before, after = np.array([start[r] for r in rows]), np.array([final[r] for r in rows])
    d = after - before
    interval = t_interval(d)
    ci = None if interval is None else (float(interval[3][0]), float(interval[3][1]))
    if ci is None:
        verdict = "too few rows to tell"
    elif ci[0] <= 0 <= ci[1]:
        verdict = "no detectable change (the 95% interval includes 0)"
    else:
        up = ci[0] > 0
        verdict = "improved" if up == (better == "higher") else "got worse"
    return MetricChange(metric, better, float(before.mean()), float(after.mean()), float(d.mean()), ci, len(rows),
                        verdict)


def changes(start: dict[str, dict[int, float]], final: dict[str, dict[int, float]],
            directions: dict[str, str]) -> list[MetricChange]:
    """`paired_change` of every metric in `directions`, in its order."""
    return [paired_change(m, better, start[m], final[m]) for m, better in directions.items()]
