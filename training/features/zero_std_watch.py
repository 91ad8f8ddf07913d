"""Warn when most groups carry no signal for several batches in a row.

A group whose rewards are all equal has advantage 0 everywhere: it teaches nothing. TRL logs the fraction of such
groups (`frac_reward_zero_std`); `ZeroStdWatch` tracks how many generation batches in a row it stayed above
`zero_std_warn_threshold`, logs that streak as `zero_std/streak`, and warns when it reaches `zero_std_warn_steps`
(and again every that many batches). With dynamic sampling on, it watches the first round, i.e. the raw signal.
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)


def next_streak(streak: int, frac_zero_std: float, threshold: float) -> int:
    """The streak after one more batch: +1 when above the threshold, else back to 0."""
    return streak + 1 if frac_zero_std > threshold else 0


class ZeroStdWatch:
    def __init__(self, threshold: float, steps: int, dynamic_sampling: bool):
        self.threshold = threshold
        self.steps = steps
        self.remedy = "raise dynamic_sampling_max_rounds" if dynamic_sampling else "turn on dynamic_sampling"
        self.streak = 0

    def after_batch(self, frac_zero_std: float, metrics: dict) -> None:
        """One training generation batch's `frac_reward_zero_std` (its first round's)."""
        self.streak = next_streak(self.streak, frac_zero_std, self.threshold)
        metrics["zero_std/streak"].append(float(self.streak))
        if self.steps > 0 and self.streak and self.streak % self.steps == 0:
            logger.warning(
                "frac_reward_zero_std has been above %.2f for %d generation batches in a row (now %.2f): most "
                "groups' rewards are all equal, so they carry no learning signal. Check the reward functions "
                "(rewards/*/std), raise temperature or num_generations, or %s.",
                self.threshold,
                self.streak,
                frac_zero_std,
                self.remedy,
            )

    def state_dict(self) -> dict:
        return {"streak": self.streak}

    def load_state_dict(self, state: dict) -> None:
        self.streak = state["streak"]
