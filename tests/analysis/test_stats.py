"""training/analysis/stats.py against results published independently of this code: R's documented output on Student's sleep
data, the effectsize package's d_z interval, Field's bushtucker repeated-measures ANOVA, the SciPy docs' Friedman
example, and Holm's procedure worked by hand."""

import itertools

import numpy as np
import pytest
from scipy import stats

from training.analysis.convergence import convergence_step, moving_average
from training.analysis.stats import cohens_dz, compare_paired, holm, omnibus, paired_t, shapiro_p, wilcoxon_signed_rank
from training.evaluation.episodes import t_interval

# Student (1908) via R's `sleep` data set: extra sleep (hours) of 10 patients under two drugs.
SLEEP_1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0]
SLEEP_2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4]


def test_paired_t_on_student_sleep_data_matches_r():
    # R: t.test(extra ~ group, data = sleep, paired = TRUE)
    #    t = -4.0621, df = 9, p-value = 0.002833; 95 percent CI -2.4598858 -0.7001142; mean difference -1.58
    result = paired_t(SLEEP_1, SLEEP_2)
    assert result.t == pytest.approx(-4.0621, abs=1e-4) and result.df == 9
    assert result.p == pytest.approx(0.002833, abs=1e-6)
    assert result.mean_diff == pytest.approx(-1.58)
    assert result.ci95 == pytest.approx((-2.4598858, -0.7001142), abs=1e-7)


def test_wilcoxon_and_shapiro_on_sleep_data_match_r():
    # R: wilcox.test(SLEEP_1, SLEEP_2, paired = TRUE) -> V = 0, p-value = 0.009091 (ties and a zero: normal approx.)
    result = wilcoxon_signed_rank(SLEEP_1, SLEEP_2)
    assert result.statistic == 0 and result.p == pytest.approx(0.009091, abs=1e-6) and result.n_nonzero == 9
    # R: shapiro.test(SLEEP_1 - SLEEP_2) -> W = 0.82987, p-value = 0.03334
    assert shapiro_p(np.subtract(SLEEP_1, SLEEP_2)) == pytest.approx(0.03334, abs=1e-5)


def test_paired_cohens_d_and_its_ci_match_the_effectsize_package():
    # R: effectsize::cohens_d(Pair(extra[group == 1], extra[group == 2]) ~ 1, data = sleep) -> -1.28, 95% CI
    # [-2.12, -0.41]
    effect = cohens_dz(SLEEP_1, SLEEP_2)
    assert effect.d_z == pytest.approx(-1.58 / 1.229995, abs=1e-5)
    assert effect.ci95 == pytest.approx((-2.12, -0.41), abs=0.005)


def test_the_d_z_interval_is_computed_where_scipy_gives_nan_in_the_noncentral_t_tail():
    # 128 units with d_z = -0.328 (the causal workflow's teacher vs starting policy): scipy's nct.cdf is NaN at
    # noncentrality t + 10, which left the interval n/a. For large n it is close to d_z -/+ 1.96 sqrt(1/n + d_z^2/2n).
    d = stats.norm.ppf((np.arange(128) + 0.5) / 128)
    d = (d - d.mean()) / d.std(ddof=1) - 0.328
    effect = cohens_dz(d, np.zeros(128))
    half = 1.96 * np.sqrt(1 / 128 + 0.328**2 / 256)
    assert effect.d_z == pytest.approx(-0.328) and effect.ci95 == pytest.approx((-0.328 - half, -0.328 + half), abs=0.01)


def test_the_sign_flip_test_on_sleep_data_is_exact_and_equals_an_enumeration_of_its_sign_vectors():
    # 10 patients: all 2^10 sign vectors, counted by brute force here; p = share with |mean| >= the observed one.
    d = np.subtract(SLEEP_1, SLEEP_2)
    flips = np.array(list(itertools.product([1.0, -1.0], repeat=len(d))))
    means = (flips * d).mean(axis=1)
    expected = np.mean(np.abs(means) >= abs(d.mean()) - 1e-12)
    result = compare_paired(SLEEP_1, SLEEP_2)
    assert result.test == "permutation" and "all 1024 sign flips" in result.reason
    assert result.p == pytest.approx(expected, abs=1e-12) and result.p == pytest.approx(0.00390625)  # 4 of 1024
    assert result.mean_diff == pytest.approx(-1.58) and result.mean_diff_ci95 == pytest.approx((-2.4598858, -0.7001142))
    constant = compare_paired([1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0])
    assert constant.p == 1.0 and constant.mean_diff_ci95 is None and constant.d_z is None


def test_the_verdict_follows_the_mean_where_the_wilcoxon_test_follows_the_median():
    # 128 units: 100 lose a little (-0.02), 28 gain a lot (+0.2). The mean gains (+0.028), the median loses: the
    # Wilcoxon test (the rule before) calls A significantly worse; the verdict now tests the mean, as its interval does.
    a = np.r_[np.full(100, -0.02), np.full(28, 0.2)] + np.linspace(0, 1e-3, 128)
    b = np.linspace(0, 1e-3, 128)
    assert wilcoxon_signed_rank(a, b).p < 0.05 and np.median(a - b) < 0 < np.mean(a - b)
    result = compare_paired(a, b)
    assert "20000 random sign flips" in result.reason
    assert result.mean_diff > 0 and result.mean_diff_ci95[0] > 0 and result.p < 0.01
    assert compare_paired(a, b).p == result.p  # the seed is fixed: a rebuilt report gives the same p


def test_repeated_measures_anova_matches_fields_bushtucker_example():
    # Field, Discovering Statistics: 8 celebrities x 4 bushtucker foods, time to retch (s).
    # F(3, 21) = 3.79, p = .026 (sphericity assumed).
    retch = np.array([[8, 7, 1, 6], [9, 5, 2, 5], [6, 2, 3, 8], [5, 3, 1, 9],
                      [8, 4, 5, 8], [7, 5, 6, 7], [10, 2, 7, 2], [12, 6, 8, 1]], float)
    result = omnibus(retch)
    assert result.anova_f == pytest.approx(3.79, abs=0.005) and result.anova_df == (3.0, 21.0)
    assert result.anova_p == pytest.approx(0.026, abs=0.0005)
    assert result.test == "rm_anova" and result.p == result.anova_p


def test_friedman_matches_the_scipy_docs_example():
    # scipy.stats.friedmanchisquare docs: pulse rates of 7 people at 3 times -> statistic 10.571..., p 0.00506...
    pulse = np.array([[72, 96, 88, 92, 74, 76, 82], [120, 120, 132, 120, 101, 96, 112],
                      [76, 95, 104, 96, 84, 72, 76]], float).T
    result = omnibus(pulse)
    assert result.friedman_chi2 == pytest.approx(10.571428571428571)
    assert result.friedman_p == pytest.approx(0.005063414171757498)


def test_friedman_is_primary_when_residuals_are_far_from_normal():
    rng = np.random.default_rng(0)
    skewed = rng.exponential(size=(60, 3)) ** 3 + np.array([0.0, 0.5, 1.0])
    result = omnibus(skewed)
    assert result.test == "friedman" and result.p == result.friedman_p and "far from normal" in result.reason


def test_holm_on_a_worked_example():
    # p = (0.01, 0.04, 0.03, 0.005), alpha 0.05: sorted 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04
    # -> running max 0.02, 0.03, 0.06, 0.06; only H1 and H4 are rejected.
    reject, adjusted = holm([0.01, 0.04, 0.03, 0.005])
    assert reject == [True, False, False, True]
    assert adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_t_interval_of_the_mean():
    # mean 5, sd 2.138 (n = 8): 5 +- 2.3646 * 2.138 / sqrt(8) = [3.2126, 6.7874]
    mean, std, _, ci = t_interval(np.array([2.0, 4, 4, 4, 5, 5, 7, 9]))
    assert (mean, std) == pytest.approx((5.0, 2.13809), abs=1e-5)
    assert ci == pytest.approx((3.21252, 6.78748), abs=1e-4)


def test_convergence_step_is_where_the_moving_average_enters_the_band_for_good():
    assert moving_average([0.0, 0.3, 0.6, 0.9], 2) == pytest.approx([0.0, 0.15, 0.45, 0.75])
    history = [(0, 0.1), (10, 0.5), (20, 0.8), (30, 0.2), (40, 0.8), (50, 0.8), (60, 0.8)]
    # window 1: the reward dips at step 30 and is back within 0.05 of 0.8 from step 40 on
    assert convergence_step(history, window=1, band=0.05).step == 40
    # window 3: MA = .1, .3, .467, .5, .6, .6, .8 -> only the last is within 0.05 of 0.8
    assert convergence_step(history, window=3, band=0.05).step == 60
    assert convergence_step(history, window=3, band=0.35).step == 20  # MA .467 is the first within .35
    assert convergence_step([], window=3).step is None


def test_welch_is_none_where_it_is_undefined_and_a_test_where_it_is_not():
    from training.analysis.stats import welch_t

    assert welch_t([0.0, 0.0, 0.0], [0.0, 0.0]) is None  # constant per-seed means: no variance, no test (not NaN)
    assert welch_t([0.1], [0.2, 0.3]) is None
    t, p = welch_t([0.1, 0.2, 0.15], [0.5, 0.6, 0.55])
    assert t < 0 and 0 < p < 0.05
