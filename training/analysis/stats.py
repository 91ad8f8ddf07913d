"""Statistics for paired comparisons of models evaluated on the same episodes (pure functions over arrays).

Built on `scipy.stats` and `statsmodels`; the choices between tests are made here and reported with their reason:

* two models: a sign-flip permutation test of the mean difference mean(d), d_i = a_i - b_i (under "no
  difference" each d_i is as likely to have either sign), beside the paired t interval of the same mean. Both are
  about the mean, the quantity every verdict states, so an interval that excludes 0 and a verdict of "no
  difference" cannot come from two tests of different things (the Wilcoxon signed-rank test, used before, tests
  the pseudo-median: on skewed rewards it can call a model worse whose mean is higher);
* effect size: Cohen's d for paired samples, d_z = mean(d) / sd(d), with a CI from the noncentral t distribution
  (t = d_z sqrt(n) follows a noncentral t with n-1 df and noncentrality delta sqrt(n));
* several models: one-way repeated-measures ANOVA (statsmodels `AnovaRM`; episodes are the subjects), or the
  Friedman test when the ANOVA's residuals are far from normal;
* multiple comparisons: Holm's step-down correction (statsmodels `multipletests(method="holm")`);
* the unit of replication: episodes of one unit (samples of one prompt, episodes of one SCM) share that unit and are
  not independent, so they are averaged within the unit first (`unit_means`) and the tests run over units.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
from scipy import optimize, stats
from statsmodels.stats.anova import AnovaRM
from statsmodels.stats.multitest import multipletests

NORMALITY_ALPHA = 0.05


def unit_means(values, units) -> tuple[list, np.ndarray]:
    """`values` (n episodes, or n episodes x k models) averaged within each unit: (the units in first-seen order,
    their means, one row per unit)."""
    values = np.asarray(values, float)
    order = list(dict.fromkeys(units))
    index = {u: i for i, u in enumerate(order)}
    rows = np.array([index[u] for u in units])
    if len(rows) != len(values):
        raise ValueError(f"{len(values)} values but {len(rows)} unit labels")
    sums = np.zeros((len(order), *values.shape[1:]))
    np.add.at(sums, rows, values)
    counts = np.bincount(rows, minlength=len(order)).reshape(-1, *([1] * (values.ndim - 1)))
    return order, sums / counts


@dataclass(frozen=True)
class TTest:
    """Paired t-test: t = mean(d) / (sd(d) / sqrt(n)), df = n - 1, two-sided p, and the t-based CI of mean(d)."""

    t: float
    df: int
    p: float
    mean_diff: float
    ci95: tuple[float, float]


def paired_t(a, b, level: float = 0.95) -> TTest:
    d = np.asarray(a, float) - np.asarray(b, float)
    n = len(d)
    result = stats.ttest_rel(a, b)
    sem = np.std(d, ddof=1) / math.sqrt(n)
    half = stats.t.ppf(0.5 + level / 2, n - 1) * sem
    mean = float(np.mean(d))
    return TTest(float(result.statistic), n - 1, float(result.pvalue), mean, (float(mean - half), float(mean + half)))


@dataclass(frozen=True)
class WilcoxonTest:
    """Wilcoxon signed-rank test of the paired differences (zero differences dropped, Wilcoxon's convention; the
    normal approximation with continuity correction when there are ties or zeros, as R's `wilcox.test`)."""

    statistic: float
    p: float
    n_nonzero: int


def wilcoxon_signed_rank(a, b) -> WilcoxonTest:
    d = np.asarray(a, float) - np.asarray(b, float)
    nonzero = d[d != 0]
    if len(nonzero) == 0:
        return WilcoxonTest(0.0, 1.0, 0)
    ties = len(np.unique(np.abs(nonzero))) < len(nonzero) or len(nonzero) < len(d)
    method = "approx" if ties else "auto"
    result = stats.wilcoxon(nonzero, zero_method="wilcox", correction=ties, method=method)
    return WilcoxonTest(float(result.statistic), float(result.pvalue), len(nonzero))


PERMUTATIONS = 20_000  # random sign flips when 2^n is more; the smallest two-sided p it gives is 2 / 20001
PERMUTATION_SEED = 0   # fixed: a report rebuilt from the same episodes gives the same p-values


@dataclass(frozen=True)
class PermutationTest:
    """Two-sided sign-flip permutation test of mean(d): exact (all 2^n sign vectors) when 2^n <= `PERMUTATIONS`,
    else `PERMUTATIONS` random ones (p counts the observed vector, so it is never 0); `reason` says which."""

    p: float
    reason: str


def permutation_mean_test(a, b) -> PermutationTest:
    d = np.asarray(a, float) - np.asarray(b, float)
    if not np.any(d):
        return PermutationTest(1.0, "every difference is 0")
    result = stats.permutation_test(
        (d,), np.mean, permutation_type="samples", vectorized=True, n_resamples=PERMUTATIONS, batch=2_000,
        alternative="two-sided", rng=np.random.default_rng(PERMUTATION_SEED))
    flips = f"all {2 ** len(d)}" if 2 ** len(d) <= PERMUTATIONS else f"{PERMUTATIONS} random"
    return PermutationTest(float(result.pvalue), f"sign-flip test of the mean difference, {flips} sign flips")


def shapiro_p(values) -> float | None:
    """Shapiro-Wilk p-value of `values`; None when it is undefined (fewer than 3 values, or all equal)."""
    values = np.asarray(values, float)
    if len(values) < 3 or np.ptp(values) == 0:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy warns that p may be inaccurate for n > 5000
        return float(stats.shapiro(values).pvalue)


@dataclass(frozen=True)
class EffectSize:
    """Cohen's d_z = mean(d) / sd(d) and its CI (noncentral t inversion); None where sd(d) = 0."""

    d_z: float | None
    ci95: tuple[float, float] | None


def cohens_dz(a, b, level: float = 0.95) -> EffectSize:
    """d_z with the exact CI: find the noncentralities nc_lo, nc_hi with P(T <= t_obs | nc_lo) = (1 + level) / 2
    and P(T <= t_obs | nc_hi) = (1 - level) / 2 for T ~ nct(n - 1, nc), then divide by sqrt(n)."""
    d = np.asarray(a, float) - np.asarray(b, float)
    n = len(d)
    sd = np.std(d, ddof=1) if n > 1 else 0.0
    if n < 2 or sd <= 1e-12 * max(1.0, float(np.max(np.abs(d)))):  # no variance, up to rounding
        return EffectSize(None, None)
    dz = float(np.mean(d) / sd)
    t_obs, df = dz * math.sqrt(n), n - 1

    def cdf(nc: float) -> float:
        # scipy returns NaN, not 0 or 1, where t_obs lies far in a tail of nct(df, nc): the tail's own limit
        value = stats.nct.cdf(t_obs, df, nc)
        return value if np.isfinite(value) else (0.0 if nc > t_obs else 1.0)

    def solve(target: float) -> float:
        f = lambda nc: cdf(nc) - target  # noqa: E731 - decreasing in nc
        lo, hi = t_obs - 10, t_obs + 10
        while f(lo) < 0:
            lo -= 10
        while f(hi) > 0:
            hi += 10
        return optimize.brentq(f, lo, hi, xtol=1e-10)

    try:
        lo, hi = solve(0.5 + level / 2), solve(0.5 - level / 2)
    except ValueError:  # t so large that the noncentral t's cdf underflows: the interval cannot be computed
        return EffectSize(dz, None)
    return EffectSize(dz, (float(lo / math.sqrt(n)), float(hi / math.sqrt(n))))


@dataclass(frozen=True)
class PairedComparison:
    """Two models on the same n units: the permutation test's p, the paired t-test of the same mean (its interval is
    `mean_diff_ci95`), the effect size."""

    n: int
    mean_diff: float
    mean_diff_ci95: tuple[float, float] | None
    test: str
    reason: str
    p: float
    t_test: dict | None
    d_z: float | None
    d_z_ci95: tuple[float, float] | None

    def as_json(self) -> dict:
        return asdict(self)


def compare_paired(a, b) -> PairedComparison:
    """The sign-flip permutation test of mean(a - b) gives `p`; the paired t-test of the same mean gives the interval
    (None when the differences have no variance)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired samples need equal 1-d shapes, got {a.shape} and {b.shape}")
    if len(a) < 3:
        raise ValueError(f"a paired comparison needs at least 3 common episodes, got {len(a)}")
    perm = permutation_mean_test(a, b)
    effect = cohens_dz(a, b)
    t_test = None if effect.d_z is None else asdict(paired_t(a, b))
    return PairedComparison(
        n=len(a),
        mean_diff=float(np.mean(a - b)),
        mean_diff_ci95=t_test["ci95"] if t_test else None,
        test="permutation",
        reason=perm.reason,
        p=perm.p,
        t_test=t_test,
        d_z=effect.d_z,
        d_z_ci95=effect.ci95,
    )


def holm(pvalues: list[float], alpha: float = 0.05) -> tuple[list[bool], list[float]]:
    """Holm step-down: sort p ascending, adjusted p_(i) = max_{j <= i} min(1, (m - j + 1) p_(j)); reject where the
    adjusted p < alpha. Returns (reject, adjusted p) in the input order."""
    if not pvalues:
        return [], []
    reject, adjusted, _, _ = multipletests(pvalues, alpha=alpha, method="holm")
    return [bool(r) for r in reject], [float(p) for p in adjusted]


@dataclass(frozen=True)
class Omnibus:
    """Are all k models equal? One-way repeated-measures ANOVA (F, its dfs, p) and Friedman (chi2, p) on the same
    n x k score matrix; `test` names the primary one and `reason` why."""

    k: int
    n: int
    anova_f: float | None
    anova_df: tuple[float, float]
    anova_p: float | None
    friedman_chi2: float | None
    friedman_p: float | None
    residual_shapiro_p: float | None
    test: str
    reason: str
    p: float | None

    def as_json(self) -> dict:
        return asdict(self)


def rm_anova(scores: np.ndarray) -> tuple[float, float, float, float]:
    """(F, df_num, df_den, p) of the one-way repeated-measures ANOVA of an n (subjects) x k (conditions) matrix,
    by statsmodels `AnovaRM` (sphericity assumed)."""
    n, k = scores.shape
    frame = pd.DataFrame({
        "subject": np.repeat(np.arange(n), k),
        "model": np.tile(np.arange(k), n),
        "score": scores.reshape(-1),
    })
    table = AnovaRM(frame, depvar="score", subject="subject", within=["model"]).fit().anova_table
    row = table.loc["model"]
    return float(row["F Value"]), float(row["Num DF"]), float(row["Den DF"]), float(row["Pr > F"])


def omnibus(scores: np.ndarray, normality_alpha: float = NORMALITY_ALPHA) -> Omnibus:
    """RM-ANOVA when its residuals e_ij = x_ij - row mean_i - column mean_j + grand mean look normal (Shapiro-Wilk
    p >= `normality_alpha`), else Friedman (`scipy.stats.friedmanchisquare`); both are reported."""
    scores = np.asarray(scores, float)
    n, k = scores.shape
    if k < 2 or n < 3:
        raise ValueError(f"the omnibus test needs >= 2 models and >= 3 episodes, got {k} models, {n} episodes")
    residuals = scores - scores.mean(axis=1, keepdims=True) - scores.mean(axis=0, keepdims=True) + scores.mean()
    if np.allclose(residuals, 0) and np.ptp(scores.mean(axis=0)) == 0:
        return Omnibus(k, n, None, (k - 1, (k - 1) * (n - 1)), None, None, None, None, "none",
                       "every model has the same score on every episode", 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # F is infinite when residuals vanish; reported as such
        f, df1, df2, p_anova = rm_anova(scores)
    if k >= 3:
        chi2, p_friedman = (float(x) for x in stats.friedmanchisquare(*scores.T))
    else:  # Friedman needs 3 groups; for 2 it is the sign test's normal approximation: use the Wilcoxon instead
        chi2, p_friedman = None, wilcoxon_signed_rank(scores[:, 0], scores[:, 1]).p
    sp = shapiro_p(residuals.reshape(-1))
    if sp is not None and sp >= normality_alpha and math.isfinite(f):
        test, reason, p = "rm_anova", f"residuals compatible with normal (Shapiro-Wilk p = {sp:.3g})", p_anova
    else:
        why = "residuals have no variance" if sp is None else f"residuals far from normal (Shapiro-Wilk p = {sp:.3g})"
        test, reason, p = ("friedman" if k >= 3 else "wilcoxon"), why, p_friedman
    return Omnibus(k, n, f, (df1, df2), p_anova, chi2, p_friedman, sp, test, reason, p)


def welch_t(a, b) -> tuple[float, float] | None:
    """(t, p) of Welch's unequal-variance t-test of two independent samples (e.g. per-seed means); None when either
    has fewer than 2 values, or when the test is undefined (both samples constant: no variance to test against)."""
    if len(a) < 2 or len(b) < 2:
        return None
    result = stats.ttest_ind(a, b, equal_var=False)
    if not (np.isfinite(result.statistic) and np.isfinite(result.pvalue)):
        return None
    return float(result.statistic), float(result.pvalue)
