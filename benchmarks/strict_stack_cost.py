"""What the strict stack costs when it does not change the maths: step time with every such feature on, against
record-at-sample alone, paired and alternating.

    python -m benchmarks.strict_stack_cost [--pairs 6] [--steps 10] [--models tiny,larger] [--write BENCHMARKS.md]

Both variants are `StrictGRPOTrainer` with `PPO_RECORD_AT_SAMPLE=1` on the recipe of
benchmarks/record_at_sample_speed.py (LoRA on all linear layers, `num_iterations=2`, beta 0).
- `record-only`: the schema checks, the reward checks, the ratio statistics, the health callback and metrics.jsonl are
  switched off on the instance (the benchmark replaces them with no-ops; nothing in the library does this).
- `full`: all of them on, plus the LoRA reference adapter kept in sync every step (beta 0, so the loss never reads
  it: the cost is the copy, the verification count and the checksum) and a forward hook on the final norm capturing
  hidden states in every forward, as the value head's does.
Step time is TRL's `step_time`, the mean over generation batches after the first; reported: the median over pairs
of full / record-only and the range. Goal: <= 1.05.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
from pathlib import Path

import torch
from datasets import Dataset
from peft import LoraConfig
from transformers import Qwen3ForCausalLM

from benchmarks.record_at_sample_speed import larger_model_dir, write_section
from tests.support.tiny_trainer import TASK_TRAIN, length_reward
from training.callbacks import MetricsJsonlCallback
from training.config import StrictGRPOConfig
from training.data import load_rows
from training.features.value_head import final_norm
from training.flags import read_flags
from training.health import HealthMonitorCallback
from training.models import resolve_model_path
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
    final_norm(model).register_forward_hook(lambda module, args, output: captured.append(output) or captured.clear())


def run_variant(variant: str, model_dir: str, steps: int, rows: list[dict]) -> float:
    args = StrictGRPOConfig(
        output_dir=tempfile.mkdtemp(prefix=f"bench_{variant}_"), use_cpu=True, bf16=False,
        gradient_checkpointing=False, seed=0, max_steps=steps, learning_rate=1e-3, per_device_train_batch_size=16,
        num_generations=4, max_completion_length=16, num_iterations=2, logging_steps=1, save_strategy="no",
        report_to="none", beta=0.0, chat_template_kwargs={"enable_thinking": False}, strict_health=False,
    )  # fmt: skip
    lora = LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM")
    trainer = StrictGRPOTrainer(model=model_dir, reward_funcs=[length_reward], train_dataset=Dataset.from_list(rows),
                                args=args, peft_config=lora, flags=read_flags({"PPO_RECORD_AT_SAMPLE": "1"}))
    if variant == "record-only":
        strip_to_record_at_sample(trainer)
    else:
        add_zero_beta_reference_and_hook(trainer)
    trainer.train()
    times = [h["step_time"] for h in trainer.state.log_history if "step_time" in h][2:]
    return statistics.mean(times)


def measure(model_dir: str, pairs: int, steps: int, rows: list[dict]) -> dict:
    ratios, full_times, base_times = [], [], []
    for pair in range(pairs):
        order = ("full", "record-only") if pair % 2 == 0 else ("record-only", "full")
        result = {variant: run_variant(variant, model_dir, steps, rows) for variant in order}
        full_times.append(result["full"])
        base_times.append(result["record-only"])
        ratios.append(result["full"] / result["record-only"])
        print(f"  pair {pair}: full {result['full']:.3f}s  record-only {result['record-only']:.3f}s  "
              f"ratio {ratios[-1]:.3f}")
    return {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios),
            "full_s": statistics.median(full_times), "base_s": statistics.median(base_times)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--steps", type=int, default=10, help="optimizer steps per run (2 per generation batch)")
    parser.add_argument("--models", default="tiny,larger", help="comma-separated: tiny, larger")
    parser.add_argument("--write", type=Path, help="update this markdown file's strict-stack section")
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
    rows = load_rows(TASK_TRAIN)[:256]
    tiny = resolve_model_path("tiny-qwen3")
    dirs = {"tiny": ("tiny Qwen3", tiny), "larger": ("Qwen3 512x8, CPU-sized", larger_model_dir(tiny))}
    results = {}
    for key in args.models.split(","):
        label, model_dir = dirs[key]
        params = sum(p.numel() for p in Qwen3ForCausalLM.from_pretrained(model_dir).parameters())
        name = f"{label} ({params / 1e6:.1f}M params)"
        print(name)
        results[name] = measure(model_dir, args.pairs, args.steps, rows)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, torch threads {torch.get_num_threads()}"
    lines = [
        MARKER,
        "## The strict stack's own cost: every feature that does not change the maths vs record-at-sample alone",
        "",
        f"Command: `python -m benchmarks.strict_stack_cost --pairs {args.pairs} --steps {args.steps} "
        f"--models {args.models} --write BENCHMARKS.md`. Machine: {machine}. Recipe as the record-at-sample "
        "benchmark. `full`: schema checks, reward checks, ratio statistics, health detectors, metrics.jsonl, a LoRA "
        "reference adapter synced and verified every step (beta 0), a hidden-state hook on the final norm. "
        "`record-only`: those switched off. Goal: full / record-only <= 1.05.",
        "",
        "| model | full / record-only (median of pairs) | range over pairs | full (s/step) | record-only (s/step) |",
        "| --- | ---: | --- | ---: | ---: |",
    ]
    for name, r in results.items():
        lines.append(f"| {name} | {r['median']:.3f} | {r['min']:.3f} - {r['max']:.3f} | {r['full_s']:.3f} | "
                     f"{r['base_s']:.3f} |")
    lines += ["", MARKER]
    text = "\n".join(lines)
    print(text)
    if args.write:
        write_section(args.write, text, MARKER)


if __name__ == "__main__":
    main()
