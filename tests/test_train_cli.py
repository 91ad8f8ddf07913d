"""The entry point: one recipe runs end to end, writes every output, refuses bad input, and resumes."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from training.features.reward_checks import NonFiniteRewardError
from training.outputs.run_record import ended_on_health_stop, health_stops
from training.run_setup.prompt_datasets import DatasetError
from training.step.health import RunHealthError
from training.train import RecipeError, main

RECIPE = "recipes/tiny_cpu.yaml"
# A 5-step warm start rarely answers right, so rewards are mostly all-zero: the health stop is not under test here.
FAST = ["--warm_start_steps", "5", "--heldout_max_samples", "16", "--per_device_train_batch_size", "16",
        "--strict_health", "false"]


def run(out: Path, *extra: str) -> dict:
    return main(["--config", RECIPE, "--output_dir", str(out), *FAST, *extra])


def test_three_steps_write_every_output(tmp_path):
    out = tmp_path / "run"
    summary = run(out, "--max_steps", "3", "--save_steps", "2")
    assert (out / "checkpoint-2" / "adapter_model.safetensors").exists()
    assert (out / "adapter_model.safetensors").exists()
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [m["step"] for m in metrics if "loss" in m]
    assert steps == [1, 2, 3]
    for name in ("reward", "reward_std", "loss", "frac_reward_zero_std", "grad_norm", "ratio/mean", "ratio/std",
                 "timing/generate_s", "timing/score_s", "timing/loss_s", "timing/optimizer_s", "memory/rss_mb"):
        assert name in metrics[0], name
    on_disk = json.loads((out / "run_summary.json").read_text())
    assert on_disk["global_step"] == 3 == summary["global_step"]
    assert on_disk["training_args"]["max_steps"] == 3
    assert set(on_disk["library_versions"]) >= {"torch", "transformers", "trl", "peft"}
    assert on_disk["heldout_reward_before"] is not None and on_disk["heldout_reward_after"] is not None
    assert on_disk["wall_time_s"] > 0
    assert (out / "reward_curve.png").stat().st_size > 5_000


def test_existing_output_dir_is_not_overwritten(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "metrics.jsonl").write_text('{"step": 1}\n')
    with pytest.raises(RecipeError, match="already holds an earlier run"):
        run(out, "--max_steps", "1")
    assert (out / "metrics.jsonl").read_text() == '{"step": 1}\n'


def test_unknown_recipe_key_is_named(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(Path(RECIPE).read_text() + "\nlearning_rat: 0.1\n")
    with pytest.raises(RecipeError, match="unknown key 'learning_rat'.*learning_rate"):
        main(["--config", str(recipe), "--output_dir", str(tmp_path / "o")])


def test_tool_call_rate_outside_unit_interval_is_named_before_any_work(tmp_path, monkeypatch):
    monkeypatch.setattr("training.train.resolve_model_path", lambda *a, **k: pytest.fail("the run went past the check"))
    with pytest.raises(RecipeError, match="warm_start_tool_call_rate=0.0"):
        main(["--config", "recipes/tool_agent_cpu.yaml", "--warm_start_tool_call_rate", "0", "--output_dir",
              str(tmp_path / "o")])


def test_dataset_without_prompt_column_is_named(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": [{"role": "user", "content": "hi"}], "answer": "1"}\n{"question": "x", "answer": "2"}\n')
    with pytest.raises(DatasetError, match=r"row 1 has no 'prompt' column"):
        run(tmp_path / "o", "--train_file", str(data))


def test_empty_prompt_is_named(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": [{"role": "user", "content": "hi"}], "answer": "1"}\n{"prompt": "  ", "answer": "2"}\n')
    with pytest.raises(DatasetError, match=r"row 1 has an empty 'prompt'"):
        run(tmp_path / "o", "--train_file", str(data))


def test_missing_model_path_is_named_before_training(tmp_path):
    with pytest.raises(FileNotFoundError, match="no/such/model"):
        run(tmp_path / "o", "--model_name_or_path", "./no/such/model")
    assert not (tmp_path / "o" / "metrics.jsonl").exists()


def test_cli_prints_one_clear_error_line(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "training.train", "--config", RECIPE, "--output_dir", str(tmp_path / "o"),
         "--model_name_or_path", "./no/such/model"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("error: model_name_or_path='./no/such/model'")


def test_wall_time_guard_saves_and_exits_cleanly(tmp_path):
    out = tmp_path / "run"
    summary = run(out, "--max_steps", "50", "--max_wall_time_s", "0.01", "--save_steps", "1000")
    assert summary["global_step"] == 1
    assert "max_wall_time_s=0.01 reached" in summary["stopped_reason"]
    assert (out / "checkpoint-1" / "trainer_state.json").exists()


def test_killed_run_resumes_to_the_same_step_count(tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "training.train", "--config", RECIPE, "--output_dir", str(out), *FAST,
           "--max_steps", "6", "--save_steps", "2"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    def logged_steps() -> list[int]:
        path = out / "metrics.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        return [json.loads(line)["step"] for line in lines if '"loss"' in line]

    # Kill after a checkpoint and after a later step was logged, so that the resumed run repeats logged steps.
    while not ((out / "checkpoint-2" / "trainer_state.json").exists() and max(logged_steps(), default=0) >= 3):
        assert proc.poll() is None, "the run ended before its first checkpoint"
        assert time.time() < deadline, "no checkpoint within the deadline"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (out / "run_summary.json").exists()

    summary = main(["--config", RECIPE, "--output_dir", str(out), *FAST, "--max_steps", "6", "--save_steps", "2",
                    "--resume_from_checkpoint", "true"])
    assert summary["global_step"] == 6
    state = json.loads((out / "checkpoint-6" / "trainer_state.json").read_text())
    assert state["global_step"] == 6
    assert logged_steps() == [1, 2, 3, 4, 5, 6]  # one history: lines after the checkpoint were dropped on resume


def test_the_issue_42_reproduction_is_refused_naming_the_environment_variable(tmp_path):
    """The command that trained under bf16 autocast behind `bf16: false` (ratio/std 1.3e-3, logp gap 1e-3) now exits 2
    with one `error:` line naming ACCELERATE_MIXED_PRECISION and the recipe's field, before any output is written."""
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "training.train", "--config", RECIPE, "--max_steps", "2", "--warm_start_steps", "0",
         "--logp_check_steps", "1", "--output_dir", str(out)],
        env={**os.environ, "ACCELERATE_MIXED_PRECISION": "bf16"}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ACCELERATE_MIXED_PRECISION='bf16' asks for another precision than the recipe's "
                           "(bf16: false"), last
    assert "Traceback" not in proc.stderr
    assert not (out / "metrics.jsonl").exists()


@pytest.mark.parametrize("stop, health", [
    (NonFiniteRewardError("reward function 'parent' returned nan for completion 0"), True),  # a subclass counts too
    (RunHealthError("health/grad_spike fired for 3 consecutive steps (up to step 0)"), True),
    (RuntimeError("boom"), False),
])
def test_how_an_attempt_ended_tells_the_workflow_whether_a_health_check_stopped_it(tmp_path, monkeypatch, stop, health):
    import training.train as train_module

    def stopped(*args):
        raise stop

    monkeypatch.setattr(train_module, "train_and_report", stopped)
    out = tmp_path / "run"
    with pytest.raises(type(stop)):
        run(out, "--max_steps", "3")
    attempt = json.loads((out / "run_record.json").read_text())["attempts"][-1]
    assert attempt["ended"] == f"error: {type(stop).__name__}: {stop}"
    assert ended_on_health_stop(out) is health
    assert health_stops(out) == ([f"step 0: {stop}"] if health else [])
