"""The surrogate interface: a belief about the target's parents that every new sample updates.

A surrogate sees rows of samples with a bool mask of which variable was hard-intervened on in each row, and keeps a
distribution over the target's parent set. `ParentPosterior` is that distribution: a list of parent sets with
probabilities summing to 1, and per-variable marginals P(X_j ∈ Pa(target)) = sum of the probabilities of the sets
containing X_j. Its entropy is H = -sum_S P(S) log P(S) in nats (0 log 0 = 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from training.tasks.causal.surrogates.subsets import members


@dataclass(frozen=True)
class ParentPosterior:
    target: str
    sets: tuple[frozenset[str], ...]
    probs: np.ndarray
    marginals: dict[str, float]

    def __post_init__(self):
        if len(self.sets) != len(self.probs):
            raise ValueError(f"{len(self.sets)} parent sets but {len(self.probs)} probabilities")
        if np.any(self.probs < 0) or not np.isclose(self.probs.sum(), 1.0, atol=1e-9):
            raise ValueError(f"parent-set probabilities must be >= 0 and sum to 1 (sum {self.probs.sum()!r})")

    def entropy(self) -> float:
        return entropy_nats(self.probs)

    def map_set(self) -> frozenset[str]:
        """The most probable parent set."""
        return self.sets[int(np.argmax(self.probs))]

    def marginal_set(self, threshold: float = 0.5) -> frozenset[str]:
        """The variables whose parent marginal exceeds `threshold`."""
        return frozenset(v for v, p in self.marginals.items() if p > threshold)

    def probability(self, parents) -> float:
        return float(dict(zip(self.sets, self.probs)).get(frozenset(parents), 0.0))


@dataclass(frozen=True)
class IndependentParentPosterior:
    """A parent-set distribution whose candidates are independent Bernoullis with P(X_j ∈ Pa) = `marginals[X_j]`:
    the same reads as `ParentPosterior` without listing the 2^(d-1) sets (a surrogate for large graphs)."""

    target: str
    marginals: dict[str, float]

    def entropy(self) -> float:
        p = np.clip(np.array(list(self.marginals.values()), dtype=float), 1e-12, 1 - 1e-12)
        return float(-(p * np.log(p) + (1 - p) * np.log(1 - p)).sum())

    def map_set(self) -> frozenset[str]:
        return self.marginal_set(0.5)

    def marginal_set(self, threshold: float = 0.5) -> frozenset[str]:
        return frozenset(v for v, p in self.marginals.items() if p > threshold)

    def probability(self, parents) -> float:
        parents = frozenset(parents)
        if not parents <= set(self.marginals):
            return 0.0
        return float(np.prod([p if v in parents else 1.0 - p for v, p in self.marginals.items()]))


def check_variables(variables: list[str], target: str, name: str, max_vars: int | None) -> None:
    """A surrogate's variables: the target among them, 2..`max_vars` of them (`name` says which surrogate; None:
    no upper limit)."""
    if target not in variables:
        raise ValueError(f"target: {target!r} is not one of the variables {variables}")
    if len(variables) < 2:
        raise ValueError(f"variables: a surrogate needs at least 2 variables, got {len(variables)}")
    if max_vars is not None and len(variables) > max_vars:
        raise ValueError(f"variables: the {name} surrogate handles up to {max_vars} variables, got {len(variables)} "
                         "(training.tasks.causal.surrogates.catalogue.check_surrogate_fits names one that handles them)")


def entropy_nats(p: np.ndarray) -> float:
    p = np.asarray(p, dtype=float)
    nz = p[p > 0]
    return float(-(nz * np.log(nz)).sum())


def posterior_from_mask_probs(probs: np.ndarray, variables: list[str], target: str,
                              max_parents: int | None = None) -> ParentPosterior:
    """A `ParentPosterior` from P(Pa_target = S) indexed by bitmask S over `variables` (0 where target ∈ S), over the
    sets of at most `max_parents` members (None: all)."""
    d = len(variables)
    t = variables.index(target)
    k = d - 1 if max_parents is None else max_parents
    masks = [m for m in range(1 << d) if not m >> t & 1 and m.bit_count() <= k]
    sets = tuple(frozenset(variables[i] for i in members(m, d)) for m in masks)
    p = np.asarray(probs, dtype=float)[masks]
    p = p / p.sum()
    bits = np.array(masks)
    marg = {v: float(p[(bits >> i) & 1 == 1].sum()) for i, v in enumerate(variables) if v != target}
    return ParentPosterior(target, sets, p, marg)


@runtime_checkable
class Surrogate(Protocol):
    """What the environment and the baselines need from a surrogate."""

    variables: list[str]
    target: str
    updates: int  # number of update() calls that changed the state (logged as surrogate/updates)

    def update(self, samples: np.ndarray, intervened: np.ndarray) -> None:
        """Condition on new rows: samples (n, d) in variable order, intervened (n, d) bool."""

    def posterior(self) -> ParentPosterior: ...

    def entropy(self) -> float:
        """Entropy (nats) of the target's parent-set distribution."""

    def copy(self) -> Surrogate: ...
