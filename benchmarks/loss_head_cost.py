"""The main job's loss forward and backward with the LM head on the loss mask's tokens against TRL's full-width head.

`training/features/policy_token_head.py` lets TRL's fused LM head score only the tokens the loss reads (the policy's
own); TRL's CPU path scores every position of every row, prompt, tool results and padding included. This benchmark
samples generation batches of `recipes/causal_cpu.yaml` from its starting policy (the trainer of
`benchmarks.causal_step_speed`), then times `_compute_loss` + `backward` on each batch both ways, alternating which
goes first, and reports the medians, the positions each head scored and the largest difference between the two losses.
Wall and process CPU time (the machine may be shared).

    python -m benchmarks.loss_head_cost --batches 6 --write BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import time
from pathlib import Path

import torch
import trl.trainer.utils as trl_utils
import yaml

from benchmarks.causal_step_speed import build
from benchmarks.markdown_section import publish
from training.algorithms.trajectory import loss_mask
from training.run_setup.models import resolve_model_path
from training.run_setup.prompt_datasets import load_rows

MARK = "<!-- loss_head_cost -->"


def timed_loss(trainer, batch: dict, full_head: bool) -> tuple[float, float, float, int]:
    """(wall s, CPU s, loss, positions the head projected) of one loss forward and backward."""
    rows = []
    apply = trl_utils._ChunkedLogProbFunction.apply
    head_forward = trainer.policy_head.forward

    def counted(hidden, *args):
        rows.append(hidden.shape[0])
        return apply(hidden, *args)

    trl_utils._ChunkedLogProbFunction.apply = counted
    if full_head:
        trainer.policy_head.forward = lambda trl_forward, *args: trl_forward()
    try:
        trainer.model.zero_grad()
        wall, cpu = time.perf_counter(), time.process_time()
        loss = trainer._compute_loss(trainer.model, dict(batch))
        loss.backward()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        trl_utils._ChunkedLogProbFunction.apply = apply
        trainer.policy_head.forward = head_forward
    return wall, cpu, loss.item(), sum(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="recipes/causal_cpu.yaml")
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--write", default=None, help="replace this benchmark's section of a markdown file")
    args = parser.parse_args()
    recipe = yaml.safe_load(Path(args.recipe).read_text())
    rows = load_rows(recipe["train_file"])
    model = resolve_model_path(recipe["model_name_or_path"], seed=recipe.get("model_seed", 0))
    trainer = build(recipe, model, "exact", "/tmp/loss_head_cost")
    groups = recipe["per_device_train_batch_size"] // recipe["num_generations"]
    times = {False: [], True: []}
    cpu = {False: [], True: []}
    positions = {False: [], True: []}
    gaps, loss_tokens = [], []
    for b in range(args.batches + 1):
        torch.manual_seed(b)
        trainer.model.train()
        batch = trainer._generate_and_score_completions(
            [dict(r) for r in rows[b * groups:(b + 1) * groups] for _ in range(trainer.num_generations)])
        results = {}
        for full in ((False, True) if b % 2 else (True, False)):
            results[full] = timed_loss(trainer, batch, full)
        if b == 0:
            continue  # warm-up: first-call costs
        for full, (wall, cpu_s, _, scored) in results.items():
            times[full].append(wall)
            cpu[full].append(cpu_s)
            positions[full].append(scored)
        gaps.append(abs(results[False][2] - results[True][2]))
        loss_tokens.append(int(loss_mask(batch).sum()))
        print(f"batch {b}: policy tokens {results[False][0]:.3f}s ({results[False][3]} positions), full head "
              f"{results[True][0]:.3f}s ({results[True][3]} positions)", flush=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    med = statistics.median
    lines = [MARK, "## The main job's loss forward and backward: the LM head on the policy's tokens (issue 53)", "",
             f"Command: `python -m benchmarks.loss_head_cost --batches {args.batches} --write BENCHMARKS.md`, at "
             f"commit {commit}. Machine: {platform.machine()}, {os.cpu_count()} cores, Python "
             f"{platform.python_version()}, torch {torch.__version__}, {torch.get_num_threads()} threads. "
             f"{args.batches} generation batches of `{args.recipe}` (16 episodes, from its starting policy); on each, "
             "`_compute_loss` + `backward` with the head on the loss mask's tokens "
             "(`training/features/policy_token_head.py`) and with TRL's CPU head (every position), alternating which "
             "goes first; medians over the batches.", "",
             "| head | positions scored | wall (s) | CPU (s) |", "| --- | ---: | ---: | ---: |",
             f"| the loss mask's tokens | {med(positions[False]):.0f} | {med(times[False]):.3f} | "
             f"{med(cpu[False]):.3f} |",
             f"| TRL's CPU head: every position | {med(positions[True]):.0f} | {med(times[True]):.3f} | "
             f"{med(cpu[True]):.3f} |", "",
             f"Wall ratio {med(t / f for t, f in zip(times[False], times[True], strict=True)):.3f} (median of the "
             f"batches'); the loss mask held {med(loss_tokens):.0f} tokens a batch; the two losses differed by at most "
             f"{max(gaps):.1e}.", "", MARK]
    publish("\n".join(lines), args.write, MARK)


if __name__ == "__main__":
    main()
