"""Closed-form marginal likelihood of every parent set under ADDITIVE NONLINEAR mechanisms, from raw rows.

Local model for node v with parent set S, on the rows where v was NOT intervened on (n rows, as for the linear
score, `training.tasks.causal.surrogates.linear_scores`):

    y = alpha 1 + sum_{j in S} Phi_j w_j + e,     e ~ N(0, sigma^2 I),
    p(alpha, sigma^2) ∝ 1 / sigma^2,    w_j | sigma^2 ~ N(0, sigma^2 diag(PRIOR_VAR))   (independent per parent),

where Phi_j (n, F) is a fixed dictionary of parent j's raw value x (`ATOMS`: x, sin x, cos x, tanh x,
x^2 / (1 + |x|), the primitives the bundled nonlinear families and most hand-written mechanisms are made of), each
column standardised over v's rows (mean 0, sd 1), so the prior variance of a weight is in units of sigma^2 per sd of
its feature. So each parent's effect is a weighted sum of these shapes; the sum over parents is additive (no
interactions). The slope's prior variance is 1 (the linear score's unit-information g = n), each nonlinear atom's
0.25, so that the four atoms together cost about what one linear term does.

Marginalising w (Gaussian), alpha (flat; the centred columns are orthogonal to 1) and sigma^2 (Jeffreys) gives, with
y_c the centred y, Phi = [Phi_j]_{j in S} (n, p), Lambda = diag(PRIOR_VAR per feature), A = Lambda^-1 + Phi' Phi,

    log BF_v(S) = -1/2 log det(I_p + Lambda^(1/2) Phi' Phi Lambda^(1/2)) - (n - 1) / 2 log(Q_S / Q_0),
    Q_S = y_c' y_c - b' A^-1 b,   b = Phi' y_c,   Q_0 = y_c' y_c,

against the intercept-only model (a Gaussian-process marginal likelihood with the finite additive kernel
Phi Lambda Phi', noise variance integrated out). The prior on w is proper, so the score exists for any n >= 2
however many features S has (n <= p included: the evidence is then weak, not undefined); with n <= 1 rows, or y
constant on them, BF = 1 for every S. A parent constant on v's rows (say, only ever set to one value there) has
all-zero centred features: it explains nothing and adds nothing to the determinant.

Invariances: BF depends on y only through Q_S / Q_0, so an affine change of units of the CHILD (y -> a y + b,
a != 0) leaves every score unchanged, and the linear column is standardised, so a parent's shift or rescaling
changes only the nonlinear atoms' fit. But the atoms read the parent in its own units (sin x of metres is not
sin x of millimetres): unlike the linear g-prior's, these scores are NOT invariant to a change of a parent's units;
it models mechanisms written in the units the SCM is given in. The linear g-prior score (`training.tasks.causal.surrogates.linear_scores`)
is the one to use where units are arbitrary.

The log structure score is log beta_v(S) = log rho(S) + log BF_v(S) with the same parent-set prior as the linear score.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from training.tasks.causal.surrogates.linear_scores import CONSTANT_REL_SD
from training.tasks.causal.surrogates.subsets import parent_bound, score_plan

ATOMS = ("x", "sin(x)", "cos(x)", "tanh(x)", "x^2/(1+|x|)")  # per parent, in the mechanism language's units
FEATURES = len(ATOMS)
LINEAR_PRIOR_VAR = 1.0  # the slope's prior variance per sd of the parent, in sigma^2 units: the g-prior's g = n
ATOM_PRIOR_VAR = 0.25  # each nonlinear atom's, smaller: 4 atoms together weigh about one linear term
PRIOR_VAR = np.array([LINEAR_PRIOR_VAR] + [ATOM_PRIOR_VAR] * (FEATURES - 1))


def atoms(x: np.ndarray) -> np.ndarray:
    """(..., F) dictionary of raw values x (...,), in `ATOMS` order."""
    x = np.asarray(x, dtype=float)
    return np.stack([x, np.sin(x), np.cos(x), np.tanh(x), x * x / (1.0 + np.abs(x))], axis=-1)


@dataclass(frozen=True)
class Basis:
    """Per-parent features (`atoms`: (...,) -> (..., F)) and their prior variances (F,)."""

    atoms: Callable[[np.ndarray], np.ndarray]
    prior_var: np.ndarray

    @property
    def size(self) -> int:
        return len(self.prior_var)


DICTIONARY = Basis(atoms, PRIOR_VAR)  # the surrogate's; others only for measurements (benchmarks/cbo_parents.py)


@dataclass(frozen=True)
class NodeDesign:
    """Node v's rows: y (n,), and every variable's standardised atoms there, phi (n, d, F), with the columns' means
    and sds (d, F) (sd 0 where a column is constant on the rows: its feature is 0). A new value x of parent j has
    features `(atoms(x) - mean[j]) / sd[j]` (`features`)."""

    y: np.ndarray
    phi: np.ndarray
    mean: np.ndarray
    sd: np.ndarray
    basis: Basis = DICTIONARY

    def features(self, j: int, x: np.ndarray) -> np.ndarray:
        return self.standardised(j, self.basis.atoms(x))

    def standardised(self, j: int, raw: np.ndarray) -> np.ndarray:
        """Parent j's features from its atoms `raw` (..., F)."""
        safe = np.where(self.sd[j] > 0, self.sd[j], 1.0)
        return np.where(self.sd[j] > 0, (raw - self.mean[j]) / safe, 0.0)


def node_design(samples: np.ndarray, intervened: np.ndarray, v: int, basis: Basis = DICTIONARY) -> NodeDesign:
    rows = samples[~intervened[:, v]]
    d, f = samples.shape[1], basis.size
    if len(rows) == 0:
        zeros = np.zeros((d, f))
        return NodeDesign(np.zeros(0), np.zeros((0, d, f)), zeros, zeros, basis)
    raw = basis.atoms(rows)  # (n, d, F)
    mean, sd = raw.mean(axis=0), raw.std(axis=0)
    sd = np.where(sd <= CONSTANT_REL_SD * np.abs(mean), 0.0, sd)
    phi = np.where(sd > 0, (raw - mean) / np.where(sd > 0, sd, 1.0), 0.0)
    return NodeDesign(rows[:, v], phi, mean, sd, basis)


def log_bayes_factors_rows(samples: np.ndarray, intervened: np.ndarray, basis: Basis = DICTIONARY,
                           max_parents: int | None = None) -> np.ndarray:
    """log BF_v(S) for every node v and mask S of one data set: (d, 2^d), -inf where v in S or S has more than
    `max_parents` members (`subsets.parent_bound`)."""
    d, features = samples.shape[1], basis.size
    plan = score_plan(d, parent_bound(d, max_parents))
    out = np.full((d, 1 << d), -np.inf)
    out[np.arange(d), 0] = 0.0
    designs = [node_design(samples, intervened, v, basis) for v in range(d)]
    n = np.array([len(de.y) for de in designs], dtype=float)
    yc = [de.y - de.y.mean() if len(de.y) else de.y for de in designs]
    q0 = np.array([float(y @ y) for y in yc])
    informative = (n >= 2) & (q0 > (CONSTANT_REL_SD ** 2) * n * np.array(
        [de.y.mean() ** 2 if len(de.y) else 0.0 for de in designs]))
    scale = np.sqrt(np.tile(basis.prior_var, d))  # Lambda^(1/2) per flattened feature
    gram = np.zeros((d, d * features, d * features))
    cross = np.zeros((d, d * features))
    for v, de in enumerate(designs):
        if len(de.y):
            phi = de.phi.reshape(len(de.y), d * features) * scale
            gram[v], cross[v] = phi.T @ phi, phi.T @ yc[v]
    for grp in plan.size_groups:
        fidx = (grp.idx[:, :, None] * features + np.arange(features)).reshape(len(grp.nodes), -1)  # (m, p)
        g = gram[grp.nodes[:, None, None], fidx[:, :, None], fidx[:, None, :]]  # scaled: Lambda^½ Phi'Phi Lambda^½
        b = cross[grp.nodes[:, None], fidx]
        a = g + np.eye(fidx.shape[1])
        chol = np.linalg.cholesky(a)
        logdet = 2.0 * np.log(np.diagonal(chol, axis1=-2, axis2=-1)).sum(axis=-1)
        sol = np.linalg.solve(a, b[..., None])[..., 0]
        q0_m = q0[grp.nodes]
        ratio = np.clip(1.0 - np.einsum("mp,mp->m", b, sol) / np.where(q0_m > 0, q0_m, 1.0), 1e-300, 1.0)
        lbf = -0.5 * logdet - 0.5 * (n[grp.nodes] - 1.0) * np.log(ratio)
        out[grp.nodes, grp.masks] = np.where(informative[grp.nodes], lbf, 0.0)
    return out


def log_local_scores_rows(samples: np.ndarray, intervened: np.ndarray, basis: Basis = DICTIONARY,
                          max_parents: int | None = None) -> np.ndarray:
    """log beta_v(S) = log rho(S) + log BF_v(S), shape (d, 2^d) (-inf where v in S or S is larger than the bound)."""
    d = samples.shape[1]
    return (score_plan(d, parent_bound(d, max_parents)).log_prior
            + log_bayes_factors_rows(samples, intervened, basis, max_parents))
