"""The optimum of an SCM: the best E[target | do(X_i = v)] over non-target X_i and v in X_i's range.

* Linear family (exact): E[target | do(X_i = v)] = c_i + tau_i * v is affine in v (tau_i is X_i's total effect on
  the target), so its best value over [low_i, high_i] is at an endpoint: high_i when tau_i > 0 and the goal is
  "max" (mirrored for "min"). Both endpoints are evaluated exactly and the best (variable, endpoint) wins.
* Otherwise (numerical): for each variable, E[target | do] is the common-random-numbers Monte-Carlo estimate of
  `SCM.expected_target` (a deterministic, smooth function of v). It is evaluated on a dense grid of `GRID_POINTS`
  values across the range, then refined by bounded Brent search (scipy's `minimize_scalar`, xatol 1e-7) between the
  best grid point's neighbours. The result is the optimum of that estimator to ~1e-7 in v, unless a peak is
  narrower than the grid spacing (range / 200); its distance to the true optimum adds the Monte-Carlo error of the
  estimator (0 when the intervened variable is the target's only parent, as in the CBO toy SCM).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from scipy.optimize import minimize_scalar


class SCM(Protocol):
    """What the search reads of an SCM (`training.tasks.causal.scm.scm.SCM`, whose `optimum()` calls this module:
    declared here rather than imported, so the two modules do not import each other)."""

    goal: str
    actionable: list[str]
    ranges: Mapping[str, tuple[float, float]]

    @property
    def is_linear(self) -> bool: ...

    def expected_target(self, do: Mapping[str, float] | None = None) -> float: ...

    def expected_targets(self, variable: str, values: Sequence[float]) -> np.ndarray: ...

    def better(self, a: float, b: float) -> bool: ...


@dataclass(frozen=True)
class Optimum:
    """The best single-variable hard intervention: do(`variable` = `value`) gives E[target] = `expected`."""

    variable: str
    value: float
    expected: float
    exact: bool  # True for the linear family (closed form); False when found numerically (see optimum.py)

GRID_POINTS = 201


def _sign(scm: SCM) -> float:
    return 1.0 if scm.goal == "max" else -1.0


def linear_optimum(scm: SCM) -> Optimum:
    best: Optimum | None = None
    for var in scm.actionable:
        for value in scm.ranges[var]:
            e = scm.expected_target({var: value})
            if best is None or scm.better(e, best.expected):
                best = Optimum(var, float(value), e, exact=True)
    return best


def best_value(scm: SCM, var: str, grid_points: int = GRID_POINTS) -> Optimum:
    """The best do(var = v) for one variable: the better endpoint (linear) or grid + Brent refinement."""
    if scm.is_linear:
        lo, hi = scm.ranges[var]
        e_lo, e_hi = scm.expected_target({var: lo}), scm.expected_target({var: hi})
        return Optimum(var, hi, e_hi, True) if scm.better(e_hi, e_lo) else Optimum(var, lo, e_lo, True)
    return numerical_optimum(scm, grid_points, variables=[var])


def numerical_optimum(scm: SCM, grid_points: int = GRID_POINTS, variables: list[str] | None = None) -> Optimum:
    sign = _sign(scm)
    best: Optimum | None = None
    for var in variables or scm.actionable:
        lo, hi = scm.ranges[var]
        grid = np.linspace(lo, hi, grid_points)
        values = scm.expected_targets(var, grid)
        k = int(np.argmax(sign * values))
        a, b = grid[max(k - 1, 0)], grid[min(k + 1, grid_points - 1)]
        res = minimize_scalar(lambda v: -sign * scm.expected_targets(var, [float(np.clip(v, lo, hi))])[0],
                              bounds=(a, b), method="bounded", options={"xatol": 1e-7})
        cand_v, cand_e = (float(res.x), -sign * float(res.fun))
        if not sign * cand_e >= sign * values[k]:  # refinement never returns worse than the grid
            cand_v, cand_e = float(grid[k]), float(values[k])
        if best is None or scm.better(cand_e, best.expected):
            best = Optimum(var, cand_v, cand_e, exact=False)
    return best


def find_optimum(scm: SCM) -> Optimum:
    if not scm.actionable:
        raise ValueError("optimum: the SCM has no variable to intervene on")
    return linear_optimum(scm) if scm.is_linear else numerical_optimum(scm)
