"""The linear-space structure DP of `linear_dp` compiled, one data set at a time (its node sets' sums stay in
cache): what the lookahead runs on its thousands of hypothetical data sets.

The same sums in the same order as `linear_dp.parent_log_posterior_linear` (the shift by each node's largest score,
the subset sums bit by bit, L(U) over U without the target and R(P) over P with it, each a sum over the members in
ascending order, h = L R and its superset sums), the same underflow guard (`linear_dp.TINY`), so the same numbers
up to rounding: numpy's version spends most of its time gathering rows of B values between steps of a few flops.
"""

from __future__ import annotations

from functools import lru_cache

import numba
import numpy as np

from training.tasks.causal.surrogates.linear_dp import TINY, order_plan

_JIT = dict(cache=True, fastmath={"contract"}, error_model="numpy")


@lru_cache(maxsize=None)
def order_tables(d: int, target: int) -> tuple[np.ndarray, ...]:
    """`linear_dp.order_plan` flattened: per recursion (L, then R) the masks in the order computed, each one's
    terms' range (CSR offsets), and per term the flat index of its a (into (2^(d - 1), d)) and of the mask it
    reads."""
    plan = order_plan(d, target)
    tables = []
    for masks, a_idx, read in ((plan.l_masks, plan.l_a, plan.l_rest), (plan.r_masks, plan.r_a, plan.r_next)):
        counts = np.concatenate([np.full(len(m), i.shape[1]) for m, i in zip(masks, a_idx)])
        flat = np.concatenate([i.ravel() for i in a_idx]).astype(np.int64)  # v 2^(d - 1) + W without v
        half = 1 << (d - 1)
        tables += [np.concatenate(masks).astype(np.int64), np.r_[0, np.cumsum(counts)].astype(np.int64),
                   (flat % half) * d + flat // half,  # into the (2^(d - 1), d) layout of `_posteriors`
                   np.concatenate([j.ravel() for j in read]).astype(np.int64)]
    return tuple(tables)


def target_log_posterior(values: np.ndarray, nodes: np.ndarray, sets: np.ndarray, d: int, target: int
                         ) -> tuple[np.ndarray, np.ndarray]:
    """(log P(Pa_target = S | D) at the target's scored sets (B, n_t), in the order of `sets[nodes == target]`;
    underflow (B,) bool: the data sets to redo in log space) from sparse scores (B, K) at the pairs (nodes, sets)
    (grouped by node, each set without its node)."""
    starts = np.searchsorted(nodes, np.arange(d + 1)).astype(np.int64)
    if np.any(np.diff(nodes) < 0) or np.any(starts[1:] == starts[:-1]) or np.any(sets >> nodes & 1):
        raise ValueError("scores: pairs must be grouped by node, cover every node and leave each node out of its set")
    out = np.zeros((len(values), int(starts[target + 1] - starts[target])))
    underflow = np.zeros(len(values), dtype=np.bool_)
    _posteriors(np.ascontiguousarray(values, dtype=float), nodes.astype(np.int64), sets.astype(np.int64), starts,
                d, target, TINY, order_tables(d, target), out, underflow)
    return out, underflow


@numba.njit(**_JIT)
def _posteriors(values, nodes, sets, starts, d, target, tiny, tables, out, underflow):  # pragma: no cover - compiled
    half, n = 1 << (d - 1), 1 << d
    a = np.zeros((half, d))  # a_v(W) at [W without bit v, v]: the subset sums run over the nodes innermost
    l, r, h = np.zeros(n), np.zeros(n), np.zeros(n)
    shift = np.zeros(d)
    for b in range(len(values)):
        for v in range(d):
            top = -np.inf
            for k in range(starts[v], starts[v + 1]):
                top = max(top, values[b, k])
            if not np.isfinite(top):
                raise ValueError("scores: every node needs a finite score in every data set")
            shift[v] = top
        a[:] = 0.0
        for k in range(len(nodes)):
            v = nodes[k]
            a[_squeeze(sets[k], v), v] = np.exp(values[b, k] - shift[v])
        _subset_sums(a, d - 1)  # the target's own too (never read)
        smallest = _order_sums(a.ravel(), tables, d, target, l, r, h)
        for v in range(d):
            if v != target:
                smallest = min(smallest, a[0, v])
        underflow[b] = smallest < tiny
        _target_joint(values[b], sets, starts, target, shift, h, out[b])


@numba.njit(**_JIT)
def _squeeze(mask, v):  # pragma: no cover
    low = (1 << v) - 1
    return (mask & low) | ((mask >> 1) & ~low)


@numba.njit(**_JIT)
def _subset_sums(x, bits):  # pragma: no cover
    """x[W, :] <- sum_{S ⊆ W} x[S, :] in place, bit after bit."""
    d = x.shape[1]
    for bit in range(bits):
        step = 1 << bit
        for start in range(0, x.shape[0], 2 * step):
            for w in range(start, start + step):
                for v in range(d):
                    x[w + step, v] += x[w, v]


@numba.njit(**_JIT)
def _order_sums(a, tables, d, target, l, r, h):  # pragma: no cover
    """l(U) for U without the target, r(P) for P with it (`order_tables`), h = l r on the first and its superset
    sums over the other bits; the smallest of l, r and h (what `linear_dp` guards)."""
    n, bit = 1 << d, 1 << target
    l[0], r[n - 1] = 1.0, 1.0
    smallest = np.inf
    _recursion(a, tables[0], tables[1], tables[2], tables[3], l)
    _recursion(a, tables[4], tables[5], tables[6], tables[7], r)
    for u in range(n):
        if not u & bit:
            h[u] = l[u] * r[u | bit]
            smallest = min(smallest, l[u], r[u | bit])
        else:
            h[u] = 0.0
    for b in range(d):
        if b == target:
            continue
        step = 1 << b
        for start in range(0, n, 2 * step):
            for u in range(start, start + step):  # u without bit b; h is only read without the target's
                h[u] += h[u + step]
    for u in range(n):
        if not u & bit:
            smallest = min(smallest, h[u])
    return smallest


@numba.njit(**_JIT)
def _recursion(a, masks, offsets, a_idx, read, x):  # pragma: no cover
    """x[mask] = sum over its terms of a[a_idx] x[read], mask after mask (each reads masks computed before)."""
    for i in range(len(masks)):
        acc = 0.0
        for j in range(offsets[i], offsets[i + 1]):
            acc += a[a_idx[j]] * x[read[j]]
        x[masks[i]] = acc


@numba.njit(**_JIT)
def _target_joint(row, sets, starts, target, shift, h, out):  # pragma: no cover
    """out: log P(Pa_target = S) of the target's scored sets S from their scores, h and the shifts."""
    rest = 0.0
    for v in range(len(shift)):
        if v != target:
            rest += shift[v]
    top = -np.inf
    for i in range(starts[target], starts[target + 1]):
        out[i - starts[target]] = row[i] + np.log(h[sets[i]]) + rest
        top = max(top, out[i - starts[target]])
    top = top if np.isfinite(top) else 0.0
    total = 0.0
    for i in range(len(out)):
        total += np.exp(out[i] - top)
    log_z = np.log(total) + top
    for i in range(len(out)):
        out[i] -= log_z
