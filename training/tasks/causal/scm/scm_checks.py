"""An SCM checked before any work: every mechanism finite on its range, and a finite optimum.

A mechanism such as ``exp(1000) * X``, ``X / (X - X)`` or ``log(-1 - X * X)`` builds (its expression is valid) but
gives inf or NaN; ``exp(-X) + 1/0`` raises when evaluated. `check_scm` samples the SCM once without intervening and
once at each end of every intervention range (the episodes' extremes), evaluating the mechanisms in topological order
itself so that a failure names the variable, its mechanism and the parent values that produced it; then it computes
E[target] and the optimum (cached on the SCM, so the episodes reuse it) and refuses a non-finite one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from training.tasks.causal.scm.expressions import shortened
from training.tasks.causal.scm.scm import SCM, SCMError

CHECK_ROWS = 64
CHECK_SEED = 0


def _mechanism_text(mechanism) -> str:
    source = getattr(mechanism, "source", None)
    return shortened(source) if source is not None else f"linear {mechanism.to_dict()}"


def _under(do: Mapping[str, float] | None) -> str:
    if not do:
        return " (observational sample)"
    return " under " + ", ".join(f"do({v} = {value:g})" for v, value in do.items())


def check_sample(scm: SCM, noise: np.ndarray, do: Mapping[str, float] | None) -> None:
    """Evaluate every mechanism on `noise` (n, d) under `do`; `SCMError` names the first variable whose mechanism
    raises or gives a non-finite value, and the parent values at which it does."""
    n = noise.shape[0]
    values: dict[str, np.ndarray] = {}
    for v in scm.order:
        if do and v in do:
            values[v] = np.full(n, float(do[v]))
            continue
        mechanism = scm.mechanisms[v]
        where = f"variable {v}'s mechanism {_mechanism_text(mechanism)}"
        with np.errstate(all="ignore"):
            try:
                column = np.broadcast_to(np.asarray(mechanism(values), dtype=float) + noise[:, scm.index[v]], (n,))
            except Exception as err:  # whatever the user's expression raises (ZeroDivisionError, OverflowError, ...)
                raise SCMError(f"{where} raises {type(err).__name__}: {err}{_under(do)}") from None
        bad = ~np.isfinite(column)
        if bad.any():
            k = int(np.argmax(bad))
            at = ", ".join(f"{p}={values[p][k]:.6g}" for p in mechanism.parents) or "any value"
            raise SCMError(f"{where} gives {column[k]} at {at}{_under(do)}")
        values[v] = np.array(column)


def check_scm(scm: SCM) -> None:
    """Refuse an SCM whose mechanisms raise or are not finite on their range, or whose optimum is not finite."""
    noise = np.random.default_rng(CHECK_SEED).standard_normal((CHECK_ROWS, scm.d)) * scm.noise_std
    check_sample(scm, noise, None)
    for v in scm.actionable:
        for bound in scm.ranges[v]:
            check_sample(scm, noise, {v: bound})
    with np.errstate(all="ignore"):
        try:
            baseline, optimum = scm.expected_target(), scm.optimum()
        except Exception as err:  # the Monte-Carlo draws reach values the check's draws did not
            raise SCMError(f"computing the optimum raises {type(err).__name__}: {err}") from None
    if not math.isfinite(baseline):
        raise SCMError(f"E[{scm.target}] without intervention is {baseline}, not finite")
    if not (math.isfinite(optimum.expected) and math.isfinite(optimum.value)):
        raise SCMError(f"the optimum is E[{scm.target} | do({optimum.variable} = {optimum.value:g})] = "
                       f"{optimum.expected}, not finite")
