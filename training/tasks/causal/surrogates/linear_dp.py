"""The structure DP of `structure_posterior` in linear space: the same sums, without a logaddexp per term.

Shift: with m_v the largest log beta_v(S) of node v in one data set, a_v(W) = sum_{S ⊆ W} exp(log beta_v(S) - m_v)
= alpha_v(W) e^(-m_v). Every order of U has exactly one alpha factor per node of U, so L(U) = e^(sum_{v ∈ U} m_v)
l(U), R(P) = e^(sum_{v ∉ P} m_v) r(P), and l, r obey the DP's recursions with a in place of alpha; the target's
joint is beta_t(S) e^(sum_{v != t} m_v) h(S) with h the superset sum of l(U) r(U ∪ {t}). No overflow: a <= 2^(d - 1),
l, r <= d! 2^(d (d - 1)) (< 1e86 at d = 16), h <= 2^d l r.

Underflow guard: a value below `TINY` anywhere in a, l, r or h (a_v(∅) is a's smallest: a is monotone in W) sends
that data set to the log-space reference (`structure_posterior.reference_parent_log_posterior`). Where every value
is at least `TINY`, a term lost to underflow (below 1e-308) is at most 1e-28 of the sum it was part of, so the
result is the reference's up to rounding. It fires where a node's score spread max_S log beta_v(S) - log beta_v(∅)
passes -ln TINY = 645 nats (data sets of hundreds of rows with strong effects) or where the sums themselves get that
small; never at the main job's sizes.

Layout: node v's a keeps only the 2^(d - 1) sets W ∌ v (the DP reads no other), at the index of W with bit v
removed, and the data sets last, (d, 2^(d - 1), B): the subset sums run as in-place adds over contiguous reshaped
views (no fancy index), and the order sums gather whole rows of B values.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from training.tasks.causal.surrogates.subsets import subset_plan

TINY = 1e-280


@dataclass(frozen=True)
class LinearPlan:
    """Flat indices into a (d * 2^(d - 1), B) array of a for the DP's gathers, per layer k of `subset_plan`."""

    l_a: tuple[np.ndarray, ...]  # (m, k): a_v(U \\ {v}) for v in U
    r_a: tuple[np.ndarray, ...]  # (m, d - k): a_v(P) for v not in P


def squeeze_bit(masks: np.ndarray, v) -> np.ndarray:
    """The index of each mask (not containing bit v) in the (d - 1)-bit space without bit v."""
    low = (1 << v) - 1
    return (masks & low) | ((masks >> 1) & ~low)


@lru_cache(maxsize=None)
def linear_plan(d: int) -> LinearPlan:
    half = 1 << (d - 1)
    plan = subset_plan(d)

    return LinearPlan(
        l_a=tuple(layer.l_v * half + squeeze_bit(layer.l_rest, layer.l_v) for layer in plan.layers),
        r_a=tuple(layer.r_v * half + squeeze_bit(layer.masks[:, None], layer.r_v) for layer in plan.layers),
    )


def subset_sums(x: np.ndarray, bits: range) -> None:
    """In place over axis 1 of x (rows, 2^bits, B): x[:, W] <- sum_{S ⊆ W} x[:, S]."""
    rows, n, bsz = x.shape
    for b in bits:
        view = x.reshape(rows, n >> (b + 1), 2, 1 << b, bsz)
        view[:, :, 1] += view[:, :, 0]


def superset_sums(x: np.ndarray, bits) -> None:
    """In place over axis 0 of x (2^d, B), for the given bits: x[W] <- sum_{S ⊇ W} x[S]."""
    n, bsz = x.shape
    for b in bits:
        view = x.reshape(n >> (b + 1), 2, 1 << b, bsz)
        view[:, 0] += view[:, 1]


def shifted_scores(values: np.ndarray, nodes: np.ndarray, sets: np.ndarray, d: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(beta_v(S) e^(-m_v) at (v, S with bit v removed, data set): (d, 2^(d - 1), B), m (B, d)) from the scores
    `values` (B, K) of the pairs (nodes, sets) (grouped by node, each S ∌ v; every other score is -inf), m_v the
    largest score of node v."""
    half = 1 << (d - 1)
    starts = np.searchsorted(nodes, np.arange(d))
    if np.any(np.diff(nodes) < 0) or len(np.unique(nodes)) < d or np.any(sets >> nodes & 1):
        raise ValueError("scores: pairs must be grouped by node, cover every node and leave each node out of its set")
    shift = np.maximum.reduceat(values, starts, axis=1)  # (B, d)
    if not np.all(np.isfinite(shift)):
        raise ValueError("scores: every node needs a finite score in every data set")
    out = np.zeros((d * half, len(values)))
    out[nodes * half + squeeze_bit(sets, nodes)] = np.exp(values - shift[:, nodes]).T
    return out.reshape(d, half, len(values)), shift


def _sum_of_products(x: np.ndarray, i: np.ndarray, y: np.ndarray, j: np.ndarray) -> np.ndarray:
    """sum_c x[i[:, c]] * y[j[:, c]] over the columns c of the (m, c) index arrays, rows of B values each (a column
    at a time: 2x faster than one einsum over (m, c, B) gathers)."""
    acc = x[i[:, 0]] * y[j[:, 0]]
    for c in range(1, i.shape[1]):
        acc += x[i[:, c]] * y[j[:, c]]
    return acc


def order_sums_linear(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(l, r): (2^d, B) from a (d, 2^(d - 1), B), the recursions of `structure_posterior.order_sums` unshifted."""
    d, half, bsz = a.shape
    n = half << 1
    plan, lin = subset_plan(d), linear_plan(d)
    flat = a.reshape(d * half, bsz)
    l, r = np.empty((n, bsz)), np.empty((n, bsz))
    l[0], r[n - 1] = 1.0, 1.0
    for k in range(1, d + 1):
        layer = plan.layers[k]
        l[layer.masks] = _sum_of_products(flat, lin.l_a[k], l, layer.l_rest)
    for k in range(d - 1, -1, -1):
        layer = plan.layers[k]
        r[layer.masks] = _sum_of_products(flat, lin.r_a[k], r, layer.r_next)
    return l, r


def parent_log_posterior_linear(values: np.ndarray, nodes: np.ndarray, sets: np.ndarray, d: int, target: int
                                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(log P(Pa_target = S | D) (B, 2^d), log Z (B,), underflow (B,) bool) from sparse scores (`shifted_scores`):
    `structure_posterior.reference_parent_log_posterior` of the scores spread out, valid where `underflow` is False
    (see the module docstring)."""
    bsz, n = len(values), 1 << d
    a, shift = shifted_scores(values, nodes, sets, d)
    subset_sums(a, range(d - 1))
    l, r = order_sums_linear(a)
    bit = 1 << target
    free = subset_plan(d).without_bit[target]
    h = np.zeros((n, bsz))
    h[free] = l[free] * r[free | bit]
    superset_sums(h, [b for b in range(d) if b != target])
    underflow = ((a[:, 0, :] < TINY).any(axis=0) | (l.min(axis=0) < TINY) | (r.min(axis=0) < TINY)
                 | (h[free].min(axis=0) < TINY))
    own = np.flatnonzero(nodes == target)
    log_joint = np.full((bsz, n), -np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):  # an underflowed data set's h may hold 0: redone anyway
        log_joint[:, sets[own]] = (values[:, own] + np.log(h[sets[own]]).T
                                   + (shift.sum(axis=1) - shift[:, target])[:, None])
        top = np.max(log_joint, axis=1, keepdims=True)
        top = np.where(np.isfinite(top), top, 0.0)
        log_z = np.log(np.exp(log_joint - top).sum(axis=1)) + top[:, 0]
        return log_joint - log_z[:, None], log_z, underflow
