"""Exact posterior over the target's parent set, marginalising over whole DAGs (not over the target alone).

Structure prior (order-modular, Koivisto & Sood 2004, JMLR 5): a node order ≺ is uniform over the d! orders, and
given ≺ a DAG G compatible with ≺ gets weight prod_v rho_v(Pa_v) with rho_v(S) = 1 / C(d - 1, |S|)
(`training.tasks.causal.surrogates.subsets`). Hence

    P(G) ∝ #linext(G) * prod_v rho_v(Pa_v(G)),

where #linext(G) is the number of orders G is compatible with. This is NOT uniform over DAGs (a DAG with many
linear extensions, e.g. the empty one, weighs more). With the local scores beta_v(S) = rho_v(S) * BF_v(S)
(`training.tasks.causal.surrogates.linear_scores`) the joint posterior is p(≺, G | D) ∝ prod_v beta_v(Pa_v) 1[G ⊆ ≺].

Dynamic programme (every step vectorised over a batch of B data sets and over the masks of one subset size; in
linear space after a per-node shift, `linear_dp`, with the log-space statement kept as the reference):

    alpha_v(W) = sum_{S ⊆ W} beta_v(S)                          (zeta transform, W ∌ v)
    L(U)       = sum_{v ∈ U} alpha_v(U \\ {v}) L(U \\ {v}),  L(∅) = 1        (orders of U, summed)
    R(P)       = sum_{v ∉ P} alpha_v(P) R(P ∪ {v}),        R(V) = 1        (completions after P)
    P(Pa_t = S, D) ∝ beta_t(S) * sum_{U : S ⊆ U ⊆ V \\ {t}} L(U) R(U ∪ {t})   (superset sum over U)

and Z = L(V) = R(∅) normalises it. Cost O(d 2^d) per data set. `enumerate_parent_posterior` computes the same
quantity by brute force over every DAG (d <= 5: 29281 DAGs on 5 nodes) with the same prior, for tests.
"""

from __future__ import annotations

from functools import lru_cache
from itertools import permutations, product

import numpy as np

from training.tasks.causal.surrogates.linear_dp import parent_log_posterior_linear
from training.tasks.causal.surrogates.subsets import subset_plan


def logsumexp(x: np.ndarray, axis: int) -> np.ndarray:
    """log(sum(exp(x))) along `axis`, -inf for all--inf slices (no warnings, no NaN)."""
    m = np.max(x, axis=axis, keepdims=True)
    m_safe = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        s = np.log(np.sum(np.exp(x - m_safe), axis=axis, keepdims=True)) + m_safe
    return np.squeeze(s, axis=axis)


def zeta_transform(log_beta: np.ndarray) -> np.ndarray:
    """alpha[..., v, W] = log sum_{S ⊆ W} exp(log_beta[..., v, S])."""
    d = log_beta.shape[-2]
    plan = subset_plan(d)
    alpha = log_beta.copy()
    for b in range(d):
        hi = plan.with_bit[b]
        alpha[..., hi] = np.logaddexp(alpha[..., hi], alpha[..., hi ^ (1 << b)])
    return alpha


def order_sums(alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(L, R): log L(U) and log R(P) for every mask, shape (B, 2^d), from alpha (B, d, 2^d)."""
    bsz, d, n_masks = alpha.shape
    plan = subset_plan(d)
    log_l = np.full((bsz, n_masks), -np.inf)
    log_r = np.full((bsz, n_masks), -np.inf)
    log_l[:, 0] = 0.0
    log_r[:, n_masks - 1] = 0.0
    for layer in plan.layers[1:]:
        terms = alpha[:, layer.l_v, layer.l_rest] + log_l[:, layer.l_rest]  # (B, m, k)
        log_l[:, layer.masks] = logsumexp(terms, axis=-1)
    for layer in reversed(plan.layers[:-1]):
        terms = alpha[:, layer.r_v, layer.masks[:, None]] + log_r[:, layer.r_next]  # (B, m, d - k)
        log_r[:, layer.masks] = logsumexp(terms, axis=-1)
    return log_l, log_r


def parent_log_posterior(log_beta: np.ndarray, target: int) -> tuple[np.ndarray, np.ndarray]:
    """(log P(Pa_target = S | D) for every mask S (-inf where target ∈ S), log Z), for a batch (B, d, 2^d): the DP
    in linear space (`linear_dp`) on the sets finite in some data set (`sparse_parent_log_posterior`)."""
    d = log_beta.shape[1]
    live = np.isfinite(log_beta).any(axis=0) & ((np.arange(1 << d)[None, :] >> np.arange(d)[:, None] & 1) == 0)
    nodes, sets = np.nonzero(live)
    return sparse_parent_log_posterior(log_beta[:, nodes, sets], nodes, sets, d, target)


def sparse_parent_log_posterior(values: np.ndarray, nodes: np.ndarray, sets: np.ndarray, d: int, target: int
                                ) -> tuple[np.ndarray, np.ndarray]:
    """`parent_log_posterior` of the scores `values` (B, K) at the pairs (nodes, sets) (grouped by node, each set
    without its node; -inf elsewhere): linear space, and the data sets where that would underflow by the log-space
    reference (`linear_dp`)."""
    log_post, log_z, underflow = parent_log_posterior_linear(values, nodes, sets, d, target)
    if underflow.any():
        redo = np.flatnonzero(underflow)
        log_beta = np.full((len(redo), d, 1 << d), -np.inf)
        log_beta[:, nodes, sets] = values[redo]
        log_post[redo], log_z[redo] = reference_parent_log_posterior(log_beta, target)
    return log_post, log_z


def reference_parent_log_posterior(log_beta: np.ndarray, target: int) -> tuple[np.ndarray, np.ndarray]:
    """`parent_log_posterior` term by term in log space: the plain statement of the DP, what the linear-space one
    is tested against and falls back to where it would underflow."""
    d = log_beta.shape[-2]
    plan = subset_plan(d)
    alpha = zeta_transform(log_beta)
    log_l, log_r = order_sums(alpha)
    bit = 1 << target
    h = np.full_like(log_l, -np.inf)
    free = plan.without_bit[target]
    h[:, free] = log_l[:, free] + log_r[:, free | bit]
    for b in range(d):
        if b == target:
            continue
        lo = plan.without_bit[b]
        h[:, lo] = np.logaddexp(h[:, lo], h[:, lo | (1 << b)])
    log_joint = log_beta[:, target, :] + h
    log_z = logsumexp(log_joint, axis=-1)
    return log_joint - log_z[:, None], log_z


@lru_cache(maxsize=None)
def all_dags(d: int) -> tuple[np.ndarray, np.ndarray]:
    """(parent masks (G, d), #linext (G,)) of every DAG on d <= 5 nodes: the union over the d! orders of the
    graphs compatible with each order, counted with multiplicity (a DAG appears once per linear extension)."""
    if d > 5:
        raise ValueError(f"enumeration is for d <= 5 nodes (there are 1,138,779,265 DAGs on 7), got {d}")
    codes = []
    for order in permutations(range(d)):
        pred = {v: 0 for v in range(d)}
        for pos, v in enumerate(order):
            pred[v] = sum(1 << u for u in order[:pos])
        choices = [[s for s in range(1 << d) if s & ~pred[v] == 0] for v in range(d)]
        for combo in product(*choices):
            codes.append(sum(m << (d * v) for v, m in enumerate(combo)))
    uniq, counts = np.unique(np.array(codes, dtype=np.int64), return_counts=True)
    masks = np.stack([(uniq >> (d * v)) & ((1 << d) - 1) for v in range(d)], axis=1)
    return masks, counts


def enumerate_parent_posterior(log_beta: np.ndarray, target: int) -> np.ndarray:
    """P(Pa_target = S | D) for every mask S by brute force over all DAGs (one data set, (d, 2^d) scores)."""
    d = log_beta.shape[0]
    masks, counts = all_dags(d)
    log_w = np.log(counts) + sum(log_beta[v, masks[:, v]] for v in range(d))
    w = np.exp(log_w - log_w.max())
    p = np.bincount(masks[:, target], weights=w, minlength=1 << d)
    return p / p.sum()


def categorical(logits: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One index per row of `logits` (n, k), drawn with probability ∝ exp(logits) (-inf: never), by inverse CDF on
    one uniform per row."""
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    cdf = np.cumsum(p, axis=1)
    u = rng.random(len(p)) * cdf[:, -1]
    return np.minimum((cdf <= u[:, None]).sum(axis=1), p.shape[1] - 1)


def _parents(log_beta: np.ndarray, v: np.ndarray, w: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Per draw i, a parent set S ⊆ w[i] of node v[i] drawn with probability ∝ beta_v(S): `categorical` over the
    sets finite for some drawn node only. The same draw as over all 2^d sets: a -inf set adds exactly 0 to the
    cumulative sum, so the first set past the uniform is the same set."""
    live = np.flatnonzero(np.isfinite(log_beta[np.unique(v)]).any(axis=0))
    subsets = (live[None, :] & ~w[:, None]) == 0  # (n, sets): S ⊆ U \\ {v}
    return live[categorical(np.where(subsets, log_beta[v][:, live], -np.inf), rng)]


def sample_dags(log_beta: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """n DAGs (n, d) parent masks from the posterior p(G | D) ∝ sum_≺ prod_v beta_v(Pa_v) 1[G ⊆ ≺] (one data
    set).

    Backward sampling of (≺, G), all n draws at once: among the nodes U not yet placed, the last one is v with
    probability ∝ alpha_v(U \\ {v}) L(U \\ {v}); its parents are S ⊆ U \\ {v} with probability ∝ beta_v(S); then
    U <- U \\ {v}. d steps, each vectorised over the draws (`categorical`)."""
    d = log_beta.shape[0]
    alpha = zeta_transform(log_beta[None])[0]
    log_l = order_sums(alpha[None])[0][0]
    bits = 1 << np.arange(d)
    rows = np.arange(n)
    out = np.zeros((n, d), dtype=np.int64)
    u = np.full(n, (1 << d) - 1)
    for _ in range(d):
        rest = u[:, None] & ~bits[None, :]  # (n, d): U without each v
        placed_last = np.where((u[:, None] & bits[None, :]) != 0, alpha[np.arange(d)[None, :], rest] + log_l[rest],
                               -np.inf)
        v = categorical(placed_last, rng)
        w = rest[rows, v]
        out[rows, v] = _parents(log_beta, v, w, rng)
        u = w
    return out
