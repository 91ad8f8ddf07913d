"""Launchers: strict flags exported with safe defaults, validated once in Python, printed; bad values refused naming
the flag; dry runs print the `accelerate launch` command; GPU launchers say so when no GPU is there;
`launch_cpu.sh` really trains."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
LAUNCHERS = ["launch_cpu.sh", "launch_gpu.sh", "launch_deepspeed.sh", "vllm_server.sh"]
SAFE = {"FORCE_RATE": "0.0", "ASSIST_WARMUP": "0", "RL_DISABLE_FORCED": "1", "PPO_RECORD_AT_SAMPLE": "1",
        "STRICT_TRAJ_KEYS": "1"}  # fmt: skip
BAD_VALUES = [("FORCE_RATE", "1.5"), ("STRICT_TRAJ_KEYS", "yes please"), ("ASSIST_WARMUP", "-1"),
              ("RL_DISABLE_FORCED", "true"), ("PPO_RECORD_AT_SAMPLE", ""), ("FORCE_RATE", "nan")]  # fmt: skip


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SAFE and k != "DRY_RUN"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["PYTHON"] = sys.executable
    env.update(extra)
    return env


def run(args: list[str], timeout: int = 120, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=REPO, env=clean_env(**env), capture_output=True, text=True, timeout=timeout)


def launcher(name: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    return run(["bash", str(REPO / "launchers" / name), *args], **env)


# ---- strict flags, via python -m training.run_setup.flags -----------------------------------------------------------------
def test_flags_module_prints_safe_defaults():
    proc = run([sys.executable, "-m", "training.run_setup.flags"])
    assert proc.returncode == 0, proc.stderr
    assert dict(line.split("=", 1) for line in proc.stdout.split()) == SAFE


@pytest.mark.parametrize(("flag", "value"), BAD_VALUES)
def test_flags_module_refuses_bad_value_naming_flag(flag, value):
    proc = run([sys.executable, "-m", "training.run_setup.flags"], **{flag: value})
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"error: {flag}=")
    assert proc.stdout == ""


# ---- strict flags, via the launchers ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", LAUNCHERS)
def test_launcher_exports_and_prints_safe_defaults(name):
    proc = launcher(name, "--dry-run", "--num-processes", "2")
    assert proc.returncode == 0, proc.stderr
    for flag, value in SAFE.items():
        assert f"  {flag}={value}\n" in proc.stdout
    assert "Dry run: not started." in proc.stdout


def test_launcher_keeps_flags_the_caller_set():
    proc = launcher("launch_cpu.sh", "--dry-run", FORCE_RATE="0.25", ASSIST_WARMUP="10", RL_DISABLE_FORCED="0")
    assert proc.returncode == 0, proc.stderr
    assert "  FORCE_RATE=0.25\n" in proc.stdout
    assert "  ASSIST_WARMUP=10\n" in proc.stdout
    assert "  RL_DISABLE_FORCED=0\n" in proc.stdout


@pytest.mark.parametrize("name", LAUNCHERS)
@pytest.mark.parametrize(("flag", "value"), BAD_VALUES[:3])
def test_launcher_refuses_bad_flag_before_launching(name, flag, value):
    proc = launcher(name, "--dry-run", **{flag: value})
    assert proc.returncode == 2
    assert f"error: {flag}=" in proc.stderr
    assert "Command:" not in proc.stdout  # nothing was (or would have been) started


# ---- commands -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", LAUNCHERS)
def test_help_describes_usage_and_starts_nothing(name):
    proc = launcher(name, "--help")
    assert proc.returncode == 0
    assert proc.stdout.startswith(f"Usage: launchers/{name}")
    assert "Command:" not in proc.stdout


def command_line(proc: subprocess.CompletedProcess) -> str:
    lines = [line for line in proc.stdout.splitlines() if line.startswith("Command: ")]
    assert len(lines) == 1, proc.stdout + proc.stderr
    return lines[0].removeprefix("Command: ")


def test_cpu_dry_run_command_passes_extra_args_through():
    proc = launcher("launch_cpu.sh", "--dry-run", "--max_steps", "3", "--output_dir", "runs/x y")
    assert command_line(proc) == (
        "accelerate launch --config_file accelerate_configs/cpu.yaml --num_processes 1 --mixed_precision no "
        "-m training.train --config recipes/tiny_cpu.yaml --max_steps 3 --output_dir runs/x\\ y"
    )


def test_printed_command_hides_token_values():
    proc = launcher("launch_cpu.sh", "--dry-run", "--hub_token", "hf_secret123456", "--other_token=hf_abcdefgh1")
    assert command_line(proc).endswith("--hub_token <redacted> --other_token=<redacted>")
    assert "hf_secret123456" not in proc.stdout + proc.stderr and "hf_abcdefgh1" not in proc.stdout + proc.stderr


def test_dry_run_env_var_equals_option():
    assert command_line(launcher("launch_cpu.sh", DRY_RUN="1")) == command_line(launcher("launch_cpu.sh", "--dry-run"))
    proc = launcher("launch_cpu.sh", DRY_RUN="yes")
    assert proc.returncode == 2 and "DRY_RUN=yes" in proc.stderr


def test_gpu_dry_run_commands():
    gpu = command_line(launcher("launch_gpu.sh", "--dry-run", "--num-processes", "4", "--max_steps", "5"))
    assert gpu.startswith("accelerate launch --config_file accelerate_configs/multi_gpu.yaml --num_processes 4 "
                          "--mixed_precision bf16 ")  # the recipe's bf16: true, not the config file's
    assert gpu.endswith("-m training.train --config recipes/qwen3_0.6b_lora.yaml --max_steps 5")
    if torch.cuda.device_count() <= 1:  # default N = visible GPUs, at least 1: the single-GPU config
        single = command_line(launcher("launch_gpu.sh", "--dry-run"))
        assert "accelerate_configs/single_gpu.yaml --num_processes 1 " in single
    qlora = command_line(
        launcher("launch_gpu.sh", "--dry-run", "--num-processes", "1", "--recipe", "recipes/qwen3_0.6b_qlora.yaml")
    )
    assert "--config recipes/qwen3_0.6b_qlora.yaml" in qlora


def test_deepspeed_stage_by_option_or_env():
    def config(*args, **env):
        return command_line(launcher("launch_deepspeed.sh", "--dry-run", "--num-processes", "2", *args, **env))

    assert "--config_file accelerate_configs/deepspeed_zero2.yaml --num_processes 2 --mixed_precision bf16 " in config()
    assert "--config_file accelerate_configs/deepspeed_zero3.yaml --num_processes 2 " in config("--zero", "3")
    assert "--config_file accelerate_configs/deepspeed_zero3.yaml --num_processes 2 " in config(ZERO_STAGE="3")
    proc = launcher("launch_deepspeed.sh", "--dry-run", "--zero", "1")
    assert proc.returncode == 2 and "ZeRO stage '1'" in proc.stderr


def test_vllm_server_command_on_dedicated_gpus():
    proc = launcher("vllm_server.sh", "--dry-run", "--model", "Qwen/Qwen3-1.7B", "--max_model_len", "2048",
                    VLLM_GPUS="2,3")  # fmt: skip
    assert command_line(proc) == (
        "trl vllm-serve --model Qwen/Qwen3-1.7B --tensor_parallel_size 2 --port 8000 --max_model_len 2048"
    )
    assert "vLLM server on GPU(s) 2,3" in proc.stdout
    bad = launcher("vllm_server.sh", "--dry-run", VLLM_GPUS="all")
    assert bad.returncode == 2 and "VLLM_GPUS='all'" in bad.stderr


# ---- precision: the recipe's, passed to accelerate launch; another asked by the environment is refused --------------
TRAINING_LAUNCHERS = ["launch_cpu.sh", "launch_gpu.sh", "launch_deepspeed.sh"]


@pytest.mark.parametrize("name", TRAINING_LAUNCHERS)
@pytest.mark.parametrize(("recipe", "extra", "precision"), [
    ("recipes/tiny_cpu.yaml", (), "no"),                       # bf16: false
    ("recipes/tiny_cpu.yaml", ("--bf16", "true"), "bf16"),     # the command line over the recipe
    ("recipes/qwen3_0.6b_lora.yaml", (), "bf16"),              # bf16: true, whatever the config file says
    ("recipes/qwen3_0.6b_lora.yaml", ("--bf16=false",), "no"),
    ("recipes/causal_cpu.yaml", ("--bf16", "false", "--fp16", "true", "--use_cpu", "false"), "fp16"),
])  # fmt: skip
def test_every_launcher_passes_the_recipes_precision_to_accelerate(name, recipe, extra, precision):
    proc = launcher(name, "--dry-run", "--num-processes", "2", "--recipe", recipe, *extra)
    assert proc.returncode == 0, proc.stderr
    cmd = command_line(proc)
    assert f" --mixed_precision {precision} -m training.train --config {recipe}" in cmd
    assert cmd.count("--mixed_precision") == 1
    assert f"Precision from the recipe: accelerate launch --mixed_precision {precision}\n" in proc.stdout


@pytest.mark.parametrize("name", TRAINING_LAUNCHERS)
def test_every_launcher_refuses_an_environment_asking_for_another_precision(name):
    proc = launcher(name, "--dry-run", "--recipe", "recipes/tiny_cpu.yaml", ACCELERATE_MIXED_PRECISION="bf16")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith(
        "error: ACCELERATE_MIXED_PRECISION='bf16' asks for another precision than the recipe's (bf16: false")
    assert "Command:" not in proc.stdout  # nothing was (or would have been) started
    agreeing = launcher(name, "--dry-run", "--recipe", "recipes/tiny_cpu.yaml", "--bf16", "true",
                        ACCELERATE_MIXED_PRECISION="bf16")
    assert agreeing.returncode == 0 and " --mixed_precision bf16 " in command_line(agreeing)


def test_the_gpu_launchers_command_trains_a_bf16_false_recipe_without_autocast(tmp_path):
    """The single-GPU config says `mixed_precision: bf16`; the command the GPU launcher prints passes the recipe's
    `no`, and run as printed (on CPU here: the recipe says use_cpu) the loss forward runs without autocast."""
    out = tmp_path / "out"
    proc = launcher("launch_gpu.sh", "--dry-run", "--num-processes", "1", "--recipe", "recipes/tiny_cpu.yaml",
                    "--max_steps", "1", "--warm_start_steps", "0", "--heldout_max_samples", "4",
                    "--per_device_train_batch_size", "8", "--strict_health", "false", "--output_dir", str(out))
    cmd = shlex.split(command_line(proc))
    assert cmd[:5] == ["accelerate", "launch", "--config_file", "accelerate_configs/single_gpu.yaml", "--num_processes"]
    trained = run(cmd, timeout=300)
    assert trained.returncode == 0, trained.stderr[-3000:]
    precision = json.loads((out / "run_summary.json").read_text())["precision"]
    assert precision["environment"] == {"ACCELERATE_MIXED_PRECISION": "no"}
    assert precision["accelerator_mixed_precision"] == "no"
    assert precision["loss_forward"] == {"autocast_dtype": None, "device": "cpu", "hidden_dtype": "float32"}
    assert precision["weights_dtype"] == {"frozen": ["float32"], "trainable": ["float32"]}


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without a GPU")
@pytest.mark.parametrize("name", ["launch_gpu.sh", "launch_deepspeed.sh", "vllm_server.sh"])
def test_gpu_launcher_without_gpu_prints_command_and_says_so(name):
    proc = launcher(name, "--max_steps", "1", **({"VLLM_GPUS": "0"} if name == "vllm_server.sh" else {}))
    assert proc.returncode == 3
    assert "No CUDA GPU is visible on this machine: the command above was not started." in proc.stderr
    command_line(proc)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without a GPU")
def test_vllm_server_without_gpu_serves_on_the_cpu_with_trls_flags_the_trainers_dtype_and_the_gloo_sync():
    proc = launcher("vllm_server.sh", "--dry-run", "--model", "models/causal_starting_policy", "--port", "8011")
    assert proc.returncode == 0, proc.stderr
    assert "vLLM server on CPU (no CUDA GPU is visible)" in proc.stdout
    assert " -m training.run_setup.vllm_serve_cpu --model models/causal_starting_policy " in command_line(proc)
    from training.run_setup.vllm_serve_cpu import server_command

    command, url = server_command(["--model", "models/causal_starting_policy", "--port", "8011"])
    assert url == "http://127.0.0.1:8011"
    assert command[1:5] == ["-m", "vllm.entrypoints.openai.api_server", "--model", "models/causal_starting_policy"]
    flags = dict(zip(command[5::], command[6::]))
    assert flags["--dtype"] == "float32" and flags["--weight-transfer-config"] == '{"backend": "gloo"}'
    assert flags["--logprobs-mode"] == "processed_logprobs" and flags["--gpu-memory-utilization"] == "0.3"
    assert "--enforce-eager" in command


# ---- launch_cpu.sh trains for real ------------------------------------------------------------------------------
def test_launch_cpu_trains_the_default_recipe(launched_cpu_run):
    out, log = launched_cpu_run["out"], launched_cpu_run["log"]
    assert "  ASSIST_WARMUP=3\n" in log
    assert "Command: accelerate launch --config_file accelerate_configs/cpu.yaml" in log
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["global_step"] == 2
    assert summary["strict_flags"] == {**SAFE, "ASSIST_WARMUP": "3"}  # the launcher's flags reached the trainer
    assert summary["training_args"]["max_steps"] == 2
    assert Path(summary["training_args"]["output_dir"]) == out  # extra arguments passed through
    assert (out / "adapter_model.safetensors").exists()
    lines = (out / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines if '"loss"' in line] == [1, 2]
    # the recipe's fp32 reached accelerate and was in force: no autocast in the loss forward or the sampler
    assert "Command: accelerate launch --config_file accelerate_configs/cpu.yaml --num_processes 1 --mixed_precision no " in log
    precision = summary["precision"]
    assert precision["accelerator_mixed_precision"] == "no" and precision["recipe"]["bf16"] is False
    assert precision["loss_forward"]["autocast_dtype"] is None and precision["no_grad_forward"]["autocast_dtype"] is None
    assert summary["sampler_gap"]["check_every"] == 0 and summary["sampler_gap"]["measured_steps"] == 0
    assert summary["gpu_memory"] is None  # not on CUDA


def test_the_launchers_export_what_training_flags_prints_with_one_source_of_defaults():
    """The safe defaults live in training/run_setup/flags.py alone: the launchers evaluate `python -m training.run_setup.flags --export`
    and the workflow runner gives its runs the same mapping."""
    from types import SimpleNamespace

    from training.run_setup.flags import DEFAULTS
    from training.workflow import run_env

    script = 'eval "$("$PYTHON" -m training.run_setup.flags --export)"; env'
    proc = run(["bash", "-c", script], FORCE_RATE="0.25")
    assert proc.returncode == 0, proc.stderr
    exported = dict(line.split("=", 1) for line in proc.stdout.splitlines() if line.split("=", 1)[0] in DEFAULTS)
    assert exported == {**DEFAULTS, "FORCE_RATE": "0.25"}
    for text in ((REPO / "launchers" / "_common.sh").read_text(), (REPO / "training" / "workflow.py").read_text()):
        assert "ASSIST_WARMUP" not in text  # no second copy of the defaults
    env = {k: v for k, v in run_env(SimpleNamespace(name="w"), 1).items() if k in DEFAULTS}
    assert env == {k: os.environ.get(k, v) for k, v in DEFAULTS.items()}
