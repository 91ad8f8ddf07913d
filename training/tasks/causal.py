"""The bundled causal task: seeded SCMs to intervene on (train and held-out), and the prompt rendered from a row.

Each row carries the SCM itself as JSON text (`scm_json`, what `CausalEnv.reset` builds the episode from), its
`target` and `goal`, how it was generated (`family`, `mechanism`, `n_vars`, `scm_seed`), the episode's sampling
`seed`, the `budget` of calls and the number of `initial_samples`. The SCM is text, not a nested column, because
Arrow would merge the different SCMs' keys into one struct.

Default splits (`python -m training.tasks.causal` writes `data/causal/{train,heldout}.jsonl`): 64 train and 16
held-out SCMs with 4 to 6 variables, the four graph families in turn, every fourth one nonlinear, the rest
linear-Gaussian. Held-out SCMs come from a disjoint seed range. There is no `prompt` column yet: `causal_prompt`
renders one from a row (the final prompt wording is settled with the trainer integration).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from training.causal.env import DEFAULT_BUDGET, DEFAULT_INITIAL_SAMPLES
from training.causal.families import FAMILIES, random_scm
from training.causal.scm import SCM
from training.data import write_split_files

DATA_DIR = Path(__file__).resolve().parents[2] / "data" / "causal"
N_TRAIN, N_HELDOUT = 64, 16
HELDOUT_SEED_OFFSET = 100_000
SIZES = (4, 5, 6)


def scm_row(scm: SCM, seed: int, budget: int = DEFAULT_BUDGET, initial_samples: int = DEFAULT_INITIAL_SAMPLES
            ) -> dict:
    meta = scm.meta
    return {
        "scm_json": scm.to_json(), "target": scm.target, "goal": scm.goal,
        "family": meta.get("family", "user"), "mechanism": meta.get("mechanism", "expression"),
        "n_vars": scm.d, "scm_seed": meta.get("seed"), "seed": seed, "budget": budget,
        "initial_samples": initial_samples,
    }


def make_rows(n: int, seed_offset: int) -> list[dict]:
    rows = []
    for i in range(n):
        family = FAMILIES[i % len(FAMILIES)]
        mechanism = "nonlinear" if i % 4 == 3 else "linear"
        n_vars = SIZES[(i // len(FAMILIES)) % len(SIZES)]
        scm = random_scm(family, n_vars, seed_offset + i, mechanism)
        rows.append(scm_row(scm, seed=seed_offset + i))
    return rows


def make_splits() -> tuple[list[dict], list[dict]]:
    return make_rows(N_TRAIN, 0), make_rows(N_HELDOUT, HELDOUT_SEED_OFFSET)


def causal_prompt(row: dict) -> list[dict]:
    """Chat messages for a row: the variables with their intervention ranges, the target, the goal and the budget."""
    scm = SCM.from_json(row["scm_json"])
    budget = row.get("budget", DEFAULT_BUDGET)
    ranges = ", ".join(f"{v} in [{lo:g}, {hi:g}]" for v, (lo, hi) in scm.ranges.items())
    aim = "as high" if scm.goal == "max" else "as low"
    text = (f"A causal system has variables {', '.join(scm.variables)}. Target: {scm.target}. "
            f"Make the expected value of {scm.target} {aim} as possible and find its parents. "
            f"You may set one variable at a time: {ranges}. Budget: {budget} calls of intervene or observe.")
    return [{"role": "user", "content": text}]


def write_splits(out_dir: Path = DATA_DIR) -> None:
    train, heldout = make_splits()
    write_split_files(out_dir, {"train": train, "heldout": heldout})


if __name__ == "__main__":
    argparse.ArgumentParser(description="Regenerate the bundled causal SCM splits.").parse_args()
    write_splits()
    print(json.dumps({"train": N_TRAIN, "heldout": N_HELDOUT, "dir": str(DATA_DIR)}))
