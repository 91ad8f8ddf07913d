"""The rollout reference: with one candidate it is the one-step rule; in a simulated world that is the SCM itself, a
simulated episode earns what the environment pays for the optimization and exploration components."""

import numpy as np
import pytest

from tests.tasks.causal.helpers import chain5
from training.tasks.causal.env import CausalEnv
from training.tasks.causal.policies.belief_line import OneStepPolicy
from training.tasks.causal.policies.play import run_policy
from training.tasks.causal.policies.rollout import RolloutPolicy, SimulatedWorld, simulated_episode
from training.tasks.causal.reward_components import episode_rewards
from training.tasks.causal.splits import scm_row
from training.tasks.causal.surrogates.exact_surrogate import LinearModel


def chain5_model() -> LinearModel:
    """chain5 itself as a posterior draw (weights 1.0, -1.2, 0.9, 1.1; unit noise)."""
    coef = [np.zeros(0), np.array([1.0]), np.array([-1.2]), np.array([0.9]), np.array([1.1])]
    return LinearModel(list(range(5)), [[], [0], [1], [2], [3]], np.zeros(5), [np.zeros(len(c)) for c in coef], coef,
                       np.ones(5))


def test_with_one_candidate_the_rollout_plays_the_one_step_rule():
    row = scm_row(chain5(), seed=3, budget=4, initial_samples=20)
    rollout = run_policy(RolloutPolicy(candidates=1, draws=2), row, 0)
    one_step = run_policy(OneStepPolicy(), row, 0)
    assert rollout.interventions == one_step.interventions and len(rollout.interventions) == 4


def test_a_simulated_episode_in_the_true_scm_earns_the_environments_optimization_and_exploration():
    """Were the posterior draw the SCM itself, the simulated episode's optimization and exploration (functions of the
    calls alone) are what the environment pays for the same calls."""
    env = CausalEnv()
    env.reset(**scm_row(chain5(), seed=3, budget=3, initial_samples=20))
    # E[X2 | do] at the ends: do(X0 = -3) and do(X1 = -3) give 3.6 (and -3.6 at +3); X3, X4 leave it at 0: span 7.2
    world = SimulatedWorld(chain5_model(), span=7.2, none=0.0, parents={"X1"}, noise=np.zeros((1, 5)), seed=0)
    first = next(o for o in env.belief.candidates if o.call == ("X3", 3.0))  # improves nothing, a new cell
    surrogate, made = env.surrogate.copy(), []
    earned = simulated_episode(env.scm, 3, world, surrogate, made, first, 3)
    assert surrogate.updates == env.surrogate.updates + 3 and env.surrogate.updates == 1  # the copy learnt, not env
    assert made[0] == ("X3", 3.0) and len(made) == 3
    for call in made:  # the same calls in the environment
        env.intervene(*call)
    paid = episode_rewards(env.trace)
    assert earned["optimization"] == pytest.approx(paid["optimization"], abs=1e-9) and paid["optimization"] > 0
    assert earned["exploration"] == pytest.approx(paid["exploration"], abs=1e-12)


def test_the_rollout_refuses_before_reset_and_observes_when_effects_are_unknown():
    from training.tasks.causal.env import make_causal_env

    with pytest.raises(ValueError, match="reset"):
        RolloutPolicy()(CausalEnv(), np.random.default_rng(0))
    unknown = make_causal_env("noop")()
    unknown.reset(**scm_row(chain5(), seed=1, budget=4, initial_samples=20))
    assert RolloutPolicy()(unknown, np.random.default_rng(0)) == ("observe", {})
