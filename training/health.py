"""Health detectors for the failures that make a broken RL run look like a working one.

Each logged training step is checked for:
- `health/zero_loss`: the loss is exactly 0 and no gradient flows (every advantage is 0: all rewards equal in every
  group, a reward function returning constants, or a masked-out batch);
- `health/all_groups_zero_std`: every group's rewards are equal, so the step carries no learning signal;
- `health/ratio_pinned`: on a reuse pass of a generation batch (`num_iterations > 1`) the PPO ratio is exactly 1 with
  zero spread, i.e. the "old" log-probs were recomputed with the current policy.
Each detection is counted in the step's logs (1.0 or 0.0, so `metrics.jsonl` shows every step). When one persists
for `health_patience` consecutive logged steps and `strict_health` is on, the run stops with a message that says
what is wrong and where to look.
"""

from __future__ import annotations

import logging
from collections import defaultdict

from transformers import TrainerCallback

logger = logging.getLogger(__name__)


class RunHealthError(RuntimeError):
    """A health detector fired for `health_patience` consecutive steps under `strict_health`."""


ADVICE = {
    "health/zero_loss": "the loss is exactly 0 and the gradient norm is 0: every advantage is 0. Check that the "
    "reward functions return varied scores (rewards/*/std in metrics.jsonl) and that the loss mask is not empty",
    "health/all_groups_zero_std": "every group's rewards are identical (frac_reward_zero_std = 1): GRPO has no signal. "
    "Check the reward functions, raise num_generations or temperature, or enable dynamic sampling",
    "health/ratio_pinned": "the PPO ratio is exactly 1.0 with zero spread on a reuse pass: the old log-probs were "
    "recomputed with the current policy. Keep PPO_RECORD_AT_SAMPLE=1",
}


def detect(logs: dict, reuse_pass: bool) -> dict[str, bool]:
    """Which detectors fire for one training-step log. Pure: tested alone."""
    return {
        "health/zero_loss": logs.get("loss") == 0.0 and logs.get("grad_norm") == 0.0,
        "health/all_groups_zero_std": logs.get("frac_reward_zero_std") == 1.0,
        "health/ratio_pinned": reuse_pass and logs.get("ratio/std") == 0.0 and logs.get("ratio/mean") == 1.0,
    }


class HealthMonitorCallback(TrainerCallback):
    """Adds the detector values to each training-step log; when one persists under `strict_health` it leaves a
    `RunHealthError` in `self.error` for the trainer to raise once the log line has been written."""

    def __init__(self, trainer):
        self.trainer = trainer
        self.streaks: dict[str, int] = defaultdict(int)
        self.error: RunHealthError | None = None

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "loss" not in logs:
            return
        fired = detect(logs, reuse_pass=self.trainer.is_reuse_pass())
        for name, hit in fired.items():
            logs[name] = float(hit)
            self.streaks[name] = self.streaks[name] + 1 if hit else 0
            if hit:
                logger.warning("step %d: %s", state.global_step, ADVICE[name])
            if hit and args.strict_health and self.streaks[name] >= args.health_patience:
                self.error = RunHealthError(
                    f"{name} fired for {self.streaks[name]} consecutive steps (up to step {state.global_step}): "
                    f"{ADVICE[name]}. Set strict_health=false to only warn."
                )
