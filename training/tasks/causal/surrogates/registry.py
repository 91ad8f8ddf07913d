"""Surrogates by name. Each surrogate module registers its class with what a command must know before it builds one:
the largest SCM it handles, whether it takes an in-degree bound, whether its posterior can be sampled (the belief
line's expectations, the teacher, Thompson sampling, expected improvement, the structure reward) and whether it scores
hypothetical data in batches (greedy EIG). `training.tasks.causal.surrogates.catalogue` imports every surrogate
module, so its `SURROGATES` is the whole registry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from training.registries import Registry


@dataclass(frozen=True)
class SurrogateKind:
    name: str
    build: Callable  # (variables, target, max_parents) -> surrogate; max_parents only where `bounded`
    max_vars: int | None  # None: any number of variables
    bounded: bool  # takes an in-degree bound (`max_parents`)
    sampled: bool  # has `posterior_models`
    lookahead: bool  # has a batched `what_if_many`


KINDS: Registry = Registry("surrogate")  # name -> SurrogateKind (`training.registries.Registry`)


def register_surrogate(kind: SurrogateKind) -> None:
    KINDS.register(kind.name, kind)
