"""Seconds per call of the causal environment by the number of variables, what bounds the sizes the bundled splits
train on (training/tasks/causal/splits.py, `SIZES`).

One call is one `CausalEnv.intervene`: sample the SCM, the structure reward's lookahead (16 posterior draws), the
surrogate's update (every parent set of every node rescored, the DP rerun) and the options of the reply (every
candidate's expected improvement under 16 draws and expected information gain under 8: `belief.Belief.of`). Episodes
of the one-step rule (`belief_line`) on seeded chain SCMs, 6 calls after 10 observational rows, the exact surrogate
(with its default in-degree bound of 3 above 10 variables); the median over calls and episodes.

    python -m benchmarks.causal_option_cost --sizes 4 6 8 10 12 --episodes 2 --write BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np
import torch

from training.tasks.causal.env import make_causal_env
from training.tasks.causal.policies.belief_line import OneStepPolicy
from training.tasks.causal.scm.families import random_scm
from training.tasks.causal.splits import scm_row

from benchmarks.markdown_section import publish

MARK = "<!-- causal_option_cost -->"


def seconds_per_call(d: int, episodes: int) -> list[float]:
    times = []
    for e in range(episodes):
        row = scm_row(random_scm("chain", d, 1000 + e), seed=e)
        env = make_causal_env("exact")()
        env.reset(**row)
        policy, rng = OneStepPolicy(), np.random.default_rng(e)
        while env.record.used < env.record.budget:
            tool, args = policy(env, rng)
            started = time.perf_counter()
            getattr(env, tool)(**args)
            times.append(time.perf_counter() - started)
    return times


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 6, 8, 10, 12])
    parser.add_argument("--episodes", type=int, default=2)
    parser.add_argument("--write", default=None, help="BENCHMARKS.md to update")
    args = parser.parse_args(argv)
    rows = []
    for d in args.sizes:
        t = seconds_per_call(d, args.episodes)
        rows.append(f"| {d} | {np.median(t):.3f} | {max(t):.3f} | {len(t)} |")
        print(rows[-1], flush=True)
    text = "\n".join([
        MARK, "## Causal environment: seconds per call by size", "",
        f"`python -m benchmarks.causal_option_cost --sizes {' '.join(map(str, args.sizes))} --episodes "
        f"{args.episodes}` ({platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads; one call: sampling, the structure reward's lookahead, the surrogate's "
        "update and the reply's options).", "",
        "| variables | median s / call | max s / call | calls |", "| ---: | ---: | ---: | ---: |", *rows, MARK])
    publish(text, args.write, MARK)


if __name__ == "__main__":
    main()
