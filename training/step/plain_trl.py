"""Plain TRL for comparisons: `trl.GRPOTrainer` as shipped, none of the strict step features (record-at-sample,
forcing, reward checks, reference adapter, value head, health stops, dynamic sampling), with only what makes its run
comparable to a strict one around it: the same held-out evaluation (training/evaluation/trainer_heldout.py, per-episode files and
all), `metrics.jsonl`, the wall-time guard, the precision probe (run_summary.json's precision in force) and, on
CUDA, each step's peak GPU memory. A recipe asks for it with `trainer: trl`.
"""

from __future__ import annotations

from trl import GRPOTrainer

from training.evaluation.trainer_heldout import HeldoutEvaluation
from training.step.callbacks import HeldoutEvalCallback, MetricsJsonlCallback, WallTimeGuardCallback
from training.step.gpu_memory import gpu_memory_callback
from training.step.precision_probe import PrecisionProbe


class PlainTRLGRPOTrainer(GRPOTrainer):
    """`GRPOTrainer` plus held-out evaluation and run files; takes (and ignores) the strict flags it is given, so
    that `training.train` builds it like `StrictGRPOTrainer`."""

    def __init__(self, *args, flags=None, heldout_rows: list[dict] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.flags = flags
        self.heldout = HeldoutEvaluation(self, heldout_rows or [])
        self.wall_time_guard = WallTimeGuardCallback(getattr(self.args, "max_wall_time_s", None))
        self.precision_probe = PrecisionProbe()  # run_summary.json's precision in force, as for a strict run
        self.precision_probe.attach(self.accelerator.unwrap_model(self.model))
        self.add_callback(MetricsJsonlCallback(self.args.output_dir))
        self.add_callback(self.wall_time_guard)
        gpu_memory = gpu_memory_callback(self._metrics["train"], self.accelerator.device)
        if gpu_memory is not None:  # each step's peak GPU memory on CUDA, as a strict run logs it
            self.add_callback(gpu_memory)
        if self.heldout.rows and getattr(self.args, "heldout_eval_steps", 0):
            self.add_callback(HeldoutEvalCallback(self.heldout, self.args.heldout_eval_steps))

    def evaluate_heldout(self) -> dict[str, float]:
        return self.heldout.evaluate()

    @property
    def heldout_history(self) -> list[dict]:
        return self.heldout.history
