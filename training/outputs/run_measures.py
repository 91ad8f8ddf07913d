"""What `run_summary.json` says about the run's numerics: the precision in force, the sampler/trainer log-prob gap
over the whole run, and the peak GPU memory. The gap and the memory are read from `metrics.jsonl`, which holds every
step of the run (a resumed run's earlier attempts included)."""

from __future__ import annotations

import os

from training.run_setup.precision import ENV
from training.step.gpu_memory import ALLOCATED, RESERVED


def precision_in_force(trainer, training_args, model_args) -> dict:
    """The recipe's precision fields, the environment's request, and what the run computed in (the precision probe,
    training/step/precision_probe.py)."""
    model = trainer.accelerator.unwrap_model(trainer.model)
    return {
        "recipe": {"bf16": training_args.bf16, "fp16": training_args.fp16, "dtype": model_args.dtype},
        "environment": {ENV: os.environ.get(ENV)},
        **trainer.precision_probe.summary(model, trainer.accelerator.mixed_precision),
    }


def sampler_gap(rows: list[dict], plan: dict | None) -> dict:
    """The log-prob check's plan (how often, why, the normal it warns above) and its results over the run: how many
    logged steps measured it, the mean of their mean gaps, the largest per-token gap, the steps above normal."""
    measured = [r for r in rows if r.get("sampling/logp_abs_diff") is not None]
    means = [r["sampling/logp_abs_diff"] for r in measured]
    return {
        **(plan or {}),
        "measured_steps": len(measured),
        "logp_abs_diff_mean": sum(means) / len(means) if means else None,
        "logp_abs_diff_max": max((r["sampling/logp_abs_diff_max"] for r in measured), default=None),
        "steps_above_normal": sum(1 for r in measured if r.get("sampling/logp_gap_above_normal")),
    }


def gpu_memory(rows: list[dict]) -> dict | None:
    """The run's peak GPU memory in MiB (the largest step peak), or None for a run that logged none (not on CUDA)."""
    allocated = [r[ALLOCATED] for r in rows if ALLOCATED in r]
    if not allocated:
        return None
    return {"peak_allocated_mb": max(allocated), "peak_reserved_mb": max(r[RESERVED] for r in rows if RESERVED in r),
            "steps": len(allocated)}
