"""`StrictGRPOTrainer`: TRL's `GRPOTrainer` with the strict stack wired in through a few narrow overrides."""

from __future__ import annotations

import logging
from functools import partial

from trl import GRPOTrainer

from training.callbacks import (
    HeldoutEvalCallback,
    MetricsJsonlCallback,
    OptimizerTimingCallback,
    WallTimeGuardCallback,
)
from training.checkpoints import save_complete_checkpoint  # robust branch (issue 15): see _save_checkpoint
from training.config import StrictGRPOConfig
from training.diagnostics import rss_mb, timed
from training.dynamic_sampling import DynamicSamplingMixin
from training.envs.tool_mixin import ToolCallMixin
from training.flags import StrictFlags, read_flags
from training.forcing import ForcedToolCallMixin
from training.health import HealthMonitorCallback
from training.heldout import HeldoutEvaluation
from training.record_at_sample import RecordAtSampleMixin
from training.reference import ReferenceAdapterMixin
from training.reward_checks import RewardChecksMixin
from training.value_head_mixin import ValueHeadMixin
from training.zero_std_watch import ZeroStdWatchMixin

logger = logging.getLogger(__name__)


# Order matters where two features override the same method: dynamic sampling calls everything after it once per
# sampling round, so each round gets its own forcing plan, record-at-sample log-probs, schema check, rewards and
# value targets; forcing rewrites forced first turns before record-at-sample records the sampled ones.
class StrictGRPOTrainer(
    ZeroStdWatchMixin,
    DynamicSamplingMixin,
    RewardChecksMixin,
    ForcedToolCallMixin,
    ToolCallMixin,
    RecordAtSampleMixin,
    ReferenceAdapterMixin,
    ValueHeadMixin,
    GRPOTrainer,
):
    """GRPO with LoRA that makes silent failures loud.

    Args beyond `GRPOTrainer`'s:
        flags: the strict flags; read (and validated) from the environment when not given.
        heldout_rows: held-out rows (`prompt` plus reward columns) scored by `evaluate_heldout`.
    """

    args: StrictGRPOConfig

    def __init__(self, *args, flags: StrictFlags | None = None, heldout_rows: list[dict] | None = None, **kwargs):
        self.flags = flags if flags is not None else read_flags()
        super().__init__(*args, **kwargs)
        self.heldout = HeldoutEvaluation(self, heldout_rows or [])
        self.wall_time_guard = WallTimeGuardCallback(self.args.max_wall_time_s)
        self.health = HealthMonitorCallback(self)
        # First of all callbacks, so that every logger and metrics.jsonl see its values.
        self.callback_handler.callbacks.insert(0, self.health)
        self.add_callback(MetricsJsonlCallback(self.args.output_dir))
        self.add_callback(self.wall_time_guard)
        self.add_callback(OptimizerTimingCallback(self._metrics["train"]))
        if self.heldout.rows and self.args.heldout_eval_steps:
            self.add_callback(HeldoutEvalCallback(self.heldout, self.args.heldout_eval_steps))

    # ---- robust branch (issue 15), to port: a checkpoint counts only once complete (training/checkpoints.py) ---
    def _save_checkpoint(self, model, trial):
        save_complete_checkpoint(self, partial(super()._save_checkpoint, model, trial))

    # ---- timing of the step's phases -------------------------------------------------------------------------
    def _generate(self, prompts):
        with timed(self._metrics["train" if self.model.training else "eval"], "generate"):
            return super()._generate(prompts)

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        with timed(self._metrics["train" if self.model.training else "eval"], "score"):
            return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)

    def _compute_loss(self, model, inputs):
        with timed(self._metrics["train" if self.model.training else "eval"], "loss"):
            return super()._compute_loss(model, inputs)

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs:  # a training-step log, not the end-of-training summary
            logs["memory/rss_mb"] = rss_mb()
        super().log(logs, start_time)
        if self.health.error is not None:
            raise self.health.error

    def is_reuse_pass(self) -> bool:
        """Whether the step just taken reused a generation batch seen by an earlier step (`num_iterations > 1`)."""
        generate_every = self.args.steps_per_generation * self.num_iterations
        steps_into_batch = (self._step - 1) % generate_every
        return steps_into_batch >= self.args.steps_per_generation

    # ---- held-out reward ----------------------------------------------------------------------------------------
    def evaluate_heldout(self) -> dict[str, float]:
        """Held-out reward of the current policy (training/heldout.py)."""
        return self.heldout.evaluate()

    @property
    def heldout_rows(self) -> list[dict]:
        return self.heldout.rows

    @heldout_rows.setter
    def heldout_rows(self, rows: list[dict]) -> None:
        self.heldout.rows = rows

    @property
    def heldout_history(self) -> list[dict]:
        return self.heldout.history
