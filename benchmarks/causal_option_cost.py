"""Seconds per call of the causal environment by size, and the ratio to the arithmetic floor of the call's lookahead
(`benchmarks.causal_option_floor`: its flop model, and the add rate measured here).

One call is one `CausalEnv` tool call: sample the SCM, the structure reward's lookahead (16 posterior draws), the
surrogate's update (every parent set of every node rescored, the DP rerun) and the options of the reply (every
candidate's expected improvement under 16 draws and expected information gain under 8: `belief.Belief.of`).

* by size (`--sizes`): episodes of the one-step rule (`belief_line`) on seeded chain SCMs, 6 calls after 10
  observational rows, the exact surrogate (its default in-degree bound of 3 above 10 variables); what bounds the
  sizes the bundled splits train on (training/tasks/causal/splits.py, `SIZES`);
* named cases (`--cases`): one teacher episode each (as GRPO's starting policy plays), 6 calls after 10 observational
  rows: the bundled Sachs file (11 variables, bound 3) and er12 file, `random_scm("er", 16, 0)` (bound 3), and the
  CBO toy file under the additive surrogate (52 candidates on the 26-value grid).

With `--additive`, the same for nonlinear SCMs under the additive surrogate, its own section of BENCHMARKS.md:
by size, one teacher episode per seed of `examples.scm_generators.sempler_style(seed, d)` (sempler-like DAGs, terms
w f(parent) with f in tanh, sin, x^2 / (1 + |x|), exp(-|x|): mechanisms outside the surrogate's dictionary), and the
bundled nonlinear files (`--cases sachs_nonlinear sempler6`: 11 variables, in-degree bound 3; 6 variables):

    python -m benchmarks.causal_option_cost --additive --sizes 3 4 5 6 7 8 9 10 --episodes 2 \
        --cases sachs_nonlinear sempler6 --write BENCHMARKS.md

Medians over calls of the wall time and of the process's CPU time (the machine may be shared: the CPU time is the
steadier of the two, and the ratio to the floor is taken on it). Run with one thread (OMP_NUM_THREADS=1
MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1):

    python -m benchmarks.causal_option_cost --sizes 4 6 8 10 12 --episodes 2 --cases sachs er12 er16 cbo \
        --write BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import time
from pathlib import Path

import numpy as np

from benchmarks.causal_option_floor import add_rate, call_flops
from examples.scm_generators import sempler_style
from benchmarks.markdown_section import publish
from training.tasks.causal.belief import NONLINEAR_GRID, grid_values
from training.tasks.causal.env import make_causal_env
from training.tasks.causal.policies.belief_line import OneStepPolicy, teacher
from training.tasks.causal.scm.families import random_scm
from training.tasks.causal.scm.user_scm import load_user_scm
from training.tasks.causal.splits import scm_row
from training.tasks.causal.surrogates.additive_surrogate import ADDITIVE_FULL_SPACE_VARS
from training.tasks.causal.surrogates.subsets import parent_bound

MARK = "<!-- causal_option_cost -->"
MARK_ADDITIVE = "<!-- causal_option_cost additive -->"
ROOT = Path(__file__).resolve().parents[1]
CASES = {  # name: (SCM, surrogate)
    "sachs": (lambda: load_user_scm(ROOT / "examples/scms/sachs_linear.yaml"), "exact"),
    "er12": (lambda: load_user_scm(ROOT / "examples/scms/er12_linear.yaml"), "exact"),
    "er16": (lambda: random_scm("er", 16, 0), "exact"),
    "cbo": (lambda: load_user_scm(ROOT / "examples/scms/cbo_toy.yaml"), "additive"),
    "sachs_nonlinear": (lambda: load_user_scm(ROOT / "examples/scms/sachs_nonlinear.yaml"), "additive"),
    "sempler6": (lambda: load_user_scm(ROOT / "examples/scms/sempler6_nonlinear.yaml"), "additive"),
}


def timed_episode(scm, surrogate: str, policy, seed: int, budget: int, initial: int) -> list[tuple[float, float]]:
    """(wall, CPU) seconds of each call of one episode."""
    env = make_causal_env(surrogate)()
    env.reset(**scm_row(scm, seed=seed, budget=budget, initial_samples=initial))
    rng, times = np.random.default_rng(seed), []
    while env.trace.used < env.trace.budget:
        tool, args = policy(env, rng)
        wall, cpu = time.perf_counter(), time.process_time()
        getattr(env, tool)(**args)
        times.append((time.perf_counter() - wall, time.process_time() - cpu))
    return times


def floor_seconds(scm, surrogate: str, rate: float) -> float:
    grid = 2 if surrogate == "exact" else NONLINEAR_GRID
    candidates = sum(len(grid_values(*scm.ranges[v], grid)) for v in scm.actionable)
    bound = parent_bound(scm.d) if surrogate == "exact" else parent_bound(scm.d, None, ADDITIVE_FULL_SPACE_VARS)
    return call_flops(scm.d, bound, candidates, surrogate == "additive") / rate


def row(label: str, scm, surrogate: str, times: list[tuple[float, float]], rate: float) -> str:
    wall, cpu = np.median([t[0] for t in times]), np.median([t[1] for t in times])
    floor = floor_seconds(scm, surrogate, rate)
    return (f"| {label} | {scm.d} | {surrogate} | {wall:.4f} | {cpu:.4f} | {max(t[0] for t in times):.4f} | "
            f"{floor:.3g} | {cpu / floor:.3g} | {len(times)} |")


def cpu_name() -> str:
    lines = Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return names[0] if names else platform.processor() or "unknown CPU"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--additive", action="store_true",
                        help="nonlinear SCMs under the additive surrogate (sizes: sempler_style SCMs, teacher episodes)")
    parser.add_argument("--sizes", type=int, nargs="*", default=[4, 6, 8, 10, 12])
    parser.add_argument("--episodes", type=int, default=2)
    parser.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    parser.add_argument("--calls", type=int, default=6, help="calls of each named case's episode")
    parser.add_argument("--note", default="", help="a paragraph for under the table (the conditions, a comparison)")
    parser.add_argument("--write", default=None, help="BENCHMARKS.md to update")
    args = parser.parse_args(argv)
    rate = add_rate()
    rows = []
    for d in args.sizes:
        scm_times = []
        for e in range(args.episodes):
            if args.additive:
                scm = sempler_style(e, d)
                scm_times += timed_episode(scm, "additive", teacher(), e, args.calls, 10)
            else:
                scm = random_scm("chain", d, 1000 + e)
                scm_times += timed_episode(scm, "exact", OneStepPolicy(), e, 6, 10)
        rows.append(row(f"sempler_style {d}" if args.additive else f"chain {d}", scm,
                        "additive" if args.additive else "exact", scm_times, rate))
        print(rows[-1], flush=True)
    for name in args.cases:
        build, surrogate = CASES[name]
        scm = build()
        rows.append(row(name, scm, surrogate, timed_episode(scm, surrogate, teacher(), 0, args.calls, 10), rate))
        print(rows[-1], flush=True)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    threads = {k: os.environ.get(k, "unset") for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    command = (f"python -m benchmarks.causal_option_cost{' --additive' if args.additive else ''} --sizes "
               f"{' '.join(map(str, args.sizes))} --episodes {args.episodes} --cases {' '.join(args.cases)} "
               f"--calls {args.calls}")
    mark = MARK_ADDITIVE if args.additive else MARK
    title = ("## Nonlinear SCMs: seconds per call under the additive surrogate (issue 62)" if args.additive else
             "## Causal environment: seconds per call by size, and the arithmetic floor")
    text = "\n".join([
        mark, title, "",
        f"`{command}` at {commit} ({platform.machine()}, {cpu_name()}, {os.cpu_count()} cores, "
        f"numpy {np.__version__}, {', '.join(f'{k}={v}' for k, v in threads.items())}; measured add rate "
        f"{rate / 1e9:.2f} Gflop/s). One call: sampling, the structure reward's lookahead, the surrogate's update and "
        "the reply's options. Floor: the lookahead's arithmetic at that rate (flop model in "
        "`benchmarks/causal_option_floor.py`); ratio: median CPU seconds / floor.", "",
        "| case | variables | surrogate | median s / call (wall) | median s / call (CPU) | max s / call (wall) | "
        "floor s / call | ratio | calls |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |", *rows,
        *(["", args.note] if args.note else []), mark])
    publish(text, args.write, mark)


if __name__ == "__main__":
    main()
