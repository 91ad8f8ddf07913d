"""GRPO step time with the exact surrogate over the same step without the surrogate's work, on the causal recipe.

One step = `trainer.training_step` on one generation batch: sampling the batch's episodes (multi-turn, the
environment's tools; every reply ends with the surrogate's belief), the surrogate's work per call (the structure
reward's lookahead, the update, the belief line's posterior draws), the four reward components, advantages, and the
loss forward and backward. The surrogate's work is timed inside the step (`CausalEnv._learn` and
`CausalEnv._read_belief`, reset's included), and the ratio is step / (step - that work): the same step with a
surrogate that costs nothing. Until the belief line (issue 23) the baseline was a second trainer with the no-op
surrogate sampling the same episodes; now the no-op surrogate's replies read differently ("effects unknown"), so
its episodes differ and a paired comparison would time different completions. Timing inside one step makes the
ratio independent of how busy the shared cores are. Dynamic sampling is off (resampled groups would time a
different thing).

    python -m benchmarks.causal_step_speed --steps 7 --write BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import time
from pathlib import Path

import torch
import yaml
from datasets import Dataset
from peft import LoraConfig

from training.outputs.git_state import git_state
from training.run_setup.config import StrictGRPOConfig
from training.run_setup.flags import read_flags
from training.run_setup.models import resolve_model_path
from training.run_setup.prompt_datasets import load_rows
from training.run_setup.warm_start_tools import trace_warm_start
from training.tasks.causal.env import CausalEnv, make_causal_env
from training.tasks.causal.reward_funcs import REWARD_FUNCS
from training.trainer import StrictGRPOTrainer

MARK = "<!-- causal_step_speed -->"
CONFIG_KEYS = ("per_device_train_batch_size", "num_generations", "max_completion_length", "temperature",
               "max_tool_calling_iterations", "max_tool_calls_per_episode", "reward_weights", "chat_template_kwargs",
               "learning_rate", "beta", "seed")


class Timed:
    """Wraps a `CausalEnv` method to add up the time spent in it."""

    def __init__(self, name: str):
        self.seconds, self.original = 0.0, getattr(CausalEnv, name)
        setattr(CausalEnv, name, self)

    def __get__(self, env, owner=None):
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return self.original(env, *args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0

        return timed


def build(recipe: dict, model: str, kind: str, out: str, **overrides) -> StrictGRPOTrainer:
    args = StrictGRPOConfig(output_dir=out, use_cpu=True, bf16=False, report_to="none", save_strategy="no",
                            logging_steps=1, dynamic_sampling=False,
                            **{**{k: recipe[k] for k in CONFIG_KEYS}, **overrides})
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
    parser.add_argument("--steps", type=int, default=7)
    parser.add_argument("--write", default=None, help="replace this benchmark's section of a markdown file")
    args = parser.parse_args()
    torch.set_num_threads(1)
    recipe = yaml.safe_load(Path(args.recipe).read_text())
    rows = load_rows(recipe["train_file"])
    model = resolve_model_path(recipe["model_name_or_path"], seed=recipe.get("model_seed", 0))
    if recipe.get("warm_start_steps"):
        model = trace_warm_start(model, rows, make_causal_env("exact"), steps=recipe["warm_start_steps"],
                                 lr=recipe["warm_start_lr"], seed=recipe.get("model_seed", 0),
                                 template_kwargs=recipe.get("chat_template_kwargs") or {})
    trainer = build(recipe, model, "exact", "/tmp/causal_step_speed_exact")
    timers = [Timed("_learn"), Timed("_read_belief")]
    groups = recipe["per_device_train_batch_size"] // recipe["num_generations"]
    step_seconds(trainer, rows[:groups], 10**6)  # warm-up (first-call costs), not timed
    step_s, work_s = [], []
    for p in range(args.steps):
        before = sum(t.seconds for t in timers)
        step_s.append(step_seconds(trainer, rows[p * groups:(p + 1) * groups], p))
        work_s.append(sum(t.seconds for t in timers) - before)
        print(f"step {p}: {step_s[-1]:.2f}s, surrogate work {work_s[-1]:.3f}s, ratio "
              f"{step_s[-1] / (step_s[-1] - work_s[-1]):.3f}", flush=True)
    ratios = [s_ / (s_ - w) for s_, w in zip(step_s, work_s, strict=True)]
    machine = (f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, torch "
               f"{torch.__version__}, 1 thread")
    code = git_state()
    commit = (code["commit"] or "unknown")[:7] + (" with uncommitted changes" if code["dirty"] else "")
    lines = [MARK, "## Causal GRPO step: with the exact surrogate / without its work (issues 12, 23)", "",
             f"Command: `python -m benchmarks.causal_step_speed --steps {args.steps} --write BENCHMARKS.md`, at commit "
             f"{commit}. "
             f"Machine: {machine}. Settings of `{args.recipe}` (batch {recipe['per_device_train_batch_size']} "
             f"episodes = {groups} groups x {recipe['num_generations']}, budget 6 calls, max_completion_length "
             f"{recipe['max_completion_length']}), from its starting model, dynamic sampling off; one step = "
             "`training_step` (sampling the episodes, the surrogate's work per call: lookahead, update, belief line; "
             "rewards, loss forward and backward). The surrogate's work is timed inside the step.", "",
             "| | median | range |", "| --- | ---: | --- |",
             f"| step time (s) | {statistics.median(step_s):.2f} | {min(step_s):.2f} - {max(step_s):.2f} |",
             f"| surrogate work per step (s) | {statistics.median(work_s):.3f} | {min(work_s):.3f} - "
             f"{max(work_s):.3f} |",
             f"| ratio step / (step - surrogate work) | {statistics.median(ratios):.3f} | {min(ratios):.3f} - "
             f"{max(ratios):.3f} |", "", MARK]
    text = "\n".join(lines)
    print(text)
    if args.write:
        old = Path(args.write).read_text()
        pattern = re.compile(re.escape(MARK) + ".*?" + re.escape(MARK), re.S)
        new = pattern.sub(lambda m: text, old) if pattern.search(old) else old.rstrip("\n") + "\n\n" + text + "\n"
        Path(args.write).write_text(new)


if __name__ == "__main__":
    main()
