"""The surrogates' fast paths against plain reference implementations: the linear-space DP against the log-space
one (random scores, wide spreads, the underflow guard at the spread where it fires), the closed-form R^2 against
`np.linalg.solve`, the additive scores from moments against the scores from rows, the DAG draws over the scored
sets against the draws over all sets, and the options' information gains against brute force over every DAG."""

import numpy as np
import pytest

from tests.tasks.causal.helpers import intervention_rows, observational_rows
from training.tasks.causal.scm.families import random_scm
from training.tasks.causal.surrogates import explained_share as share_module
from training.tasks.causal.surrogates.additive_moments import (
    empty_moments,
    feature_rows,
    log_bayes_factors_moments,
)
from training.tasks.causal.surrogates.additive_scores import log_bayes_factors_rows, log_local_scores_rows
from training.tasks.causal.surrogates.additive_surrogate import AdditiveSurrogate
from training.tasks.causal.surrogates.exact_surrogate import ExactSurrogate, row_entropies
from training.tasks.causal.surrogates.explained_share import explained_shares, reference_explained_share
from training.tasks.causal.surrogates.linear_dp import TINY, parent_log_posterior_linear
from training.tasks.causal.surrogates.linear_scores import (
    NodeStats,
    correlations,
    log_bayes_factors_sparse,
    log_local_scores,
    merge_rows,
    merge_single_rows,
)
from training.tasks.causal.surrogates.structure_posterior import (
    categorical,
    enumerate_parent_posterior,
    order_sums,
    parent_log_posterior,
    reference_parent_log_posterior,
    sample_dags,
    zeta_transform,
)
from training.tasks.causal.surrogates.subsets import score_plan


def random_scores(d: int, max_parents: int | None, batch: int, spread: float, rng) -> np.ndarray:
    """Scores (B, d, 2^d) on the sets `score_plan` scores, normal with sd `spread`, -inf elsewhere."""
    prior = score_plan(d, max_parents).log_prior
    return np.where(np.isfinite(prior), prior + rng.normal(0.0, spread, (batch, d, 1 << d)), -np.inf)


def assert_same_log_posterior(fast: np.ndarray, reference: np.ndarray, atol: float = 1e-10) -> None:
    finite = np.isfinite(reference)
    assert np.array_equal(np.isfinite(fast), finite)
    assert np.abs(fast[finite] - reference[finite]).max() <= atol


@pytest.mark.parametrize("d, max_parents", [(1, None), (2, None), (3, None), (5, None), (7, 2), (9, None), (11, 3)])
def test_the_linear_space_dp_equals_the_log_space_reference_on_random_scores(d, max_parents):
    rng = np.random.default_rng(d)
    # spreads from a few nats (the main job's) to thousands (hundreds of rows of strong effects): in one batch, so
    # the data sets sent to the reference and those kept in linear space are put back in their places
    log_beta = np.concatenate([random_scores(d, max_parents, 3, s, rng) for s in (0.5, 5.0, 60.0, 400.0, 3000.0)])
    for target in sorted({0, d // 2, d - 1}):
        fast, fast_z = parent_log_posterior(log_beta, target)
        ref, ref_z = reference_parent_log_posterior(log_beta, target)
        assert_same_log_posterior(fast, ref)
        assert np.abs(fast_z - ref_z).max() <= 1e-10 * max(1.0, np.abs(ref_z).max())


def _node_that_wants_the_target(spread: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Scores (1, 3, 8) of three variables, target 2, every score its prior except node 0's for the parent set {2},
    `spread` nats higher; and the scored pairs. Every order that puts 0 before the target, the only ones where 0
    can be the target's parent, then weighs e^-spread of the rest."""
    log_beta = score_plan(3).log_prior[None].copy()
    log_beta[0, 0, 0b100] += spread
    nodes, sets = np.nonzero(np.isfinite(log_beta[0]))
    return log_beta, nodes, sets


@pytest.mark.parametrize("margin", [-10.0, 10.0, 155.0])
def test_the_underflow_guard_fires_at_the_spread_where_linear_space_loses_the_answer(margin):
    spread = -np.log(TINY) + margin  # 644.7 + margin nats; 800 is past exp's own underflow (745)
    log_beta, nodes, sets = _node_that_wants_the_target(spread)
    ref = reference_parent_log_posterior(log_beta, 2)[0]
    linear, _, underflow = parent_log_posterior_linear(log_beta[:, nodes, sets], nodes, sets, 3, 2)
    assert bool(underflow[0]) == (margin > 0)
    assert_same_log_posterior(parent_log_posterior(log_beta, 2)[0], ref)
    if margin < 0:
        assert_same_log_posterior(linear, ref)
    if spread > 745:  # linear space alone: P(0 is a parent) = 0, where it is e^-800 (-800 + O(1) in log)
        assert np.isneginf(linear[0, 0b001]) and -810 < ref[0, 0b001] < -790


def test_the_underflow_guard_catches_order_sums_that_underflow_with_every_score_in_range():
    # each node wants the next as its parent, 400 nats above the empty set: every a is at least e^-400 (fine), but
    # l({0, 2}), neither node's parent there, is e^-800
    rng = np.random.default_rng(1)
    log_beta = random_scores(4, None, 2, 1.0, rng)
    log_beta[:, :, 0] = 0.0
    for v in range(4):
        log_beta[:, v, 1 << ((v + 1) % 4)] = 400.0
    nodes, sets = np.nonzero(np.isfinite(log_beta[0]))
    a = np.exp(log_beta[:, nodes, sets] - 400.0)
    assert a.min() >= TINY
    assert parent_log_posterior_linear(log_beta[:, nodes, sets], nodes, sets, 4, 0)[2].all()
    assert_same_log_posterior(parent_log_posterior(log_beta, 0)[0], reference_parent_log_posterior(log_beta, 0)[0])


def _stats_of_rows(d: int, n: int, rng) -> NodeStats:
    x = rng.normal(size=(n, d))
    x[:, 1] = 0.999 * x[:, 0] + 0.01 * x[:, 1]  # nearly collinear columns
    mask = rng.random((n, d)) < 0.2
    x[mask[:, 2], 2] = 1.5  # variable 2 constant wherever it was set
    return merge_rows(NodeStats.empty(d), x, mask)


@pytest.mark.parametrize("d, n, max_parents", [(3, 4, None), (5, 6, None), (6, 40, None), (8, 12, None), (8, 3, None),
                                              (11, 30, 3)])
def test_the_nested_cholesky_r2_equals_the_solver_on_every_scored_set(d, n, max_parents, monkeypatch):
    st = _stats_of_rows(d, n, np.random.default_rng(n))
    corr, _ = correlations(st.count[None], st.mean[None], st.m2[None])
    groups = score_plan(d, max_parents).size_groups
    for grp, r2 in zip(groups, explained_shares(corr, groups)):
        reference = reference_explained_share(corr, grp.nodes, grp.idx)
        if n > d:  # well posed (two columns 0.9999 correlated on purpose: both methods' rounding grows with it)
            assert np.allclose(r2, reference, rtol=0.0, atol=1e-9)
        else:  # fewer rows than regressors: singular up to the ridge, where only the clipped R^2 ~ 1 matters
            assert np.allclose(np.clip(r2, 0, 1), np.clip(reference, 0, 1), rtol=0.0, atol=1e-6)
    fast = log_bayes_factors_sparse(st.count[None], st.mean[None], st.m2[None], max_parents)
    monkeypatch.setattr(share_module, "NESTED", False)
    assert np.allclose(fast, log_bayes_factors_sparse(st.count[None], st.mean[None], st.m2[None], max_parents),
                       rtol=0.0, atol=1e-10)


def test_a_non_positive_pivot_and_the_sets_grown_from_it_go_to_the_solver():
    corr = np.eye(4)[None, None].repeat(4, axis=1)  # (1, 4, 4, 4)
    corr[0, 0, 1, 2] = corr[0, 0, 2, 1] = 1.0 + 1e-6  # not a correlation matrix: the pivot of {1, 2} is negative
    corr[0, 0, 1:, 0] = corr[0, 0, 0, 1:] = 0.5
    groups = [g for g in score_plan(4).size_groups]
    for grp, r2 in zip(groups, explained_shares(corr, groups)):
        assert np.allclose(r2[0, grp.nodes == 0], reference_explained_share(corr, grp.nodes, grp.idx)[
            0, grp.nodes == 0], atol=1e-9)


@pytest.mark.parametrize("d, n", [(2, 3), (3, 8), (3, 1), (4, 20), (5, 2)])
def test_the_additive_scores_from_moments_equal_the_scores_from_rows(d, n):
    rng = np.random.default_rng(10 * d + n)
    x = rng.normal(size=(n, d))
    x[:, 1] += np.sin(x[:, 0])
    mask = rng.random((n, d)) < 0.25
    x[mask] = 2.0  # intervened variables set to one value: constant columns on some nodes' rows
    plan = score_plan(d)
    moments = merge_rows(empty_moments(d), feature_rows(x), mask)
    from_moments = log_bayes_factors_moments(moments.count[None], moments.mean[None], moments.m2[None])[0]
    assert np.allclose(from_moments, log_bayes_factors_rows(x, mask)[plan.nodes, plan.sets], rtol=0.0, atol=1e-10)
    rows = rng.normal(size=(4, d))
    row_mask = np.eye(d, dtype=bool)[rng.integers(0, d, 4)]
    count, mean, m2 = merge_single_rows(moments, feature_rows(rows), row_mask)
    after = [log_bayes_factors_rows(np.vstack([x, rows[i:i + 1]]), np.vstack([mask, row_mask[i:i + 1]]))
             for i in range(4)]
    assert np.allclose(log_bayes_factors_moments(count, mean, m2),
                       np.stack([a[plan.nodes, plan.sets] for a in after]), rtol=0.0, atol=1e-10)


def _reference_sample_dags(log_beta: np.ndarray, n: int, rng) -> np.ndarray:
    """`sample_dags` as first written: each parent set drawn by `categorical` over all 2^d sets."""
    d = log_beta.shape[0]
    alpha = zeta_transform(log_beta[None])[0]
    log_l = order_sums(alpha[None])[0][0]
    all_masks, bits, rows = np.arange(1 << d), 1 << np.arange(d), np.arange(n)
    out, u = np.zeros((n, d), dtype=np.int64), np.full(n, (1 << d) - 1)
    for _ in range(d):
        rest = u[:, None] & ~bits[None, :]
        placed_last = np.where((u[:, None] & bits[None, :]) != 0, alpha[np.arange(d)[None, :], rest] + log_l[rest],
                               -np.inf)
        v = categorical(placed_last, rng)
        w = rest[rows, v]
        subsets = (all_masks[None, :] & ~w[:, None]) == 0
        out[rows, v] = categorical(np.where(subsets, log_beta[v], -np.inf), rng)
        u = w
    return out


@pytest.mark.parametrize("d, max_parents", [(3, None), (6, None), (11, 3)])
def test_dag_draws_over_the_scored_sets_are_the_draws_over_all_sets(d, max_parents):
    log_beta = random_scores(d, max_parents, 1, 3.0, np.random.default_rng(d))[0]
    assert np.array_equal(sample_dags(log_beta, 64, np.random.default_rng(5)),
                          _reference_sample_dags(log_beta, 64, np.random.default_rng(5)))


def _lookahead_case(seed: int):
    scm = random_scm("er", 4, seed)
    rng = np.random.default_rng(seed)
    sur = ExactSurrogate(scm.variables, scm.target)
    sur.update(*observational_rows(scm, 8, rng))
    sur.update(*intervention_rows(scm, scm.actionable[0], 2, rng))
    rows = np.vstack([intervention_rows(scm, v, 3, rng)[0] for v in scm.actionable])
    mask = np.repeat(np.eye(scm.d, dtype=bool)[[scm.index[v] for v in scm.actionable]], 3, axis=0)
    return sur, rows, mask


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_options_lookahead_equals_brute_force_over_every_dag(seed, monkeypatch):
    sur, rows, mask = _lookahead_case(seed)
    fast = sur.what_if_rows(rows, mask)
    np.testing.assert_allclose(fast, sur.what_if_many([(r[None], m[None]) for r, m in zip(rows, mask)]), rtol=0,
                               atol=1e-12)  # two batchings of the same sums: equal up to BLAS rounding
    monkeypatch.setattr(share_module, "NESTED", False)  # every R^2 by np.linalg.solve
    count, mean, m2 = merge_single_rows(sur.stats, rows, mask)
    log_beta = log_local_scores(count, mean, m2, sur.max_parents)
    brute = np.stack([enumerate_parent_posterior(lb, sur.t) for lb in log_beta])
    with np.errstate(divide="ignore"):
        expected = row_entropies(np.log(brute))
    assert np.allclose(fast, expected, rtol=0.0, atol=1e-10)


def test_the_additive_lookahead_equals_rescoring_the_rows():
    scm = random_scm("er", 3, 4)
    rng = np.random.default_rng(4)
    sur = AdditiveSurrogate(scm.variables, scm.target)
    sur.update(*observational_rows(scm, 7, rng))
    sur.update(*intervention_rows(scm, scm.actionable[0], 2, rng))
    rows, mask = intervention_rows(scm, scm.actionable[-1], 5, rng)
    log_beta = np.stack([log_local_scores_rows(np.vstack([sur.samples, r[None]]), np.vstack([sur.intervened, m[None]]))
                         for r, m in zip(rows, mask)])
    expected = row_entropies(reference_parent_log_posterior(log_beta, sur.t)[0])
    assert np.allclose(sur.what_if_rows(rows, mask), expected, rtol=0.0, atol=1e-10)
    two_rows = [(rows[:2], mask[:2]), (rows[2:4], mask[2:4])]
    copies = [sur.copy() for _ in two_rows]
    for c, b in zip(copies, two_rows):
        c.update(*b)
    assert np.allclose(sur.what_if_many(two_rows), [c.entropy() for c in copies], rtol=0.0, atol=1e-10)


@pytest.mark.parametrize("d, max_parents", [(5, 2), (9, None)])
def test_the_bounded_additive_lookahead_equals_rescoring_the_rows_under_the_bound(d, max_parents):
    """Under an in-degree bound (given, or the additive surrogate's default of 3 above 7 variables) the lookahead's
    scores from the moments, every set's factor grown from its prefix's and its sibling's, are the rows' scores of
    the sets within the bound, and a set above it has probability 0."""
    scm = random_scm("er", d, 7, "nonlinear")
    rng = np.random.default_rng(d)
    sur = AdditiveSurrogate(scm.variables, scm.target, max_parents)
    assert sur.max_parents == (max_parents or 3)
    sur.update(*observational_rows(scm, 12, rng))
    sur.update(*intervention_rows(scm, scm.actionable[0], 2, rng))
    sizes = np.array([bin(m).count("1") for m in range(1 << d)])
    assert sur.mask_probs[sizes > sur.max_parents].sum() == 0.0
    rows, mask = intervention_rows(scm, scm.actionable[-1], 3, rng)
    rows = np.vstack([rows, observational_rows(scm, 2, rng)[0]])
    mask = np.vstack([mask, np.zeros((2, d), dtype=bool)])
    log_beta = np.stack([log_local_scores_rows(np.vstack([sur.samples, r[None]]), np.vstack([sur.intervened, m[None]]),
                                               max_parents=sur.max_parents) for r, m in zip(rows, mask)])
    expected = row_entropies(reference_parent_log_posterior(log_beta, sur.t)[0])
    assert np.allclose(sur.what_if_rows(rows, mask), expected, rtol=0.0, atol=1e-10)


@pytest.mark.parametrize("d,bound,target,spread", [(5, 4, 2, 5.0), (8, 3, 0, 20.0), (11, 3, 10, 5.0), (6, 5, 3, 800.0)])
def test_compiled_dp_equals_the_numpy_one(d, bound, target, spread):
    from training.tasks.causal.surrogates.compiled_dp import target_log_posterior
    from training.tasks.causal.surrogates.linear_dp import parent_log_posterior_linear
    from training.tasks.causal.surrogates.subsets import score_plan

    plan = score_plan(d, bound)
    values = np.random.default_rng(d).normal(0.0, spread, (7, len(plan.nodes)))
    got, underflow = target_log_posterior(values, plan.nodes, plan.sets, d, target)
    want, _, want_underflow = parent_log_posterior_linear(values, plan.nodes, plan.sets, d, target)
    assert np.array_equal(underflow, want_underflow)
    ok = ~underflow
    scored = plan.sets[plan.nodes == target]
    np.testing.assert_allclose(got[ok], want[ok][:, scored], rtol=0, atol=1e-10)
