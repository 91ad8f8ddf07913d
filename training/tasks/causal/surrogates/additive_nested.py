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
block. `node_scores` runs it for one node over a batch of data sets with numba, up to `MAX_LANES` data sets side by
side (`lane_groups`: data sets that copy the same sets from the same anchor), every step a loop over them that the
compiler turns into SIMD instructions (one data set at a time, each F x F step is a few dozen scalar operations
that no vector unit speeds up; in numpy each step is a call whose overhead outweighs its arithmetic). The sums over
a parent's F = 5 features are written out, one vector expression a loop, so that each loop stores once. A set with
exactly one member where its group differs from the anchor is scored from the anchor's factor of the others
(`_one_new_member`: a third of the nested step's arithmetic a data set). Each data set's moments are a base's plus
an optional one-row update (the lookahead's), so that no d F x d F matrix is stored per data set (the kernel forms a
group's scaled Gram in one scratch buffer, block by block as the nested step reads them). Its cost a call:
BENCHMARKS.md "Where an additive call's time goes" (the options' scores). The same numbers as
`additive_scores.log_bayes_factors_rows` up to rounding (tests/tasks/causal/test_additive_fast_paths.py holds them to
the code before, within 1e-10).
"""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass
from functools import lru_cache

import numba
import numpy as np

from training.tasks.causal.surrogates.additive_scores import FEATURES
from training.tasks.causal.surrogates.linear_scores import CONSTANT_REL_SD
from training.tasks.causal.surrogates.subsets import score_plan

if FEATURES != 5:  # the kernel's sums over a parent's features are written out
    raise ImportError(f"additive_nested: written for 5 features a parent, the dictionary has {FEATURES}")


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
    kept: np.ndarray  # where a set smaller than the largest keeps its factor for the next size (-1: largest size)
    set_of: np.ndarray  # (2^d,) each bitmask's row among these (-1: not a scored set of v)
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
    small = flat["size"] < flat["size"].max(initial=1)
    kept = np.where(small, np.cumsum(small) - 1, -1).astype(np.int64)
    set_of = np.full(1 << d, -1, dtype=np.int64)
    set_of[flat["members"]] = np.arange(len(flat["members"]))
    return NodePlan(**flat, kept=kept, set_of=set_of, n_sets=int(np.sum(plan.nodes == v)), features=features)


@dataclass(frozen=True)
class Shared:
    """What data sets share: `anchors` (A,) the data sets scored first, in full; `anchor_of` (B,) each data set's
    anchor (-1: none; an anchor's own entry is ignored) and `agree` (B,) the bitmask of the variables whose features
    in the data set's moments equal the anchor's. A set S of node v whose S ∪ {v} lies in `agree` has the anchor's
    factor, score and kept block rows: everything the kernel computes for S reads S ∪ {v}'s features alone."""

    anchors: np.ndarray
    anchor_of: np.ndarray
    agree: np.ndarray


MAX_LANES = 64  # data sets scored side by side: the compiled loops run over them, in SIMD registers


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
    anchors = shared.anchors.astype(np.int64)
    _scores(plan.size, plan.prefix, plan.sibling, plan.last, plan.before_last, plan.cols, plan.members, plan.kept,
            plan.set_of, int(plan.size.max(initial=1)), own, np.sqrt(prior_var), CONSTANT_REL_SD,
            np.ascontiguousarray(m2), base.astype(np.int64), count.astype(float), np.ascontiguousarray(mean, dtype=float),
            np.ascontiguousarray(delta, dtype=float), weight.astype(float), anchors,
            *lane_groups(len(base), shared, own // plan.features), out)
    return out


def lane_groups(n: int, shared: Shared, own_var: int) -> tuple[np.ndarray, ...]:
    """The data sets in groups scored side by side: (order (n,) the data sets group after group, starts (G + 1,)
    each group's offsets into it, ref (G,) the anchor a group copies from (-1: none; its index in
    `shared.anchors`) and agree (G,) the variables its data sets share with that anchor). The anchors come first
    (in their order), then runs of data sets with the same anchor and agreement, at most `MAX_LANES` a group. A data
    set copies only where its own variable agrees with its anchor."""
    anchors = shared.anchors.astype(np.int64)
    rest = np.setdiff1d(np.arange(n), anchors)
    index_of = np.full(n, -1, dtype=np.int64)
    index_of[anchors] = np.arange(len(anchors))
    ref, agree = shared.anchor_of[rest].astype(np.int64), shared.agree[rest].astype(np.int64)
    ok = (ref >= 0) & ((agree >> own_var) & 1 == 1)
    ref, agree = np.where(ok, index_of[np.maximum(ref, 0)], -1), np.where(ok, agree, 0)
    order = np.lexsort((agree, ref))
    rest, ref, agree = rest[order], ref[order], agree[order]
    new_run = np.r_[True, (ref[1:] != ref[:-1]) | (agree[1:] != agree[:-1])] if len(rest) else np.zeros(0, bool)
    run_start = np.maximum.accumulate(np.where(new_run, np.arange(len(rest)), 0)) if len(rest) else rest
    heads = np.flatnonzero((np.arange(len(rest)) - run_start) % MAX_LANES == 0)
    anchor_heads = np.arange(0, len(anchors), MAX_LANES)
    starts = np.r_[anchor_heads, len(anchors) + heads, n].astype(np.int64)
    return (np.r_[anchors, rest].astype(np.int64), starts, np.r_[np.full(len(anchor_heads), -1), ref[heads]].astype(
        np.int64), np.r_[np.zeros(len(anchor_heads)), agree[heads]].astype(np.int64))


_Kept = namedtuple("_Kept", "x_rows n_inv schur resid z logdet quad")  # a set's kept factors, lane by lane
_JIT = dict(cache=True, fastmath={"contract"}, error_model="numpy", nogil=True)  # `lookahead_threads`


@numba.njit(**_JIT)
def _scores(size, prefix, sibling, last, before_last, cols, members, kept, set_of, k_max, own, root_prior, rel_sd, m2,
            base, count, mean, delta, weight, anchors, order, starts, ref_of, agree_of, out
            ):  # pragma: no cover - compiled; its values are tested through `node_scores`
    f, lanes = FEATURES, MAX_LANES
    n_feat, sets, n_anchors = m2.shape[-1], len(size), len(anchors)
    stored, rows = max(int(kept.max()) + 1, 1), f * max(k_max - 2, 1)
    state = _Kept(np.zeros((stored, rows, f, lanes)), np.zeros((stored, f, f, lanes)),
                  np.zeros((stored, f, f, lanes)), np.zeros((stored, f, lanes)), np.zeros((stored, f, lanes)),
                  np.zeros((stored, lanes)), np.zeros((stored, lanes)))
    by_anchor = _Kept(np.zeros((n_anchors, stored, rows, f)), np.zeros((n_anchors, stored, f, f)),
                      np.zeros((n_anchors, stored, f, f)), np.zeros((n_anchors, stored, f)),
                      np.zeros((n_anchors, stored, f)), np.zeros((n_anchors, stored)), np.zeros((n_anchors, stored)))
    computed, copied, one_new = (np.zeros(sets, dtype=np.bool_), np.zeros(sets, dtype=np.bool_),
                                 np.zeros(sets, dtype=np.bool_))
    new_scratch = (np.zeros((rows + f, f + 1)), np.zeros((rows + f, f + 1)), np.zeros(rows + f), np.zeros((f, f)),
                   np.zeros((3, f)), np.zeros(k_max, dtype=np.int64), np.zeros(f + 1))
    gram, cross = np.zeros((n_feat, n_feat, lanes)), np.zeros((n_feat, lanes))
    made = np.zeros((n_feat // f, n_feat // f), dtype=np.bool_)  # the Gram's blocks made for the group
    inv, dl = np.zeros((n_feat, lanes)), np.zeros((n_feat, lanes))
    q0, half_nu, informative = np.zeros(lanes), np.zeros(lanes), np.zeros(lanes, dtype=np.bool_)
    t, x, c, low = np.zeros((f, f, lanes)), np.zeros((f, f, lanes)), np.zeros((f, f, lanes)), np.zeros((f, f, lanes))
    r, root, det_root, total, acc = (np.zeros((f, lanes)), np.zeros(lanes), np.zeros(lanes), np.zeros(lanes),
                                     np.zeros(lanes))
    for g in range(len(starts) - 1):
        group = order[starts[g]:starts[g + 1]]
        nl, ref, shared = len(group), ref_of[g], agree_of[g]
        same_base = _scaled_moments(m2, base, group, count, mean, delta, weight, own, root_prior, rel_sd, inv, dl,
                                    cross, q0, half_nu, informative)
        made[:] = False
        _group_paths(size, prefix, sibling, members, kept, ref, shared, same_base, by_anchor, state, nl, computed,
                     copied, one_new)
        for s in range(sets):
            if not computed[s]:
                for lane in range(nl):
                    out[group[lane], cols[s]] = out[anchors[ref], cols[s]]
                continue
            k, j0, ks = size[s], last[s], kept[s]
            if one_new[s]:
                _one_new_member(by_anchor, ref, members[s] & ~shared, members[s], set_of, prefix, last, kept, k,
                                m2[base[group[0]]], own, inv, dl, weight, group, c, r, low, root, det_root, t, total,
                                acc, new_scratch)
            elif k == 1:
                _gram_block(m2, base, group, same_base, weight, inv, dl, j0, j0, made, gram)
                _first_block(gram, cross, j0, c, r, nl)
                for lane in range(nl):
                    total[lane] = 0.0
                    acc[lane] = 0.0  # the prefix's log det
            else:
                kp, kq = kept[prefix[s]], kept[sibling[s]]
                _gram_block(m2, base, group, same_base, weight, inv, dl, before_last[s], j0, made, gram)
                _grown_block(state, ks, kp, kq, k, k_max, before_last[s], j0, gram, t, x, c, r, nl)
                for lane in range(nl):
                    total[lane] = state.quad[kp, lane]
                    acc[lane] = state.logdet[kp, lane]
            if not one_new[s]:
                _cholesky(c, low, root, det_root, nl)
                if k < k_max:
                    _kept_for_next_size(state, ks, low, c, r, total, nl)
                else:
                    _solved_norm(low, r, t, total, nl)
                for lane in range(nl):
                    acc[lane] += 2.0 * np.log(det_root[lane])
            if k < k_max and not one_new[s]:
                for lane in range(nl):
                    state.logdet[ks, lane] = acc[lane]
                    state.quad[ks, lane] = total[lane]
            for lane in range(nl):
                ratio = min(max(1.0 - total[lane] / q0[lane], 1e-300), 1.0)
                score = -0.5 * acc[lane] - half_nu[lane] * np.log(ratio)
                out[group[lane], cols[s]] = score if informative[lane] else 0.0
        if ref < 0 and g * lanes < n_anchors:  # an anchors' group: what the groups copying from them read
            for lane in range(nl):
                _extract(state, lane, by_anchor, g * lanes + lane)


@numba.njit(**_JIT)
def _group_paths(size, prefix, sibling, members, kept, ref, shared, same_base, by_anchor, state, nl, computed, copied,
                 one_new):  # pragma: no cover
    """Which sets the group computes (the others copy the anchor's scores) and which of those take the one-new-member
    path; the anchor's kept factors of the copied sets the nested step grows from, broadcast into the lanes."""
    sets = len(size)
    for s in range(sets):
        computed[s] = ref < 0 or (members[s] & ~shared) != 0
        copied[s] = False
        new = members[s] & ~shared
        one_new[s] = ref >= 0 and same_base and size[s] > 1 and new != 0 and (new & (new - 1)) == 0
    for s in range(sets - 1, -1, -1):  # the sets the nested step grows from are made by it
        if computed[s] and not one_new[s] and size[s] > 1:
            one_new[prefix[s]] = False
            one_new[sibling[s]] = False
    if ref >= 0:
        for s in range(sets):
            if computed[s] and not one_new[s] and size[s] > 1:
                for p in (prefix[s], sibling[s]):
                    if not computed[p] and not copied[p]:
                        _broadcast(by_anchor, ref, kept[p], state, nl)
                        copied[p] = True


@numba.njit(**_JIT)
def _broadcast(by_anchor, a, ks, state, nl):  # pragma: no cover
    """Anchor a's kept factors of stored set ks into every lane."""
    for h in range(state.x_rows.shape[1]):
        for e in range(FEATURES):
            for lane in range(nl):
                state.x_rows[ks, h, e, lane] = by_anchor.x_rows[a, ks, h, e]
    for i in range(FEATURES):
        for e in range(FEATURES):
            for lane in range(nl):
                state.n_inv[ks, i, e, lane] = by_anchor.n_inv[a, ks, i, e]
                state.schur[ks, i, e, lane] = by_anchor.schur[a, ks, i, e]
        for lane in range(nl):
            state.resid[ks, i, lane] = by_anchor.resid[a, ks, i]
            state.z[ks, i, lane] = by_anchor.z[a, ks, i]
    for lane in range(nl):
        state.logdet[ks, lane] = by_anchor.logdet[a, ks]
        state.quad[ks, lane] = by_anchor.quad[a, ks]


@numba.njit(**_JIT)
def _extract(state, lane, by_anchor, a):  # pragma: no cover
    """Lane `lane`'s kept factors of every stored set, as anchor a's."""
    for ks in range(state.x_rows.shape[0]):
        for h in range(state.x_rows.shape[1]):
            for e in range(FEATURES):
                by_anchor.x_rows[a, ks, h, e] = state.x_rows[ks, h, e, lane]
        for i in range(FEATURES):
            for e in range(FEATURES):
                by_anchor.n_inv[a, ks, i, e] = state.n_inv[ks, i, e, lane]
                by_anchor.schur[a, ks, i, e] = state.schur[ks, i, e, lane]
            by_anchor.resid[a, ks, i] = state.resid[ks, i, lane]
            by_anchor.z[a, ks, i] = state.z[ks, i, lane]
        by_anchor.logdet[a, ks] = state.logdet[ks, lane]
        by_anchor.quad[a, ks] = state.quad[ks, lane]


@numba.njit(**_JIT)
def _scaled_moments(m2, base, group, count, mean, delta, weight, own, root_prior, rel_sd, inv, dl, cross, q0, half_nu,
                    informative):  # pragma: no cover
    """Fill `inv` (the features' scalings), `dl` (the row's deviations) and `cross` (the scaled cross column to v),
    lane by lane; q0 (v's sums of squares, 1 where 0), half_nu ((n - 1) / 2) and `informative` (at least 2 rows, v
    not constant). Whether the group's data sets share one base. The scaled Gram's blocks are made as the sets read
    them (`_gram_block`)."""
    n_feat, nl = inv.shape[0], len(group)
    same_base = True
    for lane in range(nl):
        b = group[lane]
        same_base = same_base and base[b] == base[group[0]]
        n, wt, mb = count[b], weight[b], m2[base[b]]
        for a in range(n_feat):
            dl[a, lane] = delta[b, a]
            sd = np.sqrt((mb[a, a] + wt * delta[b, a] * delta[b, a]) / max(n, 1.0))
            inv[a, lane] = root_prior[a] / sd if sd > rel_sd * abs(mean[b, a]) else 0.0
        sq = mb[own, own] + wt * delta[b, own] * delta[b, own]
        ybar = mean[b, own]
        informative[lane] = n >= 2 and sq > rel_sd * rel_sd * n * ybar * ybar
        q0[lane] = sq if sq > 0 else 1.0
        half_nu[lane] = 0.5 * (n - 1.0)
    for lane in range(nl):
        b = group[lane]
        mb, wt = m2[base[b]], weight[b]
        for a in range(n_feat):
            cross[a, lane] = (mb[a, own] + wt * dl[a, lane] * dl[own, lane]) * inv[a, lane]
    return same_base


@numba.njit(**_JIT)
def _gram_block(m2, base, group, same_base, weight, inv, dl, a0, e0, made, gram):  # pragma: no cover
    """The scaled Gram's block of the variables whose first features are a0 and e0, lane by lane, unless made."""
    f, nl = FEATURES, len(group)
    if made[a0 // f, e0 // f]:
        return
    made[a0 // f, e0 // f] = True
    for a in range(a0, a0 + f):
        for e in range(e0, e0 + f):
            if same_base:  # the lookahead's: one base, a row each
                m = m2[base[group[0]], a, e]
                for lane in range(nl):
                    scatter = m + weight[group[lane]] * dl[a, lane] * dl[e, lane]
                    gram[a, e, lane] = scatter * inv[a, lane] * inv[e, lane]
            else:
                for lane in range(nl):
                    b = group[lane]
                    scatter = m2[base[b], a, e] + weight[b] * dl[a, lane] * dl[e, lane]
                    gram[a, e, lane] = scatter * inv[a, lane] * inv[e, lane]


@numba.njit(**_JIT)
def _first_block(gram, cross, j0, c, r, nl):  # pragma: no cover
    """A one-member set: C = I + its Gram block, r its cross block."""
    for i in range(FEATURES):
        for e in range(FEATURES):
            one = 1.0 if i == e else 0.0
            for lane in range(nl):
                c[i, e, lane] = gram[j0 + i, j0 + e, lane] + one
        for lane in range(nl):
            r[i, lane] = cross[j0 + i, lane]


@numba.njit(**_JIT)
def _grown_block(state, ks, kp, kq, k, k_max, m0, j0, gram, t, x, c, r, nl):  # pragma: no cover
    """A set of k >= 2 members from its prefix and sibling (kept at kp and kq): x, C (lower half) and r; its block
    row kept at ks. The sums run over one parent's F = 5 features at a time, written out (one vector expression a
    lane loop); N^-1 is stored with zeros above its diagonal, so x's sums run over all five."""
    xr, ni, sc, rs, zz = state.x_rows, state.n_inv, state.schur, state.resid, state.z
    for i in range(FEATURES):
        for e in range(FEATURES):
            for lane in range(nl):
                t[i, e, lane] = gram[m0 + i, j0 + e, lane]
            for hb in range(0, FEATURES * (k - 2), FEATURES):
                for lane in range(nl):
                    t[i, e, lane] -= (xr[kp, hb, i, lane] * xr[kq, hb, e, lane]
                                      + xr[kp, hb + 1, i, lane] * xr[kq, hb + 1, e, lane]
                                      + xr[kp, hb + 2, i, lane] * xr[kq, hb + 2, e, lane]
                                      + xr[kp, hb + 3, i, lane] * xr[kq, hb + 3, e, lane]
                                      + xr[kp, hb + 4, i, lane] * xr[kq, hb + 4, e, lane])
    for i in range(FEATURES):  # x = N_P^-1 t
        for e in range(FEATURES):
            for lane in range(nl):
                x[i, e, lane] = (ni[kp, i, 0, lane] * t[0, e, lane] + ni[kp, i, 1, lane] * t[1, e, lane]
                                 + ni[kp, i, 2, lane] * t[2, e, lane] + ni[kp, i, 3, lane] * t[3, e, lane]
                                 + ni[kp, i, 4, lane] * t[4, e, lane])
    for i in range(FEATURES):  # C = C_Q - x'x (lower half), r = r_Q - x' z_P
        for e in range(i + 1):
            for lane in range(nl):
                c[i, e, lane] = sc[kq, i, e, lane] - (x[0, i, lane] * x[0, e, lane] + x[1, i, lane] * x[1, e, lane]
                                                      + x[2, i, lane] * x[2, e, lane] + x[3, i, lane] * x[3, e, lane]
                                                      + x[4, i, lane] * x[4, e, lane])
        for lane in range(nl):
            r[i, lane] = rs[kq, i, lane] - (x[0, i, lane] * zz[kp, 0, lane] + x[1, i, lane] * zz[kp, 1, lane]
                                            + x[2, i, lane] * zz[kp, 2, lane] + x[3, i, lane] * zz[kp, 3, lane]
                                            + x[4, i, lane] * zz[kp, 4, lane])
    if k < k_max:  # the set's block row, for the sets it is the prefix or sibling of
        head = FEATURES * (k - 2)
        for h in range(head):
            for e in range(FEATURES):
                for lane in range(nl):
                    xr[ks, h, e, lane] = xr[kq, h, e, lane]
        for h in range(FEATURES):
            for e in range(FEATURES):
                for lane in range(nl):
                    xr[ks, head + h, e, lane] = x[h, e, lane]


@numba.njit(**_JIT)
def _cholesky(c, low, root, det_root, nl):  # pragma: no cover
    """C = N N' into `low`, lane by lane; det N into `det_root`: a product of roots >= 1 (C >= I), so that a set
    takes one log."""
    for lane in range(nl):
        det_root[lane] = 1.0
    for e in range(FEATURES):
        for lane in range(nl):
            root[lane] = c[e, e, lane]
        for h in range(e):
            for lane in range(nl):
                root[lane] -= low[e, h, lane] * low[e, h, lane]
        for lane in range(nl):
            root[lane] = np.sqrt(root[lane])
            low[e, e, lane] = root[lane]
            det_root[lane] *= root[lane]
        for i in range(e + 1, FEATURES):
            for lane in range(nl):
                low[i, e, lane] = c[i, e, lane]
            for h in range(e):
                for lane in range(nl):
                    low[i, e, lane] -= low[i, h, lane] * low[e, h, lane]
            for lane in range(nl):
                low[i, e, lane] /= root[lane]


@numba.njit(**_JIT)
def _kept_for_next_size(state, ks, low, c, r, total, nl):  # pragma: no cover
    """What the next size reads of the set kept at ks: N^-1 (zeros above the diagonal), C, r and z = N^-1 r; adds
    |z|^2 to `total`."""
    ni, sc, rs, zz = state.n_inv, state.schur, state.resid, state.z
    for i in range(FEATURES):
        for lane in range(nl):
            ni[ks, i, i, lane] = 1.0 / low[i, i, lane]
        for e in range(i):
            for lane in range(nl):
                ni[ks, i, e, lane] = 0.0
            for h in range(e, i):
                for lane in range(nl):
                    ni[ks, i, e, lane] += low[i, h, lane] * ni[ks, h, e, lane]
            for lane in range(nl):
                ni[ks, i, e, lane] = -ni[ks, i, e, lane] / low[i, i, lane]
    for i in range(FEATURES):
        for lane in range(nl):
            zz[ks, i, lane] = (ni[ks, i, 0, lane] * r[0, lane] + ni[ks, i, 1, lane] * r[1, lane]
                               + ni[ks, i, 2, lane] * r[2, lane] + ni[ks, i, 3, lane] * r[3, lane]
                               + ni[ks, i, 4, lane] * r[4, lane])
            total[lane] += zz[ks, i, lane] * zz[ks, i, lane]
            rs[ks, i, lane] = r[i, lane]
        for e in range(i + 1):
            for lane in range(nl):
                sc[ks, i, e, lane] = c[i, e, lane]
                sc[ks, e, i, lane] = c[i, e, lane]


@numba.njit(**_JIT)
def _solved_norm(low, r, t, total, nl):  # pragma: no cover
    """Adds |N^-1 r|^2 to `total` by forward substitution (a set of the largest size: nothing is kept)."""
    for i in range(FEATURES):
        for lane in range(nl):
            t[i, 0, lane] = r[i, lane]
        for h in range(i):
            for lane in range(nl):
                t[i, 0, lane] -= low[i, h, lane] * t[h, 0, lane]
        for lane in range(nl):
            t[i, 0, lane] /= low[i, i, lane]
            total[lane] += t[i, 0, lane] * t[i, 0, lane]


@numba.njit(**_JIT)
def _one_new_member(by_anchor, ref, new, members, set_of, prefix, last, kept, k, mb, own, inv, dl, weight, group, c,
                    r, low, root, det_root, t, total, acc, scratch):  # pragma: no cover
    """log det A_S (into `acc`) and b_S' A_S^-1 b_S (into `total`), lane by lane, of a set S = P ∪ {j} whose only
    member where the group's data sets differ from their anchor is j (bitmask `new`), v agreeing: P's factor,
    z_P, log det and quad are the anchor's, and with A_Pj = G_P M_Pj G_j + w (G_P d_P)(G_j d_j)' (M the base
    moments, G the scalings, d the row's deviations, w its weight) the Schur complement and residual of j are

        X = L_P^-1 A_Pj = B G_j + w u e',   B = L_P^-1 G_P M_Pj,   u = L_P^-1 G_P d_P,   e = G_j d_j,
        C = A_jj - X'X = I + G_j (M_jj - B'B) G_j + w (1 - w u'u) e e' - w (G_j B'u e' + e u'B G_j),
        r = b_j - X' z_P = G_j (M_jy - B' z_P) + w (d_y - u' z_P) e,

    B, u and z_P the group's (P and the anchor's alone), so that each data set costs one F x F matrix of a few terms
    an entry, its Cholesky factor and a solve: a third of the nested step's."""
    f, nl = FEATURES, len(group)
    v_cols, y_cols, z_p, e0, vec, chain, tmp = scratch
    j0 = 0
    while not (new >> j0) & 1:
        j0 += 1
    j0 *= f
    p = set_of[members & ~new]
    cur = p
    for i in range(k - 2, -1, -1):  # P's prefixes, one member more each
        chain[i] = cur
        cur = prefix[cur]
    _solve_by_anchor(by_anchor, ref, chain, k, last, kept, j0, mb, inv, dl, v_cols, y_cols, z_p, tmp)
    rows = f * (k - 1)
    uu, uz = 0.0, 0.0
    for h in range(rows):
        uu += y_cols[h, f] * y_cols[h, f]
        uz += y_cols[h, f] * z_p[h]
    beta, rho = vec[0], vec[1]
    for i in range(f):
        bu, bz = 0.0, 0.0
        for h in range(rows):
            bu += y_cols[h, i] * y_cols[h, f]
            bz += y_cols[h, i] * z_p[h]
        beta[i], rho[i] = bu, mb[j0 + i, own] - bz
        for e in range(i + 1):
            bb = 0.0
            for h in range(rows):
                bb += y_cols[h, i] * y_cols[h, e]
            e0[i, e] = mb[j0 + i, j0 + e] - bb
    dy, quad_p, logdet_p = dl[own, 0], by_anchor.quad[ref, kept[p]], by_anchor.logdet[ref, kept[p]]
    for i in range(f):
        for lane in range(nl):
            gam_i = inv[j0 + i, lane]
            w = weight[group[lane]]
            e_i = gam_i * dl[j0 + i, lane]
            r[i, lane] = gam_i * rho[i] + w * (dy - uz) * e_i
            t[i, 1, lane] = gam_i
            t[i, 2, lane] = e_i
    for i in range(f):
        for e in range(i + 1):
            one, e0_ie, b_i, b_e = (1.0 if i == e else 0.0), e0[i, e], beta[i], beta[e]
            for lane in range(nl):
                w = weight[group[lane]]
                g_i, g_e, e_i, e_e = t[i, 1, lane], t[e, 1, lane], t[i, 2, lane], t[e, 2, lane]
                c[i, e, lane] = (one + g_i * e0_ie * g_e + w * (1.0 - w * uu) * e_i * e_e
                                 - w * (g_i * b_i * e_e + e_i * b_e * g_e))
    _cholesky(c, low, root, det_root, nl)
    for lane in range(nl):
        total[lane] = quad_p
    _solved_norm(low, r, t, total, nl)
    for lane in range(nl):
        acc[lane] = logdet_p + 2.0 * np.log(det_root[lane])


@numba.njit(**_JIT)
def _solve_by_anchor(by_anchor, ref, chain, k, last, kept, j0, mb, inv, dl, v_cols, y_cols, z_p, tmp
                     ):  # pragma: no cover
    """y_cols = L_P^-1 [G_P M_Pj, G_P d_P] by forward substitution through the anchor's kept factors of P's prefixes
    (`chain`), block row by block row; z_p: the anchor's z_P."""
    f = FEATURES
    for blk in range(k - 1):
        first, ks = last[chain[blk]], kept[chain[blk]]
        for i in range(f):
            a = first + i
            for e in range(f):
                v_cols[f * blk + i, e] = inv[a, 0] * mb[a, j0 + e]
            v_cols[f * blk + i, f] = inv[a, 0] * dl[a, 0]
            z_p[f * blk + i] = by_anchor.z[ref, ks, i]
        for i in range(f):
            for col in range(f + 1):
                s = v_cols[f * blk + i, col]
                for h in range(f * blk):
                    s -= by_anchor.x_rows[ref, ks, h, i] * y_cols[h, col]
                v_cols[f * blk + i, col] = s
        for i in range(f):
            for col in range(f + 1):
                s = 0.0
                for h in range(i + 1):
                    s += by_anchor.n_inv[ref, ks, i, h] * v_cols[f * blk + h, col]
                tmp[col] = s
            for col in range(f + 1):
                y_cols[f * blk + i, col] = tmp[col]
