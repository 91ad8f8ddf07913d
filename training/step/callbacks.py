"""Trainer callbacks: `metrics.jsonl`, the wall-time guard, optimizer timing, periodic held-out evaluation, and the
run record's heartbeat."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from transformers import TrainerCallback

from training.outputs import run_files
from training.outputs.atomic import atomic_write_text, naming

logger = logging.getLogger(__name__)


def keep_metrics_up_to(path: Path, step: int) -> None:
    """Keep the lines of `metrics.jsonl` logged at steps <= `step` (rewritten atomically), so that a resumed run
    tells one history. Lines that do not parse (the torn last line of a killed writer) are dropped; both kinds of
    drop are logged."""
    if not path.exists():
        return
    kept, later, torn = [], 0, []
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            row_step = row["step"]
        except (json.JSONDecodeError, KeyError, TypeError):
            torn.append(number)
            continue
        if row_step <= step:
            kept.append(line)
        else:
            later += 1
    if torn:
        logger.warning("%s: dropped unreadable line(s) %s (torn by a killed writer)", path, torn)
    if later:
        logger.info("%s: dropped %d line(s) of steps after %d (logged again as the run resumes)", path, later, step)
    if torn or later:
        atomic_write_text(path, "".join(line + "\n" for line in kept))


class MetricsJsonlCallback(TrainerCallback):
    """Append every log (one JSON object per logging step) to `output_dir/metrics.jsonl`, on the main process.

    On resume, lines from steps after the checkpoint (and a torn last line) are dropped so that the file tells one
    consistent history.
    """

    def __init__(self, output_dir: str):
        self.path = Path(output_dir) / run_files.METRICS

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            keep_metrics_up_to(self.path, state.global_step)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with naming(self.path), open(self.path, "a") as f:
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


class RunRecordCallback(TrainerCallback):
    """Keeps `run_record.json` (training/outputs/run_record.py) alive: each log and save updates this attempt's wall time and
    step, and mirrors the trainer's held-out history."""

    def __init__(self, record, heldout_history: list[dict]):
        self.record = record
        self.heldout_history = heldout_history

    def on_log(self, args, state, control, **kwargs):
        self.record.heartbeat(state.global_step, self.heldout_history)

    def on_save(self, args, state, control, **kwargs):
        self.record.heartbeat(state.global_step, self.heldout_history)
