"""What the sampler/trainer log-prob check costs: step time with the check on every generation batch against without
it, paired and alternating, on CPU.

    BENCH_THREADS=1 OMP_NUM_THREADS=1 python -m benchmarks.logp_check_cost [--pairs 4] [--steps 8]
        [--models tiny,larger] [--write BENCHMARKS.md]

Both variants are `StrictGRPOTrainer` on the recipe of benchmarks/record_at_sample_speed.py (LoRA on all linear
layers, 16 completions per step, fp32 CPU) with `num_iterations=1`, so every step samples a new generation batch;
`every` sets `logp_check_steps=1` (one no-grad forward over the batch's completions per step), `never` sets 0. Step
time is TRL's `step_time`, the mean over the steps after the first. The default check (every 10 generation batches,
on CUDA, in bf16/fp16 or with vLLM; training/step/sampler_gap.py) costs a tenth of the per-check difference per
generation batch: reported as a fraction of the step time without it.
"""

from __future__ import annotations

import argparse
import os
import platform
from pathlib import Path

import torch
from datasets import Dataset

from benchmarks.markdown_section import publish
from benchmarks.record_at_sample_speed import bench_args, bench_lora, bench_models, mean_step_time, measure_pairs
from tests.support.tiny_trainer import TASK_TRAIN, length_reward
from training.run_setup.config import StrictGRPOConfig
from training.run_setup.flags import read_flags
from training.run_setup.prompt_datasets import load_rows
from training.step.sampler_gap import DEFAULT_CHECK_EVERY
from training.trainer import StrictGRPOTrainer

MARKER = "<!-- logp_check_cost -->"


def run_variant(variant: str, model_dir: str, steps: int, rows: list[dict]) -> float:
    args = {**bench_args(variant, steps), "num_iterations": 1, "logp_check_steps": 1 if variant == "every" else 0}
    trainer = StrictGRPOTrainer(model=model_dir, reward_funcs=[length_reward], train_dataset=Dataset.from_list(rows),
                                args=StrictGRPOConfig(**args, strict_health=False), peft_config=bench_lora(),
                                flags=read_flags({"PPO_RECORD_AT_SAMPLE": "1"}))  # fmt: skip
    step_time = mean_step_time(trainer, steps_per_batch=1)
    checked = [h for h in trainer.state.log_history if "sampling/logp_abs_diff" in h]
    if len(checked) != (steps if variant == "every" else 0):
        raise RuntimeError(f"{variant}: the check ran on {len(checked)} of {steps} steps")
    return step_time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--steps", type=int, default=8, help="optimizer steps per run (one generation batch each)")
    parser.add_argument("--models", default="tiny,larger")
    parser.add_argument("--write", type=Path, help="update this markdown file's section")
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
    rows = load_rows(TASK_TRAIN)[:256]
    results = {}
    for name, model_dir in bench_models(args.models.split(",")):
        print(name)
        results[name] = measure_pairs(lambda v, d=model_dir: run_variant(v, d, args.steps, rows), ("every", "never"),
                                      args.pairs)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    machine = (f"{platform.machine()}, {os.cpu_count()} cores, torch threads {torch.get_num_threads()}, "
               f"torch {torch.__version__}, load average at the end {load} (shared with other jobs)")
    lines = [
        MARKER,
        "## The log-prob check's cost (issue 42)",
        "",
        f"Command: `BENCH_THREADS={torch.get_num_threads()} OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '')} "
        f"python -m benchmarks.logp_check_cost --pairs {args.pairs} --steps {args.steps} --models {args.models} "
        f"--write BENCHMARKS.md` (one thread: two threads on the 2 shared cores made single steps 20x slower). "
        f"Machine: {machine}. LoRA r=16 on all linear layers, 16 completions per "
        "step (4 prompts x 4), up to 16 new tokens, `num_iterations=1` (a generation batch every step), fp32 CPU. "
        "`every`: `logp_check_steps=1`; `never`: 0. Step time = TRL's `step_time`, mean over a run's steps after the "
        f"first; pairs alternate order. The default check runs every {DEFAULT_CHECK_EVERY} generation batches (on "
        "CUDA, in bf16/fp16, with vLLM): its cost per generation batch is a tenth of the per-check difference.",
        "",
        "| model | every / never (median of pairs) | range over pairs | never (s/step) | every (s/step) | one check (s) "
        f"| default, every {DEFAULT_CHECK_EVERY}: share of a step |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for name, r in results.items():
        per_check = r["every_s"] - r["never_s"]
        share = per_check / DEFAULT_CHECK_EVERY / r["never_s"]
        lines.append(f"| {name} | {r['median']:.3f} | {r['min']:.3f} - {r['max']:.3f} | {r['never_s']:.3f} | "
                     f"{r['every_s']:.3f} | {per_check:.3f} | {100 * share:.1f}% |")
    lines += ["", MARKER]
    publish("\n".join(lines), args.write, MARKER)


if __name__ == "__main__":
    main()
