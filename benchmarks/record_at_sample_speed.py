"""Step time of StrictGRPOTrainer with record-at-sample against plain trl.GRPOTrainer, paired and alternating.

    python -m benchmarks.record_at_sample_speed [--pairs 5] [--steps 6] [--write BENCHMARKS.md]

Both trainers run the same recipe (LoRA, num_iterations=2, so TRL recomputes the old log-probs with one extra
policy forward per generation batch; ours reuses the sampled ones) on two models: the offline tiny Qwen3 and a
larger CPU-sized Qwen3 config with the same tokenizer. Each pair runs both variants back to back, the order
alternating between pairs; a variant's step time is the mean of TRL's `step_time` over its generation batches after
the first (each spans two steps).
Reported: the median over pairs of (ours / TRL) and the range of those ratios.
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
from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM
from trl import GRPOConfig, GRPOTrainer

from benchmarks.markdown_section import publish
from tests.support.tiny_trainer import TASK_TRAIN, length_reward
from training.run_setup.config import StrictGRPOConfig
from training.run_setup.flags import read_flags
from training.run_setup.models import resolve_model_path
from training.run_setup.prompt_datasets import load_rows
from training.trainer import StrictGRPOTrainer

LARGER = dict(hidden_size=512, intermediate_size=1536, num_hidden_layers=8, num_attention_heads=8,
              num_key_value_heads=4, head_dim=64)  # fmt: skip
MARKER = "<!-- record_at_sample_speed -->"


def larger_model_dir(tiny_dir: str) -> str:
    # Named after the tiny dir (which carries the tokenizer's build fingerprint), so a tokenizer change rebuilds it.
    out = Path(tempfile.gettempdir()) / f"strict_grpo_bench_qwen3_512x8_{Path(tiny_dir).name}"
    if not (out / "config.json").exists():
        tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
        config = Qwen3Config(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                             eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=True, **LARGER)  # fmt: skip
        torch.manual_seed(0)
        Qwen3ForCausalLM(config).save_pretrained(out)
        tokenizer.save_pretrained(out)
    return str(out)


def bench_args(variant: str, steps: int) -> dict:
    """The benchmark recipe's GRPO arguments (shared with benchmarks/strict_stack_cost.py)."""
    return dict(
        output_dir=tempfile.mkdtemp(prefix=f"bench_{variant}_"), use_cpu=True, bf16=False,
        gradient_checkpointing=False, seed=0, max_steps=steps, learning_rate=1e-3, per_device_train_batch_size=16,
        num_generations=4, max_completion_length=16, num_iterations=2, logging_steps=1, save_strategy="no",
        report_to="none", beta=0.0, chat_template_kwargs={"enable_thinking": False},
    )  # fmt: skip


def bench_lora() -> LoraConfig:
    return LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM")


def mean_step_time(trainer, steps_per_batch: int = 2) -> float:
    """Train, then the mean `step_time` over the generation batches after the first. A generation batch spans
    num_iterations steps (2 here: the first pays generation and, in TRL, the recompute), so whole batches count both
    kinds of step."""
    trainer.train()
    return statistics.mean([h["step_time"] for h in trainer.state.log_history if "step_time" in h][steps_per_batch:])


def run_variant(variant: str, model_dir: str, steps: int, rows: list[dict]) -> float:
    common = bench_args(variant, steps)
    dataset = Dataset.from_list(rows)
    if variant == "strict":
        trainer = StrictGRPOTrainer(model=model_dir, reward_funcs=[length_reward], train_dataset=dataset,
                                    args=StrictGRPOConfig(**common, strict_health=False), peft_config=bench_lora(),
                                    flags=read_flags({"PPO_RECORD_AT_SAMPLE": "1"}))  # fmt: skip
    else:
        trainer = GRPOTrainer(model=model_dir, reward_funcs=[length_reward], train_dataset=dataset,
                              args=GRPOConfig(**common), peft_config=bench_lora())  # fmt: skip
    return mean_step_time(trainer)


def measure_pairs(run, variants: tuple[str, str], pairs: int) -> dict:
    """`run(variant)` -> seconds per step, for both variants per pair, alternating which goes first. Returns the
    median, min and max of variants[0] / variants[1] over pairs and each variant's median time (`<variant>_s`)."""
    first, second = variants
    ratios, times = [], {first: [], second: []}
    for pair in range(pairs):
        order = variants if pair % 2 == 0 else variants[::-1]
        result = {variant: run(variant) for variant in order}
        for variant in variants:
            times[variant].append(result[variant])
        ratios.append(result[first] / result[second])
        print(f"  pair {pair}: {first} {result[first]:.3f}s  {second} {result[second]:.3f}s  ratio {ratios[-1]:.3f}")
    return {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios),
            **{f"{variant}_s": statistics.median(times[variant]) for variant in variants}}


def bench_models(keys: list[str]) -> list[tuple[str, str]]:
    """(table label with the parameter count, model directory) for `tiny` and `larger`."""
    tiny = resolve_model_path("tiny-qwen3")
    dirs = {"tiny": ("tiny Qwen3", tiny), "larger": ("Qwen3 512x8, CPU-sized", larger_model_dir(tiny))}
    out = []
    for key in keys:
        label, model_dir = dirs[key]
        params = sum(p.numel() for p in Qwen3ForCausalLM.from_pretrained(model_dir).parameters())
        out.append((f"{label} ({params / 1e6:.1f}M params)", model_dir))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10, help="optimizer steps per run (2 per generation batch)")
    parser.add_argument("--write", type=Path, help="update this markdown file's record-at-sample section")
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
    rows = load_rows(TASK_TRAIN)[:256]
    results = {}
    for name, model_dir in bench_models(["tiny", "larger"]):
        print(name)
        results[name] = measure_pairs(lambda v, d=model_dir: run_variant(v, d, args.steps, rows), ("strict", "trl"),
                                      args.pairs)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, torch threads {torch.get_num_threads()}"
    lines = [
        MARKER,
        "## Record-at-sample vs plain TRL: step time (issue 3)",
        "",
        f"Command: `python -m benchmarks.record_at_sample_speed --pairs {args.pairs} --steps {args.steps} "
        "--write BENCHMARKS.md`. Machine: " + machine + ". LoRA r=16 on all linear layers, 16 completions per "
        "step (4 prompts x 4), up to 16 new tokens, `num_iterations=2`, fp32 CPU. Step time = TRL's `step_time` "
        "(generation, scoring and the update), mean over a run's generation batches after the first; pairs "
        "alternate order. The saving is one no-grad policy forward per generation batch (counted exactly in "
        "tests/features/test_record_at_sample.py); our extra bookkeeping (schema checks, metrics.jsonl, health) costs back.",
        "",
        "| model | ours / TRL (median of pairs) | range over pairs | ours (s/step) | TRL (s/step) |",
        "| --- | ---: | --- | ---: | ---: |",
    ]
    for name, r in results.items():
        lines.append(
            f"| {name} | {r['median']:.3f} | {r['min']:.3f} - {r['max']:.3f} | {r['strict_s']:.3f} | {r['trl_s']:.3f} |"
        )
    lines += ["", MARKER]
    publish("\n".join(lines), args.write, MARKER)


if __name__ == "__main__":
    main()
