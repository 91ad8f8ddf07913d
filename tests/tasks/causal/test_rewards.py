"""The four reward components, alone: their maths on a chain whose expectations are known in closed form, their
episode sums, and the TRL reward functions that read them from the environments."""

import math

import numpy as np
import pytest

from tests.tasks.causal.helpers import chain5
from training.tasks.causal import reward_funcs
from training.tasks.causal.env import CausalEnv, make_causal_env
from training.tasks.causal.reward_components import (
    COMPONENTS,
    Step,
    balanced_accuracy,
    episode_rewards,
    exploration,
    exploration_unit,
    optimization,
    parent,
    step_rewards,
    structure,
    target_span,
)
from training.tasks.causal.surrogates.surrogate import ParentPosterior

# chain5: X0 -> X1 -> X2 -> X3 -> X4, target X2 = -1.2 X1 + noise, X1 = X0 + noise; ranges [-3, 3].
# E[X2 | do(X0 = v)] = E[X2 | do(X1 = v)] = -1.2 v; X3, X4 do not move it. Optimum 3.6, worst -3.6, E[X2] = 0.
SCM = chain5()


def posterior(marginals: dict[str, float]) -> ParentPosterior:
    """A product-of-Bernoullis posterior with the given marginals (enough for the components' maths)."""
    names = sorted(marginals)
    sets, probs = [], []
    for bits in range(1 << len(names)):
        s = frozenset(n for i, n in enumerate(names) if bits >> i & 1)
        sets.append(s)
        probs.append(np.prod([marginals[n] if n in s else 1 - marginals[n] for n in names]))
    return ParentPosterior(SCM.target, tuple(sets), np.array(probs), dict(marginals))


UNIFORM = posterior({v: 0.5 for v in SCM.actionable})


def step(intervention, history=(), before=UNIFORM, after=UNIFORM, budget=6, expected_gain=0.0):
    return Step(SCM, before, after, intervention, np.zeros((1, 5)), tuple(history), budget, expected_gain)


def test_target_span_is_the_exact_best_and_worst_intervention():
    assert target_span(SCM) == pytest.approx((3.6, -3.6))


def test_optimization_pays_progress_of_the_best_so_far_as_a_share_of_the_span():
    assert optimization(step(("X1", -3.0))) == pytest.approx(3.6 / 7.2)
    assert optimization(step(("X0", -1.5))) == pytest.approx(1.8 / 7.2)
    assert optimization(step(("X1", -3.0), history=[("X0", -1.5)])) == pytest.approx(1.8 / 7.2)
    assert optimization(step(("X0", -1.5), history=[("X1", -3.0)])) == 0.0  # not better than the best so far
    assert optimization(step(("X1", 3.0))) == 0.0  # worse than doing nothing
    assert optimization(step(("X3", 3.0))) == 0.0 and optimization(step(None)) == 0.0


def test_structure_is_the_expected_entropy_drop_over_the_largest_entropy():
    sharp = posterior({"X0": 0.1, "X1": 0.9, "X3": 0.1, "X4": 0.1})
    assert structure(step(("X1", 1.0), after=sharp, expected_gain=0.3)) == pytest.approx(0.3 / (4 * math.log(2)))
    assert structure(step(("X1", 1.0), after=sharp, expected_gain=-0.1)) < 0  # data expected to unsettle cost
    assert UNIFORM.entropy() == pytest.approx(4 * math.log(2))  # an expected drop is at most 1 per call
    with pytest.raises(ValueError, match="initial_samples' >= 2"):
        structure(step(("X1", 1.0), expected_gain=None))


def test_parent_rewards_balanced_accuracy_so_claiming_every_variable_earns_nothing():
    truth = posterior({"X0": 0.0, "X1": 1.0, "X3": 0.0, "X4": 0.0})
    everything = posterior({v: 1.0 for v in SCM.actionable})
    nothing = posterior({v: 0.0 for v in SCM.actionable})
    child_as_parent = posterior({"X0": 0.0, "X1": 1.0, "X3": 1.0, "X4": 0.0})
    assert balanced_accuracy(truth, SCM) == 1.0 and balanced_accuracy(UNIFORM, SCM) == 0.5
    assert balanced_accuracy(everything, SCM) == 0.5 and balanced_accuracy(nothing, SCM) == 0.5
    assert balanced_accuracy(child_as_parent, SCM) == pytest.approx(0.5 + 0.5 * 2 / 3)
    assert parent(step(("X1", 1.0), after=truth)) == pytest.approx(0.5)
    assert parent(step(("X1", 1.0), after=everything)) == 0.0


def test_exploration_pays_new_cells_only_and_is_normalised_by_the_reachable_cells():
    unit = exploration_unit(SCM, budget=6)
    assert unit == pytest.approx(1 / 6)  # min(budget 6, 3 thirds x 4 variables + observe = 13)
    assert exploration_unit(SCM, budget=40) == pytest.approx(1 / 13)
    assert exploration(step(("X1", 3.0))) == pytest.approx(unit)
    assert exploration(step(("X1", 2.9), history=[("X1", 3.0)])) == 0.0  # same third of the same variable
    assert exploration(step(("X1", -3.0), history=[("X1", 3.0)])) == pytest.approx(unit)
    assert exploration(step(None, history=[None])) == 0.0


def episode(calls, budget=4):
    env = CausalEnv()
    env.reset(scm_json=SCM.to_json(), seed=1, budget=budget, initial_samples=6)
    for call in calls:
        getattr(env, call[0])(*call[1:])
    return env


def test_episode_sums_and_refused_calls_cost_exploration_only():
    env = episode([("intervene", "X4", 3.0), ("intervene", "X2", 1.0), ("intervene", "X1", -3.0),
                   ("observe",), ("intervene", "X9", 1.0), ("intervene", "X0", 3.0), ("intervene", "X0", 3.0)])
    record = env.trace
    totals, per_step = episode_rewards(record), step_rewards(record)
    assert [s.valid for s in record.steps] == [True, False, True, True, False, True, False]  # last: past budget
    unit = exploration_unit(SCM, 4)
    assert per_step[1] == {"optimization": 0.0, "structure": 0.0, "parent": 0.0, "exploration": -unit}
    assert totals["optimization"] == pytest.approx((3.6 - 0.0) / 7.2)
    regret_before = record.optimum - record.initial_expected
    assert totals["optimization"] == pytest.approx((regret_before - record.regret) / 7.2)  # regret closed / span
    first, last = record.initial_posterior, record.final_posterior
    expected = [s.expected_info_gain for s in record.steps if s.valid]
    assert totals["structure"] == pytest.approx(sum(expected) / (4 * math.log(2)))
    assert totals["parent"] == pytest.approx(balanced_accuracy(last, SCM) - balanced_accuracy(first, SCM))
    assert totals["exploration"] == pytest.approx(4 * unit - 3 * unit)


def test_trl_reward_functions_have_the_contract_names_and_read_the_environments():
    envs = [episode([("intervene", "X1", -3.0)]), episode([("intervene", "X3", 1.0), ("observe",)])]
    funcs = reward_funcs.REWARD_FUNCS
    assert [f.__name__ for f in funcs] == list(COMPONENTS) == ["optimization", "structure", "parent", "exploration"]
    for f in funcs:
        values = f(prompts=[[], []], completions=[[], []], environments=envs)
        assert values == [episode_rewards(e.trace)[f.__name__] for e in envs]
    assert reward_funcs.optimization(completions=[[], []], environments=envs)[0] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="'structure' reads the episodes from TRL's `environments`"):
        reward_funcs.structure(completions=[[]])
    with pytest.raises(ValueError, match="rollout 0's environment"):
        reward_funcs.parent(completions=[[]], environments=[CausalEnv()])


def test_the_four_reward_functions_score_each_finished_episode_once(monkeypatch):
    envs = [episode([("intervene", "X1", -3.0)]), episode([("intervene", "X3", 1.0), ("observe",)])]
    from training.tasks.causal import reward_components

    calls = []
    real = reward_components.episode_steps
    monkeypatch.setattr(reward_components, "episode_steps", lambda record: calls.append(record) or real(record))
    for f in reward_funcs.REWARD_FUNCS:
        assert f(completions=[[], []], environments=envs) == [episode_rewards(e.trace)[f.__name__] for e in envs]
    assert [sum(t[n] for t in e.call_rewards) for e in envs for n in ("parent",)] == [
        episode_rewards(e.trace)["parent"] for e in envs]
    assert len(calls) == 2  # one per episode, not one per episode, reward function and per-call credit
    envs[0].intervene(variable="X3", value=2.0)  # the record grew: scored again, not served stale
    fresh = reward_funcs.optimization(completions=[[], []], environments=envs)[0]
    assert len(calls) == 3
    assert fresh == sum(t["optimization"] for t in envs[0].call_rewards)


def test_a_reused_environment_is_scored_afresh_after_reset():
    """TRL keeps a pool of environment instances and resets them for every rollout (dynamic sampling's extra rounds
    included): an episode with as many calls as the previous one on the same instance must not get its scores."""
    env = episode([("intervene", "X1", -3.0)])
    first = reward_funcs.optimization(completions=[[]], environments=[env])
    env.reset(scm_json=SCM.to_json(), seed=2, budget=4, initial_samples=6)
    env.intervene("X3", 3.0)
    again = reward_funcs.optimization(completions=[[]], environments=[env])
    assert again == [episode_rewards(env.trace)["optimization"]] and again != first


def replay_until_last(calls):
    """An episode with every call but the last; the last is made on it by the caller."""
    return episode(calls[:-1], budget=len(calls))


CALLS = [("intervene", "X4", 3.0), ("observe",), ("intervene", "X1", -3.0)]


def test_structure_pays_the_call_not_the_luck_of_its_row():
    """Same state, same call, another sampled row: the realised entropy drop changes, the structure reward does not
    (a GRPO group's rollouts share the row's seed, so the same call at the same point is credited alike)."""
    lucky, unlucky = replay_until_last(CALLS), replay_until_last(CALLS)
    unlucky._rng = np.random.default_rng(999)  # only the last call's row differs
    for env in (lucky, unlucky):
        env.intervene(*CALLS[-1][1:])
    a, b = lucky.trace.steps[-1], unlucky.trace.steps[-1]
    assert not np.array_equal(a.rows, b.rows) and a.info_gain != pytest.approx(b.info_gain, abs=1e-6)
    assert a.expected_info_gain == b.expected_info_gain
    assert step_rewards(lucky.trace)[-1]["structure"] == step_rewards(unlucky.trace)[-1]["structure"]


def test_the_expected_gain_is_the_posterior_predictive_entropy_drop():
    """Against an independent estimate: 400 models drawn from the posterior before the call, each answering the call,
    each answer added to a copy of the surrogate by `update` (not the batched lookahead)."""
    for call in CALLS:
        env = replay_until_last([*CALLS[:-1], call])
        sur = env.surrogate.copy()  # drained: the posterior before the call
        getattr(env, call[0])(*call[1:])
        got = env.trace.steps[-1].expected_info_gain
        rng = np.random.default_rng(7)
        do = {} if call[0] == "observe" else {SCM.index[call[1]]: call[2]}
        n = 3 if call[0] == "observe" else 1
        mask = np.zeros((n, SCM.d), dtype=bool)
        mask[:, list(do)] = True
        drops = []
        for model in sur.posterior_models(400, rng):
            trial = sur.copy()
            trial.update(model.simulate(do, rng.standard_normal((n, SCM.d))), mask)
            drops.append(sur.entropy() - trial.entropy())
        se = np.std(drops) * math.sqrt(1 / 16 + 1 / 400)  # the environment averages 16 draws
        assert abs(got - np.mean(drops)) < 4 * se, (call, got, np.mean(drops), se)
        assert np.std(drops) > 0


def test_surrogates_without_a_sampleable_posterior_have_no_structure_reward():
    env = CausalEnv()
    env.reset(scm_json=SCM.to_json(), seed=1, budget=2, initial_samples=1)  # X0 has 1 row to sample a model from
    env.intervene("X1", 1.0)
    assert env.trace.steps[-1].expected_info_gain is None
    with pytest.raises(ValueError, match="no expected information gain"):
        episode_rewards(env.trace)
    for still in (make_causal_env("exact", active=False)(), make_causal_env("noop")()):  # posteriors that never move
        still.reset(scm_json=SCM.to_json(), seed=1, budget=2, initial_samples=6)
        still.intervene("X1", 1.0)
        assert episode_rewards(still.trace)["structure"] == 0.0
