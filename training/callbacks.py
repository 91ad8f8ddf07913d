"""Trainer callbacks: `metrics.jsonl`, the wall-time guard, optimizer timing, periodic held-out evaluation."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from transformers import TrainerCallback

logger = logging.getLogger(__name__)


class MetricsJsonlCallback(TrainerCallback):
    """Append every log (one JSON object per logging step) to `output_dir/metrics.jsonl`, on the main process.

    On resume, lines from steps after the checkpoint are dropped so that the file tells one consistent history.
    """

    def __init__(self, output_dir: str):
        self.path = Path(output_dir) / "metrics.jsonl"

    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero or not self.path.exists():
            return
        kept = [line for line in self.path.read_text().splitlines() if json.loads(line)["step"] <= state.global_step]
        self.path.write_text("".join(line + "\n" for line in kept))

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as f:
            f.write(json.dumps({"step": state.global_step, **logs}) + "\n")


class WallTimeGuardCallback(TrainerCallback):
    """Stop cleanly once `max_wall_time_s` has passed: save a checkpoint, log why, let training return."""

    def __init__(self, max_wall_time_s: float | None):
        self.max_wall_time_s = max_wall_time_s
        self.start = time.monotonic()
        self.stopped_reason: str | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.start = time.monotonic()

    def on_step_end(self, args, state, control, **kwargs):
        if self.max_wall_time_s is None or self.stopped_reason is not None:
            return
        elapsed = time.monotonic() - self.start
        if elapsed >= self.max_wall_time_s:
            self.stopped_reason = (
                f"max_wall_time_s={self.max_wall_time_s} reached after {elapsed:.1f}s at step {state.global_step}; "
                "checkpoint saved"
            )
            logger.warning("Stopping: %s", self.stopped_reason)
            control.should_save = True
            control.should_training_stop = True


class OptimizerTimingCallback(TrainerCallback):
    """Time the optimizer step into the trainer's `timing/optimizer_s` metric."""

    def __init__(self, metrics: dict):
        self.metrics = metrics
        self.start: float | None = None

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self.start = time.perf_counter()

    def on_optimizer_step(self, args, state, control, **kwargs):
        if self.start is not None:
            self.metrics["timing/optimizer_s"].append(time.perf_counter() - self.start)
            self.start = None


class HeldoutEvalCallback(TrainerCallback):
    """Score the held-out split every `every` optimizer steps; results go to the logs as `heldout/reward`."""

    def __init__(self, heldout, every: int):
        self.heldout = heldout
        self.every = every

    def on_step_end(self, args, state, control, **kwargs):
        if self.every and state.global_step % self.every == 0:
            self.heldout.record()
