"""Bad input stops before any work with exit 2 and one `error:` line that names the key, flag, file, row or path.

Each case runs the real entry point (`training.train.cli`) in-process and checks the exit status, that the last
stderr line is the `error:` line naming the culprit, and that nothing was trained."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from training import train

RECIPE = Path("recipes/tiny_cpu.yaml")


def cli_error(monkeypatch, capsys, out: Path, *argv: str, recipe: Path = RECIPE) -> str:
    """Run the CLI; assert exit 2 before any work; return the `error:` line."""
    monkeypatch.setattr(sys, "argv", ["train", "--config", str(recipe), "--output_dir", str(out), *argv])
    monkeypatch.setattr(train, "StrictGRPOTrainer", lambda *a, **k: pytest.fail("bad input reached the trainer"))
    monkeypatch.setattr(train, "supervised_warm_start", lambda *a, **k: pytest.fail("bad input reached the warm start"))
    with pytest.raises(SystemExit) as exit_info:
        train.cli()
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err, "no message"
    assert err[-1].startswith("error: "), err[-1]
    assert "Traceback" not in "\n".join(err)
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
    recipe = recipe_with(tmp_path, reward_funcs="training.rewards.exact_answer_reward")
    line = cli_error(monkeypatch, capsys, tmp_path / "o", recipe=recipe)
    assert "reward_funcs='training.rewards.exact_answer_reward' must be a list" in line
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
    line = cli_error(monkeypatch, capsys, out)
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
        line = cli_error(monkeypatch, capsys, out / "run")
    assert f"output_dir {str(out / 'run')!r} is not writable" in line


def test_full_disk_is_said_before_any_work(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(train, "free_bytes", lambda path: 3 * 2**20)
    line = cli_error(monkeypatch, capsys, tmp_path / "o")
    assert line.startswith("error: disk full") and str(tmp_path / "o") in line


def test_prompt_longer_than_the_context_is_named_with_file_and_row(tmp_path, monkeypatch, capsys):
    data = tmp_path / "long.jsonl"
    rows = [{"prompt": [{"role": "user", "content": f"Which is larger: {i} or 7?"}], "answer": "7"} for i in range(3)]
    rows[2]["prompt"][0]["content"] = "Which is larger? " + "9 " * 25_000  # 50,000 characters
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    line = cli_error(monkeypatch, capsys, tmp_path / "o", "--train_file", str(data), "--warm_start_steps", "0")
    assert str(data) in line and "row 2" in line and "context of 1024 tokens" in line

