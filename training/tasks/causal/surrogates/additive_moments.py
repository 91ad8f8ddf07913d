"""The additive scores (`additive_scores`) from per-node moments of the features, batched over data sets: what the
additive surrogate's lookahead scores hundreds of hypothetical data sets with, one row added to each.

Everything `log_bayes_factors_rows` reads of node v's rows is a centred second moment of the raw atoms: a feature's
sd is sqrt(M2_jj / n), Phi~' Phi~ = Lambda^½ D^-1 M2 D^-1 Lambda^½ over the parents' features (D their sds),
Phi~' y_c = Lambda^½ D^-1 M2[:, y] and Q_0 = M2[y, y], y being the node's own first atom (x itself). So the
per-node count, mean and centred scatter of the atoms of every variable (`NodeStats` over d F columns, merged as the
linear score's statistics are, one row in O((d F)^2)) give the same scores as the rows up to rounding, without
revisiting the rows of every data set.
"""

from __future__ import annotations

import numpy as np

from training.tasks.causal.surrogates.additive_scores import DICTIONARY, Basis
from training.tasks.causal.surrogates.linear_scores import CONSTANT_REL_SD, NodeStats
from training.tasks.causal.surrogates.subsets import score_plan


def feature_rows(samples: np.ndarray, basis: Basis = DICTIONARY) -> np.ndarray:
    """(n, d F): each row's atoms, variable-major (variable j's atoms at j F .. j F + F - 1; x itself first)."""
    return basis.atoms(samples).reshape(len(samples), samples.shape[1] * basis.size)


def empty_moments(d: int, basis: Basis = DICTIONARY) -> NodeStats:
    cols = d * basis.size
    return NodeStats(np.zeros(d), np.zeros((d, cols)), np.zeros((d, cols, cols)))


def log_bayes_factors_moments(count: np.ndarray, mean: np.ndarray, m2: np.ndarray, basis: Basis = DICTIONARY
                              ) -> np.ndarray:
    """log BF_v(S) at the scored pairs of `score_plan(d)` (`ScorePlan.nodes`, `.sets`): (B, K), from stacked feature
    moments: `count` (B, d), `mean` (B, d, d F), `m2` (B, d, d F, d F)."""
    b, d = count.shape
    f = basis.size
    plan = score_plan(d)
    diag = np.diagonal(m2, axis1=-2, axis2=-1)  # (B, d, dF)
    sd = np.sqrt(diag / np.maximum(count, 1.0)[..., None])
    sd = np.where(sd <= CONSTANT_REL_SD * np.abs(mean), 0.0, sd)
    inv = np.where(sd > 0, np.tile(np.sqrt(basis.prior_var), d) / np.where(sd > 0, sd, 1.0), 0.0)
    own = np.arange(d) * f  # each node's own x among the columns
    q0 = diag[:, np.arange(d), own]  # (B, d)
    ybar = mean[:, np.arange(d), own]
    informative = (count >= 2) & (q0 > (CONSTANT_REL_SD ** 2) * count * ybar ** 2)
    cross = m2[:, np.arange(d)[:, None], np.arange(d * f)[None, :], own[:, None]] * inv  # (B, d, dF)
    out = np.zeros((b, len(plan.nodes)))
    for grp in plan.size_groups:
        nodes = grp.nodes
        fidx = (grp.idx[:, :, None] * f + np.arange(f)).reshape(len(nodes), -1)  # (m, p)
        scale = inv[:, nodes[:, None], fidx]  # (B, m, p)
        g = m2[:, nodes[:, None, None], fidx[:, :, None], fidx[:, None, :]] * scale[..., :, None] * scale[..., None, :]
        a = g + np.eye(fidx.shape[1])
        chol = np.linalg.cholesky(a)
        logdet = 2.0 * np.log(np.diagonal(chol, axis1=-2, axis2=-1)).sum(axis=-1)
        rhs = cross[:, nodes[:, None], fidx]
        sol = np.linalg.solve(a, rhs[..., None])[..., 0]
        q0_m = q0[:, nodes]
        ratio = np.clip(1.0 - np.einsum("bmp,bmp->bm", rhs, sol) / np.where(q0_m > 0, q0_m, 1.0), 1e-300, 1.0)
        lbf = -0.5 * logdet - 0.5 * (count[:, nodes] - 1.0) * np.log(ratio)
        out[:, grp.cols] = np.where(informative[:, nodes], lbf, 0.0)
    return out


def log_local_scores_moments(count: np.ndarray, mean: np.ndarray, m2: np.ndarray, basis: Basis = DICTIONARY
                             ) -> np.ndarray:
    """log beta_v(S) = log rho(S) + log BF_v(S) at the scored pairs of `score_plan(d)`: (B, K)."""
    return score_plan(count.shape[-1]).sparse_log_prior[None] + log_bayes_factors_moments(count, mean, m2, basis)
