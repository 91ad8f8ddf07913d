"""Experiment tracking through `report_to`: trackio (local-first) and Weights & Biases (online, or offline with
`WANDB_MODE=offline`).

transformers' `TrackioCallback` and `WandbCallback` (added by `report_to`) log every training-step log, so every
metric of the contract (training/step/metric_names.py) reaches the tracker as `train/<name>` with `train/global_step`, plus the
training arguments. This module adds what they leave out:

* the rest of the resolved configuration (script arguments, model arguments, strict flags, the recipe path);
* the run's group (`tracking_group`, set by `training.workflow` to the run's configuration so that its seeds group
  together): W&B's `group`, trackio's `group` (its `project` is TrainingArguments' `project`, W&B's
  `WANDB_PROJECT`);
* at the end, after the adapter is saved: the final held-out metrics, and the final adapter as an artifact
  (W&B: `wandb.Artifact` of type `model`, logged offline too; trackio 0.43: `trackio.Artifact` of type `model`,
  stored content-addressed under its local directory).

For this, the W&B run is started here (with the group and the configuration) before `WandbCallback` sets up, which
then reuses it; `TrackioCallback`'s trackio module is wrapped so that its `init` gets the group and its `finish` at
train end is deferred until the artifact is logged (`finish_tracking`).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from transformers import TrainerCallback

from training.outputs import run_files

logger = logging.getLogger(__name__)

ADAPTER_FILES = ("adapter_model.safetensors", "adapter_config.json")
FINAL_FILES = (run_files.EVAL, run_files.EVAL_SUMMARY, run_files.RUN_SUMMARY)


def active_trackers(report_to) -> list[str]:
    report_to = [report_to] if isinstance(report_to, str) else list(report_to or [])
    return [name for name in ("trackio", "wandb") if name in report_to or "all" in report_to]


class _TrackioForRun:
    """The trackio module as `TrackioCallback` sees it: `init` carries the run's group, `finish` waits for
    `finish_tracking` (the final adapter is saved after training ends). Everything else is trackio's own."""

    def __init__(self, trackio, group: str | None):
        self._trackio = trackio
        self._group = group
        self.finish_pending = False

    def init(self, **kwargs):
        kwargs.setdefault("group", self._group)
        kwargs.setdefault("embed", False)
        return self._trackio.init(**kwargs)

    def finish(self):
        self.finish_pending = True

    def __getattr__(self, name):
        return getattr(self._trackio, name)


class _WandbRunStarter(TrainerCallback):
    """Starts the W&B run with its group, name and full configuration before `WandbCallback` sets up."""

    def __init__(self, config: dict, group: str | None):
        self.config = config
        self.group = group

    def on_train_begin(self, args, state, control, **kwargs):
        import wandb

        if state.is_world_process_zero and wandb.run is None:
            wandb.init(project=os.getenv("WANDB_PROJECT", args.project), name=args.run_name, group=self.group,
                       config=self.config)


class _TrackioConfig(TrainerCallback):
    """Adds the full configuration to the trackio run once `TrackioCallback` has started it (it runs after it)."""

    def __init__(self, config: dict):
        self.config = config

    def on_train_begin(self, args, state, control, **kwargs):
        import trackio

        if state.is_world_process_zero and trackio.context_vars.current_run.get() is not None:
            trackio.config.update(self.config)


@dataclass
class Tracking:
    trackers: list[str]
    run_name: str | None
    trackio: _TrackioForRun | None = None
    extra: dict = field(default_factory=dict)


def attach_tracking(trainer, config: dict) -> Tracking:
    """Wire the trackers `report_to` names into `trainer` (module docstring); `config` is the resolved
    configuration beyond the training arguments. A no-op without trackio or wandb in `report_to`."""
    args = trainer.args
    trackers = active_trackers(args.report_to)
    tracking = Tracking(trackers, args.run_name)
    group = getattr(args, "tracking_group", None)
    if "wandb" in trackers:
        trainer.callback_handler.callbacks.insert(0, _WandbRunStarter(config, group))
    if "trackio" in trackers:
        from transformers.integrations import TrackioCallback

        callbacks = [cb for cb in trainer.callback_handler.callbacks if isinstance(cb, TrackioCallback)]
        if len(callbacks) != 1:
            raise RuntimeError(f"report_to names trackio but the trainer has {len(callbacks)} TrackioCallback(s)")
        tracking.trackio = _TrackioForRun(callbacks[0]._trackio, group)
        callbacks[0]._trackio = tracking.trackio
        trainer.add_callback(_TrackioConfig(config))
    if trackers:
        logger.info("Tracking with %s (group %s, run %s)", ", ".join(trackers), group, args.run_name)
    return tracking


def _artifact_name(prefix: str, run_name: str | None, output_dir: str | Path) -> str:
    base = run_name or Path(output_dir).name
    return f"{prefix}-" + "".join(c if c.isalnum() or c in "._-" else "-" for c in base)


def finish_tracking(tracking: Tracking, output_dir: str | Path, final_metrics: dict) -> dict:
    """Log `final_metrics` (e.g. the held-out reward after training) and the final adapter in `output_dir` as an
    artifact, then close the runs. Returns what was logged where, per tracker."""
    output_dir = Path(output_dir)
    files = [output_dir / name for name in ADAPTER_FILES + FINAL_FILES if (output_dir / name).exists()]
    logged = {}
    metrics = {f"final/{k}": float(v) for k, v in final_metrics.items() if isinstance(v, int | float)}
    if "wandb" in tracking.trackers:
        import wandb

        if wandb.run is not None:
            wandb.run.summary.update(metrics)
            artifact = wandb.Artifact(_artifact_name("adapter", tracking.run_name, output_dir), type="model",
                                      metadata=metrics)
            for path in files:
                artifact.add_file(str(path))
            wandb.run.log_artifact(artifact, aliases=["final"])
            wandb.finish()
            logged["wandb"] = {"artifact": artifact.name, "files": [p.name for p in files]}
    if tracking.trackio is not None:
        import trackio

        if trackio.context_vars.current_run.get() is not None:
            trackio.log(metrics)
            artifact = trackio.Artifact(_artifact_name("adapter", tracking.run_name, output_dir), type="model",
                                        metadata=metrics)
            for path in files:
                artifact.add_file(str(path))
            trackio.log_artifact(artifact, aliases=["final"])
            logged["trackio"] = {"artifact": artifact.name, "files": [p.name for p in files]}
        if tracking.trackio.finish_pending or trackio.context_vars.current_run.get() is not None:
            trackio.finish()
    return logged
