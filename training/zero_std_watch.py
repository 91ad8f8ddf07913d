"""Warn when most groups carry no signal for several batches in a row.

A group whose rewards are all equal has advantage 0 everywhere: it teaches nothing. TRL logs the fraction of such
groups (`frac_reward_zero_std`); `ZeroStdWatchMixin` tracks how many generation batches in a row it stayed above
`zero_std_warn_threshold`, logs that streak as `zero_std/streak`, and warns when it reaches `zero_std_warn_steps`
(and again every that many batches). With dynamic sampling on, it watches the first round, i.e. the raw signal.
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)


def next_streak(streak: int, frac_zero_std: float, threshold: float) -> int:
    """The streak after one more batch: +1 when above the threshold, else back to 0."""
    return streak + 1 if frac_zero_std > threshold else 0


class ZeroStdWatchMixin:
    """See the module docstring."""

    _zero_std_streak: int = 0

    def _generate_and_score_completions(self, inputs):
        mode = "train" if self.model.training else "eval"
        values = self._metrics[mode]["frac_reward_zero_std"]
        before = len(values)
        output = super()._generate_and_score_completions(inputs)
        if mode != "train" or len(values) == before:
            return output
        threshold, steps = self.args.zero_std_warn_threshold, self.args.zero_std_warn_steps
        self._zero_std_streak = next_streak(self._zero_std_streak, values[before], threshold)
        self._metrics[mode]["zero_std/streak"].append(float(self._zero_std_streak))
        if steps > 0 and self._zero_std_streak and self._zero_std_streak % steps == 0:
            remedy = (
                "raise dynamic_sampling_max_rounds" if self.args.dynamic_sampling else "turn on dynamic_sampling"
            )
            logger.warning(
                "frac_reward_zero_std has been above %.2f for %d generation batches in a row (now %.2f): most "
                "groups' rewards are all equal, so they carry no learning signal. Check the reward functions "
                "(rewards/*/std), raise temperature or num_generations, or %s.",
                threshold,
                self._zero_std_streak,
                values[before],
                remedy,
            )
        return output
