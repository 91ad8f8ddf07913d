"""Users' YAML SCMs and the restricted expression language; the published CBO toy SCM and its optimum."""

import copy

import numpy as np
import pytest
import yaml

from training.tasks.causal.scm.expressions import ExpressionError, compile_expression
from training.tasks.causal.scm.user_scm import UserSCMError, load_user_scm, scm_from_spec

TOY = "examples/scms/cbo_toy.yaml"


def test_cbo_toy_optimum_matches_the_paper():
    scm = load_user_scm(TOY)
    assert scm.parents() == {"Z"} and scm.goal == "min"
    opt = scm.optimum()
    # Aglietti et al. 2020 report do(Z = -3.20), E[Y] = -2.17; the stationary point sin z = exp(-z/20)/20 gives
    # z = -3.20030, cos z - exp(-z/20) = -2.17181.
    assert opt.variable == "Z"
    assert opt.value == pytest.approx(-3.20, abs=0.005) and opt.expected == pytest.approx(-2.17, abs=0.005)
    assert opt.value == pytest.approx(-3.200303, abs=1e-4) and opt.expected == pytest.approx(-2.171806, abs=1e-6)
    # do(X) reaches no better: E[Y | do(X)] >= the Z optimum everywhere on X's range
    assert min(scm.expected_target({"X": float(x)}) for x in np.linspace(-5, 5, 101)) > opt.expected + 0.5


def test_toy_samples_follow_the_equations():
    scm = load_user_scm(TOY)
    x = scm.sample(20000, np.random.default_rng(0), {"X": 1.0})
    z, y = x[:, 1], x[:, 2]
    assert np.all(x[:, 0] == 1.0) and z.mean() == pytest.approx(np.exp(-1.0), abs=0.03)
    assert (y - (np.cos(z) - np.exp(-z / 20))).std() == pytest.approx(1.0, abs=0.03)


def spec():
    with open(TOY) as f:
        return yaml.safe_load(f)


@pytest.mark.parametrize("edit, field", [
    (lambda s: s.pop("target"), "'target'"),
    (lambda s: s.update(goal="lowest"), "goal"),
    (lambda s: s["variables"]["Z"].update(mechanism="__import__('os').system('true')"), "variables.Z.mechanism"),
    (lambda s: s["variables"]["Z"].update(mechanism="X.real"), "variables.Z.mechanism"),
    (lambda s: s["variables"]["Z"].update(mechanism="exp(-X) + Y"), "variables.Z.mechanism"),
    (lambda s: s["variables"]["Z"].update(mechanism="3.0"), "variables.Z.mechanism"),  # edge X -> Z unused
    (lambda s: s["variables"]["Z"].update(range=[20, -5]), "variables.Z.range"),
    (lambda s: s["variables"]["Z"].update(noise_std="big"), "variables.Z.noise_std"),
    (lambda s: s["variables"]["Z"].update(colour="red"), "variables.Z"),
    (lambda s: s["variables"]["Y"].update(range=[0, 1]), "variables.Y.range"),
    (lambda s: (s["edges"].append(["Z", "X"]), s["variables"]["X"].update(mechanism="Z")), "cycle"),
    (lambda s: s["edges"].append(["Q", "X"]), "edges[2]"),
])
def test_bad_user_scms_raise_naming_the_field(edit, field):
    s = copy.deepcopy(spec())
    edit(s)
    with pytest.raises(UserSCMError) as err:
        scm_from_spec(s, where="toy")
    assert field in str(err.value)


def test_expression_language_is_arithmetic_and_whitelisted_functions_only():
    f = compile_expression("2 * tanh(A) - B ** 2 / (1 + abs(B)) + pi", {"A", "B"})
    a, b = np.array([0.3, -1.0]), np.array([2.0, 0.5])
    assert np.allclose(f({"A": a, "B": b}), 2 * np.tanh(a) - b ** 2 / (1 + np.abs(b)) + np.pi)
    assert f.names == {"A", "B"}
    for bad in ("open('x')", "A.__class__", "[A][0]", "A if B else 0", "lambda: 1", "'s'", "A < B", "exp(x=A)",
                "exp(A, B)", "np.exp(A)"):
        with pytest.raises(ExpressionError):
            compile_expression(bad, {"A", "B"})


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(UserSCMError, match="does not exist"):
        load_user_scm(tmp_path / "none.yaml")
    (tmp_path / "bad.yaml").write_text("variables: [unclosed")
    with pytest.raises(UserSCMError, match="not valid YAML"):
        load_user_scm(tmp_path / "bad.yaml")


@pytest.mark.parametrize("mechanism, named", [
    ("exp(1000) * X", "variable Z's mechanism 'exp(1000) * X' gives inf at X="),
    ("X / (X - X)", "variable Z's mechanism 'X / (X - X)' gives inf at X="),
    ("log(-1 - X * X)", "variable Z's mechanism 'log(-1 - X * X)' gives nan at X="),
    ("exp(-X) + 1/0", "variable Z's mechanism 'exp(-X) + 1/0' raises ZeroDivisionError"),
    ("X + 10.0**400", "variable Z's mechanism 'X + 10.0**400' raises OverflowError"),
    ("1e999 * X", "the literal '1e999' is out of bounds"),
    ("X * " + "1" * 400, "has 400 characters; numbers may have at most 40"),
    ("-" * 50_000 + "X", "nests deeper than 50 levels"),
    ("exp(" * 60 + "X" + ")" * 60, "nests deeper than 50 levels"),
    (" + ".join(["X"] * 3000), "more than 200 terms"),
    ("sqrt(X + 4.5)", "gives nan at X=-5 under do(X = -5)"),  # finite on the sample, not at the range's end
])
def test_an_scm_that_is_not_finite_on_its_range_or_outside_the_bounds_is_refused_naming_the_variable(mechanism, named):
    s = copy.deepcopy(spec())
    s["variables"]["Z"]["mechanism"] = mechanism
    with pytest.raises(UserSCMError) as err:
        scm_from_spec(s, where="toy")
    assert named in str(err.value)
    assert len(str(err.value)) < 400  # a 50,000-character expression is not repeated


def test_a_file_that_is_not_utf8_is_named(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(open(TOY, "rb").read().replace(b"cbo_toy", "caf\u00e9".encode("latin-1")))
    with pytest.raises(UserSCMError) as err:
        load_user_scm(path)
    assert str(err.value).startswith(f"{path}: not UTF-8 (byte ") and "\n" not in str(err.value)


def test_expressions_within_the_bounds_still_compile():
    inside = ["-" * 49 + "X", "exp(" * 49 + "X" + ")" * 49, " + ".join(["X"] * 200), "X * 1e12", "X * 0.000001"]
    for source in inside:
        compile_expression(source, {"X"})


def test_a_variable_may_be_named_as_a_python_keyword():
    """Names are the user's: a crop's `yield`, a portfolio's `return` (issue 41: the parser refused them as syntax)."""
    spec = {"target": "yield", "goal": "max", "edges": [["rain", "yield"], ["yield", "return"]],
            "variables": {"rain": {"mechanism": "0"}, "yield": {"mechanism": "2 * rain - 0.1 * square(rain)"},
                          "return": {"mechanism": "0.5 * yield"}}}
    scm = scm_from_spec(spec)
    assert scm.parents() == {"rain"} and scm.parents("return") == {"yield"}
    assert scm.expected_target({"rain": 1.0}) == pytest.approx(1.9, abs=0.05)
    again = type(scm).from_json(scm.to_json())
    assert again.expected_target({"return": 2.0}) == pytest.approx(scm.expected_target({"return": 2.0}))
    assert compile_expression("yield * 2", {"yield"})({"yield": np.array([3.0])}) == 6.0
    with pytest.raises(ExpressionError, match="not a valid expression"):
        compile_expression("yield * 2", {"rain"})  # a keyword that is not one of the names: still not an expression


def test_an_scm_with_keyword_names_runs_in_the_environment():
    from training.tasks.causal.env import CausalEnv
    from training.tasks.causal.splits import scm_row

    spec = {"target": "yield", "edges": [["rain", "yield"], ["lambda", "yield"]],
            "variables": {"rain": {"mechanism": "0"}, "lambda": {"mechanism": "0"},
                          "yield": {"mechanism": "cos(rain) + lambda"}}}
    env = CausalEnv()
    env.reset(**scm_row(scm_from_spec(spec), seed=0))
    assert env.intervene("lambda", 3.0).startswith("yield=") and env.trace.steps[-1].valid
