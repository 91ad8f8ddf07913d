"""Reference values of the additive surrogate, recorded from the code before issue 62's fast paths, that
test_additive_fast_paths.py holds every later version to (within 1e-10).

A case is a seeded nonlinear SCM (`examples.scm_generators.sempler_style`, 3 to 8 variables, and the CBO toy file),
a surrogate updated with 10 observational rows and then 3 intervened rows, one call at a time. Recorded per case:
the target's parent-set probabilities and entropy; the entropies after 40 hypothetical single rows (random values,
one variable or none intervened each) and after 3 batches of 2 rows; the expected gain of a call (16 draws); and,
up to 7 variables, every candidate's gain, info and score in the options (`Belief.of`) with the shown options' order.

    python -m tests.tasks.causal.additive_reference   # rewrites tests/tasks/causal/data/additive_reference.npz

The file in the repository was written by this module at 0863861, whose surrogate code is cb969d8's (the additive
surrogate before issue 62).

The larger cases (`LARGE_CASES`: sempler-style SCMs of 11 and 12 variables and the nonlinear Sachs file, the
surrogate's default in-degree bound of 3, the options' values included) have their own file, written before issue
69's lookahead by

    python -m tests.tasks.causal.additive_reference --large   # rewrites tests/tasks/causal/data/additive_reference_large.npz

at 68c1492 (main before issue 69).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from examples.scm_generators import sempler_style
from training.tasks.causal.belief import Belief
from training.tasks.causal.scm.user_scm import load_user_scm
from training.tasks.causal.surrogates.additive_surrogate import AdditiveSurrogate

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = Path(__file__).parent / "data" / "additive_reference.npz"
LARGE_FIXTURE = Path(__file__).parent / "data" / "additive_reference_large.npz"
CASES = {"cbo": None, **{f"sempler{d}": d for d in range(3, 9)}}
LARGE_CASES = {"sempler11": 11, "sempler12": 12, "sachs_nonlinear": "examples/scms/sachs_nonlinear.yaml"}
BELIEF_MAX_VARS = 7  # the old code's options cost tens of seconds a belief above (the large cases' are recorded)


def case_scm(name: str):
    d = CASES[name] if name in CASES else LARGE_CASES[name]
    if isinstance(d, str):
        return load_user_scm(ROOT / d)
    return load_user_scm(ROOT / "examples/scms/cbo_toy.yaml") if d is None else sempler_style(d, d)


def case_state(name: str, **surrogate_args) -> tuple:
    """(scm, surrogate after the case's rows, generator for what comes next)."""
    scm = case_scm(name)
    rng = np.random.default_rng([62, scm.d])
    surrogate = AdditiveSurrogate(scm.variables, scm.target, **surrogate_args)
    rows = scm.sample(10, rng)
    surrogate.update(rows, np.zeros_like(rows, dtype=bool))
    for k in range(3):
        v = scm.actionable[k % len(scm.actionable)]
        lo, hi = scm.ranges[v]
        row = scm.sample(1, rng, do={v: float(rng.uniform(lo, hi))})
        mask = np.zeros_like(row, dtype=bool)
        mask[:, scm.index[v]] = True
        surrogate.update(row, mask)
    return scm, surrogate, rng


def hypothetical_rows(scm, rng: np.random.Generator, n: int = 40) -> tuple[np.ndarray, np.ndarray]:
    rows = scm.sample(n, rng) + rng.normal(0.0, 0.5, (n, scm.d))
    mask = np.zeros((n, scm.d), dtype=bool)
    which = rng.integers(-1, scm.d, n)  # -1: no variable intervened
    mask[np.flatnonzero(which >= 0), which[which >= 0]] = True
    return rows, mask


def case_values(name: str, **surrogate_args) -> dict[str, np.ndarray]:
    scm, surrogate, rng = case_state(name, **surrogate_args)
    out = {"mask_probs": surrogate.mask_probs, "entropy": np.array([surrogate.entropy()])}
    rows, mask = hypothetical_rows(scm, rng)
    out["what_if_rows"] = surrogate.what_if_rows(rows, mask)
    batches = [hypothetical_rows(scm, rng, 2) for _ in range(3)]
    out["what_if_many"] = surrogate.what_if_many(batches)
    v = scm.index[scm.actionable[0]]
    call_mask = np.zeros((1, scm.d), dtype=bool)
    call_mask[0, v] = True
    out["expected_gain"] = np.array([surrogate.expected_gain((v, 0.5), call_mask, 16, np.random.default_rng(7))])
    if scm.d <= BELIEF_MAX_VARS or name in LARGE_CASES:
        belief = Belief.of(surrogate, scm, np.random.default_rng(11), budget=6, made=((scm.actionable[0], 0.5),))
        out["candidates"] = np.array([[o.gain, o.info, o.score] for o in belief.candidates])
        out["shown"] = np.array([belief.candidates.index(o) for o in belief.options])
    return out


def main(large: bool = False) -> None:
    cases, fixture = (LARGE_CASES, LARGE_FIXTURE) if large else (CASES, FIXTURE)
    values = {f"{name}/{key}": v for name in cases for key, v in case_values(name).items()}
    fixture.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(fixture, **values)
    print(f"{len(values)} arrays -> {fixture}")


if __name__ == "__main__":
    main(large="--large" in sys.argv[1:])
