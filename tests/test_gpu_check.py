"""The GPU check (benchmarks/gpu_check.py): its dry run rehearses the whole plan on CPU (so one call on a GPU is
enough), its verdicts fail when what they guard is broken, and a failing step is reported while the others still run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import gpu_check, gpu_check_install
from benchmarks.gpu_check import GpuCheck, StepFailed, generation_speed

REPO = Path(__file__).resolve().parents[1]
PLAN = ["install", "environment", "pytest_gpu", "causal_fp32", "causal_bf16", "sampler_modes", "qwen3_0.6b"]


@pytest.mark.slow  # minutes on 2 cores: the default run stays under 15 (README "Tests")
def test_the_dry_run_rehearses_the_whole_plan_on_cpu(tmp_path):
    out = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "benchmarks.gpu_check", "--dry-run", "--jobs", "2", "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    report = json.loads(out.read_text())
    steps = report["steps"]
    assert proc.returncode == 0, json.dumps({k: v for k, v in steps.items() if v["status"] != "passed"})[-4000:]
    assert list(steps) == PLAN and report["passed"] is True
    assert report["machine"]["cuda_available"] is False and report["mode"].startswith("dry-run")

    assert steps["install"]["note"] == "nothing to install" and steps["install"]["missing"] == []
    tests = steps["pytest_gpu"]
    assert tests["collected"] >= 3 and tests["failed"] == tests["errors"] == 0
    assert set(tests["skipped"].values()) == {"needs CUDA"}
    for module, why in tests["modules_skipped"].items():  # without the `gpu` extra (CI): only its modules, named
        assert "the `gpu` extra" in why, (module, why)

    fp32 = steps["causal_fp32"]  # through the CPU launcher, which passes the recipe's precision
    assert "launch --config_file accelerate_configs/cpu.yaml --num_processes 1 --mixed_precision no " in fp32["command"]
    assert abs(fp32["first_ratio"]["mean"] - 1) <= 1e-5 and fp32["first_ratio"]["std"] <= 1e-5
    assert fp32["precision"]["loss_forward"]["autocast_dtype"] is None
    bf16 = steps["causal_bf16"]  # no log-prob flag: the gap is measured by default
    assert " --mixed_precision bf16 " in bf16["command"] and "--logp_check_steps" not in bf16["command"]
    assert bf16["sampler_gap"]["why"] == "default on: bfloat16" and bf16["sampler_gap"]["measured_steps"] == 1
    assert 0 < bf16["sampler_gap"]["logp_abs_diff_mean"] < 1e-2
    assert bf16["precision"]["loss_forward"]["autocast_dtype"] == "bfloat16"

    modes = steps["sampler_modes"]["modes"]
    assert modes["dynamic"]["within_tolerance"] and modes["static"]["within_tolerance"]
    assert modes["dynamic"]["tokens_per_s"] > 0 and modes["static"]["tokens_per_s"] > 0
    assert modes["static_compiled"]["status"].startswith("not run: transformers compiles")
    qwen = steps["qwen3_0.6b"]
    assert qwen["model"]["shape"] == "tiny" and qwen["steps"] == 2
    assert qwen["step_time_s"] > 0 and qwen["generated_tokens_per_s"] > 0
    assert qwen["gpu_memory"] is None  # CPU: no GPU numbers, never zeros


def checked_with(monkeypatch, tmp_path, **steps) -> tuple[int, dict]:
    """A GpuCheck whose steps are replaced by `steps` (name -> function of the time limit); its exit code and report."""
    check = GpuCheck(dry_run=True, out=tmp_path / "report.json", wheels=None, budget_s=60)
    passing = {name: (lambda limit: {}) for name in ("install", "environment", "pytest_gpu", "causal_fp32",
                                                      "causal_bf16", "sampler_modes", "qwen3_0_6b")}
    for name, fn in {**passing, **steps}.items():
        monkeypatch.setattr(check, name, fn)
    code = check.run()
    return code, json.loads((tmp_path / "report.json").read_text())


def test_a_failing_step_is_reported_and_the_rest_still_run(monkeypatch, tmp_path):
    def broken(limit):
        raise StepFailed("float32: the first PPO ratio is not 1")

    code, report = checked_with(monkeypatch, tmp_path, causal_fp32=broken)
    assert code == 1 and report["passed"] is False
    assert report["steps"]["causal_fp32"] == {"status": "failed", "error": "float32: the first PPO ratio is not 1",
                                              "seconds": report["steps"]["causal_fp32"]["seconds"]}
    assert [name for name, s in report["steps"].items() if s["status"] == "passed"] == [
        n for n in PLAN if n != "causal_fp32"]


def test_without_a_working_environment_nothing_else_runs(monkeypatch, tmp_path):
    def no_gpu(limit):
        raise StepFailed("no CUDA GPU is visible: run with --dry-run to rehearse on CPU")

    code, report = checked_with(monkeypatch, tmp_path, environment=no_gpu)
    assert code == 1
    assert {report["steps"][n]["status"] for n in PLAN[2:]} == {"not run"}


def fake_launch(rows: list[dict], autocast: str | None):
    summary = {"precision": {"loss_forward": {"autocast_dtype": autocast}}, "sampler_gap": {}, "gpu_memory": None}
    return lambda *args, **kwargs: (rows, summary, "accelerate launch ...")


@pytest.mark.parametrize(("ratio", "autocast", "wrong"), [
    ({"ratio/mean": 0.9999, "ratio/std": 1e-7}, None, "the first PPO ratio is not 1"),
    ({"ratio/mean": 1.0, "ratio/std": 2e-5}, None, "the first PPO ratio is not 1"),
    ({"ratio/mean": 1.0, "ratio/std": 1e-7}, "bfloat16", "ran under autocast"),
])  # fmt: skip
def test_the_fp32_verdict_fails_when_the_first_ratio_is_not_one_or_autocast_ran(monkeypatch, tmp_path, ratio,
                                                                              autocast, wrong):
    check = GpuCheck(dry_run=True, out=tmp_path / "r.json", wheels=None, budget_s=60)
    monkeypatch.setattr(check, "launch", fake_launch([{"loss": 0.1, **ratio}], autocast))
    with pytest.raises(StepFailed, match=wrong):
        check.causal_fp32(60)
    monkeypatch.setattr(check, "launch", fake_launch([{"loss": 0.1, "ratio/mean": 1.0, "ratio/std": 1e-7}], None))
    assert check.causal_fp32(60)["first_ratio"]["mean"] == 1.0


def test_the_bf16_verdict_fails_when_the_gap_was_not_measured_by_default(monkeypatch, tmp_path):
    check = GpuCheck(dry_run=True, out=tmp_path / "r.json", wheels=None, budget_s=60)
    monkeypatch.setattr(check, "launch", fake_launch([{"loss": 0.1, "ratio/std": 1e-3}], "bfloat16"))
    with pytest.raises(StepFailed, match="sampling/logp_abs_diff was not measured"):
        check.causal_bf16(60)


def test_generation_speed_counts_the_completions_of_each_generation():
    rows = [{"loss": 1, "timing/generate_s": 9.0, "completions/mean_length": 60, "completions/max_length": 64},
            {"loss": 1, "timing/generate_s": 2.0, "completions/mean_length": 50, "completions/max_length": 64},
            {"loss": 1, "timing/generate_s": 2.0, "completions/mean_length": 30, "completions/max_length": 64}]
    summary = {"training_args": {"per_device_train_batch_size": 16, "steps_per_generation": 1}}
    speed = generation_speed(rows, summary)  # the first (warm-up) step left out
    assert speed["generated_tokens_per_s"] == pytest.approx((50 + 30) * 16 / 4.0)
    assert speed["ms_per_decoding_step"] == pytest.approx(1000 * 4.0 / 128, abs=0.1)


def test_what_the_machine_lacks_is_installed_from_the_wheels_folder_only(monkeypatch, tmp_path):
    assert gpu_check_install.unmet(["surely-not-installed-here>=1", "pytest>=9", "pytest>=999"]) == [
        "surely-not-installed-here>=1", "pytest>=999"]
    monkeypatch.setattr(gpu_check_install, "plan", lambda: {"missing": ["pyyaml>=6"], "optional_missing": [],
                                                            "project_installed": True})
    refused = gpu_check_install.install(None, dry_run=False, timeout_s=10)
    assert refused["status"] == "failed" and "no --wheels folder" in refused["note"]
    ran = []
    monkeypatch.setattr(gpu_check_install.subprocess, "run",
                        lambda cmd, **kw: ran.append(cmd) or subprocess.CompletedProcess(cmd, 0, "", ""))
    resolved = gpu_check_install.install(str(tmp_path), dry_run=True, timeout_s=10)
    assert resolved["status"] == "passed"
    assert ran == [[sys.executable, "-m", "pip", "install", "--no-index", "--find-links", str(tmp_path), "pyyaml>=6",
                    "--dry-run"]]


def test_the_check_module_starts_on_the_standard_library_alone():
    """It must run on a machine that lacks the project's packages: no third-party import at module level."""
    for module in (gpu_check, gpu_check_install):
        source = Path(module.__file__).read_text()
        imports = [line.split()[1] for line in source.splitlines() if line.startswith(("import ", "from "))]
        third_party = [name for name in imports if name.split(".")[0] not in sys.stdlib_module_names
                       and name not in ("__future__", "benchmarks.gpu_check_install")]
        assert third_party == []


def test_a_module_skipped_while_collected_is_listed_apart_from_the_tests(tmp_path):
    """Without DeepSpeed (CI installs no `gpu` extra) its test modules skip themselves at collection: listed by module
    with the reason, not counted as a skipped test, so 'every skipped test needs CUDA' still holds."""
    xml = tmp_path / "report.xml"
    xml.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="" name="tests.test_deepspeed_cpu"><skipped message="collection skipped">'
        "('tests/test_deepspeed_cpu.py', 24, 'Skipped: DeepSpeed is in the `gpu` extra')</skipped></testcase>"
        '<testcase classname="tests.test_vllm" name="test_a"><skipped message="needs CUDA">x</skipped></testcase>'
        '<testcase classname="tests.test_vllm" name="test_b"/>'
        "</testsuite></testsuites>")
    counts = gpu_check.junit_counts(xml)
    assert counts["skipped"] == {"tests.test_vllm.test_a": "needs CUDA"}
    assert counts["collected"] == 2 and counts["passed"] == 1
    assert list(counts["modules_skipped"]) == ["tests.test_deepspeed_cpu"]
    assert "DeepSpeed is in the `gpu` extra" in counts["modules_skipped"]["tests.test_deepspeed_cpu"]
