"""GRPO step time with vLLM, colocated and as a CPU server, against the transformers sampler, on CPU, side by side.

    python -m benchmarks.vllm_sampler_speed [--steps 6] [--pairs 2] [--write BENCHMARKS.md]

Run in the CPU-vLLM venv (scripts/install_vllm_cpu.sh). Each variant (model x sampler x precision) trains in a
process of its own, so each one's peak memory and engine are its own; the variants of one model and precision
alternate their order between pairs. Per variant: the trainer's build time (colocate: the engine's start
included), the server's start (until /health answers; `training.run_setup.vllm_serve_cpu`, as launchers/vllm_server.sh
starts it), the median `step_time` over the steps after the first, the median weight sync (`timing/weight_sync_s`),
the trainer's peak RSS (and the server's processes' RSS at the end), and the sampler/trainer gap
(`sampling/logp_abs_diff`, measured on every step). Models: the offline tiny Qwen3 and the ~25M Qwen3 of
benchmarks/record_at_sample_speed.py.
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
GROUPS = [  # (model, sampler, precision), alternated within a group
    [("tiny", "transformers", "float32"), ("tiny", "vllm-colocate", "float32"), ("tiny", "vllm-server", "float32")],
    [("tiny", "transformers", "bfloat16"), ("tiny", "vllm-colocate", "bfloat16")],
    [("25M", "transformers", "float32"), ("25M", "vllm-colocate", "float32"), ("25M", "vllm-server", "float32")],
]
VARIANTS = [variant for group in GROUPS for variant in group]


def run_variant(model: str, sampler: str, precision: str, steps: int) -> dict:
    """In this process: build the trainer, train `steps` steps, read its logs."""
    import torch

    from benchmarks.record_at_sample_speed import larger_model_dir
    from tests.support.tiny_trainer import build_tiny_trainer
    from training.outputs.run_summary import read_metrics
    from training.run_setup.models import resolve_model_path

    torch.set_num_threads(1)
    tiny = resolve_model_path("tiny-qwen3", seed=0)
    model_dir = tiny if model == "tiny" else larger_model_dir(tiny)
    out = tempfile.mkdtemp(prefix=f"bench_vllm_{model}_{sampler}_")
    server, vllm = None, {}
    if sampler == "vllm-server":
        from pathlib import Path

        from tests.support.vllm_server import CpuServer, free_port

        start = time.perf_counter()
        server = CpuServer(model_dir, Path(out) / "server.log", dtype=precision).start()
        server_start_s = time.perf_counter() - start
        vllm = dict(use_vllm=True, vllm_mode="server", vllm_server_base_url=server.url, vllm_group_port=free_port())
    elif sampler == "vllm-colocate":
        server_start_s, vllm = None, dict(use_vllm=True, vllm_mode="colocate")
    else:
        server_start_s = None
    try:
        start = time.perf_counter()
        trainer = build_tiny_trainer(out, model=model_dir, bf16=precision == "bfloat16", logp_check_steps=1,
                                     max_steps=steps, per_device_train_batch_size=16, max_completion_length=16,
                                     strict_health=False, **vllm)
        build_s = time.perf_counter() - start
        trainer.train()
        server_rss_mb = server_rss(server.process.pid) if server else None
    finally:
        if server:
            server.stop()
    logs = [row for row in read_metrics(out) if "loss" in row]
    syncs = [row["timing/weight_sync_s"] for row in logs if "timing/weight_sync_s" in row]
    return {
        "model": model, "sampler": sampler, "precision": precision, "build_s": build_s,
        "server_start_s": server_start_s, "step_s": statistics.median(row["step_time"] for row in logs[1:]),
        "sync_s": statistics.median(syncs) if syncs else None,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "server_rss_mb": server_rss_mb,
        "gap_mean": statistics.mean(row["sampling/logp_abs_diff"] for row in logs),
        "gap_max": max(row["sampling/logp_abs_diff_max"] for row in logs),
    }


def server_rss(pid: int) -> float:
    """MiB resident in the server's process and its children (vLLM's engine core and worker)."""
    import psutil

    root = psutil.Process(pid)
    return sum(p.memory_info().rss for p in [root, *root.children(recursive=True)]) / 2**20


def measure(steps: int, pairs: int) -> list[dict]:
    rows = []
    for pair in range(pairs):
        for group in GROUPS:
            for variant in (group if pair % 2 == 0 else group[::-1]):
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
    lines = [MARKER, "## vLLM on CPU: colocated and as a server, against the transformers sampler", "",
             f"`python -m benchmarks.vllm_sampler_speed --steps {steps} --pairs {pairs} --write BENCHMARKS.md` in the "
             f"CPU-vLLM venv (scripts/install_vllm_cpu.sh), at {(facts['commit'] or '?')[:7]}; {cpu_model()}, "
             f"{facts['cpu_count']} cores, torch {facts['torch']}, vllm {installed_version('vllm-cpu')}. "
             "Batch 16 (4 prompts x 4), 16 completion tokens, LoRA; median over pairs; the gap is sampling/logp_abs_diff over every step.", "",
             "| model | sampler | precision | build s (colocate: engine start included) | server start s | step s "
             "| weight sync s | trainer peak RSS MiB | server RSS MiB | gap mean | gap max |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for model, sampler, precision in VARIANTS:
        mine = [r for r in rows if (r["model"], r["sampler"], r["precision"]) == (model, sampler, precision)]
        med = {k: statistics.median(r[k] for r in mine) if mine[0].get(k) is not None else None
               for k in ("build_s", "server_start_s", "step_s", "sync_s", "peak_rss_mb", "server_rss_mb",
                         "gap_mean", "gap_max")}
        cell = {k: "-" if v is None else v for k, v in med.items()}
        lines.append(f"| {model} | {sampler} | {precision} | {med['build_s']:.1f} | {_num(cell['server_start_s'], '.1f')} "
                     f"| {med['step_s']:.3f} | {_num(cell['sync_s'], '.3f')} | {med['peak_rss_mb']:.0f} "
                     f"| {_num(cell['server_rss_mb'], '.0f')} | {med['gap_mean']:.2g} | {med['gap_max']:.2g} |")
    lines.append(MARKER)
    return "\n".join(lines)


def _num(value, spec: str) -> str:
    return value if isinstance(value, str) else format(value, spec)


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
