"""The additive scores (`additive_scores`) from per-node moments of the features, batched over data sets: what the
additive surrogate's lookahead scores thousands of hypothetical data sets with, one row added to each.

Everything `log_bayes_factors_rows` reads of node v's rows is a centred second moment of the raw atoms: a feature's
sd is sqrt(M2_jj / n), Phi~' Phi~ = Lambda^½ D^-1 M2 D^-1 Lambda^½ over the parents' features (D their sds),
Phi~' y_c = Lambda^½ D^-1 M2[:, y] and Q_0 = M2[y, y], y being the node's own first atom (x itself). So the
per-node count, mean and centred scatter of the atoms of every variable (`NodeStats` over d F columns, merged as the
linear score's statistics are, one row in O((d F)^2)) give the same scores as the rows up to rounding, without
revisiting the rows of every data set. Each node's sets are scored by `additive_nested.node_scores`.

One row added (`log_local_scores_single_rows`, the lookahead of the options): node v's moments after it are the
one-row Welford update of the current ones (as `linear_scores.merge_single_rows`): count n + 1, mean
mean + delta / (n + 1), scatter M2 + n / (n + 1) delta delta' (delta = the row's atoms - mean), formed inside the
kernel from the current moments and delta; a node intervened on in the row keeps its current scores, scored once.
The rows' anchors (`additive_anchors`) are scored first, and each data set copies from its anchor the sets whose
family it shares with it. The nodes are scored on the lookahead's threads (`lookahead_threads`).
"""

from __future__ import annotations

from functools import partial

import numpy as np

from training.tasks.causal.surrogates.additive_anchors import agreement, anchor_rows
from training.tasks.causal.surrogates.additive_nested import Shared, node_plan, node_scores
from training.tasks.causal.surrogates.additive_scores import DICTIONARY, Basis
from training.tasks.causal.surrogates.linear_scores import NodeStats
from training.tasks.causal.surrogates.lookahead_threads import run_all
from training.tasks.causal.surrogates.subsets import parent_bound, score_plan


def feature_rows(samples: np.ndarray, basis: Basis = DICTIONARY) -> np.ndarray:
    """(n, d F): each row's atoms, variable-major (variable j's atoms at j F .. j F + F - 1; x itself first)."""
    return basis.atoms(samples).reshape(len(samples), samples.shape[1] * basis.size)


def empty_moments(d: int, basis: Basis = DICTIONARY) -> NodeStats:
    cols = d * basis.size
    return NodeStats(np.zeros(d), np.zeros((d, cols)), np.zeros((d, cols, cols)))


def _node_slices(d: int, max_parents: int) -> list[slice]:
    starts = np.searchsorted(score_plan(d, max_parents).nodes, np.arange(d + 1))
    return [slice(int(starts[v]), int(starts[v + 1])) for v in range(d)]


def log_bayes_factors_moments(count: np.ndarray, mean: np.ndarray, m2: np.ndarray, max_parents: int | None = None,
                              basis: Basis = DICTIONARY) -> np.ndarray:
    """log BF_v(S) at the scored pairs of `score_plan(d, max_parents)` (`ScorePlan.nodes`, `.sets`): (B, K), from
    stacked feature moments: `count` (B, d), `mean` (B, d, d F), `m2` (B, d, d F, d F)."""
    b, d = count.shape
    bound = parent_bound(d, max_parents)
    prior = np.tile(basis.prior_var, d)
    out = np.zeros((b, len(score_plan(d, bound).nodes)))
    none = np.zeros((b, d * basis.size))
    for v, cols in enumerate(_node_slices(d, bound)):
        out[:, cols] = node_scores(node_plan(d, bound, v, basis.size), v * basis.size, prior, m2[:, v],
                                   np.arange(b), count[:, v], mean[:, v], none, np.zeros(b))
    return out


def log_local_scores_moments(count: np.ndarray, mean: np.ndarray, m2: np.ndarray, max_parents: int | None = None,
                             basis: Basis = DICTIONARY) -> np.ndarray:
    """log beta_v(S) = log rho(S) + log BF_v(S) at the scored pairs of `score_plan(d, max_parents)`: (B, K)."""
    d = count.shape[-1]
    prior = score_plan(d, parent_bound(d, max_parents)).sparse_log_prior
    return prior[None] + log_bayes_factors_moments(count, mean, m2, max_parents, basis)


def log_local_scores_single_rows(stats: NodeStats, rows: np.ndarray, intervened: np.ndarray,
                                 max_parents: int | None = None, basis: Basis = DICTIONARY) -> np.ndarray:
    """log beta of the scored pairs (B, K) of B data sets, data set i being the moments `stats` plus the single row
    `rows[i]` ((B, d F) atoms, `feature_rows`) with its mask `intervened[i]` (module docstring)."""
    b, d = intervened.shape
    bound = parent_bound(d, max_parents)
    plan = score_plan(d, bound)
    prior = np.tile(basis.prior_var, d)
    out = np.empty((b, len(plan.nodes)))
    anchors, anchor_of = anchor_rows(rows.reshape(b, d, basis.size)[:, :, 0], intervened)  # x itself: atom 0
    anchor_features = basis.atoms(anchors).reshape(len(anchors), d * basis.size)
    agree = agreement(rows, anchor_features, anchor_of, d)
    first = np.arange(len(anchors))

    def score_node(v: int, cols: slice) -> None:
        node, own = node_plan(d, bound, v, basis.size), v * basis.size
        c, mu, m2 = stats.count[v], stats.mean[v], stats.m2[v][None]
        kept = np.flatnonzero(~intervened[:, v])
        if len(kept) < b:  # the node's rows are unchanged: its current scores
            out[np.flatnonzero(intervened[:, v]), cols] = node_scores(
                node, own, prior, m2, np.zeros(1), c[None], mu[None], np.zeros((1, len(mu))), np.zeros(1))
        count = c + 1.0
        delta = np.concatenate([anchor_features, rows[kept]]) - mu
        n = len(delta)
        shared = Shared(first, np.concatenate([first, anchor_of[kept]]),
                        np.concatenate([np.zeros(len(first), dtype=np.int64), agree[kept]]))
        out[kept, cols] = node_scores(node, own, prior, m2, np.zeros(n), np.full(n, count), mu + delta / count, delta,
                                      np.full(n, c / count), shared)[len(anchors):]

    run_all([partial(score_node, v, cols) for v, cols in enumerate(_node_slices(d, bound))], b)
    return out + plan.sparse_log_prior[None]
