"""The additive scores of every parent set of one node in many data sets, each set's Cholesky factor built from two
smaller sets' (its prefix and its sibling), compiled: what the additive surrogate scores its lookahead's thousands
of data sets with.

For node v and a data set, `additive_scores` needs, per parent set S, log det A_S and b_S' A_S^-1 b_S, where
A = I + Lambda^½ D^-1 M2 D^-1 Lambda^½ over all the variables' features (D their sds on v's rows, 0 for a constant
one: its feature is 0), A_S its block on S's features (F = 5 a parent, in the order of S's members) and b the same
scaling of M2[:, y]. With A_S = L L' (Cholesky), L's block row of member s_r is [X_r', N_r], where
X_r = L_{S[:r]}^-1 A[S[:r], s_r] and N_r N_r' = A[s_r, s_r] - X_r' X_r: it depends on S[:r + 1] alone. So a set
S = P ∪ {j} (j its largest member, P = `SizeGroup.prefix`'s set) has the factor of P plus one block row [X', N], and
X = [X_Q ; x] where X_Q belongs to the sibling Q = P \\ {max P} ∪ {j} (one member fewer, the same largest one):

    x = N_P^-1 (A[max P, j] - X_P' X_Q)                (X_P: P's own block row)
    C = C_Q - x'x,   C = N N'                           (C_Q = A[j, j] - X_Q' X_Q, Q's Schur complement; C >= I)
    r = r_Q - x' z_P,   z = N^-1 r                      (r_Q = b_j - X_Q' z_{P \\ max P}, z_P: P's last block of z)
    log det A_S = log det A_P + 2 sum log diag N,   b_S' A_S^-1 b_S = quad_P + |z|^2.

So a set costs O(F^3 k) (one F x F Cholesky factor and a few F x F products), not the O((k F)^3) of factorising its
block. `node_scores` runs it for one node over a batch of data sets, a data set at a time (its sets' factors stay in
cache), with numba: in numpy each F x F step is a call whose overhead outweighs its arithmetic. Its cost a call:
BENCHMARKS.md "Where an additive call's time goes" (the options' scores). Each data set's moments are a base's
plus an optional one-row update (the lookahead's), so that no d F x d F matrix is stored per data set (the kernel
forms each data set's scaled Gram in one scratch buffer). The same numbers as `additive_scores.log_bayes_factors_rows` up to rounding
(tests/tasks/causal/test_additive_fast_paths.py holds them to the code before, within 1e-10).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numba
import numpy as np

from training.tasks.causal.surrogates.additive_scores import FEATURES
from training.tasks.causal.surrogates.linear_scores import CONSTANT_REL_SD
from training.tasks.causal.surrogates.subsets import score_plan


@dataclass(frozen=True)
class NodePlan:
    """Node v's scored parent sets of sizes 1.., in `score_plan` order, by size (flat arrays over the sets): each
    one's size, the rows of its prefix and its sibling among these (k >= 2), its largest member's first feature and
    its prefix's largest member's first feature (columns of the (d F)-wide Gram), and its place among v's scored
    sets (the empty set's included)."""

    size: np.ndarray
    prefix: np.ndarray
    sibling: np.ndarray
    last: np.ndarray
    before_last: np.ndarray
    cols: np.ndarray
    members: np.ndarray  # each set's bitmask of variables
    n_sets: int
    features: int  # F


@lru_cache(maxsize=None)
def node_plan(d: int, max_parents: int, v: int, features: int) -> NodePlan:
    plan = score_plan(d, max_parents)
    start = int(np.searchsorted(plan.nodes, v))
    parts = {key: [] for key in ("size", "prefix", "sibling", "last", "before_last", "cols", "members")}
    prev_masks, prev_offset, offset = np.zeros(0, dtype=np.int64), 0, 0
    for grp in plan.size_groups:
        rows = np.flatnonzero(grp.nodes == v)
        idx, masks = grp.idx[rows], grp.masks[rows]
        if grp.k == 1:
            prefix = sibling = np.zeros(len(rows), dtype=np.int64)
        else:
            order = np.argsort(prev_masks)
            prefix = prev_offset + order[np.searchsorted(prev_masks[order], masks & ~(1 << idx[:, -1]))]
            sibling = prev_offset + order[np.searchsorted(prev_masks[order], masks & ~(1 << idx[:, -2]))]
        parts["size"].append(np.full(len(rows), grp.k))
        parts["prefix"].append(prefix)
        parts["sibling"].append(sibling)
        parts["last"].append(idx[:, -1] * features)
        parts["before_last"].append(idx[:, -2 if grp.k > 1 else -1] * features)
        parts["cols"].append(grp.cols[rows] - start)
        parts["members"].append(masks)
        prev_masks, prev_offset, offset = masks, offset, offset + len(rows)
    flat = {key: np.concatenate(value).astype(np.int64) if value else np.zeros(0, dtype=np.int64)
            for key, value in parts.items()}
    return NodePlan(**flat, n_sets=int(np.sum(plan.nodes == v)), features=features)


def node_scores(plan: NodePlan, own: int, prior_var: np.ndarray, m2: np.ndarray, base: np.ndarray,
                count: np.ndarray, mean: np.ndarray, delta: np.ndarray, weight: np.ndarray,
                shared: Shared | None = None) -> np.ndarray:
    """log BF of node v's scored sets (`plan`), (B, n_sets), in B data sets whose moments over the P = d F features
    are count[i], mean[i] and m2[base[i]] + weight[i] delta[i] delta[i]' (`m2` (Bm, P, P)); `own`: v's own x
    column, `prior_var` (P,) each feature's. 0 where the data set is uninformative (fewer than 2 rows, or v constant
    on them). With `shared`, the data sets `shared.anchors` are scored first and the others copy from their anchor
    what they share with it (`Shared`)."""
    out = np.zeros((len(base), plan.n_sets))
    if plan.features != FEATURES:
        raise ValueError(f"node_scores: compiled for {FEATURES} features a parent, got {plan.features}")
    if shared is None:
        shared = Shared(np.zeros(0, dtype=np.int64), np.full(len(base), -1, dtype=np.int64),
                        np.zeros(len(base), dtype=np.int64))
    _scores(plan.size, plan.prefix, plan.sibling, plan.last, plan.before_last, plan.cols, plan.members,
            int(plan.size.max(initial=1)), own // plan.features, own, np.sqrt(prior_var), CONSTANT_REL_SD,
            np.ascontiguousarray(m2), base.astype(np.int64), count.astype(float),
            np.ascontiguousarray(mean, dtype=float), np.ascontiguousarray(delta, dtype=float), weight.astype(float),
            shared.anchors.astype(np.int64), shared.anchor_of.astype(np.int64), shared.agree.astype(np.int64), out)
    return out


@dataclass(frozen=True)
class Shared:
    """What data sets share: `anchors` (A,) the data sets scored first, in full; `anchor_of` (B,) each data set's
    anchor (-1: none; an anchor's own entry is ignored) and `agree` (B,) the bitmask of the variables whose features
    in the data set's moments equal the anchor's. A set S of node v whose S ∪ {v} lies in `agree` has the anchor's
    factor, score and kept block rows: everything the kernel computes for S reads S ∪ {v}'s features alone."""

    anchors: np.ndarray
    anchor_of: np.ndarray
    agree: np.ndarray


_JIT = dict(cache=True, fastmath={"contract"}, error_model="numpy")


@numba.njit(**_JIT)
def _scores(size, prefix, sibling, last, before_last, cols, members, k_max, own_var, own, root_prior, rel_sd, m2,
            base, count, mean, delta, weight, anchors, anchor_of, agree, out
            ):  # pragma: no cover - compiled; its values are tested through `node_scores`
    f = FEATURES  # a compile-time constant, so that the F x F loops are unrolled
    n_feat = m2.shape[-1]
    sets, slots = len(size), len(anchors) + 1  # slot 0: the data set being scored; 1 + a: anchor a
    x_rows = np.zeros((slots, sets, f * max(k_max - 1, 1), f))
    n_inv = np.zeros((slots, sets, f, f))
    schur = np.zeros((slots, sets, f, f))
    resid = np.zeros((slots, sets, f))
    z = np.zeros((slots, sets, f))
    logdet = np.zeros((slots, sets))
    quad = np.zeros((slots, sets))
    slot_of = np.zeros(sets, dtype=np.int64)
    slot_of_anchor = np.full(len(base), -1, dtype=np.int64)
    for a in range(len(anchors)):
        slot_of_anchor[anchors[a]] = a + 1
    scratch = (np.zeros(n_feat), np.zeros((n_feat, n_feat)), np.zeros(n_feat), np.zeros((f, f)), np.zeros((f, f)),
               np.zeros((f, f)), np.zeros(f), np.zeros((f, f)))
    for step in range(len(anchors) + len(base)):
        b = anchors[step] if step < len(anchors) else step - len(anchors)
        store, ref, shared = 0, -1, 0
        if step < len(anchors):
            store = step + 1
        elif slot_of_anchor[b] >= 0:
            continue  # scored as an anchor
        elif anchor_of[b] >= 0 and (agree[b] >> own_var) & 1:
            ref, shared = anchor_of[b], agree[b]
        for s in range(sets):
            reuse = ref >= 0 and (members[s] & ~shared) == 0
            slot_of[s] = slot_of_anchor[ref] if reuse else store
        _one_data_set(b, ref, size, prefix, sibling, last, before_last, cols, k_max, own, root_prior, rel_sd,
                      m2[base[b]], count[b], mean[b], delta[b], weight[b], slot_of, store, x_rows, n_inv, schur,
                      resid, z, logdet, quad, scratch, out)


@numba.njit(**_JIT)
def _one_data_set(b, ref, size, prefix, sibling, last, before_last, cols, k_max, own, root_prior, rel_sd, mb, n,
                  mean_b, delta_b, w, slot_of, store, x_rows, n_inv, schur, resid, z, logdet, quad, scratch, out
                  ):  # pragma: no cover
    """Data set b's scores into out[b]: each set computed into slot `store`, or copied from anchor `ref`'s row where
    `slot_of` points at that anchor's slot."""
    inv, gram, cross, t, x, c, r, low = scratch
    q0 = _scaled_moments(mb, w, n, delta_b, mean_b, own, root_prior, rel_sd, inv, gram, cross)
    if q0 < 0:
        return  # uninformative: every score 0
    q0_safe = q0 if q0 > 0 else 1.0
    half_nu = 0.5 * (n - 1.0)
    for s in range(len(size)):
        if slot_of[s] != store:
            out[b, cols[s]] = out[ref, cols[s]]
            continue
        k, j0 = size[s], last[s]
        if k == 1:
            _first_block(gram, cross, j0, c, r)
            logdet_p, quad_p = 0.0, 0.0
        else:
            p, q = prefix[s], sibling[s]
            sp, sq = slot_of[p], slot_of[q]
            _grown_block(store, s, sp, p, sq, q, k, k_max, before_last[s], j0, gram, x_rows, n_inv, schur, resid, z,
                         t, x, c, r)
            logdet_p, quad_p = logdet[sp, p], quad[sp, p]
        det_root = _cholesky(c, low)
        if k < k_max:
            total = quad_p + _kept_for_next_size(store, s, low, c, r, n_inv, schur, resid, z)
        else:
            total = quad_p + _solved_norm(low, r, t)
        logdet[store, s] = logdet_p + 2.0 * np.log(det_root)
        quad[store, s] = total
        ratio = min(max(1.0 - total / q0_safe, 1e-300), 1.0)
        out[b, cols[s]] = -0.5 * logdet[store, s] - half_nu * np.log(ratio)


@numba.njit(**_JIT)
def _scaled_moments(mb, w, n, delta_b, mean_b, own, root_prior, rel_sd, inv, gram, cross):  # pragma: no cover
    """Fill `gram` and `cross` with one data set's scaled Gram and its cross column to v; v's sum of squares, or -1
    when the data set is uninformative (fewer than 2 rows, or v constant on them)."""
    n_feat = len(inv)
    for a in range(n_feat):
        var = mb[a, a] + w * delta_b[a] * delta_b[a]
        sd = np.sqrt(var / max(n, 1.0))
        inv[a] = root_prior[a] / sd if sd > rel_sd * abs(mean_b[a]) else 0.0
    q0 = mb[own, own] + w * delta_b[own] * delta_b[own]
    ybar = mean_b[own]
    if not (n >= 2 and q0 > rel_sd * rel_sd * n * ybar * ybar):
        return -1.0
    for a in range(n_feat):
        cross[a] = (mb[a, own] + w * delta_b[a] * delta_b[own]) * inv[a]
        for e in range(n_feat):
            gram[a, e] = (mb[a, e] + w * delta_b[a] * delta_b[e]) * inv[a] * inv[e]
    return q0


@numba.njit(**_JIT)
def _first_block(gram, cross, j0, c, r):  # pragma: no cover
    """A one-member set: C = I + its Gram block, r its cross block."""
    f = FEATURES
    for i in range(f):
        for e in range(f):
            c[i, e] = gram[j0 + i, j0 + e]
        c[i, i] += 1.0
        r[i] = cross[j0 + i]


@numba.njit(**_JIT)
def _grown_block(so, s, sp, p, sq, q, k, k_max, m0, j0, gram, x_rows, n_inv, schur, resid, z, t, x, c, r
                 ):  # pragma: no cover
    """A set of k >= 2 members from its prefix p and sibling q (in slots sp, sq): x, C (lower half) and r; its block
    row kept in slot so."""
    f = FEATURES
    for i in range(f):
        for e in range(f):
            acc = gram[m0 + i, j0 + e]
            for h in range(f * (k - 2)):
                acc -= x_rows[sp, p, h, i] * x_rows[sq, q, h, e]
            t[i, e] = acc
    for i in range(f):  # x = N_P^-1 t (lower triangular)
        for e in range(f):
            acc = 0.0
            for h in range(i + 1):
                acc += n_inv[sp, p, i, h] * t[h, e]
            x[i, e] = acc
    for i in range(f):  # C = C_Q - x'x (lower half), r = r_Q - x' z_P
        for e in range(i + 1):
            acc = schur[sq, q, i, e]
            for h in range(f):
                acc -= x[h, i] * x[h, e]
            c[i, e] = acc
        acc = resid[sq, q, i]
        for h in range(f):
            acc -= x[h, i] * z[sp, p, h]
        r[i] = acc
    if k < k_max:  # the set's block row, for the sets it is the prefix or sibling of
        head = f * (k - 2)
        for h in range(head):
            for e in range(f):
                x_rows[so, s, h, e] = x_rows[sq, q, h, e]
        for h in range(f):
            for e in range(f):
                x_rows[so, s, head + h, e] = x[h, e]


@numba.njit(**_JIT)
def _cholesky(c, low):  # pragma: no cover
    """C = N N' into `low`; det N: a product of roots >= 1 (C >= I), so that a set takes one log."""
    f = FEATURES
    det_root = 1.0
    for e in range(f):
        acc = c[e, e]
        for h in range(e):
            acc -= low[e, h] * low[e, h]
        root = np.sqrt(acc)
        low[e, e] = root
        det_root *= root
        for i in range(e + 1, f):
            acc = c[i, e]
            for h in range(e):
                acc -= low[i, h] * low[e, h]
            low[i, e] = acc / root
    return det_root


@numba.njit(**_JIT)
def _kept_for_next_size(so, s, low, c, r, n_inv, schur, resid, z):  # pragma: no cover
    """What the next size reads of set s: N^-1, C, r and z = N^-1 r; returns |z|^2."""
    f = FEATURES
    for i in range(f):
        n_inv[so, s, i, i] = 1.0 / low[i, i]
        for e in range(i):
            acc = 0.0
            for h in range(e, i):
                acc += low[i, h] * n_inv[so, s, h, e]
            n_inv[so, s, i, e] = -acc / low[i, i]
    total = 0.0
    for i in range(f):
        acc = 0.0
        for h in range(i + 1):
            acc += n_inv[so, s, i, h] * r[h]
        z[so, s, i] = acc
        total += acc * acc
        resid[so, s, i] = r[i]
        for e in range(i + 1):
            schur[so, s, i, e] = c[i, e]
            schur[so, s, e, i] = c[i, e]
    return total


@numba.njit(**_JIT)
def _solved_norm(low, r, t):  # pragma: no cover
    """|N^-1 r|^2 by forward substitution (a set of the largest size: nothing is kept)."""
    f = FEATURES
    total = 0.0
    for i in range(f):
        acc = r[i]
        for h in range(i):
            acc -= low[i, h] * t[h, 0]
        t[i, 0] = acc / low[i, i]
        total += t[i, 0] * t[i, 0]
    return total
