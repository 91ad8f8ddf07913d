"""Small SCMs and data helpers shared by the causal tests."""

from __future__ import annotations

import numpy as np

from training.causal.scm import SCM, LinearMechanism

CHAIN_VARS = ["X0", "X1", "X2", "X3", "X4"]


def chain5(target: str = "X2") -> SCM:
    """X0 -> X1 -> X2 -> X3 -> X4, unit noise, weights 1.0, -1.2, 0.9, 1.1."""
    weights = {"X1": 1.0, "X2": -1.2, "X3": 0.9, "X4": 1.1}
    mech = {"X0": LinearMechanism((), ())}
    for i in range(1, 5):
        mech[f"X{i}"] = LinearMechanism((f"X{i - 1}",), (weights[f"X{i}"],))
    return SCM(CHAIN_VARS, mech, {v: 1.0 for v in CHAIN_VARS}, {v: (-3.0, 3.0) for v in CHAIN_VARS if v != target},
               target)


def intervention_rows(scm: SCM, variable: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """n rows, each under do(variable = uniform value in its range), with their intervened masks."""
    lo, hi = scm.ranges[variable]
    rows = np.vstack([scm.sample(1, rng, {variable: float(rng.uniform(lo, hi))}) for _ in range(n)])
    mask = np.zeros_like(rows, dtype=bool)
    mask[:, scm.index[variable]] = True
    return rows, mask


def observational_rows(scm: SCM, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    rows = scm.sample(n, rng)
    return rows, np.zeros_like(rows, dtype=bool)
