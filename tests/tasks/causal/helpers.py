"""Small SCMs and data helpers shared by the causal tests."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from training.tasks.causal.scm.scm import SCM, LinearMechanism

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


def rescaled(scm: SCM, variable: str, factor: float) -> SCM:
    """The same SCM with `variable` measured in other units, X' = factor * X: its mechanism, noise and range scale
    by `factor`, and every child reads X' / factor. Interventions at the same position of the (rescaled) range
    then give the same distribution of every other variable."""
    import re

    from training.tasks.causal.scm.scm import ExpressionMechanism

    name = re.compile(rf"\b{re.escape(variable)}\b")
    mechanisms = {}
    for v, m in scm.mechanisms.items():
        if isinstance(m, LinearMechanism):
            w = [wt / factor if p == variable else wt for p, wt in zip(m.parents, m.weights)]
            bias = m.bias
            if v == variable:
                w, bias = [wt * factor for wt in w], bias * factor
            mechanisms[v] = LinearMechanism(m.parents, tuple(w), bias)
        else:
            source = name.sub(f"({variable} / {factor!r})", m.source)
            if v == variable:
                source = f"{factor!r} * ({source})"
            mechanisms[v] = ExpressionMechanism(m.parents, source)
    noise = {v: float(s) * (factor if v == variable else 1.0) for v, s in zip(scm.variables, scm.noise_std)}
    ranges = {v: (lo * factor, hi * factor) if v == variable else (lo, hi) for v, (lo, hi) in scm.ranges.items()}
    return SCM(scm.variables, mechanisms, noise, ranges, scm.target, scm.goal, scm.meta)


def noisier(scm: SCM, factor: float) -> SCM:
    """The same SCM with every noise standard deviation multiplied by `factor`."""
    noise = {v: float(s) * factor for v, s in zip(scm.variables, scm.noise_std)}
    return SCM(scm.variables, dict(scm.mechanisms), noise, dict(scm.ranges), scm.target, scm.goal, scm.meta)


def play(policy, scm: SCM, seed: int, budget: int, n_calls: int | None = None, initial_samples: int = 10):
    """An episode of `policy(env, rng) -> (tool, args)` for `n_calls` calls (default: the budget), on `scm` with
    environment seed `seed`; returns the environment (read its `.trace`)."""
    from training.tasks.causal.env import CausalEnv

    env = CausalEnv()
    env.reset(scm_json=scm.to_json(), seed=seed, budget=budget, initial_samples=initial_samples)
    rng = np.random.default_rng(seed + 1)
    for _ in range(budget if n_calls is None else n_calls):
        tool, args = policy(env, rng)
        getattr(env, tool)(**args)
    return env


def uniform_position_policy(env, rng):
    """The random baseline without rounding (a uniform non-target variable, a uniform position in its range),
    so that a rescaled range gives the same positions."""
    scm = env.scm
    var = scm.actionable[int(rng.integers(len(scm.actionable)))]
    lo, hi = scm.ranges[var]
    return "intervene", {"variable": var, "value": lo + float(rng.random()) * (hi - lo)}


@contextmanager
def dropped_module(package: str, folder: Path, name: str, source: str) -> Iterator[str]:
    """A module `name` written into the package's `folder` for the duration (what a user adding one file does); on
    exit the file, its bytecode and its import are gone. Yields the module's full name."""
    path, full = folder / f"{name}.py", f"{package}.{name}"
    path.write_text(source)
    importlib.invalidate_caches()
    try:
        yield full
    finally:
        path.unlink(missing_ok=True)
        for cached in (folder / "__pycache__").glob(f"{name}.*"):
            cached.unlink(missing_ok=True)
        sys.modules.pop(full, None)
        importlib.invalidate_caches()
