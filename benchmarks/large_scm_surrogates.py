"""The surrogates at the sizes of real benchmarks (issue 35): the exact surrogate's cost per update as the graph
grows, and the learned surrogate's parent F1 and calibration against the exact one (d = 6, 10, 12) and against the
true graph (d = 20, 30).

    python -m benchmarks.large_scm_surrogates --write BENCHMARKS.md

Cost table: a seeded Erdős–Rényi linear SCM per size (`families.random_scm("er", d, seed)`), 10 observational rows,
then single-row random interventions; per size the median over `--updates` updates of `update` (rescore every
parent set within the in-degree bound, rerun the DP over all 2^d node sets), of `posterior()` (the target's parent
sets read out) and of `expected_gain` (16 posterior draws, each a hypothetical update: what an environment call pays
for the structure reward), on one thread.

Quality table: `--scms` seeded ER linear SCMs per size, each given the same data (10 observational rows then `--calls`
random single interventions of 3 rows, `compare_surrogates.episode_data`'s design); per surrogate, the parent F1 of the
MAP parent set against the true parents, the Brier score and the expected calibration error (5 bins) of the target's
parent marginals against the truth, and at d <= 12 the mean absolute difference of the learned marginals from the
exact ones.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np
import torch

from benchmarks.markdown_section import publish
from training.outputs.git_state import git_state
from training.tasks.causal.surrogates.catalogue import build_surrogate
from training.tasks.causal.scm.families import random_scm
from training.tasks.causal.structure_metrics import brier_score, expected_calibration_error, parent_f1

MARK = "<!-- large_scm_surrogates -->"


def one_call(scm, rng, rows: int = 1) -> tuple[np.ndarray, np.ndarray]:
    var = scm.actionable[int(rng.integers(len(scm.actionable)))]
    x = np.vstack([scm.sample(1, rng, {var: float(rng.uniform(*scm.ranges[var]))}) for _ in range(rows)])
    m = np.zeros_like(x, dtype=bool)
    m[:, scm.index[var]] = True
    return x, m


def cost_row(d: int, updates: int, seed: int) -> dict:
    scm = random_scm("er", d, seed)
    rng = np.random.default_rng(seed)
    sur = build_surrogate("exact", scm.variables, scm.target)
    x = scm.sample(10, rng)
    sur.update(x, np.zeros_like(x, dtype=bool))
    times = {"update": [], "posterior": [], "expected_gain": []}
    for _ in range(updates):
        batch = one_call(scm, rng)
        t0 = time.perf_counter()
        sur.update(*batch)
        times["update"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        sur.posterior()
        times["posterior"].append(time.perf_counter() - t0)
        var = int(rng.integers(d - 1))
        var = var if var < scm.index[scm.target] else var + 1
        t0 = time.perf_counter()
        sur.expected_gain((var, 1.0), np.eye(d, dtype=bool)[[var]], 16, rng)
        times["expected_gain"].append(time.perf_counter() - t0)
    return {"d": d, "max_parents": sur.max_parents, **{k: float(np.median(v)) for k, v in times.items()}}


def quality_rows(d: int, kinds: list[str], scms: int, calls: int) -> list[dict]:
    out = {k: {"f1": [], "brier": [], "probs": [], "truth": [], "gap": []} for k in kinds}
    for i in range(scms):
        scm = random_scm("er", d, 1000 + i)
        rng = np.random.default_rng(i)
        x = scm.sample(10, rng)
        batches = [(x, np.zeros_like(x, dtype=bool)), *(one_call(scm, rng, 3) for _ in range(calls))]
        posts = {}
        for kind in kinds:
            sur = build_surrogate(kind, scm.variables, scm.target)
            for batch in batches:
                sur.update(*batch)
            posts[kind] = post = sur.posterior()
            acc = out[kind]
            acc["f1"].append(parent_f1(post.map_set(), scm.parents()))
            acc["brier"].append(brier_score(post.marginals, scm.parents()))
            acc["probs"] += list(post.marginals.values())
            acc["truth"] += [v in scm.parents() for v in post.marginals]
        if "exact" in posts and "learned" in posts:
            out["learned"]["gap"].append(np.mean([abs(posts["learned"].marginals[v] - p)
                                                  for v, p in posts["exact"].marginals.items()]))
    rows = []
    for kind, acc in out.items():
        rows.append({"d": d, "surrogate": kind, "f1": float(np.mean(acc["f1"])), "f1_sd": float(np.std(acc["f1"])),
                     "brier": float(np.mean(acc["brier"])),
                     "ece": expected_calibration_error(np.array(acc["probs"]), np.array(acc["truth"], dtype=float)),
                     "gap": float(np.mean(acc["gap"])) if acc["gap"] else None})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="6,10,12,14,16", help="exact surrogate cost table")
    parser.add_argument("--updates", type=int, default=5)
    parser.add_argument("--scms", type=int, default=20, help="SCMs per size in the quality table")
    parser.add_argument("--calls", type=int, default=6, help="interventions (3 rows each) after 10 observational rows")
    parser.add_argument("--write", default=None, help="replace this benchmark's section of a markdown file")
    args = parser.parse_args()
    torch.set_num_threads(1)
    code = git_state()
    cost = []
    for d in (int(x) for x in args.sizes.split(",")):
        cost.append(cost_row(d, args.updates, 0))
        print(cost[-1], flush=True)
    quality = []
    for d, kinds in ((6, ["exact", "learned"]), (10, ["exact", "learned"]), (12, ["exact", "learned"]),
                     (20, ["learned"]), (30, ["learned"])):
        quality += quality_rows(d, kinds, args.scms, args.calls)
        print(quality[-1], flush=True)
    machine = (f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, numpy "
               f"{np.__version__}, torch {torch.__version__}, 1 thread")
    lines = [MARK, "## Surrogates at the sizes of real benchmarks (issue 35)", "",
             f"Command: `python -m benchmarks.large_scm_surrogates --sizes {args.sizes} --updates {args.updates} "
             f"--scms {args.scms} --calls {args.calls} --write BENCHMARKS.md` at commit {code['commit'][:7]}"
             f"{' (uncommitted changes)' if code['dirty'] else ''}. Machine: {machine}. "
             "Design: the module docstring.", "",
             "Exact surrogate, median seconds per operation (in-degree bound: the default, none up to 10 variables, "
             "3 above):", "",
             "| variables | in-degree bound | `update` (s) | `posterior()` (s) | `expected_gain`, 16 draws (s) |",
             "| ---: | ---: | ---: | ---: | ---: |"]
    for r in cost:
        lines.append(f"| {r['d']} | {r['max_parents']} | {r['update']:.4f} | {r['posterior']:.4f} | "
                     f"{r['expected_gain']:.3f} |")
    lines += ["", f"Parent recovery after 10 observational rows and {args.calls} random interventions of 3 rows, "
                  f"{args.scms} seeded ER linear SCMs per size (truth: the SCM's parents):", "",
              "| variables | surrogate | parent F1 of MAP set (mean ± sd) | Brier | ECE (5 bins) | "
              "mean abs. difference from the exact marginals |",
              "| ---: | --- | --- | ---: | ---: | ---: |"]
    for r in quality:
        gap = "" if r["gap"] is None else f"{r['gap']:.3f}"
        lines.append(f"| {r['d']} | {r['surrogate']} | {r['f1']:.3f} ± {r['f1_sd']:.3f} | {r['brier']:.3f} | "
                     f"{r['ece']:.3f} | {gap} |")
    lines += ["", MARK]
    publish("\n".join(lines), args.write, MARK)


if __name__ == "__main__":
    main()
