"""The score the belief line ranks by: each term is the reward component it stands for, computed under the posterior's
draws instead of the unknown SCM."""

import math

import numpy as np
import pytest

from tests.tasks.causal.helpers import chain5
from training.tasks.causal.acquisition import (
    call_scores,
    expected_improvements,
    information_gains,
    made_settings,
    new_cells,
)
from training.tasks.causal.belief import belief_rng
from training.tasks.causal.env import CausalEnv
from training.tasks.causal.reward_components import exploration_unit
from training.tasks.causal.splits import scm_row


def test_expected_improvement_is_the_mean_over_draws_of_the_gain_over_each_draws_best_as_a_share_of_its_span():
    candidates = np.array([[0.0, 2.0, 4.0],    # draw 0: span 4, best reached 1.0
                           [1.0, 1.0, -1.0]])  # draw 1: span 2, best reached 3.0 (nothing improves)
    incumbents = np.array([[1.0, -5.0], [0.0, 3.0]])
    assert expected_improvements(candidates, incumbents) == pytest.approx([0.0, (1 / 4) / 2, (3 / 4) / 2])
    flat = np.ones((2, 3))  # no spread: no improvement is measurable, and none is claimed
    assert expected_improvements(flat, np.zeros((2, 1))) == pytest.approx([0.0, 0.0, 0.0])


def test_a_cell_is_new_unless_a_made_call_fell_in_the_same_third_of_the_same_variable():
    scm = chain5()  # ranges [-3, 3]: thirds [-3, -1), [-1, 1), [1, 3]
    index = np.array([scm.index["X1"]] * 3 + [scm.index["X0"]])
    values = np.array([2.5, 0.0, -3.0, 2.5])
    assert new_cells(scm, index, values, made=(("X1", 3.0),)).tolist() == [0.0, 1.0, 1.0, 1.0]


def test_the_score_weighs_the_three_terms_by_the_rewards_default_weights():
    env = CausalEnv()
    env.reset(**scm_row(chain5(), seed=1, budget=4, initial_samples=20))
    env.intervene("X1", -3.0)
    sur, scm = env.surrogate, env.scm
    models = sur.posterior_models(16, np.random.default_rng(0))
    index = np.array([scm.index[v] for v in scm.actionable for _ in (0, 1)])
    values = np.array([x for _ in scm.actionable for x in (-3.0, 3.0)])
    t = scm.index["X2"]
    e_cand = np.stack([m.simulate_each(index, values, np.zeros(scm.d))[:, t] for m in models])
    e_reached = np.stack([m.simulate_each(np.array([-1, scm.index["X1"]]), np.array([0.0, -3.0]),
                                          np.zeros(scm.d))[:, t] for m in models])
    made = (("X1", -3.0),)
    out = call_scores(sur, scm, index, values, e_cand, e_reached, models, made, 4, np.random.default_rng(1))
    gains = information_gains(sur, index, values, models[:8], np.random.default_rng(1))
    assert out.gains == pytest.approx(gains)
    expected = out.improvement + 0.5 * gains / (4 * math.log(2)) + 0.1 * out.novel * exploration_unit(scm, 4)
    assert out.score == pytest.approx(expected)
    repeat = int(np.flatnonzero((index == scm.index["X1"]) & (values == -3.0))[0])
    assert out.improvement[repeat] == 0.0 and out.novel[repeat] == 0.0  # a made setting earns neither
    assert np.all(gains > -1e-9) and gains.max() > 0


def test_a_made_setting_expects_exactly_no_improvement_whatever_the_rounding_of_its_two_expectations():
    """The made setting is computed twice (as a candidate and as an incumbent); another BLAS kernel rounds the two
    apart (3.6e-18 on AVX-512). Raise the candidate's copy above the incumbent by the smallest float, by 3.6e-18 and
    by 1e-17: its expected improvement and its novelty stay exactly 0, while the same numbers unmarked improve."""
    env = CausalEnv()
    env.reset(**scm_row(chain5(), seed=1, budget=4, initial_samples=20))
    env.intervene("X1", -3.0)
    scm = env.scm
    models = env.surrogate.posterior_models(16, np.random.default_rng(0))
    index = np.array([scm.index["X1"], scm.index["X0"]])
    values = np.array([-3.0, 3.0])
    made = (("X1", -3.0),)
    assert made_settings(scm, index, values, made).tolist() == [True, False]
    incumbents = np.array([[-1.0, 0.0]] * len(models))  # no intervention, then the made call: the best in every draw
    for raised in (np.nextafter(0.0, 1.0), 3.6e-18, 1e-17):
        candidates = np.array([[raised, -1.0]] * len(models))  # the made call's copy, rounded above its incumbent
        candidates[:, 1] = np.linspace(-1.0, 0.5, len(models))  # a span in every draw
        out = call_scores(env.surrogate, scm, index, values, candidates, incumbents, models, made, 4,
                          np.random.default_rng(1))
        assert out.improvement[0] == 0.0 and out.novel[0] == 0.0
        unmade = expected_improvements(candidates, incumbents)  # the same numbers, nothing marked made
        assert unmade[0] > 0.0


def test_the_line_of_a_surrogate_without_a_lookahead_ranks_without_the_information_term():
    env = CausalEnv()
    env.reset(**scm_row(chain5(), seed=1, budget=4, initial_samples=20))
    sur, scm = env.surrogate, env.scm

    class NoLookahead:  # the learned surrogate's shape: draws, no what_if_many
        d = sur.d

    models = sur.posterior_models(4, belief_rng(1, 0))
    index, values = np.array([0, 1]), np.array([-3.0, 3.0])
    assert information_gains(NoLookahead(), index, values, models, np.random.default_rng(0)) is None
    e = np.zeros((4, 2))
    out = call_scores(NoLookahead(), scm, index, values, e, e[:, :1], models, (), 4, np.random.default_rng(0))
    assert out.gains is None and out.score == pytest.approx(0.1 * out.novel * exploration_unit(scm, 4))
