"""A checkpoint counts only once complete: kills inside a save, full disks and finished runs resume with nothing lost
and no hand cleanup (training/outputs/checkpoints.py, training/outputs/run_record.py, the metrics.jsonl history)."""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from training import train
from training.outputs import checkpoints
from training.outputs.checkpoints import MARKER, mark_complete, prepare_resume, rotate
from training.outputs.run_record import INTERRUPTED, RunRecord
from training.step.callbacks import keep_metrics_up_to

RECIPE = "recipes/tiny_cpu.yaml"
# Small and fast, but learning: the length reward has spread even for the untrained model.
TINY = ["--warm_start_steps", "0", "--reward_funcs", "tests.support.tiny_trainer.length_reward", "--reward_weights", "1.0",
        "--per_device_train_batch_size", "8", "--num_generations", "4", "--max_completion_length", "8",
        "--heldout_max_samples", "4", "--heldout_samples_per_prompt", "1", "--heldout_eval_steps", "2",
        "--strict_health", "false", "--disable_tqdm", "true", "--save_total_limit", "1"]  # fmt: skip


def args(out: Path, *extra: str) -> list[str]:
    return ["--config", RECIPE, "--output_dir", str(out), *TINY, *extra]


def fake_checkpoint(out: Path, step: int, complete: bool) -> Path:
    path = out / f"checkpoint-{step}"
    path.mkdir(parents=True)
    (path / "optimizer.pt").write_bytes(b"x" * 100)
    (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    if complete:
        mark_complete(path, step)
    return path


def logged_steps(out: Path) -> list[int]:
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line)["step"] for line in lines if '"loss"' in line]


# ---- which checkpoint a resume takes -------------------------------------------------------------------------------
def test_resume_takes_the_newest_complete_checkpoint_and_sets_the_others_aside(tmp_path, caplog):
    out = tmp_path / "run"
    fake_checkpoint(out, 2, complete=True)
    fake_checkpoint(out, 4, complete=True)
    (out / "checkpoint-4" / "optimizer.pt").write_bytes(b"")  # torn after it was completed: e.g. a disk error
    fake_checkpoint(out, 6, complete=False)  # killed while written
    (out / "checkpoint-8").mkdir()  # killed as the directory appeared
    with caplog.at_level(logging.INFO, logger="training.outputs.checkpoints"):
        assert prepare_resume(out) == out / "checkpoint-2"
    assert sorted(p.name for p in (out / "incomplete").iterdir()) == ["checkpoint-4", "checkpoint-6", "checkpoint-8"]
    assert [p.name for p in out.glob("checkpoint-*")] == ["checkpoint-2"]
    lines = [r.getMessage() for r in caplog.records if "Resuming" in r.getMessage()]
    assert len(lines) == 1  # one line says what was chosen and what was moved, and why
    assert "checkpoint-2" in lines[0] and "optimizer.pt has 0 bytes" in lines[0] and "no completion marker" in lines[0]


def test_no_complete_checkpoint_means_from_scratch(tmp_path, caplog):
    fake_checkpoint(tmp_path, 2, complete=False)
    with caplog.at_level(logging.INFO, logger="training.outputs.checkpoints"):
        assert prepare_resume(tmp_path) is None
    assert "starting from scratch" in caplog.text and (tmp_path / "incomplete" / "checkpoint-2").is_dir()


def test_rotation_never_counts_an_incomplete_checkpoint(tmp_path):
    for step, complete in ((2, True), (4, True), (6, False)):
        fake_checkpoint(tmp_path, step, complete)
    rotate(tmp_path, limit=1, protected=set())
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == ["checkpoint-4", "checkpoint-6"]


def test_kill_between_the_files_and_the_marker_keeps_the_last_complete_checkpoint(make_trainer, monkeypatch, tmp_path):
    """With save_total_limit=1 the Trainer's own rotation (inside the save) would delete checkpoint-1 before
    checkpoint-2 is marked complete; rotation must wait for the marker."""
    trainer = make_trainer(max_steps=2, save_strategy="steps", save_steps=1, save_total_limit=1, strict_health=False)
    real_mark = checkpoints.mark_complete

    def killed_at_step_2(path, step):
        if step == 2:
            raise KeyboardInterrupt("killed before the marker")
        real_mark(path, step)

    monkeypatch.setattr(checkpoints, "mark_complete", killed_at_step_2)
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    out = tmp_path / "out"
    assert checkpoints.incompleteness(out / "checkpoint-1") is None
    assert checkpoints.incompleteness(out / "checkpoint-2") is not None
    assert prepare_resume(out) == out / "checkpoint-1"


# ---- metrics.jsonl and the run record ------------------------------------------------------------------------------
def test_torn_last_metrics_line_is_dropped_and_said(tmp_path, caplog):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "loss": 0.5}\n{"step": 2, "loss": 0.4}\n{"step": 3, "lo')
    with caplog.at_level(logging.INFO):
        keep_metrics_up_to(path, 2)
    assert path.read_text() == '{"step": 1, "loss": 0.5}\n{"step": 2, "loss": 0.4}\n'
    assert "line(s) [3]" in caplog.text and "torn" in caplog.text


def test_a_silently_truncated_file_is_caught_before_the_marker(tmp_path):
    path = fake_checkpoint(tmp_path, 2, complete=False)
    torch.save({"x": torch.zeros(100)}, path / "optimizer.pt")
    assert checkpoints.damaged_file(path) is None
    (path / "optimizer.pt").write_bytes((path / "optimizer.pt").read_bytes()[:-30])
    assert "optimizer.pt is truncated" in checkpoints.damaged_file(path)


def test_run_record_closes_killed_attempts_and_drops_evaluations_after_the_checkpoint(tmp_path):
    first = RunRecord.begin(tmp_path, resume=False, resume_step=0, resumed_from=None, started_monotonic=0.0)
    first.set_heldout("before", 0, {"heldout/reward": 0.1}, [{"step": 0, "heldout/reward": 0.1}])
    first.heartbeat(6, [{"step": 0, "heldout/reward": 0.1}, {"step": 4, "x": 1}, {"step": 6, "x": 2}])
    # killed here: no end
    second = RunRecord.begin(tmp_path, resume=True, resume_step=4, resumed_from="checkpoint-4", started_monotonic=0.0)
    assert [a["ended"] for a in second.data["attempts"]] == [INTERRUPTED, None]
    assert [h["step"] for h in second.heldout_history] == [0, 4]
    assert second.data["heldout_before"]["heldout/reward"] == 0.1
    assert second.total_wall_time_s >= first.data["attempts"][0]["wall_time_s"] > 0
    fresh = RunRecord.begin(tmp_path, resume=False, resume_step=0, resumed_from=None, started_monotonic=0.0)
    assert len(fresh.data["attempts"]) == 1 and fresh.heldout_history == []


# ---- full disk -----------------------------------------------------------------------------------------------------
def test_full_disk_during_a_save_stops_with_one_line_naming_the_last_good_checkpoint(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    real_save = torch.save

    def disk_fills_at_step_2(obj, f, *a, **k):
        if not (isinstance(f, str) and f.endswith(os.path.join("checkpoint-2", "optimizer.pt"))):
            return real_save(obj, f, *a, **k)
        monkeypatch.setattr(checkpoints, "free_bytes", lambda path: 0)
        buffer = io.BytesIO()
        real_save(obj, buffer, *a, **k)
        with open(f, "wb") as part:
            part.write(buffer.getvalue()[:1000])
        with open("/dev/full", "wb") as full:  # the kernel's own ENOSPC for the rest
            full.write(buffer.getvalue())
            full.flush()

    monkeypatch.setattr(torch, "save", disk_fills_at_step_2)
    monkeypatch.setattr(sys, "argv", ["train", *args(out, "--max_steps", "3", "--save_steps", "1")])
    with pytest.raises(SystemExit) as exit_info:
        train.cli()
    assert exit_info.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("error: disk full (ENOSPC) while writing checkpoint-2")
    assert f"the last complete checkpoint is {out / 'checkpoint-1'}" in line
    assert not (out / "checkpoint-2").exists()  # the partial one is removed: it only held the space
    record = json.loads((out / "run_record.json").read_text())
    assert record["attempts"][-1]["ended"].startswith("error: DiskFullError")


# ---- a real kill inside a checkpoint write -------------------------------------------------------------------------
@pytest.mark.slow  # minutes on 2 cores: the default run stays under 15 (README "Tests")
def test_sigkill_inside_a_checkpoint_write_resumes_to_the_uninterrupted_result(tmp_path, caplog):
    """The test-only hook SIGKILLs the run after writing half of checkpoint-4's optimizer.pt (save_total_limit=1);
    `--resume_from_checkpoint true` needs no hand cleanup, ends at max_steps with each step logged once and the
    adapter of an uninterrupted run, and resuming the finished run trains nothing."""
    killed, clean = tmp_path / "killed", tmp_path / "clean"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path.cwd()), checkpoints.TEST_KILL_ENV: "4:2"}
    run = args(killed, "--max_steps", "6", "--save_steps", "2")
    proc = subprocess.run([sys.executable, "-m", "training.train", *run], env=env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    sizes = [(killed / f"checkpoint-{step}" / "optimizer.pt").stat().st_size for step in (4, 2)]
    assert 0 < sizes[0] < sizes[1]  # half written

    with caplog.at_level(logging.INFO):
        summary = train.main([*run, "--resume_from_checkpoint", "true"])
    assert "Resuming from checkpoint-2" in caplog.text and "checkpoint-4 (no completion marker" in caplog.text
    assert summary["global_step"] == 6 and logged_steps(killed) == [1, 2, 3, 4, 5, 6]
    assert [a["resumed_from"] for a in summary["attempts"]] == [None, "checkpoint-2"]
    assert summary["attempts"][0]["ended"] == INTERRUPTED
    assert summary["heldout_reward_before"] is not None
    assert [h["step"] for h in summary["heldout_history"]] == [0, 2, 4, 6, 6]
    assert summary["wall_time_s"] > summary["wall_time_this_attempt_s"] > 0

    train.main(args(clean, "--max_steps", "6", "--save_steps", "2"))
    got, want = (load_file(d / "adapter_model.safetensors") for d in (killed, clean))
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in got)

    again = train.main([*run, "--resume_from_checkpoint", "true"])
    assert not (killed / "checkpoint-7").exists() and logged_steps(killed) == [1, 2, 3, 4, 5, 6]
    assert again["heldout_history"] == summary["heldout_history"] and len(again["attempts"]) == 3
    assert again["heldout_reward_after"] == summary["heldout_reward_after"]
    assert load_file(killed / "adapter_model.safetensors").keys() == want.keys()


def test_kill_before_the_first_checkpoint_resumes_from_scratch(tmp_path, caplog):
    """What a kill during the first save leaves: a partial checkpoint, one logged step, an open attempt."""
    out = tmp_path / "run"
    fake_checkpoint(out, 2, complete=False)
    (out / "metrics.jsonl").write_text('{"step": 1, "loss": 0.1}\n{"step": 2, "lo')
    RunRecord.begin(out, resume=False, resume_step=0, resumed_from=None, started_monotonic=0.0)
    with pytest.raises(train.RecipeError, match="already holds an earlier run"):  # a fresh start is refused...
        train.main(args(out, "--max_steps", "2", "--save_steps", "2"))
    with caplog.at_level(logging.INFO):  # ...and resuming works
        summary = train.main([*args(out, "--max_steps", "2", "--save_steps", "2"), "--resume_from_checkpoint=true"])
    assert "starting from scratch" in caplog.text
    aside = out / "incomplete" / "checkpoint-2"
    assert (aside / "optimizer.pt").exists() and MARKER not in os.listdir(aside)
    assert summary["global_step"] == 2 and logged_steps(out) == [1, 2]
    assert [a["ended"] for a in summary["attempts"]] == [INTERRUPTED, "completed"]
