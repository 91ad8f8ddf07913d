"""The bundled causal task: seeded SCMs to intervene on (train and held-out), their prompts and expert traces.

Each row carries the chat `prompt` (the variables, their ranges, the target and the goal; TRL appends reset's text:
the budget and a summary of the initial data), the SCM itself as JSON text (`scm_json`, what `CausalEnv.reset`
builds the episode from), its `target` and `goal`, how it was generated (`family`, `mechanism`, `n_vars`,
`scm_seed`), the episode's sampling `seed`, the `budget` of calls and the number of `initial_samples`. The SCM is
text, not a nested column, because Arrow would merge the different SCMs' keys into one struct.

Train rows also carry `reference_calls_json`: the calls of the teacher playing that row's episode (same seed, so
replaying them in the environment gives the same samples): the call the belief line of the last reply recommends
(`training.tasks.causal.policies.belief_line.BeliefPolicy`: the variable listed last, the call of largest expected
reward, at the value shown), or with probability `TEACHER_REPEAT` its previous call again (`belief_line.teacher`, the
flawed teacher GRPO is to surpass). The teacher acts on what the policy reads, so imitation can teach the policy to
read the belief. The starting policy imitates these traces and more episodes of the same rows
(`training.tasks.causal.starting_policy`); `FORCE_RATE` forcing uses their first call.

Default splits (`python -m training.tasks.causal.splits` writes `data/causal/{train,heldout}.jsonl`, about a minute, most
of it the teacher): 256 train and 128 held-out SCMs with 4 to 6 variables, the four graph families in turn, every
fourth one nonlinear, the rest linear-Gaussian; held-out SCMs come from a disjoint seed range. The target is named
`Y` and the other variables `X1` .. `X{d-1}` (`target_named_y`). Budget and initial observational samples: the
environment's defaults (`training.tasks.causal.env.DEFAULT_BUDGET`, 6 calls, after `DEFAULT_INITIAL_SAMPLES`, 10).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from training.run_setup.prompt_datasets import write_split_files
from training.tasks.causal.env import DEFAULT_BUDGET, DEFAULT_INITIAL_SAMPLES, make_causal_env
from training.tasks.causal.policies.belief_line import teacher
from training.tasks.causal.scm.families import FAMILIES, random_scm
from training.tasks.causal.scm.scm import SCM

DATA_DIR = Path(__file__).resolve().parents[3] / "data" / "causal"
N_TRAIN, N_HELDOUT = 256, 128
HELDOUT_SEED_OFFSET = 100_000
SIZES = (4, 5, 6)
TEACHER_SEED_OFFSET = 7_000_000  # the teacher's own generator: default_rng(row seed + this)


def causal_prompt(row: dict) -> list[dict]:
    """Chat messages for a row: the variables, the target and its goal, and the variables that may be set (every
    other one, listed: a small model copies a name from a list more easily than it excludes the target) with
    their range."""
    scm = SCM.from_json(row["scm_json"])
    ranges = {f"[{lo:g}, {hi:g}]" for lo, hi in scm.ranges.values()}
    if len(ranges) == 1:
        settable = f"one of {', '.join(scm.actionable)} at a time to a value in {ranges.pop()}"
    else:
        settable = "one of " + ", ".join(f"{v} in [{lo:g}, {hi:g}]" for v, (lo, hi) in scm.ranges.items())
        settable += " at a time"
    aim = "high" if scm.goal == "max" else "low"
    text = (f"Variables: {', '.join(scm.variables)}. Target: {scm.target}. Make {scm.target} as {aim} as possible "
            f"and find its parents. Set {settable}.")
    return [{"role": "user", "content": text}]


def target_named_y(scm: SCM) -> SCM:
    """The bundled task's names: the target is `Y`, the others `X1` .. `X{d-1}` (in the generator's order, which
    is already a seeded permutation of the graph positions, so a name tells nothing about the graph); listed X1 ..
    X{d-1}, Y. A role name the policy can read: the target is never among the names it may set."""
    others = [v for v in scm.variables if v != scm.target]
    mapping = {v: f"X{i + 1}" for i, v in enumerate(others)} | {scm.target: "Y"}
    return scm.renamed(mapping, order=[*(f"X{i + 1}" for i in range(len(others))), "Y"])


def scm_row(scm: SCM, seed: int, budget: int = DEFAULT_BUDGET, initial_samples: int = DEFAULT_INITIAL_SAMPLES) -> dict:
    meta = scm.meta
    row = {
        "scm_json": scm.to_json(), "target": scm.target, "goal": scm.goal,
        "family": meta.get("family", "user"), "mechanism": meta.get("mechanism", "expression"),
        "n_vars": scm.d, "scm_seed": meta.get("seed"), "seed": seed, "budget": budget,
        "initial_samples": initial_samples,
    }
    return {"prompt": causal_prompt(row), **row}


def play_episode(row: dict, policy, surrogate: str = "exact") -> tuple[str, list[dict], list[str]]:
    """The row's own episode (its seed) played by a scripted policy to the budget, or until the policy stops (returns
    None): reset's text, the calls as `{name, arguments}` and what the environment answered to each. The policy's
    generator is `default_rng(row seed + TEACHER_SEED_OFFSET)`; the environment has the `surrogate`."""
    env = make_causal_env(surrogate)()
    reset_text = env.reset(**row)
    rng = np.random.default_rng(int(row["seed"]) + TEACHER_SEED_OFFSET)
    calls, results = [], []
    while env.record.used < env.record.budget:
        call = policy(env, rng)
        if call is None:
            break
        tool, args = call
        out = getattr(env, tool)(**args)
        if out.startswith("error"):
            raise RuntimeError(f"the call {tool}({args}) was refused on row seed {row['seed']}: {out}")
        calls.append({"name": tool, "arguments": args})
        results.append(out)
    return reset_text, calls, results


def teacher_calls(row: dict, surrogate: str = "exact") -> list[dict]:
    """The teacher's calls on the row's own episode (its seed), to the budget, as `{name, arguments}`."""
    return play_episode(row, teacher(), surrogate)[1]


def make_rows(n: int, seed_offset: int, with_teacher: bool, start: int = 0) -> list[dict]:
    """Rows start .. n-1 of a split (a slice regenerates exactly the shipped lines)."""
    rows = []
    for i in range(start, n):
        family = FAMILIES[i % len(FAMILIES)]
        mechanism = "nonlinear" if i % 4 == 3 else "linear"
        n_vars = SIZES[(i // len(FAMILIES)) % len(SIZES)]
        row = scm_row(target_named_y(random_scm(family, n_vars, seed_offset + i, mechanism)), seed=seed_offset + i)
        if with_teacher:
            row["reference_calls_json"] = json.dumps(teacher_calls(row))
        rows.append(row)
    return rows


def make_splits() -> tuple[list[dict], list[dict]]:
    return make_rows(N_TRAIN, 0, with_teacher=True), make_rows(N_HELDOUT, HELDOUT_SEED_OFFSET, with_teacher=False)


def write_splits(out_dir: Path = DATA_DIR) -> None:
    train, heldout = make_splits()
    write_split_files(out_dir, {"train": train, "heldout": heldout})


if __name__ == "__main__":
    argparse.ArgumentParser(description="Regenerate the bundled causal SCM splits.").parse_args()
    write_splits()
    print(json.dumps({"train": N_TRAIN, "heldout": N_HELDOUT, "dir": str(DATA_DIR)}))
