"""Baselines that aim at regret: Thompson sampling and expected improvement on hand-built posteriors, the oracle on
an SCM whose best intervention is upstream of the target's parent, greedy EIG's baseline grid on an interior optimum."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from training.tasks.causal.env import CausalEnv
from training.tasks.causal.policies.greedy_eig import GreedyEIGPolicy
from training.tasks.causal.policies.play import run_policy
from training.tasks.causal.policies.policy_catalogue import POLICIES
from training.tasks.causal.policies.regret import ExpectedImprovementPolicy, ThompsonPolicy
from training.tasks.causal.policies.scripted import OraclePolicy
from training.tasks.causal.scm.scm import SCM
from training.tasks.causal.episode_source import load_scm_file
from training.tasks.causal.splits import scm_row
from training.tasks.causal.surrogates.exact_surrogate import LinearModel

CBO = Path(__file__).resolve().parents[3] / "examples" / "scms" / "cbo_toy.yaml"


def linear_scm(weights: dict[str, dict[str, float]], ranges: dict[str, list[float]], goal: str = "max") -> SCM:
    """Variables X1, X2, Y (target Y); `weights[v]` = {parent: weight}."""
    variables = ["X1", "X2", "Y"]
    mech = {v: {"kind": "linear", "parents": list(weights.get(v, {})), "weights": list(weights.get(v, {}).values()),
                "bias": 0.0} for v in variables}
    return SCM.from_dict({"variables": variables, "target": "Y", "goal": goal, "mechanisms": mech,
                          "noise_std": dict.fromkeys(variables, 1.0), "ranges": ranges})


def draw(y_coef: list[float]) -> LinearModel:
    """A posterior draw: X1, X2 roots (mean 0), Y = y_coef . (X1, X2) + noise."""
    return LinearModel(order=[0, 1, 2], parents=[[], [], [0, 1]], intercept=np.zeros(3),
                       centre=[np.zeros(0), np.zeros(0), np.zeros(2)],
                       coef=[np.zeros(0), np.zeros(0), np.array(y_coef, dtype=float)], noise_sd=np.ones(3))


class QuadraticDraw:
    """A nonlinear draw: Y = -(X1 - 1.234)^2 + X2 / 10 + noise; its best call is do(X1 = 1.234), between grid values."""

    order = [0, 1, 2]

    def simulate_each(self, variables, values, eps):
        x = np.zeros((len(variables), 3))
        for v in range(2):
            x[:, v] = np.where(variables == v, values, eps[v])
        x[:, 2] = -(x[:, 0] - 1.234) ** 2 + x[:, 1] / 10 + eps[2]
        return x


class Posterior:
    """A surrogate stub whose posterior draws are the given models, cycled."""

    def __init__(self, *models):
        self.models = models

    def posterior_models(self, n, rng):
        return [self.models[i % len(self.models)] for i in range(n)]


def episode(posterior, goal="max", done=()):
    scm = linear_scm({}, {"X1": [-3, 3], "X2": [-3, 3]}, goal)
    steps = [SimpleNamespace(valid=True, intervention=d) for d in done]
    return SimpleNamespace(scm=scm, surrogate=posterior, trace=SimpleNamespace(steps=steps))


RNG = np.random.default_rng(0)


@pytest.mark.parametrize("coef, goal, call", [([2.0, 0.5], "max", ("X1", 3.0)), ([2.0, 0.5], "min", ("X1", -3.0)),
                                               ([0.5, -1.0], "max", ("X2", -3.0))])
def test_thompson_sets_the_best_call_of_its_draw(coef, goal, call):
    tool, args = ThompsonPolicy()(episode(Posterior(draw(coef)), goal), RNG)
    assert (tool, args["variable"], args["value"]) == ("intervene", *call)


def test_thompson_reaches_an_interior_optimum_of_a_nonlinear_draw():
    _, args = ThompsonPolicy()(episode(Posterior(QuadraticDraw())), RNG)
    assert args == {"variable": "X1", "value": 1.23}  # the grid alone gives 1.26 (spacing 0.06)


def test_expected_improvement_values_an_uncertain_effect_above_a_surer_mean():
    # draws: Y = X1 + 0.4 X2 and Y = -0.5 X1 + 0.4 X2. Posterior means: do(X1 = 3) 0.75, do(X2 = 3) 1.2; the
    # incumbent (no intervention yet) is E[Y] = 0, so EI(X1 = 3) = (3 + 0) / 2 = 1.5 > EI(X2 = 3) = 1.2.
    post = Posterior(draw([1.0, 0.4]), draw([-0.5, 0.4]))
    policy = ExpectedImprovementPolicy(grid=3, n_models=2)
    index, values, ei, mean = policy.scores(episode(post), RNG)
    got = {(int(i), float(v)): (e, m) for i, v, e, m in zip(index, values, ei, mean, strict=True)}
    assert got[0, 3.0] == pytest.approx((1.5, 0.75)) and got[0, -3.0] == pytest.approx((0.75, -0.75))
    assert got[1, 3.0] == pytest.approx((1.2, 1.2)) and got[1, 0.0] == pytest.approx((0.0, 0.0))
    assert policy(episode(post), RNG)[1] == {"variable": "X1", "value": 3.0}
    assert policy(episode(post, "min"), RNG)[1] == {"variable": "X1", "value": -3.0}  # -3, +1.5: EI 1.5


def test_expected_improvement_measures_improvement_over_the_best_intervention_so_far():
    # after do(X2 = 3) (posterior mean 1.2) and do(X1 = -3) (mean -0.75), the incumbent is 1.2
    post = Posterior(draw([1.0, 0.4]), draw([-0.5, 0.4]))
    policy = ExpectedImprovementPolicy(grid=3, n_models=2)
    index, values, ei, _ = policy.scores(episode(post, done=[("X2", 3.0), ("X1", -3.0)]), RNG)
    got = {(int(i), float(v)): e for i, v, e in zip(index, values, ei, strict=True)}
    assert got[0, 3.0] == pytest.approx(0.9) and got[0, -3.0] == pytest.approx(0.15) and got[1, 3.0] == 0.0


def test_oracle_sets_an_ancestor_when_it_beats_every_parent():
    # X1 -> X2 -> Y with weights 3 and 1: do(X1 = 1) gives E[Y] = 3, the parent's best do(X2 = 2) only 2
    scm = linear_scm({"X2": {"X1": 3.0}, "Y": {"X2": 1.0}}, {"X1": [-1, 1], "X2": [-2, 2]})
    record = run_policy(OraclePolicy(), scm_row(scm, seed=3, budget=3), 0)
    assert record.regret == 0.0 and record.optimum == pytest.approx(3.0)
    assert [s.arguments["variable"] for s in record.steps] == ["X1", "X2", "X1"]  # then the parent, in turn


def test_greedy_eig_baseline_reaches_near_an_interior_optimum():
    # CBO toy: min E[Y] at do(Z = -3.2003); the expert's 5-value grid gets within 1.17 of it at best
    env = CausalEnv()
    env.reset(**scm_row(load_scm_file(CBO), seed=0, budget=2))
    scm = env.scm

    def best_regret(policy):
        return min(scm.expected_target({v: x}) for v, x in policy.candidates(env)) - scm.optimum().expected

    assert best_regret(POLICIES["greedy_eig"]()) < 0.05
    assert best_regret(GreedyEIGPolicy()) == pytest.approx(1.17, abs=0.01)  # the expert's grid, unchanged
