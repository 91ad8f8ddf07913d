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
BLOCK_BYTES = 1 << 20  # about half of a core's L2 cache


@dataclass(frozen=True)
class OrderPlan:
    """Per layer of the recursions, the masks computed and what they sum over, with flat indices into a
    (d * 2^(d - 1), B) array of a. For a target t, only what its posterior reads: L(U) for U ∌ t (whose recursion
    stays among sets without t) and R(P) for P ∋ t (likewise among sets with t); half of each."""

    l_masks: tuple[np.ndarray, ...]  # (m,) layers k = 1 .. d, in order
    l_a: tuple[np.ndarray, ...]  # (m, k): a_v(U \ {v}) for v in U
    l_rest: tuple[np.ndarray, ...]  # (m, k): U \ {v}
    r_masks: tuple[np.ndarray, ...]  # layers k = d - 1 .. 0, in order
    r_a: tuple[np.ndarray, ...]  # (m, d - k): a_v(P) for v not in P
    r_next: tuple[np.ndarray, ...]  # (m, d - k): P ∪ {v}


def squeeze_bit(masks: np.ndarray, v) -> np.ndarray:
    """The index of each mask (not containing bit v) in the (d - 1)-bit space without bit v."""
    low = (1 << v) - 1
    return (masks & low) | ((masks >> 1) & ~low)


@lru_cache(maxsize=None)
def order_plan(d: int, target: int) -> OrderPlan:
    half = 1 << (d - 1)
    layers = subset_plan(d).layers
    bit = 1 << target
    l_keep = [np.flatnonzero(layer.masks & bit == 0) for layer in layers]
    r_keep = [np.flatnonzero(layer.masks & bit == bit) for layer in layers]
    l_layers = [(layers[k], l_keep[k]) for k in range(1, d + 1) if len(l_keep[k])]
    r_layers = [(layers[k], r_keep[k]) for k in range(d - 1, -1, -1) if len(r_keep[k])]
    return OrderPlan(
        l_masks=tuple(layer.masks[i] for layer, i in l_layers),
        l_a=tuple(layer.l_v[i] * half + squeeze_bit(layer.l_rest[i], layer.l_v[i]) for layer, i in l_layers),
        l_rest=tuple(layer.l_rest[i] for layer, i in l_layers),
        r_masks=tuple(layer.masks[i] for layer, i in r_layers),
        r_a=tuple(layer.r_v[i] * half + squeeze_bit(layer.masks[i, None], layer.r_v[i]) for layer, i in r_layers),
        r_next=tuple(layer.r_next[i] for layer, i in r_layers),
    )


def subset_sums(x: np.ndarray, bits: int) -> None:
    """In place over axis 1 of x (rows, 2^bits, B): x[:, W] <- sum_{S ⊆ W} x[:, S]. The low bits a block of
    `BLOCK_BYTES` at a time, all of them while it is in cache, then the high bits over the whole array: half the
    time of bit after bit over arrays of tens of MB (16 variables)."""
    rows, n, bsz = x.shape
    low = bits
    while low > 0 and (bsz << low) * 8 > BLOCK_BYTES:
        low -= 1
    if low < bits:
        for block in x.reshape(rows * (n >> low), 1 << low, bsz):
            _bit_passes(block[None], range(low))
    _bit_passes(x.reshape(rows * (n >> bits), 1 << bits, bsz), range(low if low < bits else 0, bits))


def _bit_passes(x: np.ndarray, bits: range) -> None:
    """x (rows, 2^k, B) in place: for each bit b, x[:, W ∪ {b}] += x[:, W] over the W without b."""
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


def order_sums_linear(a: np.ndarray, target: int) -> tuple[np.ndarray, np.ndarray]:
    """(l, r): (2^d, B) from a (d, 2^(d - 1), B), the recursions of `structure_posterior.order_sums` unshifted, at
    what the target's posterior reads (`order_plan`: l(U) for U ∌ target, r(P) for P ∋ target); the rest is
    garbage."""
    d, half, bsz = a.shape
    n = half << 1
    plan = order_plan(d, target)
    flat = a.reshape(d * half, bsz)
    l, r = np.empty((n, bsz)), np.empty((n, bsz))
    l[0], r[n - 1] = 1.0, 1.0
    for masks, i, j in zip(plan.l_masks, plan.l_a, plan.l_rest):
        l[masks] = _sum_of_products(flat, i, l, j)
    for masks, i, j in zip(plan.r_masks, plan.r_a, plan.r_next):
        r[masks] = _sum_of_products(flat, i, r, j)
    return l, r


def parent_log_posterior_linear(values: np.ndarray, nodes: np.ndarray, sets: np.ndarray, d: int, target: int
                                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(log P(Pa_target = S | D) (B, 2^d), log Z (B,), underflow (B,) bool) from sparse scores (`shifted_scores`):
    `structure_posterior.reference_parent_log_posterior` of the scores spread out, valid where `underflow` is False
    (see the module docstring)."""
    bsz, n = len(values), 1 << d
    a, shift = shifted_scores(values, nodes, sets, d)
    for rows in (a[:target], a[target + 1:]):  # the target's own a is never read (its L and R terms skip it)
        subset_sums(rows, d - 1)
    l, r = order_sums_linear(a, target)
    free = subset_plan(d).without_bit[target]
    l, r = l[free], r[free | 1 << target]
    h = np.zeros((n, bsz))
    h[free] = l * r
    superset_sums(h, [b for b in range(d) if b != target])
    smallest = [np.delete(a[:, 0, :], target, axis=0).min(axis=0, initial=np.inf), l.min(axis=0), r.min(axis=0),
                h[free].min(axis=0)]
    underflow = np.minimum.reduce(smallest) < TINY
    own = np.flatnonzero(nodes == target)
    log_post = np.full((bsz, n), -np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):  # an underflowed data set's h may hold 0: redone anyway
        joint = values[:, own] + np.log(h[sets[own]]).T + (shift.sum(axis=1) - shift[:, target])[:, None]
        top = np.max(joint, axis=1, keepdims=True)
        top = np.where(np.isfinite(top), top, 0.0)
        log_z = np.log(np.exp(joint - top).sum(axis=1)) + top[:, 0]
        log_post[:, sets[own]] = joint - log_z[:, None]  # the target's scored sets; the rest is 0 (-inf)
    return log_post, log_z, underflow
