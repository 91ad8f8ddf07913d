"""Per-node sufficient statistics and the Zellner g-prior marginal likelihood of every parent set, vectorised.

Local model for node v with parent set S (k = |S|), fitted ONLY on the rows where v was not intervened on (a hard
intervention cuts v's mechanism, so those rows carry no evidence about Pa(v)):

    y = alpha 1 + X_S beta + e,   e ~ N(0, sigma^2 I),
    p(alpha, sigma^2) ∝ 1 / sigma^2  (flat intercept, Jeffreys),   beta | sigma^2 ~ N(0, g sigma^2 (Xc' Xc)^-1)

with Xc the column-centred regressors (Zellner 1986; Liang et al. 2008, JASA, eq. 5). Its Bayes factor against the
intercept-only model, with n rows, nu = n - 1 and R^2 the coefficient of determination of the least-squares fit, is

    BF(S) = (1 + g)^((nu - r) / 2) * (1 + g (1 - R^2))^(-nu / 2),

r = rank of Xc (= k for regressors in general position, at most nu). The intercept-only factor is the same for every
S of node v, so it cancels from every posterior over graphs and is left out. We use the unit-information choice
g = n (the prior carries one observation's worth of information). Why this prior: BF depends on the data only
through R^2 and r, so it is invariant to rescaling or shifting any variable (a model of X in millimetres or in
kilometres gets the same posterior); it is conjugate (closed form, no tuning of a prior scale), and it handles the
small-n regime exactly: with r = nu (as many free regressors as residual degrees of freedom) R^2 = 1 and BF = 1, no
evidence either way; with n <= 1 rows BF = 1 for every S.

Rank and degenerate columns: R^2 and r are computed from the correlation matrix of the node's rows. A column that is
constant on those rows (|sd / mean| <= 1e-10, e.g. a variable only ever set to one value there) is collinear with the
intercept: it explains nothing and does not add to r. Otherwise r = min(#non-constant regressors, nu) (general
position; exact collinearity between distinct continuous columns has probability zero), and R^2 = c' A^-1 c is
solved with a 1e-10 ridge on the correlation matrix A (so that the r = nu case, where A is singular, gives R^2 ~ 1).

Statistics per node v (over v's rows): count n_v, mean vector (d,), centred scatter M2 (d, d); merged with Chan et
al.'s parallel update, so a batch of rows costs O(batch * d^3) and the scores never revisit old rows.

The log structure score of v is log beta_v(S) = log rho(S) + log BF_v(S), with the parent-set prior
rho(S) = 1 / C(d - 1, |S|) (uniform over the size of S, then uniform among sets of that size).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from training.tasks.causal.surrogates.explained_share import explained_shares
from training.tasks.causal.surrogates.subsets import score_plan

CONSTANT_REL_SD = 1e-10


@dataclass
class NodeStats:
    """For each node v: the number of rows where v was not intervened on, their mean and centred scatter."""

    count: np.ndarray  # (d,)
    mean: np.ndarray  # (d, d): mean[v] = mean of all variables over v's rows
    m2: np.ndarray  # (d, d, d): m2[v] = sum over v's rows of (x - mean[v])(x - mean[v])^T

    @classmethod
    def empty(cls, d: int) -> NodeStats:
        return cls(np.zeros(d), np.zeros((d, d)), np.zeros((d, d, d)))

    def copy(self) -> NodeStats:
        return NodeStats(self.count.copy(), self.mean.copy(), self.m2.copy())


def check_batch(samples: np.ndarray, intervened: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Validated float (n, d) samples and bool (n, d) intervened masks; raises naming the argument."""
    samples = np.asarray(samples, dtype=float)
    intervened = np.asarray(intervened)
    if samples.ndim != 2 or samples.shape[1] != d:
        raise ValueError(f"samples: expected shape (n, {d}), got {samples.shape}")
    if intervened.shape != samples.shape:
        raise ValueError(f"intervened: expected shape {samples.shape} like samples, got {intervened.shape}")
    if intervened.dtype != bool:
        raise ValueError(f"intervened: expected a bool array, got dtype {intervened.dtype}")
    if not np.all(np.isfinite(samples)):
        raise ValueError("samples: contain NaN or inf")
    return samples, intervened


def merge_rows(stats: NodeStats, samples: np.ndarray, intervened: np.ndarray) -> NodeStats:
    """Stats after adding rows: row i counts for node v iff v is not intervened in row i (Chan et al. merge)."""
    keep = (~intervened).T.astype(float)  # (d_nodes, n)
    n_b = keep.sum(axis=1)  # (d,)
    safe = np.where(n_b > 0, n_b, 1.0)
    mean_b = keep @ samples / safe[:, None]  # (d, d)
    centred = samples[None, :, :] - mean_b[:, None, :]  # (d, n, d)
    m2_b = np.einsum("vn,vni,vnj->vij", keep, centred, centred)
    n_a = stats.count
    n = n_a + n_b
    frac = np.where(n > 0, n_b / np.where(n > 0, n, 1.0), 0.0)
    delta = mean_b - stats.mean
    mean = stats.mean + delta * frac[:, None]
    m2 = stats.m2 + m2_b + np.einsum("v,vi,vj->vij", n_a * frac, delta, delta)
    has_b = n_b > 0
    return NodeStats(n, np.where(has_b[:, None], mean, stats.mean), np.where(has_b[:, None, None], m2, stats.m2))


def merge_single_rows(stats: NodeStats, samples: np.ndarray, intervened: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stacked stats (count (n, d), mean (n, d, d), m2 (n, d, d, d)) of n hypothetical data sets, data set i being
    `stats` plus the single row samples[i] (with its mask intervened[i]): the one-row Welford update
    c' = c + 1, mean' = mean + delta / c', M2' = M2 + (c / c') delta delta^T (delta = x - mean) for each node v not
    intervened in that row; equal to `merge_rows(stats, samples[i:i+1], intervened[i:i+1])`, vectorised over i."""
    keep = (~intervened).astype(float)  # (n, d_nodes)
    count = stats.count[None] + keep
    delta = samples[:, None, :] - stats.mean[None]  # (n, v, d)
    step = np.where(count > 0, keep / np.where(count > 0, count, 1.0), 0.0)
    mean = stats.mean[None] + delta * step[..., None]
    weight = np.where(count > 0, keep * stats.count[None] / np.where(count > 0, count, 1.0), 0.0)
    m2 = stats.m2[None] + weight[..., None, None] * delta[..., :, None] * delta[..., None, :]
    return count, mean, m2


def correlations(stats_count: np.ndarray, stats_mean: np.ndarray, stats_m2: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(corr, constant): per node, the correlation matrix of its rows (constant columns zeroed, diagonal 1) and a
    bool (..., d, d) marking columns that are constant on those rows. Leading batch dims allowed."""
    var = np.diagonal(stats_m2, axis1=-2, axis2=-1)  # (..., d_nodes, d)
    n = np.maximum(stats_count, 1.0)[..., None]
    constant = var <= (CONSTANT_REL_SD ** 2) * n * stats_mean ** 2
    sd = np.sqrt(np.where(constant, 1.0, var))
    corr = stats_m2 / (sd[..., :, None] * sd[..., None, :])
    mask = constant[..., :, None] | constant[..., None, :]
    corr = np.where(mask, 0.0, corr)
    d = corr.shape[-1]
    eye = np.eye(d, dtype=bool)
    corr = np.where(eye, 1.0, corr)
    return corr, constant


def log_bayes_factors_sparse(count: np.ndarray, mean: np.ndarray, m2: np.ndarray, max_parents: int | None = None
                             ) -> np.ndarray:
    """log BF_v(S) at the scored pairs (`ScorePlan.nodes`, `ScorePlan.sets`, the empty set's 0 included): (B, K).

    `count` (B, d), `mean` (B, d, d), `m2` (B, d, d, d) are stacked `NodeStats` of B independent data sets."""
    b, d = count.shape
    plan = score_plan(d, max_parents)
    corr, constant = correlations(count, mean, m2)
    n = count  # (B, d)
    nu = n - 1.0
    g = n
    own_constant = np.diagonal(constant, axis1=-2, axis2=-1)  # (B, d): node v constant on its own rows
    informative = (nu > 0) & ~own_constant  # otherwise BF = 1 for every S
    any_constant, all_informative = constant.any(), informative.all()
    out = np.zeros((b, len(plan.nodes)))
    log1g = np.log1p(g)
    for grp, r2 in zip(plan.size_groups, explained_shares(corr, plan.size_groups)):
        nodes, idx, k = grp.nodes, grp.idx, grp.k
        r2 = np.clip(r2, 0.0, 1.0)
        if any_constant:
            free = (~constant[:, nodes[:, None], idx]).sum(axis=-1)  # (B, m) non-constant regressors
        else:
            free = np.full(1, k)
        nu_m = nu[:, nodes]
        rank = np.minimum(free, np.maximum(nu_m, 0.0))
        rank_full = rank >= nu_m
        if rank_full.any():
            r2 = np.where(rank_full, 1.0, r2)  # r = nu: the fit is exact
        lbf = 0.5 * (nu_m - rank) * log1g[:, nodes] - 0.5 * nu_m * np.log1p(g[:, nodes] * (1.0 - r2))
        out[:, grp.cols] = lbf if all_informative else np.where(informative[:, nodes], lbf, 0.0)
    return out


def log_bayes_factors(count: np.ndarray, mean: np.ndarray, m2: np.ndarray, max_parents: int | None = None
                      ) -> np.ndarray:
    """log BF_v(S) for every node v and every mask S not containing v of at most `max_parents` members
    (`subsets.parent_bound`): (B, d, 2^d), -inf where v in S or S is larger (`log_bayes_factors_sparse` spread out)."""
    b, d = count.shape
    plan = score_plan(d, max_parents)
    out = np.full((b, d, 1 << d), -np.inf)
    out[:, plan.nodes, plan.sets] = log_bayes_factors_sparse(count, mean, m2, max_parents)
    return out


def log_local_scores_sparse(count: np.ndarray, mean: np.ndarray, m2: np.ndarray, max_parents: int | None = None
                            ) -> np.ndarray:
    """log beta_v(S) = log rho(S) + log BF_v(S) at the scored pairs (`ScorePlan.nodes`, `ScorePlan.sets`): (B, K)."""
    d = count.shape[-1]
    return score_plan(d, max_parents).sparse_log_prior[None] + log_bayes_factors_sparse(count, mean, m2, max_parents)


def log_local_scores(count: np.ndarray, mean: np.ndarray, m2: np.ndarray, max_parents: int | None = None
                     ) -> np.ndarray:
    """log beta_v(S) = log rho(S) + log BF_v(S), shape (B, d, 2^d) (-inf where v in S or |S| > the bound)."""
    d = count.shape[-1]
    return score_plan(d, max_parents).log_prior[None] + log_bayes_factors(count, mean, m2, max_parents)
