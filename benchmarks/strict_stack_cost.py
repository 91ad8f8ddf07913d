"""What the strict stack costs when it does not change the maths: step time with every such feature on, against
record-at-sample alone, paired and alternating.

    python -m benchmarks.strict_stack_cost [--pairs 6] [--steps 10] [--models tiny,larger] [--write BENCHMARKS.md]

Both variants are `StrictGRPOTrainer` with `PPO_RECORD_AT_SAMPLE=1` on the recipe of
benchmarks/record_at_sample_speed.py (LoRA on all linear layers, `num_iterations=2`, beta 0).
- `record-only`: the schema checks, the reward checks, the ratio statistics, the health callback and metrics.jsonl are
  switched off on the instance (the benchmark replaces them with no-ops; nothing in the library does this).
- `full`: all of them on, plus the LoRA reference adapter kept in sync every step (beta 0, so the loss never reads
  it: the cost is the copy, the verification count and the checksum) and a forward hook on the backbone capturing the
  final hidden states in every forward, as the value head's does.
Step time is TRL's `step_time`, the mean over generation batches after the first; reported: the median over pairs
of full / record-only and the range. Goal: <= 1.05.
"""

from __future__ import annotations

import argparse
import os
import platform
from pathlib import Path

import torch
from datasets import Dataset

from benchmarks.record_at_sample_speed import (
    bench_args,
    bench_lora,
    bench_models,
    mean_step_time,
    measure_pairs,
)
from benchmarks.markdown_section import publish
from tests.support.tiny_trainer import TASK_TRAIN, length_reward
from training.features.final_hidden_state import hook_final_hidden_state
from training.run_setup.config import StrictGRPOConfig
from training.run_setup.flags import read_flags
from training.run_setup.prompt_datasets import load_rows
from training.step.callbacks import MetricsJsonlCallback
from training.step.health import HealthMonitorCallback
from training.trainer import StrictGRPOTrainer

MARKER = "<!-- strict_stack_cost -->"


def _no_op(*args, **kwargs):
    return None


def strip_to_record_at_sample(trainer: StrictGRPOTrainer) -> None:
    """Switch off every feature that does not change the maths, except record-at-sample itself."""
    trainer._check_batch = _no_op
    trainer.reward_checks.check = lambda rewards, *args: rewards
    trainer.record.log_ratio = _no_op
    for callback in [c for c in trainer.callback_handler.callbacks
                     if isinstance(c, (HealthMonitorCallback, MetricsJsonlCallback))]:
        trainer.callback_handler.remove_callback(callback)


def add_zero_beta_reference_and_hook(trainer: StrictGRPOTrainer) -> None:
    model = trainer.accelerator.unwrap_model(trainer.model)
    trainer.args.ref_model_sync_steps = 1
    trainer.args.ref_model_mixup_alpha = 1.0  # a hard sync, verified to leave 0 differing tensors
    trainer.add_callback(trainer.reference.attach(model, trainer.accelerator, trainer._metrics["train"], force=True))
    captured: list = []
    hook_final_hidden_state(model, lambda hidden: captured.append(hidden) or captured.clear())


def run_variant(variant: str, model_dir: str, steps: int, rows: list[dict]) -> float:
    args = StrictGRPOConfig(**bench_args(variant, steps), strict_health=False)
    trainer = StrictGRPOTrainer(model=model_dir, reward_funcs=[length_reward], train_dataset=Dataset.from_list(rows),
                                args=args, peft_config=bench_lora(), flags=read_flags({"PPO_RECORD_AT_SAMPLE": "1"}))
    if variant == "record-only":
        strip_to_record_at_sample(trainer)
    else:
        add_zero_beta_reference_and_hook(trainer)
    return mean_step_time(trainer)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--steps", type=int, default=10, help="optimizer steps per run (2 per generation batch)")
    parser.add_argument("--models", default="tiny,larger", help="comma-separated: tiny, larger")
    parser.add_argument("--write", type=Path, help="update this markdown file's strict-stack section")
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
    rows = load_rows(TASK_TRAIN)[:256]
    results = {}
    for name, model_dir in bench_models(args.models.split(",")):
        print(name)
        results[name] = measure_pairs(lambda v, d=model_dir: run_variant(v, d, args.steps, rows),
                                      ("full", "record-only"), args.pairs)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, torch threads {torch.get_num_threads()}"
    lines = [
        MARKER,
        "## The strict stack's own cost: every feature that does not change the maths vs record-at-sample alone",
        "",
        f"Command: `python -m benchmarks.strict_stack_cost --pairs {args.pairs} --steps {args.steps} "
        f"--models {args.models} --write BENCHMARKS.md`. Machine: {machine}. Recipe as the record-at-sample "
        "benchmark. `full`: schema checks, reward checks, ratio statistics, health detectors, metrics.jsonl, a LoRA "
        "reference adapter synced and verified every step (beta 0), a hidden-state hook on the backbone. "
        "`record-only`: those switched off. Goal: full / record-only <= 1.05.",
        "",
        "| model | full / record-only (median of pairs) | range over pairs | full (s/step) | record-only (s/step) |",
        "| --- | ---: | --- | ---: | ---: |",
    ]
    for name, r in results.items():
        lines.append(f"| {name} | {r['median']:.3f} | {r['min']:.3f} - {r['max']:.3f} | {r['full_s']:.3f} | "
                     f"{r['record-only_s']:.3f} |")
    lines += ["", MARKER]
    publish("\n".join(lines), args.write, MARKER)


if __name__ == "__main__":
    main()
