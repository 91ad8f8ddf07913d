"""Break each reward component's normalisation once and watch the reward tests fail (not collected by pytest).

    python tests/tasks/causal/reward_mutations.py

Each mutation rewrites one line of training/tasks/causal/reward_components.py, runs the three reward test files, prints which tests
failed, and restores the file (also on error or Ctrl-C). Every mutation must make at least one test fail.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PATH = Path(__file__).resolve().parents[3] / "training" / "tasks" / "causal" / "reward_components.py"
TESTS = ["tests/tasks/causal/test_rewards.py", "tests/tasks/causal/test_reward_normalisation.py",
         "tests/tasks/causal/test_reward_adversarial.py"]
MUTATIONS = {
    "optimization not divided by the span": (
        "    return (_g(scm, after) - _g(scm, before)) / span", "    return (_g(scm, after) - _g(scm, before))"),
    "structure in nats": (
        "    return step.expected_gain / ((step.scm.d - 1) * math.log(2.0))", "    return step.expected_gain"),
    "structure paying the realised drop (the luck of the row)": (
        "    return step.expected_gain / ((step.scm.d - 1) * math.log(2.0))",
        "    return (step.before.entropy() - step.after.entropy()) / ((step.scm.d - 1) * math.log(2.0))"),
    "parent not balanced (true parents' marginals only)": (
        "    halves = [float(np.mean(h)) for h in (hits, rejections) if h]",
        "    halves = [float(np.mean(hits))] if hits else []"),
    "exploration on absolute value bins": (
        "    return var, min(int(RANGE_BINS * (val - lo) / (hi - lo)), RANGE_BINS - 1)", "    return var, int(val)"),
    "exploration paying repeated cells": (
        "    return 0.0 if cell(step.scm, step.intervention) in seen else exploration_unit(step.scm, step.budget)",
        "    return exploration_unit(step.scm, step.budget)"),
    "refused calls not penalised": (
        '    return -exploration_unit(scm, budget) if name == "exploration" else 0.0', "    return 0.0"),
}


def main() -> int:
    original = PATH.read_text()
    missed = []
    try:
        for name, (line, mutant) in MUTATIONS.items():
            if original.count(line) != 1:
                raise SystemExit(f"mutation {name!r}: the line to mutate is not in rewards.py exactly once")
            PATH.write_text(original.replace(line, mutant))
            run = subprocess.run([sys.executable, "-m", "pytest", "-q", *TESTS], capture_output=True, text=True)
            failed = [x.split(" - ")[0].removeprefix("FAILED ") for x in run.stdout.splitlines()
                      if x.startswith("FAILED")]
            print(f"{name}: {len(failed)} failed", *failed, sep="\n  ", flush=True)
            if not failed:
                missed.append(name)
    finally:
        PATH.write_text(original)
    if missed:
        print(f"NOT caught: {missed}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
