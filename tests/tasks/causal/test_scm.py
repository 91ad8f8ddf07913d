"""SCMs: sampling under hard interventions, exact and Monte-Carlo expectations, optima, families, JSON round trip."""

import numpy as np
import pytest

from tests.tasks.causal.helpers import chain5
from training.tasks.causal.scm.families import FAMILIES, random_scm
from training.tasks.causal.scm.scm import SCM, ExpressionMechanism, InterventionError, LinearMechanism, SCMError


def test_hard_intervention_fixes_the_variable_and_cuts_its_mechanism():
    scm = chain5()
    x = scm.sample(2000, np.random.default_rng(0), do={"X1": 2.5})
    assert np.all(x[:, 1] == 2.5)
    # X0 is upstream and unaffected; X2 = -1.2 * 2.5 + noise
    assert abs(x[:, 0].mean()) < 0.1 and abs(x[:, 2].mean() + 3.0) < 0.1
    assert abs(np.corrcoef(x[:, 0], x[:, 2])[0, 1]) < 0.1  # the edge X0 -> X1 is cut


def test_linear_expected_target_is_the_total_effect_and_matches_sampling():
    scm = chain5(target="X4")
    # do(X1 = 2): E[X4] = 2 * (-1.2) * 0.9 * 1.1
    assert scm.expected_target({"X1": 2.0}) == pytest.approx(2 * -1.2 * 0.9 * 1.1, abs=1e-12)
    x = scm.sample(40000, np.random.default_rng(1), do={"X1": 2.0})
    assert x[:, 4].mean() == pytest.approx(scm.expected_target({"X1": 2.0}), abs=0.05)


@pytest.mark.parametrize("family", FAMILIES)
def test_linear_optimum_is_exact_against_a_fine_grid(family):
    for seed in range(3):
        scm = random_scm(family, 5, seed)
        opt = scm.optimum()
        brute = max(scm.expected_target({v: float(x)}) for v in scm.actionable for x in np.linspace(-3, 3, 601))
        assert opt.exact and opt.expected == pytest.approx(brute, abs=1e-12)
        assert opt.value in (-3.0, 3.0)


def test_min_goal_mirrors_the_optimum():
    spec = chain5(target="X4").to_dict()
    spec["goal"] = "min"
    scm_min, scm_max = SCM.from_dict(spec), chain5(target="X4")
    assert scm_min.optimum().expected == pytest.approx(-scm_max.optimum().expected)


@pytest.mark.parametrize("family", ["chain", "er", "fork"])
def test_nonlinear_optimum_within_tolerance_of_brute_force(family):
    scm = random_scm(family, 4, 7, "nonlinear")
    opt = scm.optimum()
    grid = np.linspace(-3, 3, 3001)
    brute = max(scm.expected_target({v: float(x)}) for v in scm.actionable for x in grid)
    assert not opt.exact
    assert opt.expected >= brute - 1e-6  # grid spacing 0.002: refinement is at least as good
    assert opt.expected <= brute + 1e-3
    # and the Monte-Carlo estimator itself is close to a 16x larger independent Monte-Carlo estimate
    big = scm.sample(65536, np.random.default_rng(3), {opt.variable: opt.value})[:, scm.index[scm.target]].mean()
    _, stderr = scm.expected_target_and_stderr({opt.variable: opt.value})
    assert abs(big - opt.expected) < 5 * (stderr + scm.noise_std[scm.index[scm.target]] / 256)


def test_refused_interventions_name_their_kind():
    scm = chain5()
    cases = {("X9", 1.0): "unknown_variable", ("X2", 1.0): "target_variable", ("X1", "1"): "bad_value_type",
             ("X1", True): "bad_value_type", ("X1", float("inf")): "non_finite", ("X1", float("nan")): "non_finite",
             ("X1", 3.01): "out_of_bounds", ("X1", -3.5): "out_of_bounds"}
    for (var, val), kind in cases.items():
        with pytest.raises(InterventionError) as err:
            scm.sample(1, np.random.default_rng(0), {var: val})
        assert err.value.kind == kind, (var, val)
    assert scm.check_intervention("X1", 3) == ("X1", 3.0)  # ints and the closed bounds are fine


def test_asymmetric_ranges_are_respected():
    spec = chain5().to_dict()
    spec["ranges"]["X1"] = [0.5, 7.0]
    scm = SCM.from_dict(spec)
    assert scm.check_intervention("X1", 7.0)[1] == 7.0
    with pytest.raises(InterventionError, match=r"\[0.5, 7\]"):
        scm.check_intervention("X1", 0.0)
    assert scm.optimum().value in (0.5, 7.0, -3.0, 3.0)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("d", [3, 6, 10])
def test_families_have_their_documented_shape(family, d):
    scm = random_scm(family, d, 11)
    a = scm.adjacency()
    t = scm.index[scm.target]
    n_parents, n_children = a[:, t].sum(), a[t, :].sum()
    if family == "chain":
        assert a.sum() == d - 1 and a.sum(0).max() == 1 and a.sum(1).max() == 1
        assert n_parents == 1 and n_children == 1  # the target sits second to last
    elif family == "fork":
        assert a.sum() == d - 1 and n_parents == 1 and n_children == 0 and a.sum(1).max() == d - 1
    elif family == "star":
        assert n_parents == d - 1 and a.sum() == d - 1
    else:
        assert n_parents >= 1
    for v, m in scm.mechanisms.items():
        assert all(0.5 <= abs(w) <= 1.5 for w in m.weights)
    assert all(r == (-3.0, 3.0) for r in scm.ranges.values())


def test_names_are_permuted_so_the_target_is_not_always_the_same_name():
    assert len({random_scm("star", 5, s).target for s in range(12)}) > 2


def test_generation_and_json_round_trip_are_reproducible():
    for mech in ("linear", "nonlinear"):
        a, b = random_scm("er", 6, 3, mech), random_scm("er", 6, 3, mech)
        assert a.to_json() == b.to_json()
        c = SCM.from_json(a.to_json())
        assert c.to_json() == a.to_json()
        x1 = a.sample(5, np.random.default_rng(9), {a.actionable[0]: 1.5})
        x2 = c.sample(5, np.random.default_rng(9), {a.actionable[0]: 1.5})
        assert np.array_equal(x1, x2)
    assert random_scm("er", 6, 3).to_json() != random_scm("er", 6, 4).to_json()


def test_bad_specs_raise_naming_the_field():
    with pytest.raises(SCMError, match="cycle"):
        SCM(["A", "B"], {"A": LinearMechanism(("B",), (1.0,)), "B": LinearMechanism(("A",), (1.0,))},
            {"A": 1, "B": 1}, {"A": (-1, 1)}, "B")
    with pytest.raises(SCMError, match="goal"):
        SCM(["A", "B"], {"A": LinearMechanism((), ()), "B": LinearMechanism(("A",), (1.0,))},
            {"A": 1, "B": 1}, {"A": (-1, 1)}, "B", goal="maximise")
    with pytest.raises(SCMError, match=r"ranges.A"):
        SCM(["A", "B"], {"A": LinearMechanism((), ()), "B": LinearMechanism(("A",), (1.0,))},
            {"A": 1, "B": 1}, {"A": (1, -1)}, "B")
    with pytest.raises(SCMError, match="does not use its parent"):
        ExpressionMechanism(("A", "C"), "sin(A)")
    with pytest.raises(SCMError, match="n_vars"):
        random_scm("chain", 101, 0)


@pytest.mark.parametrize("family", FAMILIES)
def test_expected_targets_of_many_values_equal_expected_target_value_for_value(family):
    """The grid searches of the optimum and the reward's worst case propagate only the variables on a path from the
    intervened variable to the target, many values at once: the numbers must be the very ones `expected_target`
    gives, bit for bit (the bundled optima, regrets and rewards must not move)."""
    scm = random_scm(family, 6, seed=11, mechanism="nonlinear")
    for var in scm.actionable:
        grid = np.linspace(*scm.ranges[var], 45)  # more than one chunk of values at once
        fast = scm.expected_targets(var, grid)
        assert fast.tolist() == [scm.expected_target({var: float(v)}) for v in grid], var
    with pytest.raises(InterventionError):
        scm.expected_targets(scm.actionable[0], [99.0])
