"""Learned vs exact surrogate on held-out SCMs: calibration of the parent marginals and parent F1.

For each held-out SCM and seed, one random-intervention episode's data (the initial observational rows, then
`--budget` random interventions) is fed row by row to both surrogates. At the end we score each surrogate's target
parent marginals against the true parents: Brier score (mean squared error of P(j ∈ Pa) against 1[j ∈ Pa]),
expected calibration error over 5 probability bins, the reliability table, and the parent F1 of the MAP parent
set; plus the mean wall time of one single-row update. Run: `python -m training.tasks.causal.surrogates.compare_surrogates`.

`--grid` compares surrogates (`--surrogates`, default exact,additive) by mechanism family (linear, nonlinear) on data
sets of `--rows` rows (default 10, 30, 100) of two kinds: observational, and random interventions (every row a
do(X_i = u) on a uniform non-target variable, u uniform in its range); each data set is given to the surrogate in
one update (the exact and additive posteriors do not depend on how rows are batched). One table row per (family,
data, rows, surrogate): Brier score and ECE of the parent marginals, and the MAP parent set's F1.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from training.evaluation.pairing_seeds import data_set_seed
from training.tasks.causal.scm.scm import SCM
from training.tasks.causal.structure_metrics import (
    brier_score,
    expected_calibration_error,
    parent_f1,
    reliability_table,
)
from training.tasks.causal.surrogates.exact_surrogate import ExactSurrogate
from training.tasks.causal.surrogates.learned_surrogate import LearnedSurrogate


def episode_data(scm: SCM, budget: int, initial: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    rows = scm.sample(initial, rng)
    batches = [(rows, np.zeros_like(rows, dtype=bool))]
    for _ in range(budget):
        var = scm.actionable[int(rng.integers(len(scm.actionable)))]
        x = scm.sample(1, rng, {var: float(rng.uniform(*scm.ranges[var]))})
        m = np.zeros_like(x, dtype=bool)
        m[0, scm.index[var]] = True
        batches.append((x, m))
    return batches


def grid_data(scm: SCM, n: int, kind: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n observational rows, or n rows of random single interventions (`--grid`)."""
    batches = episode_data(scm, 0, n, seed) if kind == "observational" else episode_data(scm, n, 0, seed)[1:]
    return np.concatenate([b[0] for b in batches]), np.concatenate([b[1] for b in batches])


def grid(rows: list[dict], kinds: list[str], sizes: list[int], seeds: int) -> list[dict]:
    """One result per (mechanism family, data kind, rows, surrogate): Brier, ECE, MAP parent F1 (mean ± std)."""
    from training.tasks.causal.surrogates.catalogue import build_surrogate

    out = []
    for family in sorted({r["mechanism"] for r in rows}):
        scms = [SCM.from_json(r["scm_json"]) for r in rows if r["mechanism"] == family]
        for data in ("observational", "random"):
            for n in sizes:
                sets = [(scm, grid_data(scm, n, data, data_set_seed(i, s))) for i, scm in enumerate(scms)
                        for s in range(seeds)]
                for kind in kinds:
                    probs, truth, f1s, briers = [], [], [], []
                    for scm, batch in sets:
                        sur = build_surrogate(kind, scm.variables, scm.target)
                        sur.update(*batch)
                        post = sur.posterior()
                        probs += list(post.marginals.values())
                        truth += [v in scm.parents() for v in post.marginals]
                        f1s.append(parent_f1(post.map_set(), scm.parents()))
                        briers.append(brier_score(post.marginals, scm.parents()))
                    out.append({"family": family, "data": data, "rows": n, "surrogate": kind, "sets": len(sets),
                                "brier": float(np.mean(briers)), "parent_f1": float(np.mean(f1s)),
                                "parent_f1_std": float(np.std(f1s)),
                                "ece": expected_calibration_error(np.array(probs), np.array(truth, dtype=float))})
    return out


def main(argv: list[str] | None = None) -> dict:
    from training.tasks.causal.splits import DATA_DIR

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="heldout")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--budget", type=int, default=20)
    parser.add_argument("--grid", action="store_true", help="the by-family table over data kinds and sizes")
    parser.add_argument("--surrogates", default="exact,additive", help="--grid: surrogates to compare")
    parser.add_argument("--rows", default="10,30,100", help="--grid: data set sizes")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    with open(DATA_DIR / f"{args.split}.jsonl") as f:
        rows = [json.loads(line) for line in f]
    if args.grid:
        results = grid(rows, args.surrogates.split(","), [int(n) for n in args.rows.split(",")], args.seeds)
        print(f"split {args.split}: {len(rows)} SCMs x {args.seeds} data sets per cell")
        print("| mechanisms | data | rows | surrogate | Brier (lower is better) | ECE (5 bins) | parent F1 of MAP set |")
        print("| --- | --- | ---: | --- | ---: | ---: | --- |")
        for r in results:
            print(f"| {r['family']} ({r['sets']} data sets) | {r['data']} | {r['rows']} | {r['surrogate']} | "
                  f"{r['brier']:.3f} | {r['ece']:.3f} | {r['parent_f1']:.3f} ± {r['parent_f1_std']:.3f} |")
        return {"grid": results}
    out = {}
    for kind in ("exact", "learned"):
        probs, truth, f1s, briers, times = [], [], [], [], []
        for row in rows:
            scm = SCM.from_json(row["scm_json"])
            for seed in range(args.seeds):
                sur = ExactSurrogate(scm.variables, scm.target) if kind == "exact" else LearnedSurrogate(
                    scm.variables, scm.target)
                for batch in episode_data(scm, args.budget, row["initial_samples"], data_set_seed(row["seed"], seed)):
                    t0 = time.perf_counter()
                    sur.update(*batch)
                    times.append(time.perf_counter() - t0)
                post = sur.posterior()
                probs += list(post.marginals.values())
                truth += [v in scm.parents() for v in post.marginals]
                f1s.append(parent_f1(post.map_set(), scm.parents()))
                briers.append(brier_score(post.marginals, scm.parents()))
        probs, truth = np.array(probs), np.array(truth, dtype=float)
        out[kind] = {"brier": float(np.mean(briers)), "ece": expected_calibration_error(probs, truth),
                     "parent_f1": float(np.mean(f1s)), "parent_f1_std": float(np.std(f1s)),
                     "update_ms": 1000 * float(np.median(times)), "reliability": reliability_table(probs, truth)}
    print(f"split {args.split}: {len(rows)} SCMs x {args.seeds} random-intervention episodes ({args.budget} "
          f"interventions after the initial rows)")
    print("| surrogate | Brier (lower is better) | ECE (5 bins) | parent F1 of MAP set | median ms / update |")
    print("| --- | ---: | ---: | --- | ---: |")
    for kind, r in out.items():
        print(f"| {kind} | {r['brier']:.3f} | {r['ece']:.3f} | {r['parent_f1']:.3f} ± {r['parent_f1_std']:.3f} | "
              f"{r['update_ms']:.2f} |")
    for kind, r in out.items():
        print(f"reliability ({kind}): " + "; ".join(f"[{lo:.1f},{hi:.1f}) predicted {p:.2f} observed {o:.2f} "
                                                   f"(n={c})" for lo, hi, p, o, c in r["reliability"]))
    return out


if __name__ == "__main__":
    main()
