"""Environment steps per second with the exact surrogate at 5 and 10 variables (issue 12).

One "step" is one `CausalEnv.intervene` call: sample the SCM, update the surrogate (rescore every parent set of every
node, rerun the Koivisto-Sood DP), record. Each repeat plays episodes of random interventions on a seeded ER SCM
(20 interventions after 5 observational rows) and times the steps alone; we report the median and range over
repeats, next to the "noop" surrogate (sampling and bookkeeping only), so the surrogate's own share is visible.

    python -m benchmarks.causal_surrogate_speed --repeats 5 --write BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import time

import numpy as np
import torch

from training.evaluation.pairing_seeds import benchmark_scm_seed
from training.tasks.causal.env import make_causal_env
from training.tasks.causal.scm.families import random_scm
from training.tasks.causal.splits import scm_row

MARK = "<!-- causal_surrogate_speed -->"


def steps_per_second(kind: str, d: int, episodes: int, seed: int) -> float:
    env_cls = make_causal_env(kind)
    rng = np.random.default_rng(seed)
    total, n = 0.0, 0
    for e in range(episodes):
        scm = random_scm("er", d, benchmark_scm_seed(seed, e))
        env = env_cls()
        env.reset(**scm_row(scm, seed=e, budget=20, initial_samples=5))
        calls = [(scm.actionable[int(rng.integers(d - 1))], float(rng.uniform(-3, 3))) for _ in range(20)]
        t0 = time.perf_counter()
        for var, val in calls:
            env.intervene(var, val)
        # each call updates the surrogate and draws the belief line at once: part of the steps' cost
        total += time.perf_counter() - t0
        n += len(calls)
    return n / total


def batched_updates_per_second(d: int, group: int, seed: int) -> float:
    """Single-row updates per second when a group's episodes are updated together (`update_many`)."""
    from training.tasks.causal.surrogates.exact_surrogate import ExactSurrogate, update_many

    rng = np.random.default_rng(seed)
    scms = [random_scm("er", d, benchmark_scm_seed(seed, e)) for e in range(group)]
    surs = [ExactSurrogate(s.variables, s.target) for s in scms]
    update_many(surs, [(x, np.zeros_like(x, dtype=bool)) for x in (s.sample(5, rng) for s in scms)])
    total = 0.0
    for _ in range(20):
        batches = []
        for s in scms:
            var = s.actionable[int(rng.integers(d - 1))]
            x = s.sample(1, rng, {var: float(rng.uniform(-3, 3))})
            m = np.zeros_like(x, dtype=bool)
            m[0, s.index[var]] = True
            batches.append((x, m))
        t0 = time.perf_counter()
        update_many(surs, batches)
        total += time.perf_counter() - t0
    return 20 * group / total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=4)
    parser.add_argument("--write", default=None, help="replace this benchmark's section of a markdown file")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = []
    for d in (5, 10):
        for kind in ("exact", "noop"):
            rates = [steps_per_second(kind, d, args.episodes, r) for r in range(args.repeats)]
            rows.append((d, kind, float(np.median(rates)), min(rates), max(rates)))
        rates = [batched_updates_per_second(d, 16, r) for r in range(args.repeats)]
        rows.append((d, "exact, `update_many` over 16 episodes (updates only)", float(np.median(rates)), min(rates),
                     max(rates)))
    machine = (f"{platform.machine()}, {os.cpu_count()} cores ({platform.processor() or 'cpu'}), "
               f"Python {platform.python_version()}, numpy {np.__version__}, 1 thread; shared with other jobs")
    lines = [MARK, "## Causal environment: steps per second with the exact surrogate (issue 12)", "",
             f"Command: `python -m benchmarks.causal_surrogate_speed --repeats {args.repeats} --episodes "
             f"{args.episodes} --write BENCHMARKS.md`. Machine: {machine}. A step is one `intervene` call (sample, "
             f"surrogate update, record) on a seeded Erdős–Rényi linear SCM, 20 per episode after 5 observational "
             f"rows; {args.episodes} episodes per repeat; median and range over {args.repeats} repeats. `noop` is "
             f"the same environment with a surrogate that does nothing (sampling and bookkeeping only). The `update_many` row "
             f"times only the surrogate updates of 16 episodes' rows done as one batched call (a GRPO group), per "
             f"row. A GRPO step of 16 episodes x 20 interventions is 320 updates.", "",
             "| variables | surrogate | steps/s (median) | range | ms/step (median) |",
             "| ---: | --- | ---: | --- | ---: |"]
    for d, kind, med, lo, hi in rows:
        lines.append(f"| {d} | {kind} | {med:.0f} | {lo:.0f} - {hi:.0f} | {1000 / med:.2f} |")
    lines.append("")
    lines.append(MARK)
    text = "\n".join(lines)
    print(text)
    if args.write:
        with open(args.write) as f:
            old = f.read()
        pattern = re.compile(re.escape(MARK) + ".*?" + re.escape(MARK), re.S)
        new = pattern.sub(lambda m: text, old) if pattern.search(old) else old.rstrip("\n") + "\n" + text + "\n"
        with open(args.write, "w") as f:
            f.write(new)


if __name__ == "__main__":
    main()
