"""Where a call's time goes under the additive surrogate: CPU seconds a call by part, for nonlinear SCMs by size
(`examples.scm_generators.sempler_style`) and the bundled nonlinear files; the same teacher episodes as
`benchmarks.causal_option_cost --additive`. Run with one thread (OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
OPENBLAS_NUM_THREADS=1):

    python -m benchmarks.additive_call_profile --sizes 5 6 8 --cases sachs_nonlinear sempler6 --write BENCHMARKS.md

Parts (each timed around its function, nested parts subtracted from their parent):

* options' scores: the lookahead's parent-set scores of every candidate's hypothetical data set
  (`additive_moments.log_local_scores_single_rows`, the compiled `additive_nested` kernel);
* options' DP: the structure DP and entropies of those data sets (`entropies_in_steps` less the scores);
* draws: the belief's and the lookahead's posterior models (`posterior_models`);
* expectations: E[target | do] of every candidate under every draw (`belief.draw_expectations`);
* options' rows: the rest of `acquisition.information_gains` (the draws' answers to each candidate);
* structure reward: the call's expected gain (`expected_gain`) less its draws and scores;
* update: the surrogate's update with the call's rows (rows rescored, DP);
* rest: the call's wall of CPU time less the parts (sampling, the reward, the reply, Python).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from collections import defaultdict
from contextlib import contextmanager

import numpy as np

from benchmarks.causal_option_cost import CASES, ROOT, cpu_name
from benchmarks.markdown_section import publish
from examples.scm_generators import sempler_style
from training.tasks.causal import acquisition, belief
from training.tasks.causal.env import make_causal_env
from training.tasks.causal.policies.belief_line import teacher
from training.tasks.causal.splits import scm_row
from training.tasks.causal.surrogates import additive_surrogate
from training.tasks.causal.surrogates.additive_surrogate import AdditiveSurrogate

MARK = "<!-- additive_call_profile -->"
PARTS = ("options' scores", "options' DP", "draws", "expectations", "options' rows", "structure reward", "update",
         "rest")


class Timer:
    """CPU seconds by part, nested parts subtracted from the part they ran in."""

    def __init__(self):
        self.seconds = defaultdict(float)
        self._stack: list[list] = []

    @contextmanager
    def part(self, name: str):
        frame = [name, time.process_time(), 0.0]
        self._stack.append(frame)
        try:
            yield
        finally:
            self._stack.pop()
            spent = time.process_time() - frame[1]
            self.seconds[name] += spent - frame[2]
            if self._stack:
                self._stack[-1][2] += spent

    def wrap(self, owner, attr: str, name: str) -> None:
        inner = getattr(owner, attr)

        def timed(*args, **kwargs):
            with self.part(name):
                return inner(*args, **kwargs)
        setattr(owner, attr, timed)


def instrument(timer: Timer) -> None:
    timer.wrap(additive_surrogate, "log_local_scores_single_rows", "options' scores")
    timer.wrap(additive_surrogate, "entropies_in_steps", "options' DP")
    timer.wrap(AdditiveSurrogate, "posterior_models", "draws")
    timer.wrap(belief, "draw_expectations", "expectations")
    timer.wrap(acquisition, "information_gains", "options' rows")
    timer.wrap(AdditiveSurrogate, "expected_gain", "structure reward")
    timer.wrap(AdditiveSurrogate, "update", "update")


def profile_episode(scm, seed: int, calls: int, timer: Timer) -> tuple[dict[str, float], int]:
    """Seconds by part summed over an episode's calls (the reset's work left out), and the number of calls."""
    env = make_causal_env("additive")()
    env.reset(**scm_row(scm, seed=seed, budget=calls, initial_samples=10))
    rng, policy = np.random.default_rng(seed), teacher()
    timer.seconds.clear()
    total = 0.0
    while env.trace.used < env.trace.budget:
        tool, args = policy(env, rng)
        started = time.process_time()
        getattr(env, tool)(**args)
        total += time.process_time() - started
    parts = dict(timer.seconds)
    parts["rest"] = total - sum(parts.values())
    return parts, calls


def row(label: str, d: int, parts: dict[str, float], calls: int) -> str:
    per_call = {k: parts.get(k, 0.0) / calls for k in PARTS}
    total = sum(per_call.values())
    cells = " | ".join(f"{per_call[k]:.4f} ({100 * per_call[k] / total:.0f}%)" for k in PARTS)
    return f"| {label} | {d} | {total:.4f} | {cells} |"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[5, 6, 8])
    parser.add_argument("--cases", nargs="*", default=["sachs_nonlinear", "sempler6"],
                        choices=[k for k, v in CASES.items() if v[1] == "additive"])
    parser.add_argument("--calls", type=int, default=6)
    parser.add_argument("--write", default=None, help="BENCHMARKS.md to update")
    args = parser.parse_args(argv)
    timer = Timer()
    instrument(timer)
    profile_episode(sempler_style(0, 3), 0, 2, timer)  # compile and load once, outside the table
    rows = []
    for label, scm in [(f"sempler_style {d}", sempler_style(0, d)) for d in args.sizes] + [
            (name, CASES[name][0]()) for name in args.cases]:
        parts, calls = profile_episode(scm, 0, args.calls, timer)
        rows.append(row(label, scm.d, parts, calls))
        print(rows[-1], flush=True)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    threads = ", ".join(f"{k}={os.environ.get(k, 'unset')}" for k in
                        ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"))
    command = (f"python -m benchmarks.additive_call_profile --sizes {' '.join(map(str, args.sizes))} --cases "
               f"{' '.join(args.cases)} --calls {args.calls}")
    text = "\n".join([
        MARK, "## Where an additive call's time goes (issue 62)", "",
        f"`{command}` at {commit} ({cpu_name()}, {os.cpu_count()} cores, {threads}). CPU seconds a call (share of the "
        "call) by part, one teacher episode of seed 0 each, 10 observational rows first; the parts are defined in "
        "`benchmarks/additive_call_profile.py`.", "",
        "| case | variables | s / call | " + " | ".join(PARTS) + " |",
        "| --- | ---: | ---: | " + " | ".join("---:" for _ in PARTS) + " |", *rows, MARK])
    publish(text, args.write, MARK)


if __name__ == "__main__":
    main()
