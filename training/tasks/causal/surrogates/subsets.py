"""Bitmask bookkeeping for subsets of d variables, shared by the local scores and the structure DP.

A subset S of {0..d-1} is the integer mask sum_{i in S} 2^i. `subset_plan(d)` precomputes, once per d, the index
arrays that let the dynamic programme run as a few vectorised numpy operations per subset size instead of Python
loops over the 2^d subsets; `score_plan(d, k)` the (node, parent set) pairs the local scores are computed for, the
parent sets of at most k variables (the in-degree bound), and the parent-set prior over them.

The in-degree bound (`parent_bound`): up to `FULL_SPACE_VARS` variables every parent set is scored (k = d - 1:
the seeded families' star graphs give the target d - 1 parents); above, a user's bound, `DEFAULT_MAX_PARENTS` unless
set. The scores then cost d * sum_{j <= k} C(d - 1, j) regressions instead of d 2^(d - 1), and the DP, still over all
2^d node sets, is what limits the exact surrogate to `EXACT_MAX_VARS` variables.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations
from math import comb

import numpy as np

FULL_SPACE_VARS = 10  # every parent set is scored up to this many variables
EXACT_MAX_VARS = 16  # the DP's 2^d node sets: BENCHMARKS.md "Exact surrogate update cost"
DEFAULT_MAX_PARENTS = 3


def parent_bound(d: int, max_parents: int | None = None, full_space: int = FULL_SPACE_VARS) -> int:
    """The in-degree bound for d variables: `max_parents` (at most d - 1) where given, else d - 1 (no bound) up to
    `full_space` variables (the exact surrogate's `FULL_SPACE_VARS`, the additive one's own) and
    `DEFAULT_MAX_PARENTS` above."""
    if max_parents is None:
        return d - 1 if d <= full_space else DEFAULT_MAX_PARENTS
    if isinstance(max_parents, bool) or not isinstance(max_parents, int) or max_parents < 1:
        raise ValueError(f"max_parents: must be an int >= 1, got {max_parents!r}")
    return min(max_parents, d - 1)


def popcount(masks: np.ndarray) -> np.ndarray:
    masks = np.asarray(masks, dtype=np.int64)
    bits = 64 if masks.size == 0 else max(int(masks.max()).bit_length(), 1)
    return ((masks[..., None] >> np.arange(bits)) & 1).sum(axis=-1)


def mask_of(indices) -> int:
    return int(sum(1 << int(i) for i in indices))


def members(mask: int, d: int) -> list[int]:
    return [i for i in range(d) if mask >> i & 1]


@dataclass(frozen=True)
class SizeGroup:
    """All (node v, parent set S not containing v) pairs with |S| = k, for batched scoring."""

    k: int
    nodes: np.ndarray  # (m,)
    masks: np.ndarray  # (m,)
    idx: np.ndarray  # (m, k) members of S, ascending
    cols: np.ndarray  # (m,) each pair's place in `ScorePlan.nodes` / `ScorePlan.sets`
    prefix: np.ndarray  # (m,) the row of (v, S without its largest member) in the group of size k - 1 (k = 1: 0)


@dataclass(frozen=True)
class Layer:
    """Masks of one size k, with the pairs the DP sums over."""

    masks: np.ndarray  # (m,) all masks of size k
    # for L (orders of U): for each U in masks and each v in U (k of them): v and U \ {v}, shaped (m, k)
    l_v: np.ndarray
    l_rest: np.ndarray
    # for R (completions of P): for each P in masks and each v not in P (d - k of them): v and P | {v}, (m, d - k)
    r_v: np.ndarray
    r_next: np.ndarray


@dataclass(frozen=True)
class SubsetPlan:
    d: int
    layers: tuple[Layer, ...]  # k = 0 .. d
    sizes: np.ndarray  # (2^d,) popcount of each mask
    with_bit: tuple[np.ndarray, ...]  # per bit b: masks containing b
    without_bit: tuple[np.ndarray, ...]  # per bit b: masks not containing b


@dataclass(frozen=True)
class ScorePlan:
    d: int
    max_parents: int
    size_groups: tuple[SizeGroup, ...]  # k = 1 .. max_parents (k = 0 needs no linear algebra)
    log_prior: np.ndarray  # (d, 2^d): log rho(S) = -log C(d-1, |S|) for S ∌ v with |S| <= max_parents, else -inf
    # the scored pairs (v, S), the empty set's included, grouped by node, and their log rho: the sparse form of the
    # scores (`linear_scores.log_local_scores_sparse`), what the linear-space DP reads
    nodes: np.ndarray  # (K,)
    sets: np.ndarray  # (K,)
    sparse_log_prior: np.ndarray  # (K,)


def _bits(masks: np.ndarray, d: int) -> np.ndarray:
    return ((masks[:, None] >> np.arange(d)) & 1).astype(bool)


@lru_cache(maxsize=None)
def subset_plan(d: int) -> SubsetPlan:
    if not 1 <= d <= EXACT_MAX_VARS:
        raise ValueError(f"subset plans support 1..{EXACT_MAX_VARS} variables, got {d}")
    all_masks = np.arange(1 << d, dtype=np.int64)
    sizes = popcount(all_masks)
    layers = []
    for k in range(d + 1):
        masks = all_masks[sizes == k]
        bits = _bits(masks, d)
        mem = np.nonzero(bits)[1].reshape(len(masks), k)  # row-major: each row's members ascending
        non = np.nonzero(~bits)[1].reshape(len(masks), d - k)
        layers.append(Layer(masks, mem, masks[:, None] & ~(1 << mem), non, masks[:, None] | (1 << non)))
    return SubsetPlan(
        d=d, layers=tuple(layers), sizes=sizes,
        with_bit=tuple(all_masks[(all_masks >> b & 1) == 1] for b in range(d)),
        without_bit=tuple(all_masks[(all_masks >> b & 1) == 0] for b in range(d)),
    )


@lru_cache(maxsize=None)
def score_plan(d: int, max_parents: int | None = None) -> ScorePlan:
    """The scored (node, parent set) pairs and the prior for d variables under the bound `parent_bound(d, max_parents)`."""
    k_max = parent_bound(d, max_parents)
    sizes = subset_plan(d).sizes
    log_prior = np.full((d, 1 << d), -np.inf)
    for v in range(d):
        allowed = ((np.arange(1 << d) >> v & 1) == 0) & (sizes <= k_max)
        log_prior[v, allowed] = -np.log([comb(d - 1, int(s)) for s in sizes[allowed]])
    nodes, sets = np.nonzero(np.isfinite(log_prior))
    groups = []
    for k in range(1, k_max + 1):
        g_nodes, masks, idx = [], [], []
        for v in range(d):
            for s in combinations([i for i in range(d) if i != v], k):
                g_nodes.append(v), masks.append(mask_of(s)), idx.append(s)
        g_nodes, masks = np.array(g_nodes), np.array(masks, dtype=np.int64)
        idx = np.array(idx, dtype=np.int64)
        cols = np.searchsorted(nodes * (1 << d) + sets, g_nodes * (1 << d) + masks)
        prefix = np.zeros(len(g_nodes), dtype=np.int64)
        if k > 1:
            prev = groups[-1]
            prev_keys = prev.nodes * (1 << d) + prev.masks
            order = np.argsort(prev_keys)
            keys = g_nodes * (1 << d) + (masks & ~(1 << idx[:, -1]))
            prefix = order[np.searchsorted(prev_keys[order], keys)]
        groups.append(SizeGroup(k, g_nodes, masks, idx, cols, prefix))
    return ScorePlan(d, k_max, tuple(groups), log_prior, nodes, sets, log_prior[nodes, sets])
