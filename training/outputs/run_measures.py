"""What `run_summary.json` says about the run's numerics: the precision in force."""

from __future__ import annotations

import os

from training.run_setup.precision import ENV


def precision_in_force(trainer, training_args, model_args) -> dict:
    """The recipe's precision fields, the environment's request, and what the run computed in (the precision probe,
    training/step/precision_probe.py)."""
    model = trainer.accelerator.unwrap_model(trainer.model)
    return {
        "recipe": {"bf16": training_args.bf16, "fp16": training_args.fp16, "dtype": model_args.dtype},
        "environment": {ENV: os.environ.get(ENV)},
        **trainer.precision_probe.summary(model, trainer.accelerator.mixed_precision),
    }
