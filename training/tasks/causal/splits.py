"""The bundled causal task: seeded SCMs to intervene on (train and held-out), their prompts and expert traces.

Each row carries the chat `prompt` (the variables, their ranges, the target and the goal; TRL appends reset's text:
the budget and a summary of the initial data), the SCM itself as JSON text (`scm_json`, what `CausalEnv.reset`
builds the episode from), its `target` and `goal`, how it was generated (`family`, `mechanism`, `n_vars`,
`scm_seed`), the episode's sampling `seed`, the `budget` of calls and the number of `initial_samples`. The SCM is
text, not a nested column, because Arrow would merge the different SCMs' keys into one struct.

Train rows also carry `reference_calls_json`: the calls of the teacher playing that row's episode (same seed, so
replaying them in the environment gives the same samples): the option the last reply listed last, the largest expected
information gain (`training.tasks.causal.policies.belief_line.teacher`, the teacher GRPO is to surpass). The teacher
acts on what the policy reads, so imitation can teach the policy to read the options. The starting policy imitates
these traces and more episodes of the same rows (`training.tasks.causal.starting_policy`); `FORCE_RATE` forcing uses
their first call.

Default splits (`python -m training.tasks.causal.splits` writes `data/causal/{train,heldout}.jsonl`, a few minutes,
most of it the teacher): 256 train and 128 held-out SCMs, the four graph families in turn, one block of four in four
nonlinear (every family has nonlinear SCMs), the rest linear-Gaussian; held-out SCMs come from a disjoint seed range
(`bundled_scm`; which seed draws what: `training.evaluation.pairing_seeds`). Each SCM draws, from its row's seed, its size (`SIZES`: 3 to 8 variables), its names (`scm.names.naming`: X1.. and Y,
letters, gene names, words such as `yield`, generated codes), where the target stands in the list, its intervention
ranges and its goal (`scm.names`; "min" one time in four), so that reading the options does not depend on one naming,
one range or one direction (`styled`). Budget and initial observational samples: the environment's defaults
(`training.tasks.causal.row_schema.DEFAULT_BUDGET`, 6 calls, after `DEFAULT_INITIAL_SAMPLES`, 10).

Why at most 8 variables: the exact surrogate's cost per call grows as 2^d (the options' lookahead scores every
candidate under posterior draws; seconds a call by size: `benchmarks/causal_option_cost.py`, docs/results/causal.md
§7.1), and a GRPO step plays about 100 calls. The replies do not grow with the number
of variables (the options are the Pareto front, the sampled target alone is shown), so larger SCMs read the same;
the example files of 11 and 12 variables are measured in docs/results/causal.md §4.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from training.evaluation.pairing_seeds import STYLE_SEED_KEY, generator, row_seed
from training.evaluation.progress import episode_bar
from training.run_setup.prompt_datasets import write_split_files
from training.tasks.causal.row_schema import DEFAULT_BUDGET, DEFAULT_INITIAL_SAMPLES, scm_from_json
from training.tasks.causal.policies.belief_line import teacher
from training.tasks.causal.policies.play import run_policy
from training.tasks.causal.scm import names
from training.tasks.causal.scm.families import FAMILIES, random_scm
from training.tasks.causal.scm.scm import SCM

DATA_DIR = Path(__file__).resolve().parents[3] / "data" / "causal"
N_TRAIN, N_HELDOUT = 256, 128
SIZES = (3, 4, 5, 6, 7, 8)


def causal_prompt(row: dict) -> list[dict]:
    """Chat messages for a row: the variables, the target and its goal, and the variables that may be set (every
    other one, listed: a small model copies a name from a list more easily than it excludes the target) with
    their range."""
    scm = scm_from_json(row["scm_json"])
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


def renamed_as(scm: SCM, rng: np.random.Generator, style: str | None = None) -> SCM:
    """`scm` with names in `style` (drawn when None; `scm.names.naming`), in the same order, the target's last drawn."""
    others = [v for v in scm.variables if v != scm.target]
    new = names.naming(scm.d, rng, style)
    return scm.renamed(dict(zip(others, new[:-1])) | {scm.target: new[-1]})


def styled(scm: SCM, rng: np.random.Generator, style: str | None = None) -> SCM:
    """`scm` with names in `style` (drawn when None; `renamed_as`), listed in the generator's order (already a seeded
    permutation of the graph positions, so neither a name nor a place in the list tells the graph), with drawn
    intervention ranges and goal."""
    renamed = renamed_as(scm, rng, style)
    spans = names.ranges(list(renamed.actionable), rng)
    return SCM(renamed.variables, renamed.mechanisms, dict(zip(renamed.variables, renamed.noise_std)), spans,
               renamed.target, names.goal(rng), renamed.meta)


def scm_row(scm: SCM, seed: int, budget: int = DEFAULT_BUDGET, initial_samples: int = DEFAULT_INITIAL_SAMPLES) -> dict:
    """The row of an episode of `scm` (its prompt reads the SCM its JSON describes, held by name for the episodes of
    this process: `row_schema`)."""
    meta = scm.meta
    row = {
        "scm_json": scm.to_json(), "target": scm.target, "goal": scm.goal,
        "family": meta.get("family", "user"), "mechanism": meta.get("mechanism", "expression"),
        "n_vars": scm.d, "scm_seed": meta.get("seed"), "seed": seed, "budget": budget,
        "initial_samples": initial_samples,
    }
    return {"prompt": causal_prompt(row), **row}


def teacher_calls(row: dict, surrogate: str = "exact") -> list[dict]:
    """The teacher's calls on the row's own episode (its seed, as GRPO plays it), to the budget, as
    `{name, arguments}`; a refused call is an error (the teacher reads the options, which lie in range)."""
    record = run_policy(teacher(), row, None, surrogate)
    refused = [s for s in record.steps if not s.valid]
    if refused:
        raise RuntimeError(f"the teacher's call {refused[0].tool}({refused[0].arguments}) was refused on row seed "
                           f"{row['seed']}: {refused[0].outcome}")
    return [{"name": s.tool, "arguments": s.arguments} for s in record.steps]


ScmOf = Callable[[int, int], SCM]  # (row index, row seed) -> the SCM the row plays


def make_rows(split: str, stop: int, scm_of: ScmOf, start: int = 0, budget: int = DEFAULT_BUDGET,
              initial_samples: int = DEFAULT_INITIAL_SAMPLES, teacher: bool = False, surrogate: str = "exact",
              max_parents: int | None = None) -> list[dict]:
    """Rows start .. stop-1 of `split` ("train" or "heldout"), the one row maker of every causal command: row i has
    seed `row_seed(split, i)` and plays `scm_of(i, seed)`; `max_parents`, where given, is each row's in-degree bound
    for the exact surrogate; `teacher` adds the teacher's calls (`teacher_calls`, played with `surrogate`). A slice
    regenerates exactly the rows of the whole. The teacher's episodes show a bar of those done."""
    rows = []
    with episode_bar(stop - start, f"teacher episodes ({split} rows)" if teacher else None) as bar:
        for i in range(start, stop):
            seed = row_seed(split, i)
            row = scm_row(scm_of(i, seed), seed=seed, budget=budget, initial_samples=initial_samples)
            if max_parents is not None:
                row["max_parents"] = max_parents
            if teacher:
                row["reference_calls_json"] = json.dumps(teacher_calls(row, surrogate))
            rows.append(row)
            bar.update(1)
    return rows


def bundled_scm(i: int, seed: int) -> SCM:
    """The bundled splits' SCM of row i with seed `seed`: the four families in turn, one block of four in four
    nonlinear, its size, names, ranges and goal drawn from `generator(seed, STYLE_SEED_KEY)`."""
    family = FAMILIES[i % len(FAMILIES)]
    mechanism = "nonlinear" if (i // len(FAMILIES)) % 4 == 3 else "linear"
    rng = generator(seed, STYLE_SEED_KEY)
    n_vars = int(rng.choice(SIZES))
    return styled(random_scm(family, n_vars, seed, mechanism), rng)


def cycling(scms: Sequence[SCM]) -> ScmOf:
    """Row i plays scms[i mod len(scms)] (a user's SCM files)."""
    return lambda i, _seed: scms[i % len(scms)]


def make_splits() -> tuple[list[dict], list[dict]]:
    return make_rows("train", N_TRAIN, bundled_scm, teacher=True), make_rows("heldout", N_HELDOUT, bundled_scm)


def write_splits(out_dir: Path = DATA_DIR) -> None:
    train, heldout = make_splits()
    write_split_files(out_dir, {"train": train, "heldout": heldout})


if __name__ == "__main__":
    argparse.ArgumentParser(description="Regenerate the bundled causal SCM splits.").parse_args()
    write_splits()
    print(json.dumps({"train": N_TRAIN, "heldout": N_HELDOUT, "dir": str(DATA_DIR)}))
