"""`StrictGRPOTrainer`: TRL's `GRPOTrainer` with the strict stack wired in through a few narrow overrides."""

from __future__ import annotations

import logging

from trl import GRPOTrainer

from training.callbacks import (
    HeldoutEvalCallback,
    MetricsJsonlCallback,
    OptimizerTimingCallback,
    WallTimeGuardCallback,
)
from training.config import StrictGRPOConfig
from training.diagnostics import rss_mb, timed
from training.envs.tool_mixin import ToolCallMixin
from training.evaluation import heldout_reward
from training.flags import StrictFlags, read_flags
from training.forcing import ForcedToolCallMixin

logger = logging.getLogger(__name__)


class StrictGRPOTrainer(
    ForcedToolCallMixin,  # before any mixin overriding _generate_single_turn: it rewrites forced first turns
    ToolCallMixin,
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
        self.heldout_rows = heldout_rows or []
        self.heldout_history: list[dict] = []
        self.wall_time_guard = WallTimeGuardCallback(self.args.max_wall_time_s)
        self.add_callback(MetricsJsonlCallback(self.args.output_dir))
        self.add_callback(self.wall_time_guard)
        self.add_callback(OptimizerTimingCallback(self._metrics["train"]))
        if self.heldout_rows and self.args.heldout_eval_steps:
            self.add_callback(HeldoutEvalCallback(self, self.args.heldout_eval_steps))

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

    # ---- held-out reward ----------------------------------------------------------------------------------------
    def evaluate_heldout(self) -> float:
        """Mean reward of greedy completions on the held-out rows, with the current policy."""
        if self.environment_factories is not None:  # tool agents: goal success of greedy episodes (envs/tool_mixin)
            return self.evaluate_environment_heldout()
        rows = self.heldout_rows[: self.args.heldout_max_samples]
        return heldout_reward(
            self.accelerator.unwrap_model(self.model),
            self.processing_class,
            rows,
            self.reward_funcs,
            reward_weights=self.reward_weights.tolist(),
            template_kwargs=self.chat_template_kwargs,
            max_new_tokens=self.max_completion_length,
        )

    def record_heldout_reward(self) -> float:
        """Score the held-out split now; the value joins the next log as `heldout/reward`."""
        value = self.evaluate_heldout()
        self.heldout_history.append({"step": self.state.global_step, "heldout/reward": value})
        self._metrics["train"]["heldout/reward"].append(value)
        return value
