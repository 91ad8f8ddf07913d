"""TRL's vLLM server mode on CPU, as a user runs it: a server started by `training.run_setup.vllm_serve_cpu` (what
launchers/vllm_server.sh runs without a GPU), the trainer's weights synced into it over gloo after every step, its
sample-time log-probs the old log-probs; and each way the server can be wrong named with its URL."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.vllm_server import CpuServer, fresh_env, free_port, server_gap
from tests.test_feature_combinations import cell_settings, check_cell, training_logs
from training.run_setup.flags import read_flags
from training.run_setup.vllm_server_client import CpuSyncVLLMClient, SamplerServerError, ServerMismatchError
from training.tasks.causal.starting_policy import STARTING_POLICY_DIR

pytestmark = pytest.mark.vllm

ROOT = Path(__file__).resolve().parents[2]
FP32_GAP = 1e-4  # the recipe's bound for float32 (training/step/sampler_gap.py NORMAL_MEAN_GAP)


# served and trained here: the causal recipe's prompts outgrow the tiny model's context
POLICY = str(STARTING_POLICY_DIR)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    started = CpuServer(POLICY, tmp_path_factory.mktemp("server") / "server.log").start()
    yield started
    started.stop()


def on_server(server: CpuServer, **overrides) -> dict:
    return {"use_vllm": True, "vllm_mode": "server", "vllm_server_base_url": server.url, "model": POLICY,
            "vllm_group_port": free_port(), "logp_check_steps": 1, **overrides}


def fixed_tokens(trainer) -> list[int]:
    return trainer.processing_class("Which number is larger: 37 or 52? The larger number is 52.")["input_ids"]


def test_the_server_samples_in_float32_and_holds_the_trainers_weights_after_every_sync(make_trainer, server):
    trainer = make_trainer(**on_server(server), max_steps=3, learning_rate=5e-2)
    assert trainer.vllm_generation.engine_dtype == "float32" == trainer.record.gap.sampler_dtype
    trainer.train()
    logs = training_logs(trainer.args.output_dir)
    assert len(logs) == 3
    gaps = [log["sampling/logp_abs_diff"] for log in logs]
    assert all(gap <= FP32_GAP for gap in gaps), gaps
    assert all(log["timing/weight_sync_s"] > 0 for log in logs)  # each step's batch is sampled after a sync
    trainer.vllm_generation.sync_weights()  # what the next generation batch would start with
    assert server_gap(trainer, fixed_tokens(trainer)) < FP32_GAP
    plan = trainer.record.gap.as_json()
    assert plan["sampler"] == "vLLM (server)" and plan["sampler_dtype"] == "float32" == plan["precision"]


def test_a_skipped_sync_leaves_the_server_on_old_weights_and_the_gap_check_says_so(make_trainer, server, monkeypatch):
    trainer = make_trainer(**on_server(server), max_steps=3, learning_rate=5e-2, strict_health=False)
    trainer.vllm_generation.sync_weights()  # the server holds this trainer's starting weights, then never again
    monkeypatch.setattr(type(trainer.vllm_generation), "sync_weights", lambda self: None)
    trainer.train()
    logs = training_logs(trainer.args.output_dir)
    assert logs[0]["sampling/logp_abs_diff"] <= FP32_GAP
    assert logs[-1]["sampling/logp_abs_diff"] > FP32_GAP and logs[-1]["sampling/logp_gap_above_normal"] == 1.0
    assert server_gap(trainer, fixed_tokens(trainer)) > 10 * FP32_GAP


def test_the_tool_agent_trains_against_the_server_with_the_features_it_meets(make_env_trainer, server):
    """Multi-turn through the environment with the turn limit, dynamic sampling, forcing, reference sync and
    `num_iterations` 2, sample-time log-probs from the server on every generation batch."""
    trainer = make_env_trainer(flags=read_flags({"FORCE_RATE": "0.5", "ASSIST_WARMUP": "10"}), max_steps=3,
                               max_turn_tokens=16, **on_server(server), **cell_settings(True, "grpo", True, 2))
    trainer.train()
    logs = training_logs(trainer.args.output_dir)
    check_cell(logs, True, "grpo", True, True, 2, steps=3)
    generated = [log for log in logs if "timing/generate_s" in log]
    assert len(generated) == 2
    assert all(log["sampling/logp_abs_diff"] <= FP32_GAP for log in generated), generated
    assert all(0 < log["turns/max_tokens"] <= 16 for log in generated)


def test_the_causal_recipe_trains_against_the_server_through_the_launcher(server, tmp_path):
    out = tmp_path / "causal"
    proc = subprocess.run(
        ["bash", "launchers/launch_cpu.sh", "--recipe", "recipes/causal_cpu.yaml", "--use_vllm", "true",
         "--vllm_mode", "server", "--vllm_server_base_url", server.url, "--vllm_group_port", str(free_port()),
         "--max_steps", "2", "--logp_check_steps", "1", "--heldout_max_samples", "4",
         # 3 turns: the starting policy has 1024 positions, which 6 turns of the recipe can outgrow, and vLLM refuses
         # a prompt and its max_tokens beyond them (the transformers sampler runs on)
         "--max_tool_calling_iterations", "3", "--output_dir", str(out)],
        capture_output=True, text=True, cwd=ROOT, timeout=900, env=fresh_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    gap = json.loads((out / "run_summary.json").read_text())["sampler_gap"]
    assert gap["sampler"] == "vLLM (server)" and gap["sampler_dtype"] == "float32" == gap["precision"]
    assert gap["measured_steps"] == 2 and gap["logp_abs_diff_max"] <= FP32_GAP, gap


# ---- faults: each one `error:` line naming the server's URL and what differs --------------------------------------
def test_a_trainer_in_another_dtype_than_the_server_is_refused_naming_both(make_trainer, server):
    with pytest.raises(ServerMismatchError, match=rf"{server.url}.*computes in float32 and the trainer trains in "
                                                  r"bfloat16"):
        make_trainer(**on_server(server, bf16=True))


def test_a_server_with_another_tokenizer_is_refused(make_trainer, server, tiny_model_dir):
    with pytest.raises(ServerMismatchError, match=rf"{server.url}.*tokenizer"):
        make_trainer(**on_server(server, model=tiny_model_dir))


def test_a_server_whose_model_cannot_take_the_trainers_weights_is_named_at_the_first_sync(
        make_trainer, server, tmp_path):
    from transformers import AutoConfig, AutoModelForCausalLM

    wider = tmp_path / "wider"  # the trainer's model has a wider MLP than the served one, the same tokenizer
    shutil.copytree(POLICY, wider)
    config = AutoConfig.from_pretrained(wider)
    config.intermediate_size *= 2
    AutoModelForCausalLM.from_config(config).save_pretrained(wider)
    trainer = make_trainer(**on_server(server, model=str(wider)), max_steps=1)
    with pytest.raises(ServerMismatchError, match=rf"{server.url} cannot load the trainer's weights"):
        trainer.train()


def train_command(url: str, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "training.train", "--config", "recipes/tiny_cpu.yaml", "--use_vllm", "true",
            "--vllm_mode", "server", "--vllm_server_base_url", url, "--vllm_group_port", str(free_port()),
            "--output_dir", str(out), *extra]  # a resume may meet its server on other ports: neither is the recipe


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def test_a_server_that_is_not_up_is_one_error_line_within_the_recipes_timeout(tmp_path):
    """The command's one error line; the wait itself timed apart from the command's start-up (its warm start, which
    a loaded machine slows by minutes): the recipe's 3 s, not TRL's default 240."""
    url = f"http://127.0.0.1:{free_port()}"
    proc = subprocess.run(train_command(url, tmp_path / "out", "--max_steps", "1", "--vllm_server_timeout", "3"),
                          capture_output=True, text=True, cwd=ROOT, timeout=600, env=fresh_env())
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = error_lines(proc.stderr)
    assert url in line and "not up after 3 s" in line
    start = time.monotonic()
    with pytest.raises(SamplerServerError, match="not up after 3 s"):
        CpuSyncVLLMClient(base_url=url, connection_timeout=3)
    assert time.monotonic() - start < 60


def test_a_server_killed_mid_run_is_one_error_line_and_the_run_resumes_once_it_is_back(tiny_model_dir, tmp_path):
    server = CpuServer(tiny_model_dir, tmp_path / "server.log").start()
    out = tmp_path / "out"
    run = subprocess.Popen(train_command(server.url, out, "--max_steps", "4", "--save_steps", "1"),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=fresh_env())
    try:
        deadline = time.monotonic() + 600
        while not (out / "checkpoint-2").exists() and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        server.stop()
        _, stderr = run.communicate(timeout=600)
        assert run.returncode == 2, stderr[-3000:]
        (line,) = error_lines(stderr)
        assert server.url in line and "stopped" in line and "--resume_from_checkpoint true" in line
        kept = sorted(p.name for p in out.glob("checkpoint-*"))
        assert "checkpoint-2" in kept and "checkpoint-4" not in kept  # what was saved stays
        server.start()  # restarted on the same port, with the checkpoint's weights arriving at the first sync
        resumed = subprocess.run(train_command(server.url, out, "--max_steps", "4", "--save_steps", "1",
                                               "--resume_from_checkpoint", "true", "--logp_check_steps", "1"),
                                 capture_output=True, text=True, cwd=ROOT, timeout=600, env=fresh_env())
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        summary = json.loads((out / "run_summary.json").read_text())
        assert summary["global_step"] == 4
        assert summary["sampler_gap"]["logp_abs_diff_max"] <= FP32_GAP
    finally:
        run.kill()
        server.stop()
