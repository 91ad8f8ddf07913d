"""The options the policy reads: each shown number is the posterior's term for that call, the shown calls are the
Pareto front of the three terms the reward pays, nothing weighs them in the text; a frozen surrogate's options never
move; the teacher sets the last option (largest information gain), the one-step rule the largest weighted score."""

import math
import re
from pathlib import Path

import numpy as np
import pytest

from tests.tasks.causal.helpers import chain5
from training.tasks.causal.acquisition import expected_improvements, information_gains
from training.tasks.causal.belief import NOISE_SAMPLES, Belief, belief_rng, grid_values, pareto_front
from training.tasks.causal.env import CausalEnv, make_causal_env
from training.tasks.causal.policies.belief_line import OneStepPolicy, TeacherPolicy
from training.tasks.causal.reward_components import DEFAULT_WEIGHTS, exploration_unit
from training.tasks.causal.scm.scm import SCM
from training.tasks.causal.episode_source import load_scm_file
from training.tasks.causal.splits import scm_row

OPTION = re.compile(r"^(\d+): (\w+)=(-?\d+\.\d) gain (-?\d+) info (-?\d+) (new|seen) parent (\d\.\d)$")


def _env(**over):
    env = CausalEnv()
    env.reset(**{**scm_row(chain5(), seed=1, budget=4, initial_samples=20), **over})
    return env


def test_each_candidates_terms_are_the_posteriors_recomputed_on_the_same_draws():
    """Worked example (chain X0 -> X1 -> X2 -> X3 -> X4, target X2, 20 observational rows and one intervention):
    each candidate's parent probability is the posterior's marginal, its gain the expected improvement of E[X2 | do]
    over the same 16 draws (propagated here one row at a time with `simulate`, not the line's vectorised path), its
    info the expected entropy drop over the first 8 of them as a share of (d - 1) ln 2, its new whether its third of
    the range is unvisited."""
    env = _env()
    env.intervene("X1", 3.0)
    sur, scm = env.surrogate, env.scm
    belief = env.belief
    assert belief == Belief.of(sur, scm, belief_rng(1, sur.updates), budget=4, made=(("X1", 3.0),))
    rng = belief_rng(1, sur.updates)
    models = sur.posterior_models(16, rng)
    rng.standard_normal((NOISE_SAMPLES, scm.d))  # the line's noise for nonlinear draws (unused by linear ones)
    marginals = sur.posterior().marginals
    t = scm.index["X2"]
    index = np.array([scm.index[o.variable] for o in belief.candidates])
    values = np.array([o.value for o in belief.candidates])
    at = np.array([[m.simulate({int(j): x}, np.zeros((1, scm.d)))[0, t] for j, x in zip(index, values)]
                   for m in models])
    reached = np.array([[m.simulate({}, np.zeros((1, scm.d)))[0, t], m.simulate({1: 3.0}, np.zeros((1, scm.d)))[0, t]]
                        for m in models])
    made = np.array([(o.variable, o.value) == ("X1", 3.0) for o in belief.candidates])
    gains = information_gains(sur, index, values, models[:8], rng) / (4 * math.log(2))
    assert [o.gain for o in belief.candidates] == pytest.approx(expected_improvements(at, reached, made))
    assert [o.info for o in belief.candidates] == pytest.approx(gains)
    assert [o.parent for o in belief.candidates] == pytest.approx([marginals[o.variable] for o in belief.candidates])
    assert [o.new for o in belief.candidates] == [(o.variable, o.value) != ("X1", 3.0) for o in belief.candidates]
    assert {o.value for o in belief.candidates} == {-3.0, 3.0}  # linear draws: the ends
    unit = exploration_unit(scm, 4)
    w = DEFAULT_WEIGHTS
    assert [o.score for o in belief.candidates] == pytest.approx(
        [w["optimization"] * o.gain + w["structure"] * o.info + w["exploration"] * unit * o.new
         for o in belief.candidates])


def test_the_options_are_the_pareto_front_by_information_and_hold_the_one_step_choice():
    env = _env()
    for call in (("X1", 3.0), ("X4", -3.0)):
        env.intervene(*call)
        belief = env.belief
        terms = np.array([[o.gain, o.info, float(o.new)] for o in belief.candidates])
        shown = [o for o, on in zip(belief.candidates, pareto_front(terms)) if on]
        assert sorted(shown, key=lambda o: o.info) == list(belief.options)
        for o in belief.candidates:  # a hidden candidate is beaten on every term by one shown
            if o not in belief.options:
                assert any(s.gain >= o.gain and s.info >= o.info and s.new >= o.new for s in belief.options)
        assert belief.best == max(belief.candidates, key=lambda o: o.score) and belief.best in belief.options
        assert belief.teacher_choice == belief.options[-1] == max(belief.options, key=lambda o: o.info)


def test_the_line_shows_the_terms_of_each_option_and_no_weighing_of_them():
    env = _env()
    reply = env.intervene("X1", 3.0)
    lines = reply.splitlines()
    assert lines[0] == f"X2={env.trace.steps[-1].rows[0, 2]:.1f} (3 calls left)"  # the sampled target alone
    assert lines[1] == "Options:" and "\n".join(lines[1:]) == env.belief.line()
    for number, (text, option) in enumerate(zip(lines[2:], env.belief.options, strict=True), start=1):
        listed, name, value, gain, info, new, parent = OPTION.match(text).groups()
        assert int(listed) == number == env.belief.number(option)
        assert (name, float(value)) == option.call and int(gain) == round(100 * option.gain)
        assert int(info) == round(100 * option.info) and (new == "new") == option.new
        assert float(parent) == round(option.parent, 1)
    assert "score" not in reply and "best" not in reply


def test_goal_min_counts_improvement_downwards():
    c = chain5()
    scm = SCM(c.variables, c.mechanisms, dict(zip(c.variables, c.noise_std)), c.ranges, c.target, goal="min")
    env = CausalEnv()
    env.reset(**scm_row(scm, seed=1, budget=4, initial_samples=20))
    best_gain = max(env.belief.candidates, key=lambda o: o.gain)
    # E[X2 | do(X1 = x)] = -1.2 x (and do(X0) acts through X1): the minimum is at +3
    assert best_gain.value == 3.0 and best_gain.variable in ("X0", "X1")


def test_a_frozen_surrogate_holds_the_belief_after_the_initial_rows_for_the_whole_episode():
    env = make_causal_env(active=False)()
    first = env.reset(**scm_row(chain5(), seed=1, budget=4, initial_samples=20))
    at_reset = env.belief
    live = _env()  # the same row, its surrogate active: the same options at reset
    assert live.belief.options == at_reset.options and at_reset.known and at_reset.teacher_choice is not None
    replies = [env.observe(), env.observe(), env.intervene("X0", -1.0)]
    lines = ["\n".join(r.splitlines()[1:]) for r in replies]
    assert lines[0] == lines[1] == first[first.index("Options"):]  # data that would move a live belief moves nothing
    # after an intervention the gains are measured from the better incumbent, but the posterior's terms stay put
    info_at_reset = {o.call: o.info for o in at_reset.candidates}
    assert {o.call: o.info for o in env.belief.candidates} == info_at_reset
    assert env.surrogate.updates == 1
    live.observe()
    assert live.belief.options != at_reset.options


def test_an_active_surrogates_options_move_with_the_data_and_repeat_for_the_same_history():
    def replies():
        env = _env()
        return [env.intervene("X1", 3.0), env.intervene("X0", -3.0)]

    a, b = replies(), replies()
    assert a == b  # a GRPO group's rollouts that make the same calls read the same options
    assert a[0].splitlines()[1:] != a[1].splitlines()[1:]


def test_the_noop_surrogate_shows_its_prior_marginals_without_effects():
    env = make_causal_env("noop")()
    env.reset(**scm_row(chain5(), seed=1, budget=4, initial_samples=20))
    assert not env.belief.known and {o.variable for o in env.belief.options} == {"X0", "X1", "X3", "X4"}


def test_the_teacher_sets_the_last_option_the_one_step_rule_its_best_and_both_observe_when_effects_are_unknown():
    env = _env()
    rng = np.random.default_rng(0)
    last, best = env.belief.options[-1], env.belief.best
    assert TeacherPolicy()(env, rng) == ("choose", {"option": len(env.belief.options)})
    assert OneStepPolicy()(env, rng) == ("choose", {"option": env.belief.number(best)})
    env.choose(len(env.belief.options))
    step = env.trace.steps[-1]
    assert step.intervention == last.call and step.follows_teacher and step.follows_one_step == (last.call == best.call)
    unknown = make_causal_env("noop")()
    unknown.reset(**scm_row(chain5(), seed=1, budget=4, initial_samples=20))
    assert TeacherPolicy()(unknown, rng) == OneStepPolicy()(unknown, rng) == ("observe", {})
    with pytest.raises(ValueError, match="reset"):
        TeacherPolicy()(CausalEnv(), rng)


def test_grid_values_lie_inside_the_range_at_one_decimal():
    assert grid_values(-3.0, 3.0, 2).tolist() == [-3.0, 3.0]
    assert grid_values(-0.25, 0.75, 2).tolist() == [-0.2, 0.7]  # the ends rounded inward, never outside
    inner = grid_values(-5.0, 20.0, 9)
    assert inner[0] == -5.0 and inner[-1] == 20.0 and len(inner) == 9 and np.all(np.diff(inner) > 0)
    assert grid_values(0.01, 0.04, 2).tolist() == [0.01, 0.04]  # narrower than a decimal: its own ends


def test_a_nonlinear_surrogates_candidates_reach_the_neighbourhood_of_an_interior_optimum():
    # CBO toy graph (examples/scms/cbo_toy.yaml): E[Y | do(Z = z)] = cos(z) - exp(-z / 20), minimised at z = -3.20
    # (-2.1718), inside Z's range [-5, 20]. With 9 values per variable the nearest candidate was Z = -1.9 (0.75 away);
    # the options can only be as good as the candidates they are chosen from.
    scm = load_scm_file(Path(__file__).resolve().parents[3] / "examples" / "scms" / "cbo_toy.yaml")
    env = make_causal_env("additive")()
    env.reset(**scm_row(scm, seed=0))
    values = np.array([o.value for o in env.belief.candidates if o.variable == "Z"])
    best = np.min(np.cos(values) - np.exp(-values / 20))
    assert best - (-2.1718) < 0.05
