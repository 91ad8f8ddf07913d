"""Scripted policies by name. Each policy module of this package registers its factories (`register_policy`) when it
is imported; `training.tasks.causal.policies.policy_catalogue` imports every module of the package, so its `POLICIES`
is the whole registry. Add a baseline policy by writing one module in this package that registers it (plus its test):
no other file lists it.

A policy maps the episode so far (the environment: its SCM spec, surrogate and record) and a generator to the next
call, ``(tool name, arguments)``, or None to stop and leave the budget unused. A factory is what `POLICIES` maps a
name to: called with no arguments, it returns a fresh policy.

The order of `POLICIES` is the order the commands print and play the policies in (`evaluate_baselines`' table, its
`--policies` help, `--baseline` choices), so it must not depend on which module the catalogue happens to import
first. Each registration therefore carries an explicit `order` (a number: policies sort by it, ties by name), and
`POLICIES`, a `training.registries.Registry` like every registry of the stack, keeps that order. The alternative, one list of names in this file, would make
adding a policy touch two files; numbers with gaps let a new policy go anywhere by naming its own. The shipped ones:
random 10, range_ends 20, greedy_eig 30, thompson 40, expected_improvement 50, belief_line 60, teacher 70, oracle 80.

(The module is `policy_registry`, not `registry`, because no two modules under `training/` share a file name
(tests/test_architecture.py) and `surrogates/registry.py` exists.)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from training.registries import Registry
from training.tasks.causal.env import CausalEnv

Call = tuple[str, dict]
Policy = Callable[[CausalEnv, np.random.Generator], Call | None]  # None: stop, leaving budget unused

POLICIES: Registry = Registry("policy")  # name -> factory, in `order`


def register_policy(name: str, factory: Callable[[], Policy] | None = None, *, order: float):
    """Register `factory` under `name` at position `order` (`training.registries.Registry`); without `factory`, a
    decorator that does so and returns what it decorates."""
    return POLICIES.add(name, order=order) if factory is None else POLICIES.register(name, factory, order=order)
