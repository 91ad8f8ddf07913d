"""A 2-rank ZeRO-2 or ZeRO-3 CPU run killed (SIGKILL of the whole job) at 3 random points and resumed each time ends
where an uninterrupted run ends: the same adapter, bit for bit, the same metric rows (timings aside) and the whole
run's mean `train_loss`; then the finished run resumed once more exits 0 and rewrites nothing (issues 35, 42).

Slow: two 12-step runs of the tiny model plus 4 restarts per case, about 5 minutes on 2 cores once DeepSpeed's CPU
comm op is compiled (tests/test_deepspeed_cpu.py).
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
from safetensors.torch import load_file

from tests.support.two_rank import REPO, two_rank_command, two_rank_env
from training.outputs.checkpoints import MARKER

pytest.importorskip("deepspeed", reason="DeepSpeed is in the `gpu` extra")

STEPS, SAVE = 12, 3
TIMING = ("timing/", "step_time", "memory/", "train_runtime", "train_samples_per_second", "train_steps_per_second")
ZERO = {stage: f"accelerate_configs/deepspeed_zero{stage}.yaml" for stage in (2, 3)}


# the features whose state a checkpoint carries besides the adapter: the reference adapter (beta > 0, synced every
# 2 steps) and dynamic sampling's draws (the value head refuses DeepSpeed by name: advantage_estimator gae)
FEATURES = {"plain": (), "reference_dynamic": ("--beta", "0.04", "--sync_ref_model", "true",
                                                     "--ref_model_sync_steps", "2", "--ref_model_mixup_alpha", "1.0",
                                                     "--dynamic_sampling", "true",
                                                     "--per_device_train_batch_size", "8")}  # whole groups per rank


def command(out: Path, resume: bool, features: tuple = (), stage: int = 2) -> list[str]:
    # half the groups without reward spread, so the zero-std streak (checkpointed state) takes several values
    train_args = ("--reward_funcs", "__main__.half_constant_reward", "--zero_std_warn_threshold", "0.3", *features)
    return two_rank_command(out, ZERO[stage], "--mixed_precision", "no", max_steps=STEPS, save_steps=SAVE,
                            train_args=(*train_args, *(("--resume_from_checkpoint", "true") if resume else ())))


def run_to_end(out: Path, probe: Path, resume: bool, features: tuple = (), stage: int = 2
               ) -> subprocess.CompletedProcess:
    proc = subprocess.run(command(out, resume, features, stage), cwd=REPO,
                          env=two_rank_env(probe, {"DS_ACCELERATOR": "cpu"}), capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return proc


def complete_steps(out: Path) -> list[int]:
    return sorted(int(p.parent.name.split("-")[1]) for p in out.glob(f"checkpoint-*/{MARKER}"))


def kill_after_next_checkpoint(out: Path, probe: Path, resume: bool, rng: random.Random, features: tuple = (),
                               stage: int = 2) -> None:
    """Start the job, wait for a checkpoint newer than those on disk, then SIGKILL every process of the job after a
    random delay of up to 0.5 s (mid-step or mid-save)."""
    before = max(complete_steps(out), default=0)
    proc = subprocess.Popen(command(out, resume, features, stage), cwd=REPO,
                            env=two_rank_env(probe, {"DS_ACCELERATOR": "cpu"}), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 600
    while max(complete_steps(out), default=0) <= before:
        assert proc.poll() is None, "the job ended before its next checkpoint"
        assert time.time() < deadline, "no new checkpoint within the deadline"
        time.sleep(0.05)
    time.sleep(rng.uniform(0.0, 0.5))  # steps take about 0.25 s: within the next two steps or their save
    job = psutil.Process(proc.pid)
    everyone = [job, *job.children(recursive=True)]  # the launcher and the ranks it started
    for p in everyone:
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    proc.wait()
    psutil.wait_procs(everyone, timeout=30)


def step_rows(out: Path) -> list[dict]:
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not k.startswith(TIMING)} for r in rows if "loss" in r]


def final_loss(out: Path) -> float:
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    (loss,) = [r["train_loss"] for r in rows if "train_loss" in r][-1:]
    return loss


@pytest.mark.slow
@pytest.mark.parametrize(("stage", "features"), [(2, "plain"), (2, "reference_dynamic"), (3, "plain"),
                                                 (3, "reference_dynamic")])
def test_a_zero_run_killed_three_times_resumes_to_the_uninterrupted_run(tmp_path, stage, features):
    extra = FEATURES[features]
    (tmp_path / "probe_a").mkdir(), (tmp_path / "probe_b").mkdir()
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    run_to_end(whole, tmp_path / "probe_a", resume=False, features=extra, stage=stage)

    rng = random.Random(0)
    for attempt in range(3):
        kill_after_next_checkpoint(killed, tmp_path / "probe_b", resume=attempt > 0, rng=rng, features=extra,
                                   stage=stage)
        assert not (killed / "run_summary.json").exists()
    run_to_end(killed, tmp_path / "probe_b", resume=True, features=extra, stage=stage)
    attempts = json.loads((killed / "run_record.json").read_text())["attempts"]
    assert [a["ended"].split(":")[0] for a in attempts] == ["interrupted"] * 3 + ["completed"]

    a, b = load_file(whole / "adapter_model.safetensors"), load_file(killed / "adapter_model.safetensors")
    assert a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)
    streaks = [r["zero_std/streak"] for r in step_rows(whole)]
    assert max(streaks) >= 2 and 0 in streaks[1:]  # the state a resume must carry over is not trivially 0
    assert step_rows(killed) == step_rows(whole)  # streaks and losses, step for step
    assert [r["step"] for r in step_rows(killed)] == list(range(1, STEPS + 1))
    assert final_loss(killed) == pytest.approx(final_loss(whole), rel=1e-9)

    files = ("adapter_model.safetensors", "metrics.jsonl", "eval.jsonl")
    before = {f: (killed / f).read_bytes() for f in files}
    proc = run_to_end(killed, tmp_path / "probe_b", resume=True, features=extra, stage=stage)  # finished: once more
    assert "already reached max_steps" in proc.stdout + proc.stderr
    assert {f: (killed / f).read_bytes() for f in files} == before
