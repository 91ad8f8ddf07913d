"""The belief line: what the policy reads equals the surrogate's posterior; a frozen surrogate's line never moves;
the expert that acts on it sets the last (best) variable listed."""

import numpy as np
import pytest

from tests.tasks.causal.helpers import chain5
from training.tasks.causal.belief import Belief, belief_rng
from training.tasks.causal.env import CausalEnv, make_causal_env
from training.tasks.causal.policies.belief_line import BeliefPolicy
from training.tasks.causal.scm.scm import SCM
from training.tasks.causal.splits import scm_row


def _env(**over):
    env = CausalEnv()
    env.reset(**{**scm_row(chain5(), seed=1, budget=4, initial_samples=20), **over})
    return env


def test_the_line_equals_the_posterior_marginals_and_expectations_of_its_draws():
    """Worked example (chain X0 -> X1 -> X2 -> X3 -> X4, target X2, 20 observational rows and one intervention):
    each entry's parent probability is the posterior's marginal, and its value, mean and sd are those of
    E[X2 | do(X = end)] over the same 16 draws, computed here by propagating each draw with `simulate` (one row,
    noise 0) rather than the vectorised path the line uses."""
    env = _env()
    env.intervene("X1", 3.0)
    sur, scm = env.surrogate, env.scm
    belief = env.belief
    assert belief == Belief.of(sur, scm, belief_rng(1, sur.updates), budget=4, made=(("X1", 3.0),))  # the current posterior
    models = sur.posterior_models(16, belief_rng(1, sur.updates))
    marginals = sur.posterior().marginals
    t = scm.index["X2"]
    for entry in belief.entries:
        j = scm.index[entry.variable]
        at = np.array([m.simulate({j: entry.value}, np.zeros((1, scm.d)))[0, t] for m in models])
        assert entry.parent == pytest.approx(marginals[entry.variable])
        assert entry.value in (-3.0, 3.0)
        assert entry.expected == pytest.approx(at.mean()) and entry.sd == pytest.approx(at.std())
    scores = [e.score for e in belief.entries]
    assert scores == sorted(scores) and belief.best == belief.entries[-1]
    # the true effect on X2 of X1 is -1.2 per unit and of X0 is -1.2: setting X1 or X0 to -3 is best, the data say
    # so; X1 = 3.0 was made and improved nothing, so X1's entry is its other end
    x1 = next(e for e in belief.entries if e.variable == "X1")
    assert x1.value == -3.0 and x1.expected > 2.0 and marginals["X1"] > 0.9
    text = belief.line()
    best = belief.best
    assert env.record.steps[-1].outcome.splitlines()[-1] == belief.line()
    assert text.startswith("Belief, best last: ")
    assert text.endswith(f"{best.variable}={best.value!r} X2 {best.expected:.1f}±{best.sd:.1f} parent {best.parent:.1f}.")


def test_goal_min_ranks_by_the_same_score_and_sets_the_lowering_end():
    c = chain5()
    scm = SCM(c.variables, c.mechanisms, dict(zip(c.variables, c.noise_std)), c.ranges, c.target, goal="min")
    env = CausalEnv()
    env.reset(**scm_row(scm, seed=1, budget=4, initial_samples=20))
    belief = env.belief
    scores = [e.score for e in belief.entries]
    assert scores == sorted(scores)
    assert belief.best.value == 3.0 and belief.best.variable in ("X0", "X1")


def test_a_frozen_surrogates_line_never_changes_and_says_the_effects_are_unknown():
    env = make_causal_env(active=False)()
    first = env.reset(**scm_row(chain5(), seed=1, budget=4, initial_samples=20)).split(". ", 2)[-1]
    lines = [env.intervene("X1", 3.0).splitlines()[-1], env.observe().splitlines()[-1],
             env.intervene("X0", -1.0).splitlines()[-1]]
    assert all(line == env.belief.line() for line in lines)
    assert first.endswith(env.belief.line()) and len(set(lines)) == 1
    assert lines[0].startswith("Belief (effects unknown): ") and env.surrogate.updates == 0
    assert not env.belief.known


def test_an_active_surrogates_line_moves_with_the_data_and_repeats_for_the_same_history():
    def replies():
        env = _env()
        return [env.intervene("X1", 3.0), env.intervene("X0", -3.0)]

    a, b = replies(), replies()
    assert a == b  # a GRPO group's rollouts that make the same calls read the same belief
    assert a[0].splitlines()[-1] != a[1].splitlines()[-1]


def test_the_noop_surrogate_shows_its_prior_marginals_without_effects():
    env = make_causal_env("noop")()
    env.reset(**scm_row(chain5(), seed=1, budget=4, initial_samples=20))
    assert not env.belief.known and {e.variable for e in env.belief.entries} == {"X0", "X1", "X3", "X4"}


def test_the_belief_policy_sets_the_last_entry_or_observes_when_effects_are_unknown():
    env = _env()
    policy, rng = BeliefPolicy(), np.random.default_rng(0)
    best = env.belief.best
    assert policy(env, rng) == ("intervene", {"variable": best.variable, "value": best.value})
    frozen = make_causal_env(active=False)()
    frozen.reset(**scm_row(chain5(), seed=1, budget=4, initial_samples=20))
    assert policy(frozen, rng) == ("observe", {})
    with pytest.raises(ValueError, match="reset"):
        policy(CausalEnv(), rng)


def test_following_the_line_makes_no_setting_twice_and_a_made_setting_expects_no_improvement():
    """A setting already made cannot raise the best E[target | do] reached (each draw's incumbent includes it) nor
    reach a new exploration cell, so the line's best entry is a new setting on this chain."""
    env = _env()
    made = []
    for _ in range(4):
        best = env.belief.best
        made.append((best.variable, best.value))
        env.intervene(best.variable, best.value)
    assert len(set(made)) == len(made)


def test_the_teacher_repeats_and_stops_at_its_rates_and_otherwise_follows_the_line():
    from training.tasks.causal.policies.belief_line import STOP_AFTER, TEACHER_REPEAT, TEACHER_STOP, teacher

    repeats = follows = calls = stops = chances = 0
    for seed in range(40):
        env = make_causal_env()()
        env.reset(**scm_row(chain5(), seed=seed, budget=6, initial_samples=20))
        policy, rng = teacher(), np.random.default_rng(seed)
        previous = None
        while env.record.used < env.record.budget:
            chances += env.record.used >= STOP_AFTER
            call = policy(env, rng)
            if call is None:
                assert env.record.used >= STOP_AFTER
                stops += 1
                break
            tool, args = call
            line = env.belief.best
            env.intervene(**args) if tool == "intervene" else env.observe()
            step = env.record.steps[-1]
            if previous is not None:
                calls += 1
                repeats += step.arguments == previous
                follows += step.follows_line
                assert step.follows_line == (args == {"variable": line.variable, "value": line.value})
                assert step.arguments == previous or step.follows_line  # nothing else
            previous = step.arguments
    assert abs(repeats / calls - TEACHER_REPEAT) < 0.1 and abs(stops / chances - TEACHER_STOP) < 0.1
    with pytest.raises(ValueError, match="repeat"):
        BeliefPolicy(repeat=1.5)
    with pytest.raises(ValueError, match="stop"):
        BeliefPolicy(stop=-0.1)
