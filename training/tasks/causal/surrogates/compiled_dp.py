"""The linear-space structure DP of `linear_dp` compiled, a few data sets side by side (`lanes_for`: each step a loop
over them, which the compiler turns into SIMD instructions, the tables read once for all of them), split over the
lookahead's threads (`lookahead_threads`): what the lookahead runs on its thousands of hypothetical data sets.

The same sums in the same order as `linear_dp.parent_log_posterior_linear` (the shift by each node's largest score,
the subset sums bit by bit, L(U) over U without the target and R(P) over P with it, each a sum over the members in
ascending order, h = L R and its superset sums), the same underflow guard (`linear_dp.TINY`), so the same numbers
up to rounding: numpy's version spends most of its time gathering rows of B values between steps of a few flops.
"""

from __future__ import annotations

from functools import lru_cache, partial

import numba
import numpy as np

from training.tasks.causal.surrogates.linear_dp import TINY, order_plan
from training.tasks.causal.surrogates.lookahead_threads import parts, run_all

_JIT = dict(cache=True, fastmath={"contract"}, error_model="numpy", nogil=True)  # `lookahead_threads`


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
    values, nodes, sets = np.ascontiguousarray(values, dtype=float), nodes.astype(np.int64), sets.astype(np.int64)
    tables, lanes = order_tables(d, target), lanes_for(d)
    run_all([partial(_posteriors, values[i:j], nodes, sets, starts, d, target, TINY, tables, lanes, out[i:j],
                     underflow[i:j]) for i, j in parts(len(values))], len(values))
    return out, underflow


# Data sets run side by side: at most MAX_LANES, and the DP's table a over them at most LANE_BYTES, so that it stays
# in cache (16 lanes at the additive surrogate's sizes, one data set at a time at 16 variables).
LANE_BYTES = 4 << 20
MAX_LANES = 16


def lanes_for(d: int) -> int:
    return int(max(1, min(MAX_LANES, LANE_BYTES // ((1 << (d - 1)) * d * 8))))


@numba.njit(**_JIT)
def _posteriors(values, nodes, sets, starts, d, target, tiny, tables, lanes, out, underflow
                ):  # pragma: no cover - compiled
    half, n = 1 << (d - 1), 1 << d
    a = np.zeros((half, d, lanes))  # a_v(W) at [W without bit v, v]: the subset sums run over nodes and lanes
    l, r, h = np.zeros((n, lanes)), np.zeros((n, lanes)), np.zeros((n, lanes))
    shift, smallest = np.zeros((d, lanes)), np.zeros(lanes)
    block = np.zeros((len(nodes), lanes))
    for b0 in range(0, len(values), lanes):
        nl = min(lanes, len(values) - b0)
        for lane in range(lanes):  # a short last group repeats its first data set
            for k in range(len(nodes)):
                block[k, lane] = values[b0 + (lane if lane < nl else 0), k]
        for v in range(d):
            for lane in range(lanes):
                shift[v, lane] = -np.inf
            for k in range(starts[v], starts[v + 1]):
                for lane in range(lanes):
                    shift[v, lane] = max(shift[v, lane], block[k, lane])
            for lane in range(lanes):
                if not np.isfinite(shift[v, lane]):
                    raise ValueError("scores: every node needs a finite score in every data set")
        a[:] = 0.0
        for k in range(len(nodes)):
            v = nodes[k]
            w = _squeeze(sets[k], v)
            for lane in range(lanes):
                a[w, v, lane] = np.exp(block[k, lane] - shift[v, lane])
        _subset_sums(a.reshape((half, d * lanes)), d - 1)  # the target's own too (never read)
        _order_sums(a.reshape((half * d, lanes)), tables, d, target, l, r, h, smallest)
        for v in range(d):
            if v != target:
                for lane in range(lanes):
                    smallest[lane] = min(smallest[lane], a[0, v, lane])
        for lane in range(nl):
            underflow[b0 + lane] = smallest[lane] < tiny
            _target_joint(values[b0 + lane], sets, starts, target, shift[:, lane], h[:, lane], out[b0 + lane])


@numba.njit(**_JIT)
def _squeeze(mask, v):  # pragma: no cover
    low = (1 << v) - 1
    return (mask & low) | ((mask >> 1) & ~low)


@numba.njit(**_JIT)
def _subset_sums(x, bits):  # pragma: no cover
    """x[W, :] <- sum_{S ⊆ W} x[S, :] in place, bit after bit."""
    width = x.shape[1]
    for bit in range(bits):
        step = 1 << bit
        for start in range(0, x.shape[0], 2 * step):
            for w in range(start, start + step):
                for e in range(width):
                    x[w + step, e] += x[w, e]


@numba.njit(**_JIT)
def _order_sums(a, tables, d, target, l, r, h, smallest):  # pragma: no cover
    """l(U) for U without the target, r(P) for P with it (`order_tables`), h = l r on the first and its superset
    sums over the other bits, lane by lane; `smallest` the smallest of l, r and h per lane (what `linear_dp`
    guards)."""
    n, bit, lanes = 1 << d, 1 << target, l.shape[1]
    for lane in range(lanes):
        l[0, lane], r[n - 1, lane], smallest[lane] = 1.0, 1.0, np.inf
    _recursion(a, tables[0], tables[1], tables[2], tables[3], l)
    _recursion(a, tables[4], tables[5], tables[6], tables[7], r)
    for u in range(n):
        if not u & bit:
            for lane in range(lanes):
                h[u, lane] = l[u, lane] * r[u | bit, lane]
                smallest[lane] = min(smallest[lane], l[u, lane], r[u | bit, lane])
        else:
            for lane in range(lanes):
                h[u, lane] = 0.0
    for b in range(d):
        if b == target:
            continue
        step = 1 << b
        for start in range(0, n, 2 * step):
            if lanes == 1:  # u without bit b; h is only read without the target's
                for u in range(start, start + step):
                    h[u, 0] += h[u + step, 0]
                continue
            for u in range(start, start + step):
                for lane in range(lanes):
                    h[u, lane] += h[u + step, lane]
    for u in range(n):
        if not u & bit:
            for lane in range(lanes):
                smallest[lane] = min(smallest[lane], h[u, lane])


@numba.njit(**_JIT)
def _recursion(a, masks, offsets, a_idx, read, x):  # pragma: no cover
    """x[mask] = sum over its terms of a[a_idx] x[read], mask after mask (each reads masks computed before), lane by
    lane (one lane: the sum in a register, not a store a term)."""
    lanes = x.shape[1]
    for i in range(len(masks)):
        m = masks[i]
        if lanes == 1:
            acc = 0.0
            for j in range(offsets[i], offsets[i + 1]):
                acc += a[a_idx[j], 0] * x[read[j], 0]
            x[m, 0] = acc
            continue
        for lane in range(lanes):
            x[m, lane] = 0.0
        for j in range(offsets[i], offsets[i + 1]):
            ai, ri = a_idx[j], read[j]
            for lane in range(lanes):
                x[m, lane] += a[ai, lane] * x[ri, lane]


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
