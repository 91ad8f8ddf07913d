"""The intervention environment: tools, budget, counted invalid calls, records, reproducibility, configuration."""

import filecmp
import json
import keyword

import numpy as np
import pytest

from tests.tasks.causal.helpers import chain5
from training.run_setup.prompt_datasets import load_rows
from training.tasks.causal import splits as causal_task
from training.tasks.causal.env import CausalEnv, make_causal_env
from training.tasks.causal.episode_traces import INVALID_KINDS
from training.tasks.causal.row_schema import EpisodeError, scm_from_json
from training.tool_use.system_prompt import tool_schemas
from training.tool_use.tool_names import environment_tool_names


def row(**over):
    base = {"scm_json": chain5().to_json(), "seed": 3, "budget": 6, "initial_samples": 4}
    return {**base, **over}


def test_only_intervene_choose_and_observe_are_tools_with_typed_schemas():
    assert environment_tool_names(CausalEnv) == ["choose", "intervene", "observe"]
    schema = {s["function"]["name"]: s["function"]["parameters"] for s in tool_schemas(CausalEnv)}
    assert schema["intervene"]["properties"]["variable"]["type"] == "string"
    assert schema["intervene"]["properties"]["value"]["type"] == "number"
    assert schema["choose"]["properties"]["option"]["type"] == "integer"
    assert schema["observe"]["properties"] == {}


def test_choose_makes_the_listed_options_intervention_and_refuses_a_number_not_listed():
    env = CausalEnv()
    env.reset(**row(budget=3))
    options = env.belief.options
    env.choose(len(options))
    step = env.trace.steps[-1]
    assert step.valid and step.tool == "choose" and step.arguments == {"option": len(options)}
    assert step.intervention == options[-1].call and step.expected_target == pytest.approx(
        env.scm.expected_target({options[-1].variable: options[-1].value}))
    state = (env._rng.bit_generator.state, env.surrogate.updates)
    for bad in (0, len(env.belief.options) + 1, "1", 1.0, True):
        assert env.choose(bad).startswith("error: option must be the number of one the last reply listed (1 to ")
    assert env.trace.invalid["unknown_option"] == 5 and (env._rng.bit_generator.state, env.surrogate.updates) == state
    unknown = make_causal_env("noop")()
    unknown.reset(**row(budget=3))
    assert "none (the effects are unknown: observe)" in unknown.choose(1)


def test_reset_summarises_initial_data_and_a_call_reports_the_target_the_calls_left_and_the_options():
    env = CausalEnv()
    text = env.reset(**row())
    rows = chain5().sample(4, np.random.default_rng(3))  # reset's first draw: the initial observational rows
    corr = np.corrcoef(rows, rowvar=False)[2]
    expected = ", ".join(f"X{j} {corr[j]:+.1f}" for j in (0, 1, 3, 4))
    assert text == f" Budget: 6 calls. 4 samples, correlation with X2: {expected}. {env.belief.line()}"
    assert env.surrogate.updates == 1
    out = env.intervene("X1", 2.0)
    step = env.trace.steps[-1]
    assert out.splitlines()[0] == f"X2={step.rows[0, 2]:.1f} (5 calls left)"  # the target alone: the rows are kept
    assert step.rows.shape == (1, 5) and step.rows[0, 1] == 2.0 and "\n".join(out.splitlines()[1:]) == env.belief.line()
    assert step.valid and step.expected_target == pytest.approx(-2.4)
    assert step.info_gain == pytest.approx(step.entropy_before - step.entropy_after)
    assert step.entropy_before != step.entropy_after and env.surrogate.updates == 2
    observed = env.observe().splitlines()[0]  # 3 rows: the target's three values
    assert observed.startswith("X2=") and observed.count("X2=") == 3 and observed.endswith("(4 calls left)")


def test_each_call_updates_the_surrogate_at_once_and_a_frozen_one_never():
    env = CausalEnv()
    env.reset(**row(budget=4))
    env.intervene("X1", 1.0)
    assert env.surrogate.updates == 2 and env.episode_metrics["surrogate/updates"] == 2.0
    env.intervene("X7", 1.0)  # refused: no such variable
    metrics = env.episode_metrics
    assert set(metrics) == {"causal/info_gain", "causal/posterior_entropy", "causal/regret", "causal/parent_f1",
                            "causal/invalid_calls", "surrogate/updates", "tools/valid_calls",
                            *(f"tools/refused/{kind}" for kind in INVALID_KINDS)}
    assert metrics["tools/valid_calls"] == 1.0 and metrics["tools/refused/unknown_variable"] == 1.0
    assert metrics["causal/invalid_calls"] == 1.0 and metrics["tools/refused/out_of_bounds"] == 0.0
    frozen = make_causal_env(active=False)()
    frozen.reset(**row(budget=4))
    frozen.intervene("X1", 1.0)
    assert frozen.trace.steps[0].info_gain == 0.0 and frozen.surrogate.updates == 1  # the initial rows only
    assert frozen.trace.steps[0].expected_info_gain == 0.0


def test_every_invalid_kind_is_answered_counted_and_changes_nothing():
    env = CausalEnv()
    env.reset(**row(budget=1))
    state = (env._rng.bit_generator.state, env.surrogate.updates, env.surrogate.entropy())
    calls = {"unknown_variable": ("X7", 1.0), "target_variable": ("X2", 1.0), "bad_value_type": ("X1", "big"),
             "non_finite": ("X1", float("nan")), "out_of_bounds": ("X1", 9.0)}
    for kind, args in calls.items():
        assert env.intervene(*args).startswith("error: ")
    assert (env._rng.bit_generator.state, env.surrogate.updates, env.surrogate.entropy()) == state
    assert env.trace.used == 0
    env.intervene("X1", 1.0)
    assert env.intervene("X1", 1.0) == "error: budget of 1 calls used up"
    assert env.observe().startswith("error: budget")
    assert dict(env.trace.invalid) == {**{k: 1 for k in calls}, "budget_exceeded": 2}
    assert set(env.trace.invalid) <= set(INVALID_KINDS)
    assert env.trace.metrics()["causal/invalid_calls"] == 7 and env.trace.used == 1
    assert all(s.info_gain == 0.0 and s.expected_target is None for s in env.trace.steps if not s.valid)


def test_same_row_same_samples_and_posterior_trajectory():
    def episode():
        env = CausalEnv()
        texts = [env.reset(**row())]
        texts += [env.intervene("X3", -1.5), env.observe(), env.intervene("X0", 3.0)]
        return texts, [(s.entropy_before, s.entropy_after) for s in env.trace.steps]

    assert episode() == episode()
    other = CausalEnv()
    assert other.reset(**row(seed=4)) != episode()[0][0]


def test_regret_uses_expected_values_and_never_goes_below_zero():
    env = CausalEnv()
    env.reset(**row(scm_json=chain5(target="X4").to_json()))
    opt = env.scm.optimum()
    assert env.trace.regret == pytest.approx(opt.expected - env.scm.expected_target())
    env.intervene("X0", 0.5)
    r1 = env.trace.regret
    env.intervene(opt.variable, opt.value)
    assert env.trace.regret == 0.0 and r1 > 0 and env.trace.steps[-1].regret == 0.0
    env.intervene("X0", 0.5)  # a worse call later does not undo the best so far
    assert env.trace.regret == 0.0


def test_frozen_and_noop_surrogates_never_learn():
    frozen = make_causal_env("exact", active=False)()
    frozen.reset(**row())
    h = frozen.surrogate.entropy()
    frozen.intervene("X1", 1.0)
    assert frozen.surrogate.updates == 1 and frozen.surrogate.entropy() == h
    assert frozen.trace.steps[-1].info_gain == 0.0
    noop = make_causal_env("noop")()
    noop.reset(**row())
    noop.intervene("X1", 1.0)
    assert noop.trace.metrics()["surrogate/updates"] == 0.0
    with pytest.raises(ValueError, match="surrogate"):
        make_causal_env("oracle")


def test_reset_refuses_rows_it_cannot_run():
    with pytest.raises(EpisodeError, match="scm_json"):
        CausalEnv().reset(seed=1)
    with pytest.raises(EpisodeError, match="seed"):
        CausalEnv().reset(scm_json=chain5().to_json())
    with pytest.raises(EpisodeError, match="budget"):
        CausalEnv().reset(**row(budget=0))
    with pytest.raises(EpisodeError, match="target"):
        CausalEnv().reset(**row(target="X4"))
    with pytest.raises(EpisodeError, match="before reset"):
        CausalEnv().observe()


def nan_scm_json() -> str:
    """chain5 with X2's mechanism P / (P - P) of its parent P: valid in the language, inf or NaN on every sample."""
    spec = json.loads(chain5().to_json())
    parents = spec["mechanisms"]["X2"]["parents"]
    x = parents[0]
    spec["mechanisms"]["X2"] = {"kind": "expression", "parents": parents, "expression": f"{x} / ({x} - {x})"}
    return json.dumps(spec)


def test_check_row_refuses_before_any_episode_what_reset_or_the_episode_would_fail_on():
    for bad, named in [
        ({"seed": 1}, "scm_json"),
        (row(seed=None), "seed"),
        (row(budget=0), "budget"),
        (row(target="X4"), "target"),
        (row(scm_json="{not json"), "not valid JSON"),
        (row(scm_json=nan_scm_json()), "variable X2's mechanism"),
    ]:
        with pytest.raises(EpisodeError, match=named):
            CausalEnv.check_row(bad)


def test_check_row_computes_the_optimum_the_episodes_then_reuse():
    good = row()
    CausalEnv.check_row(good)
    assert "_optimum" in scm_from_json(good["scm_json"]).__dict__


@pytest.mark.slow
def test_generator_rewrites_the_shipped_splits_byte_for_byte(tmp_path):
    """The whole splits (about a minute of CPU: the teacher's traces of 256 train rows)."""
    causal_task.write_splits(tmp_path)
    for name in ("train.jsonl", "heldout.jsonl"):
        assert filecmp.cmp(tmp_path / name, causal_task.DATA_DIR / name, shallow=False), name


@pytest.mark.parametrize(("split", "start"), [("train", 0), ("train", 203), ("heldout", 29)])
def test_generator_rewrites_shipped_rows_byte_for_byte(split, start):
    """A few rows of each split, in the default run (the whole files: the slow test above)."""
    n = causal_task.N_TRAIN if split == "train" else causal_task.N_HELDOUT
    stop = min(start + 3, n)
    rows = causal_task.make_rows(split, stop, causal_task.bundled_scm, start=start, teacher=split == "train")
    with open(causal_task.DATA_DIR / f"{split}.jsonl") as f:
        shipped = f.read().splitlines()[start:stop]
    assert [json.dumps(r) for r in rows] == shipped


def test_bundled_rows_run_in_the_environment_and_prompt_names_everything():
    train = load_rows(causal_task.DATA_DIR / "train.jsonl")
    heldout = load_rows(causal_task.DATA_DIR / "heldout.jsonl")
    assert len(train) == causal_task.N_TRAIN and len(heldout) == causal_task.N_HELDOUT
    assert {r["scm_json"] for r in train}.isdisjoint(r["scm_json"] for r in heldout)
    assert {r["family"] for r in train} == {"chain", "fork", "star", "er"}
    assert 0.1 < np.mean([r["mechanism"] == "nonlinear" for r in train]) < 0.5
    assert all(len(json.loads(r["reference_calls_json"])) == r["budget"] for r in train)  # the teacher never stops
    for split in (train, heldout):  # names, sizes, ranges and goals vary
        assert {r["n_vars"] for r in split} == set(causal_task.SIZES)
        assert {r["goal"] for r in split} == {"max", "min"}
        assert len({r["target"] for r in split}) > 20
        assert any(keyword.iskeyword(v) for r in split for v in json.loads(r["scm_json"])["variables"])
        assert len({tuple(lohi) for r in split for lohi in json.loads(r["scm_json"])["ranges"].values()}) > 5
    for r in heldout:
        env = CausalEnv()
        reset_text = env.reset(**r)
        v = env.scm.actionable[0]
        assert not env.intervene(v, 1.0).startswith("error")
        text = r["prompt"][0]["content"]
        assert r["prompt"] == causal_task.causal_prompt(r)
        assert all(x in text for x in env.scm.variables) and f"Target: {r['target']}." in text
        settable = text.split("Set one of ", 1)[1]
        assert all(v in settable for v in env.scm.actionable) and env.scm.target not in settable.replace(",", " ").split()
        assert all(f"[{lo:g}, {hi:g}]" in settable for lo, hi in env.scm.ranges.values())
        assert f"Budget: {r['budget']} calls." in reset_text
