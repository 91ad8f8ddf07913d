"""Bitmask bookkeeping for subsets of d variables (d <= 10), shared by the local scores and the structure DP.

A subset S of {0..d-1} is the integer mask sum_{i in S} 2^i; `SubsetPlan(d)` precomputes, once per d, the index
arrays that let the scores and the dynamic programme run as a few vectorised numpy operations per subset size
instead of Python loops over the 2^d subsets.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations
from math import comb

import numpy as np

MAX_VARS = 10


def popcount(masks: np.ndarray) -> np.ndarray:
    masks = np.asarray(masks, dtype=np.int64)
    return np.array([bin(int(m)).count("1") for m in masks.ravel()], dtype=np.int64).reshape(masks.shape)


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
    size_groups: tuple[SizeGroup, ...]  # k = 1 .. d - 1 (k = 0 needs no linear algebra)
    layers: tuple[Layer, ...]  # k = 0 .. d
    sizes: np.ndarray  # (2^d,) popcount of each mask
    log_prior: np.ndarray  # (d, 2^d): log rho(S) = -log C(d-1, |S|) for S not containing v, -inf otherwise
    with_bit: tuple[np.ndarray, ...]  # per bit b: masks containing b
    without_bit: tuple[np.ndarray, ...]  # per bit b: masks not containing b


@lru_cache(maxsize=None)
def subset_plan(d: int) -> SubsetPlan:
    if not 1 <= d <= MAX_VARS:
        raise ValueError(f"subset plans support 1..{MAX_VARS} variables, got {d}")
    n_masks = 1 << d
    all_masks = np.arange(n_masks, dtype=np.int64)
    sizes = popcount(all_masks)
    groups = []
    for k in range(1, d):
        nodes, masks, idx = [], [], []
        for v in range(d):
            for s in combinations([i for i in range(d) if i != v], k):
                nodes.append(v), masks.append(mask_of(s)), idx.append(s)
        groups.append(SizeGroup(k, np.array(nodes), np.array(masks, dtype=np.int64), np.array(idx, dtype=np.int64)))
    layers = []
    for k in range(d + 1):
        masks = all_masks[sizes == k]
        mem = np.array([members(int(m), d) for m in masks], dtype=np.int64).reshape(len(masks), k)
        non = np.array([[i for i in range(d) if not m >> i & 1] for m in masks], dtype=np.int64).reshape(
            len(masks), d - k)
        layers.append(Layer(masks, mem, masks[:, None] & ~(1 << mem), non, masks[:, None] | (1 << non)))
    log_prior = np.full((d, n_masks), -np.inf)
    for v in range(d):
        free = (all_masks >> v & 1) == 0
        log_prior[v, free] = -np.log([comb(d - 1, int(s)) for s in sizes[free]])
    return SubsetPlan(
        d=d, size_groups=tuple(groups), layers=tuple(layers), sizes=sizes, log_prior=log_prior,
        with_bit=tuple(all_masks[(all_masks >> b & 1) == 1] for b in range(d)),
        without_bit=tuple(all_masks[(all_masks >> b & 1) == 0] for b in range(d)),
    )
