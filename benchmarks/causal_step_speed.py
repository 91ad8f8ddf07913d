"""GRPO step time with the exact surrogate over the same step with the no-op surrogate, on the causal recipe (issue 12).

One step = `trainer.training_step` on one generation batch: sampling the batch's episodes (multi-turn, the
environment's tools), the surrogate updates (deferred and batched over the batch's episodes:
training/causal/pending.py), the four reward components, advantages, and the loss forward and backward. Both
trainers start from the recipe's warm start with the same LoRA initialisation and never take an optimizer step,
and each step is seeded the same way, so they sample the same episodes: the difference is the surrogate's work (the
no-op surrogate keeps the prior and does nothing). Pairs alternate which trainer goes first; we report the ratio's
median and range over pairs, and the exact surrogate's own time per step (the drains). Dynamic sampling is off here
(with the no-op surrogate more groups would be all-equal and resampled, which would time a different thing).

    python -m benchmarks.causal_step_speed --pairs 7 --write BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import time
from pathlib import Path

import numpy as np
import torch
import yaml
from datasets import Dataset
from peft import LoraConfig

from training.causal import pending
from training.causal.env import make_causal_env
from training.causal.reward_funcs import REWARD_FUNCS
from training.config import StrictGRPOConfig
from training.data import load_rows
from training.flags import read_flags
from training.models import resolve_model_path
from training.trainer import StrictGRPOTrainer
from training.warm_start_tools import trace_warm_start

MARK = "<!-- causal_step_speed -->"
CONFIG_KEYS = ("per_device_train_batch_size", "num_generations", "max_completion_length", "temperature",
               "max_tool_calling_iterations", "max_tool_calls_per_episode", "reward_weights", "chat_template_kwargs",
               "learning_rate", "beta", "seed")


class Timed:
    """Wraps `pending.drain` to add up the time spent in surrogate updates."""

    def __init__(self):
        self.seconds, self.original = 0.0, pending.drain

    def __call__(self):
        t0 = time.perf_counter()
        try:
            return self.original()
        finally:
            self.seconds += time.perf_counter() - t0


def build(recipe: dict, model: str, kind: str, out: str) -> StrictGRPOTrainer:
    args = StrictGRPOConfig(output_dir=out, use_cpu=True, bf16=False, report_to="none", save_strategy="no",
                            logging_steps=1, dynamic_sampling=False, **{k: recipe[k] for k in CONFIG_KEYS})
    lora = LoraConfig(r=recipe["lora_r"], lora_alpha=recipe["lora_alpha"], lora_dropout=recipe["lora_dropout"],
                      target_modules=recipe["lora_target_modules"], task_type="CAUSAL_LM")
    torch.manual_seed(0)  # the same LoRA initialisation in both trainers
    trainer = StrictGRPOTrainer(model=model, reward_funcs=REWARD_FUNCS, args=args, peft_config=lora, flags=read_flags(),
                             train_dataset=Dataset.from_list(load_rows(recipe["train_file"])),
                             environment_factory=make_causal_env(kind))
    trainer.current_gradient_accumulation_steps = args.gradient_accumulation_steps  # set by Trainer.train's loop
    return trainer


def step_seconds(trainer, rows: list[dict], seed: int) -> float:
    batch = [dict(r) for r in rows for _ in range(trainer.num_generations)]
    trainer.model.train()
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    trainer.training_step(trainer.model, batch, None)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="recipes/causal_cpu.yaml")
    parser.add_argument("--pairs", type=int, default=7)
    parser.add_argument("--write", default=None, help="replace this benchmark's section of a markdown file")
    args = parser.parse_args()
    torch.set_num_threads(1)
    recipe = yaml.safe_load(Path(args.recipe).read_text())
    rows = load_rows(recipe["train_file"])
    base = resolve_model_path(recipe["model_name_or_path"], seed=recipe.get("model_seed", 0))
    model = trace_warm_start(base, rows, make_causal_env("exact"), steps=recipe["warm_start_steps"],
                             lr=recipe["warm_start_lr"], seed=recipe.get("model_seed", 0),
                             template_kwargs=recipe.get("chat_template_kwargs") or {})
    trainers = {k: build(recipe, model, k, f"/tmp/causal_step_speed_{k}") for k in ("exact", "noop")}
    timer = Timed()
    pending.drain = timer
    groups = recipe["per_device_train_batch_size"] // recipe["num_generations"]
    ratios, exact_s, noop_s, drain_s = [], [], [], []
    step_seconds(trainers["exact"], rows[:groups], 10**6)  # warm-up (first-call costs), not timed
    step_seconds(trainers["noop"], rows[:groups], 10**6)
    for p in range(args.pairs):
        batch_rows = rows[p * groups:(p + 1) * groups]
        order = ("exact", "noop") if p % 2 == 0 else ("noop", "exact")
        t = {}
        for kind in order:
            before = timer.seconds
            t[kind] = step_seconds(trainers[kind], batch_rows, p)
            if kind == "exact":
                drain_s.append(timer.seconds - before)
        lengths = {k: trainers[k]._metrics["train"]["completions/mean_length"][-1] for k in trainers}
        if lengths["exact"] != lengths["noop"]:
            raise RuntimeError(f"pair {p}: the two trainers sampled different episodes ({lengths}); not comparable")
        exact_s.append(t["exact"])
        noop_s.append(t["noop"])
        ratios.append(t["exact"] / t["noop"])
        print(f"pair {p}: exact {t['exact']:.2f}s noop {t['noop']:.2f}s ratio {ratios[-1]:.3f} "
              f"(exact surrogate updates {drain_s[-1]:.3f}s)", flush=True)
    shares = [d / e for d, e in zip(drain_s, exact_s, strict=True)]
    machine = (f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, torch "
               f"{torch.__version__}, 1 thread, shared with other jobs")
    lines = [MARK, "## Causal GRPO step: exact surrogate / no-op surrogate (issue 12)", "",
             f"Command: `python -m benchmarks.causal_step_speed --pairs {args.pairs} --write BENCHMARKS.md`. "
             f"Machine: {machine}. Settings of `{args.recipe}` (batch {recipe['per_device_train_batch_size']} "
             f"episodes = {groups} groups x {recipe['num_generations']}, budget 6 calls, max_completion_length "
             f"{recipe['max_completion_length']}), from its cached warm start, dynamic sampling off; one step = "
             "`training_step` (sampling the episodes, surrogate updates batched over the batch, rewards, loss "
             "forward and backward). Same seed per pair in both trainers (same episodes); alternating order.", "",
             "| | median | range |", "| --- | ---: | --- |",
             f"| step time, exact surrogate (s) | {statistics.median(exact_s):.2f} | {min(exact_s):.2f} - "
             f"{max(exact_s):.2f} |",
             f"| step time, no-op surrogate (s) | {statistics.median(noop_s):.2f} | {min(noop_s):.2f} - "
             f"{max(noop_s):.2f} |",
             f"| ratio exact / no-op | {statistics.median(ratios):.3f} | {min(ratios):.3f} - {max(ratios):.3f} |",
             f"| exact surrogate updates per step (s) | {statistics.median(drain_s):.3f} | {min(drain_s):.3f} - "
             f"{max(drain_s):.3f} |",
             f"| their share of the exact step | {statistics.median(shares):.3f} | {min(shares):.3f} - "
             f"{max(shares):.3f} |", "",
             "The ratio's spread is the machine's (other jobs share the cores); the updates' own share of the step, "
             "timed inside the step, is the load-independent part.", "", MARK]
    text = "\n".join(lines)
    print(text)
    print(f"mean ratio {np.mean(ratios):.3f}")
    if args.write:
        old = Path(args.write).read_text()
        pattern = re.compile(re.escape(MARK) + ".*?" + re.escape(MARK), re.S)
        new = pattern.sub(lambda m: text, old) if pattern.search(old) else old.rstrip("\n") + "\n\n" + text + "\n"
        Path(args.write).write_text(new)


if __name__ == "__main__":
    main()
