"""Bad input stops before any work with exit 2 and one `error:` line that names the key, flag, file, row or path.

Each case runs the real entry point (`training.train.cli`) in-process and checks the exit status, that stderr holds
exactly one line starting with `error:` (its last) naming the culprit and no traceback, and that nothing was trained:
by default against an output_dir holding a finished earlier run, run over with `--overwrite_output_dir true` (or, for
the import paths, resumed with `--resume_from_checkpoint true`), whose files must be byte-identical afterwards
(tests/support/run_snapshot.py)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.run_snapshot import snapshot, write_finished_run
from training import train
from training.run_setup import recipe as recipe_setup

RECIPE = Path("recipes/tiny_cpu.yaml")
CAUSAL_RECIPE = Path("recipes/causal_cpu.yaml")


OVER_AN_EARLIER_RUN = {"overwrite": ["--overwrite_output_dir", "true"], "resume": ["--resume_from_checkpoint", "true"]}


def cli_error(monkeypatch, capsys, out: Path, *argv: str, recipe: Path = RECIPE, earlier_run: str | None = "overwrite"
              ) -> str:
    """Run the CLI; assert exit 2 before any work, one `error:` line and no traceback; return the `error:` line.
    `earlier_run` ("overwrite" or "resume"): `out` first holds a finished run, run over with --overwrite_output_dir
    or resumed with --resume_from_checkpoint true, and must be left byte-identical. None: `out` is left as it is.
    """
    extra = []
    if earlier_run:
        out.mkdir(parents=True)
        write_finished_run(out)
        extra = OVER_AN_EARLIER_RUN[earlier_run]
    before = snapshot(out) if earlier_run else None
    monkeypatch.setattr(sys, "argv", ["train", "--config", str(recipe), "--output_dir", str(out), *extra, *argv])
    monkeypatch.setattr(train, "StrictGRPOTrainer", lambda *a, **k: pytest.fail("bad input reached the trainer"))
    monkeypatch.setattr(recipe_setup, "supervised_warm_start", lambda *a, **k: pytest.fail("bad input reached the warm start"))
    monkeypatch.setattr(recipe_setup, "trace_warm_start", lambda *a, **k: pytest.fail("bad input reached the warm start"))
    with pytest.raises(SystemExit) as exit_info:
        train.cli()
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err, "no message"
    assert err[-1].startswith("error: "), err[-1]
    assert [line for line in err if line.startswith("error:")] == [err[-1]], err
    assert "Traceback" not in "\n".join(err)
    if earlier_run:
        assert snapshot(out) == before, "refused input changed the earlier run's files"
    else:
        assert not (out / "metrics.jsonl").exists()
    return err[-1]


def recipe_with(tmp_path: Path, **changes) -> Path:
    """The default recipe with some keys replaced (YAML values written as given)."""
    lines = [
        line for line in RECIPE.read_text().splitlines() if line.split(":", 1)[0].strip() not in changes
    ]
    lines += [f"{key}: {value}" for key, value in changes.items()]
    path = tmp_path / "recipe.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


# ---- flags and recipe values ---------------------------------------------------------------------------------------
def test_unknown_flag_is_named_with_the_nearest_flag(tmp_path, monkeypatch, capsys):
    line = cli_error(monkeypatch, capsys, tmp_path / "o", "--lerning_rate", "0.1")
    assert line.startswith("error: unknown flag --lerning_rate") and "--learning_rate" in line


def test_abbreviated_flag_is_not_taken_for_the_full_one(tmp_path, monkeypatch, capsys):
    line = cli_error(monkeypatch, capsys, tmp_path / "o", "--learning_rat", "0.1")
    assert line.startswith("error: unknown flag --learning_rat ") and "--learning_rate" in line


@pytest.mark.parametrize("count", ["0", "1", "5"])
def test_bad_num_generations_is_named(tmp_path, monkeypatch, capsys, count):
    line = cli_error(monkeypatch, capsys, tmp_path / "o", "--num_generations", count)
    assert f"num_generations={count}" in line
    if count == "5":
        assert "does not divide" in line and "64" in line


def test_flag_value_of_the_wrong_type_is_named(tmp_path, monkeypatch, capsys):
    line = cli_error(monkeypatch, capsys, tmp_path / "o", "--lora_r", "1.5")
    assert "--lora_r" in line and "'1.5'" in line


def test_fractional_lora_rank_in_a_recipe_is_named(tmp_path, monkeypatch, capsys):
    line = cli_error(monkeypatch, capsys, tmp_path / "o", recipe=recipe_with(tmp_path, lora_r="1.5"))
    assert "lora_r=1.5 must be an integer" in line and "recipe.yaml" in line


def test_zero_batch_size_is_named(tmp_path, monkeypatch, capsys):
    line = cli_error(monkeypatch, capsys, tmp_path / "o", recipe=recipe_with(tmp_path, per_device_train_batch_size=0))
    assert "per_device_train_batch_size=0" in line


def test_negative_warm_start_steps_is_named(tmp_path, monkeypatch, capsys):
    line = cli_error(monkeypatch, capsys, tmp_path / "o", "--warm_start_steps", "-3")
    assert "warm_start_steps=-3" in line


def test_scalar_reward_funcs_is_named_as_a_whole(tmp_path, monkeypatch, capsys):
    recipe = recipe_with(tmp_path, reward_funcs="training.tasks.larger_number.rewards.exact_answer_reward")
    line = cli_error(monkeypatch, capsys, tmp_path / "o", recipe=recipe)
    assert "reward_funcs='training.tasks.larger_number.rewards.exact_answer_reward' must be a list" in line
    assert "'t'" not in line


# ---- files and paths -----------------------------------------------------------------------------------------------
def test_non_utf8_data_file_is_named_with_its_line(tmp_path, monkeypatch, capsys):
    data = tmp_path / "latin1.jsonl"
    good = '{"prompt": [{"role": "user", "content": "Which is larger: 1 or 2?"}], "answer": "2"}\n'
    data.write_bytes(good.encode() + '{"prompt": "caf\u00e9?", "answer": "1"}\n'.encode("latin-1"))
    line = cli_error(monkeypatch, capsys, tmp_path / "o", "--train_file", str(data))
    assert str(data) in line and "line 2" in line and "UTF-8" in line


def test_model_directory_whose_config_is_empty_is_named(tmp_path, monkeypatch, capsys):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    line = cli_error(monkeypatch, capsys, tmp_path / "o", "--model_name_or_path", str(model))
    assert str(model) in line and "model_type" in line


def test_output_dir_that_is_a_file_is_named(tmp_path, monkeypatch, capsys):
    out = tmp_path / "taken"
    out.write_text("not a directory")
    line = cli_error(monkeypatch, capsys, out, earlier_run=None)
    assert line == f"error: output_dir {str(out)!r} is a file, not a directory"


@contextlib.contextmanager
def read_only(path: Path):
    """`path` made read-only, for root too (the immutable attribute) where chattr works, else by its mode."""
    path.mkdir()
    immutable = os.geteuid() == 0 and shutil.which("chattr") is not None
    if immutable and subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
        immutable = False
    if not immutable:
        path.chmod(0o555)
    try:
        try:
            (path / "probe").write_text("x")
        except OSError:
            yield path
        else:
            pytest.skip("cannot make a read-only directory here")
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        path.chmod(0o755)


def test_read_only_output_dir_is_named(tmp_path, monkeypatch, capsys):
    with read_only(tmp_path / "ro") as out:
        line = cli_error(monkeypatch, capsys, out / "run", earlier_run=None)
    assert f"output_dir {str(out / 'run')!r} is not writable" in line


def test_full_disk_is_said_before_any_work(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(recipe_setup, "free_bytes", lambda path: 3 * 2**20)
    line = cli_error(monkeypatch, capsys, tmp_path / "o")
    assert line.startswith("error: disk full") and str(tmp_path / "o") in line


def test_prompt_longer_than_the_context_is_named_with_file_and_row(tmp_path, monkeypatch, capsys):
    data = tmp_path / "long.jsonl"
    rows = [{"prompt": [{"role": "user", "content": f"Which is larger: {i} or 7?"}], "answer": "7"} for i in range(3)]
    rows[2]["prompt"][0]["content"] = "Which is larger? " + "9 " * 25_000  # 50,000 characters
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    line = cli_error(monkeypatch, capsys, tmp_path / "o", "--train_file", str(data), "--warm_start_steps", "0")
    assert str(data) in line and "row 2" in line and "context of 1024 tokens" in line



# ---- recipe fields that TRL, PEFT and transformers would check only after the model loads (or never) -------------
@pytest.mark.parametrize("argv, named", [
    (["--lora_dropout", "1.5"], "lora_dropout=1.5"),
    (["--lora_dropout", "-0.1"], "lora_dropout=-0.1"),
    (["--lora_alpha", "0"], "lora_alpha=0"),
    (["--lora_task_type", "NO_SUCH_TASK"], "lora_task_type='NO_SUCH_TASK'"),
    (["--reward_weights", "1.0", "2.0", "3.0"], "reward_weights=[1.0, 2.0, 3.0] has 3 weight(s) for 2 reward"),
    (["--reward_weights", "nan", "1.0"], "reward_weights[0]=nan"),
    (["--report_to", "nosuchtracker"], "report_to='nosuchtracker' is not a tracker"),
    (["--report_to", "tensorboard"], "report_to='tensorboard': the tensorboard package is not installed"),
    (["--reward_timeout_s", "0"], "reward_timeout_s=0"),
    (["--reward_timeout_s", "inf"], "reward_timeout_s=inf"),
    (["--reward_retries", "-1"], "reward_retries=-1"),
    (["--judge_retries", "-1"], "judge_retries=-1"),
    (["--judge_max_failure_rate", "2"], "judge_max_failure_rate=2"),
    (["--temperature", "0"], "temperature=0"),
    (["--learning_rate", "-1"], "learning_rate=-1"),
    (["--max_completion_length", "0"], "max_completion_length=0"),
    (["--heldout_max_samples", "0"], "heldout_max_samples=0"),
    (["--warm_start_tool_call_rate", "1.5"], "warm_start_tool_call_rate=1.5"),
    (["--warm_start_lr", "0"], "warm_start_lr=0"),
    (["--warm_start_batch_size", "0"], "warm_start_batch_size=0"),
    (["--advantage_estimator", "nope"], "advantage_estimator='nope'"),
    (["--max_wall_time_s", "0"], "max_wall_time_s=0"),
    (["--grad_spike_factor", "0.5"], "grad_spike_factor=0.5"),
    (["--model_seed", "-1"], "model_seed=-1"),
    (["--trainer", "nope"], "--trainer"),
    (["--beta", "-1"], "beta=-1.0"),
    (["--epsilon", "-1"], "epsilon=-1.0"),
    (["--num_iterations", "0"], "num_iterations=0"),
    (["--steps_per_generation", "0"], "steps_per_generation=0"),
    (["--loss_type", "nope"], "loss_type='nope'"),
    (["--scale_rewards", "true"], "scale_rewards='true'"),
    (["--importance_sampling_level", "word"], "importance_sampling_level='word'"),
    (["--top_p", "2"], "top_p=2.0"),
    (["--top_k", "-5"], "top_k=-5"),
    (["--min_p", "2"], "min_p=2.0"),
    (["--repetition_penalty", "0"], "repetition_penalty=0.0"),
    (["--weight_decay", "nan"], "weight_decay=nan"),
    (["--max_grad_norm", "-1"], "max_grad_norm=-1.0"),
    (["--num_train_epochs", "-1"], "num_train_epochs=-1.0"),
    (["--save_steps", "-1"], "save_steps=-1.0"),
    (["--chat_template_kwargs", "enable_thinking"], "chat_template_kwargs='enable_thinking' must be a mapping"),
    (["--gamma", "2"], "gamma=2.0"),
    (["--lam", "-1"], "lam=-1.0"),
    (["--vf_coef", "-1"], "vf_coef=-1.0"),
    (["--cliprange_value", "0"], "cliprange_value=0.0"),
], ids=lambda v: v[0] if isinstance(v, list) else None)
def test_bad_recipe_field_is_named_before_the_model_loads(tmp_path, monkeypatch, capsys, argv, named):
    monkeypatch.setattr(train, "resolve_model_path", lambda *a, **k: pytest.fail("bad input reached the model"))
    line = cli_error(monkeypatch, capsys, tmp_path / "o", *argv)
    assert named in line, line


@pytest.mark.parametrize("targets", [["q_proj", "no_such_proj"], ["nosuch.*"]])
def test_lora_target_module_the_model_lacks_is_named(tmp_path, monkeypatch, capsys, tiny_model_dir, targets):
    line = cli_error(monkeypatch, capsys, tmp_path / "o", "--lora_target_modules", *targets, "--warm_start_steps", "0")
    missing = [t for t in targets if t != "q_proj"]
    assert f"lora_target_modules: {missing} match no module of 'tiny-qwen3'" in line and "o_proj" in line, line


# ---- import paths ---------------------------------------------------------------------------------------------------
MODULES = {
    "raises_at_import": "raise RuntimeError('the scorer needs a GPU')\n",
    "not_callable": "score = 3\nEnv = 'an environment'\n",
}


@pytest.mark.parametrize("key, path, named", [
    ("--reward_funcs", "nosuchmodule.reward", "reward_funcs entry 'nosuchmodule.reward' cannot be imported"),
    ("--reward_funcs", "training.tasks.larger_number.rewards.no_such_reward", "module 'training.tasks.larger_number.rewards' has no 'no_such_reward'"),
    ("--reward_funcs", "justaname", "reward_funcs entry 'justaname' is not a registered reward name nor a dotted path"),
    ("--reward_funcs", "optimisation", "'optimisation' is not a registered reward name (did you mean optimization?)"),
    ("--reward_funcs", "raises_at_import.score",
     "importing module 'raises_at_import' raised RuntimeError: the scorer needs a GPU"),
    ("--reward_funcs", "not_callable.score", "reward_funcs entry 'not_callable.score' is a int, not a callable"),
    ("--environment_factory", "nosuchenv.Env", "environment_factory 'nosuchenv.Env' cannot be imported"),
    ("--environment_factory", "training.tasks.causal.env.NoSuchEnv", "module 'training.tasks.causal.env' has no 'NoSuchEnv'"),
    ("--environment_factory", "raises_at_import.Env",
     "importing module 'raises_at_import' raised RuntimeError: the scorer needs a GPU"),
    ("--environment_factory", "not_callable.Env", "environment_factory 'not_callable.Env' is not an importable"),
])
def test_bad_import_path_is_named(tmp_path, monkeypatch, capsys, key, path, named):
    for name, text in MODULES.items():
        (tmp_path / f"{name}.py").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in MODULES:
        monkeypatch.delitem(sys.modules, name, raising=False)
    argv = [key, path] + (["--reward_weights", "1.0"] if key == "--reward_funcs" else [])
    line = cli_error(monkeypatch, capsys, tmp_path / "o", *argv, earlier_run="resume")
    assert named in line, line


# ---- data files -----------------------------------------------------------------------------------------------------
GOOD_ROW = {"prompt": [{"role": "user", "content": "Which is larger: 1 or 2?"}], "answer": "2"}


@pytest.mark.parametrize("text, named", [
    (None, "does not exist"),
    ("", "the dataset has no rows"),
    (json.dumps(GOOD_ROW) + "\n{not json\n", "line 2 is not valid JSON"),
    (json.dumps(GOOD_ROW) + "\n[1, 2]\n", "line 2 is a JSON list"),
    (json.dumps({"answer": "2"}) + "\n", "row 0 has no 'prompt' column"),
    (json.dumps({"prompt": [{"content": "hi"}], "answer": "2"}) + "\n", "row 0 'prompt' message 0 must be a mapping"),
], ids=["missing", "empty", "not-json", "not-object", "no-prompt", "no-role"])
@pytest.mark.parametrize("key", ["--train_file", "--heldout_file"])
def test_bad_data_file_is_named(tmp_path, monkeypatch, capsys, text, named, key):
    data = tmp_path / "data.jsonl"
    if text is not None:
        data.write_text(text)
    line = cli_error(monkeypatch, capsys, tmp_path / "o", key, str(data))
    assert str(data) in line and named in line, line


def test_missing_recipe_is_named(tmp_path, monkeypatch, capsys):
    line = cli_error(monkeypatch, capsys, tmp_path / "o", recipe=tmp_path / "nope.yaml")
    assert f"recipe {str(tmp_path / 'nope.yaml')!r} does not exist" in line


def test_recipe_that_is_not_yaml_is_named(tmp_path, monkeypatch, capsys):
    recipe = tmp_path / "bad.yaml"
    recipe.write_text("lora_r: [unclosed\n")
    line = cli_error(monkeypatch, capsys, tmp_path / "o", recipe=recipe)
    assert f"recipe {str(recipe)!r} is not valid YAML" in line


def test_unknown_recipe_key_is_named_with_the_nearest_key(tmp_path, monkeypatch, capsys):
    line = cli_error(monkeypatch, capsys, tmp_path / "o", recipe=recipe_with(tmp_path, lora_dropuot=0.1))
    assert "unknown key 'lora_dropuot'" in line and "lora_dropout" in line


# ---- causal rows: every row's SCM built, sampled and its optimum computed before the model loads --------------------
def causal_row(mechanism: str | None = None, **changes) -> dict:
    """The first causal training row named X1..Xn, Y (the cases below name them); with `mechanism`, its SCM replaced
    by X -> Z -> Y with Z = `mechanism`."""
    rows = map(json.loads, Path("data/causal/train.jsonl").read_text().splitlines())
    row = next(r for r in rows if r["target"] == "Y" and {"X1", "X2", "X3"} <= set(json.loads(r["scm_json"])["variables"]))
    row.pop("reference_calls_json")
    if mechanism is not None:
        spec = {
            "variables": ["X", "Z", "Y"], "target": "Y", "goal": "max",
            "mechanisms": {
                "X": {"kind": "expression", "parents": [], "expression": "0"},
                "Z": {"kind": "expression", "parents": ["X"], "expression": mechanism},
                "Y": {"kind": "expression", "parents": ["Z"], "expression": "tanh(Z)"},
            },
            "noise_std": {"X": 1.0, "Z": 1.0, "Y": 1.0}, "ranges": {"X": [-3, 3], "Z": [-3, 3]},
        }
        row.update(scm_json=json.dumps(spec), target="Y")
    row.update(changes)
    return {k: v for k, v in row.items() if v is not None}


def linear_scm(**changes) -> str:
    spec = json.loads(causal_row()["scm_json"])
    spec.update(changes)
    return json.dumps(spec)


def cyclic_scm() -> str:
    spec = json.loads(causal_row()["scm_json"])
    spec["mechanisms"]["X2"] = {"kind": "linear", "parents": ["X1"], "weights": [0.5], "bias": 0.0}
    spec["mechanisms"]["X1"] = {"kind": "linear", "parents": ["X2"], "weights": [0.5], "bias": 0.0}
    spec["mechanisms"]["X3"] = {"kind": "linear", "parents": ["X1", "X2"], "weights": [0.5, 0.5], "bias": 0.0}
    return json.dumps(spec)


def huge_weight_scm() -> str:
    spec = json.loads(causal_row()["scm_json"])
    for mechanism in spec["mechanisms"].values():
        mechanism["weights"] = [1e308] * len(mechanism["weights"])  # one parent beyond 1.8 overflows
    return json.dumps(spec)


CAUSAL_CASES = {
    "exp-overflow": (causal_row("exp(1000) * X"), "variable Z's mechanism 'exp(1000) * X' gives inf at X="),
    "zero-division-numpy": (causal_row("X / (X - X)"), "variable Z's mechanism 'X / (X - X)' gives inf at X="),
    "infinite-literal": (causal_row("1e999 * X"), "the literal '1e999' is out of bounds"),
    "log-of-negative": (causal_row("log(-1 - X * X)"), "variable Z's mechanism 'log(-1 - X * X)' gives nan at X="),
    "zero-division-python": (causal_row("exp(-X) + 1/0"), "'exp(-X) + 1/0' raises ZeroDivisionError"),
    "overflow-python": (causal_row("X + 10.0**400"), "'X + 10.0**400' raises OverflowError"),
    "400-digit-literal": (causal_row("X * " + "1" * 400), "has 400 characters; numbers may have at most 40"),
    "50000-minus": (causal_row("-" * 50_000 + "X"), "nests deeper than 50 levels"),
    "3000-term-sum": (causal_row(" + ".join(["X"] * 3000)), "more than 200 terms"),
    "refused-by-language": (causal_row("__import__('os').getcwd() * X"),
                            "function \"__import__('os').getcwd\" is not allowed"),
    "unused-parent": (causal_row("3.0"), "does not use its parent(s) ['X']"),
    "cyclic": (causal_row(scm_json=cyclic_scm()), "the graph has a cycle"),
    "not-json": (causal_row(scm_json="{variables: X1"), "row 'scm_json' is not valid JSON"),
    "not-text": (causal_row(scm_json=3), "column 'scm_json': row 0 holds a str, row 1 a number"),
    "no-variables": (causal_row(scm_json=linear_scm(variables=None)), "variables: must be a list of names, got None"),
    "unknown-mechanism-kind": (causal_row(scm_json=linear_scm(mechanisms={"X1": {"kind": "neural"}})),
                               "mechanism kind must be 'linear' or 'expression'"),
    "linear-overflow": (causal_row(scm_json=huge_weight_scm()), "variable Y's mechanism linear {'kind': 'linear'"),
    "no-scm": (causal_row(scm_json=None), "causal row needs 'scm_json'"),
    "no-seed": (causal_row(seed=None), "causal row needs an int 'seed'"),
    "zero-budget": (causal_row(budget=0), "row 'budget' must be an int >= 1, got 0"),
    "negative-initial-samples": (causal_row(initial_samples=-1), "row 'initial_samples' must be an int >= 0"),
    "wrong-target": (causal_row(target="X1"), "row 'target' 'X1' differs from the SCM's target 'Y'"),
}


@pytest.mark.parametrize("case", list(CAUSAL_CASES))
def test_bad_causal_train_row_is_named_before_the_model_loads(tmp_path, monkeypatch, capsys, case):
    bad, named = CAUSAL_CASES[case]
    data = tmp_path / "train.jsonl"
    data.write_text(json.dumps(causal_row()) + "\n" + json.dumps(bad) + "\n")
    monkeypatch.setattr(train, "resolve_model_path", lambda *a, **k: pytest.fail("bad input reached the model"))
    line = cli_error(monkeypatch, capsys, tmp_path / "o", "--train_file", str(data), recipe=CAUSAL_RECIPE)
    where = f"error: {data}: " if case == "not-text" else f"error: {data}: row 1: "  # not-text: Arrow's column types
    assert line.startswith(where) and named in line, line
    assert len(line) < 600, "the message repeats the whole expression"


def test_bad_causal_heldout_row_is_named_with_the_heldout_file(tmp_path, monkeypatch, capsys):
    train_data, heldout = tmp_path / "train.jsonl", tmp_path / "heldout.jsonl"
    train_data.write_text(json.dumps(causal_row()) + "\n")
    heldout.write_text(json.dumps(causal_row()) + "\n" + json.dumps(causal_row("X / (X - X)")) + "\n")
    monkeypatch.setattr(train, "resolve_model_path", lambda *a, **k: pytest.fail("bad input reached the model"))
    line = cli_error(monkeypatch, capsys, tmp_path / "o", "--train_file", str(train_data), "--heldout_file",
                     str(heldout), recipe=CAUSAL_RECIPE)
    assert line.startswith(f"error: {heldout}: row 1: ") and "variable Z's mechanism 'X / (X - X)'" in line


@pytest.mark.parametrize(("env", "argv", "named"), [
    ("bf16", [], "ACCELERATE_MIXED_PRECISION='bf16' asks for another precision than the recipe's (bf16: false"),
    ("fp16", ["--bf16", "true"], "ACCELERATE_MIXED_PRECISION='fp16' asks for another precision than the recipe's (bf16: true"),
])  # fmt: skip
def test_an_environment_asking_for_another_precision_than_the_recipe_is_named(tmp_path, monkeypatch, capsys, env,
                                                                               argv, named):
    """`accelerate launch` exports ACCELERATE_MIXED_PRECISION from its config; transformers would take it behind a
    `bf16: false` recipe (bf16 autocast, a first PPO ratio that is not 1). Refused before the model loads."""
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", env)
    monkeypatch.setattr(train, "resolve_model_path", lambda *a, **k: pytest.fail("bad input reached the model"))
    line = cli_error(monkeypatch, capsys, tmp_path / "o", *argv)
    assert named in line, line
