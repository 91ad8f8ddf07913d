"""A run owns its directory (one writer at a time, no stale temporaries, the final evaluation recorded with its
history, full disks named, checkpoints verified by content) and its recipe (compared on resume: fixed fields
refused, others refused unless accepted, accepted ones really applied). training/outputs/run_lock.py,
training/run_setup/run_recipe.py, training/outputs/atomic.py, training/outputs/checkpoints.py, training/outputs/fault_injection.py."""

from __future__ import annotations

import errno
import io
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers.trainer_callback import TrainerState

from training import train
from training.outputs import atomic
from training.outputs.atomic import atomic_write_text
from training.outputs.checkpoints import incompleteness, mark_complete, prepare_resume
from training.outputs.fault_injection import TEST_FAULT_ENV
from training.outputs.run_lock import OutputDirInUseError, holding_output_dir
from training.outputs.run_record import RunRecord
from training.run_setup.run_recipe import ApplyRecipeOnResume, RecipeChangeError, attempt_recipe, check_resume_recipe
from training.step.callbacks import MetricsJsonlCallback

RECIPE = "recipes/tiny_cpu.yaml"
TINY = ["--warm_start_steps", "0", "--reward_funcs", "tests.support.tiny_trainer.length_reward", "--reward_weights", "1.0",
        "--per_device_train_batch_size", "8", "--num_generations", "4", "--max_completion_length", "8",
        "--heldout_max_samples", "4", "--heldout_samples_per_prompt", "1", "--heldout_eval_steps", "0",
        "--strict_health", "false", "--disable_tqdm", "true", "--save_total_limit", "1",
        "--save_steps", "2"]  # fmt: skip


def args(out: Path, *extra: str) -> list[str]:
    return ["--config", RECIPE, "--output_dir", str(out), *TINY, *extra]


def cli_error(monkeypatch, capsys, argv: list[str]) -> str:
    """Run the command line in-process; it must exit 2. Returns its last stderr line."""
    monkeypatch.setattr(sys, "argv", ["train", *argv])
    with pytest.raises(SystemExit) as exit_info:
        train.cli()
    assert exit_info.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if '"loss"' in line]


# ---- temporaries and full disks -----------------------------------------------------------------------------------
def test_the_next_write_removes_a_killed_writers_temporary(tmp_path):
    stale = tmp_path / f"run_record.json.tmp-{dead_pid()}"
    stale.write_text('{"half": ')
    atomic_write_text(tmp_path / "run_record.json", "{}")
    assert not stale.exists() and (tmp_path / "run_record.json").read_text() == "{}"


class FullDiskFile(io.BytesIO):
    """A file whose write fails as a full disk does: ENOSPC, no file name."""

    def write(self, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_in_an_atomic_write_names_the_file(tmp_path, monkeypatch):
    monkeypatch.setattr(atomic, "open", lambda path, mode: FullDiskFile(), raising=False)
    with pytest.raises(OSError) as err:
        atomic_write_text(tmp_path / "run_record.json", "{}")
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(tmp_path / "run_record.json")


def test_a_full_disk_in_metrics_jsonl_names_the_file():
    callback = MetricsJsonlCallback("/dev")
    callback.path = Path("/dev/full")  # the kernel's own ENOSPC
    state = type("State", (), {"is_world_process_zero": True, "global_step": 1})()
    with pytest.raises(OSError) as err:
        callback.on_log(None, state, None, logs={"loss": 0.1})
    assert err.value.errno == errno.ENOSPC and err.value.filename == "/dev/full"


def test_a_full_disk_writing_the_run_record_is_one_error_line_naming_it(tmp_path, monkeypatch, capsys):
    real_open = open

    def full_for_the_record(path, mode="r", *a, **k):
        return FullDiskFile() if "run_record.json" in str(path) else real_open(path, mode, *a, **k)

    monkeypatch.setattr(atomic, "open", full_for_the_record, raising=False)
    out = tmp_path / "run"
    line = cli_error(monkeypatch, capsys, args(out, "--max_steps", "2"))
    record = out / "run_record.json"
    assert line == f"error: disk full (ENOSPC) while writing {record}; there is no complete checkpoint yet"


# ---- one writer at a time -----------------------------------------------------------------------------------------
def test_a_second_writer_is_refused_naming_the_directory_and_the_holder(tmp_path):
    with holding_output_dir(tmp_path):
        with pytest.raises(OutputDirInUseError) as err, holding_output_dir(tmp_path):
            pass
        assert f"output_dir {str(tmp_path)!r} is in use by another run (pid {os.getpid()} on " in str(err.value)
        with holding_output_dir(tmp_path, enabled=False):  # a process other than the main one takes no lock
            pass
    with holding_output_dir(tmp_path):  # released at the end of the block
        pass


def test_a_killed_holder_leaves_no_lock_behind(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            from training.outputs.run_lock import holding_output_dir
            with holding_output_dir({str(tmp_path)!r}):
                print("held", flush=True)
                time.sleep(120)
        """)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(Path.cwd())},
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(OutputDirInUseError, match=f"pid {holder.pid} on "):
            with holding_output_dir(tmp_path):
                pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with holding_output_dir(tmp_path):
        pass


@pytest.mark.parametrize("resume", [False, True], ids=["second-run", "resume-while-running"])
def test_the_command_line_refuses_a_directory_in_use(tmp_path, monkeypatch, capsys, resume):
    out = tmp_path / "run"
    out.mkdir()
    extra = ["--resume_from_checkpoint", "true"] if resume else []
    with holding_output_dir(out):
        line = cli_error(monkeypatch, capsys, args(out, "--max_steps", "2", *extra))
    assert line.startswith(f"error: output_dir {str(out)!r} is in use by another run (pid {os.getpid()} on ")
    assert not (out / "run_record.json").exists()  # the refused writer wrote nothing


def test_a_fresh_run_checks_the_directory_again_once_it_holds_the_lock(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    real_prepare = train.prepare

    def another_run_finishes_meanwhile(recipe):
        run = real_prepare(recipe)
        (out / "metrics.jsonl").write_text('{"step": 1, "loss": 0.1}\n')
        return run

    monkeypatch.setattr(train, "prepare", another_run_finishes_meanwhile)
    line = cli_error(monkeypatch, capsys, args(out, "--max_steps", "2"))
    assert "already holds an earlier run (metrics.jsonl)" in line
    assert (out / "metrics.jsonl").read_text() == '{"step": 1, "loss": 0.1}\n'
    assert not (out / "run_record.json").exists()


# ---- checkpoints verified by content ------------------------------------------------------------------------------
def test_a_checkpoint_with_flipped_bytes_is_set_aside_as_corrupt(tmp_path, caplog):
    for step in (2, 4):
        path = tmp_path / f"checkpoint-{step}"
        path.mkdir()
        (path / "optimizer.pt").write_bytes(bytes(range(256)) * 4)
        (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
        mark_complete(path, step)
    optimizer = tmp_path / "checkpoint-4" / "optimizer.pt"
    data = bytearray(optimizer.read_bytes())
    data[100] ^= 0xFF
    optimizer.write_bytes(bytes(data))  # same size: only the content tells
    assert "optimizer.pt is corrupt" in incompleteness(tmp_path / "checkpoint-4")
    with caplog.at_level(logging.INFO, logger="training.outputs.checkpoints"):
        assert prepare_resume(tmp_path) == tmp_path / "checkpoint-2"
    assert (tmp_path / "incomplete" / "checkpoint-4").is_dir()
    assert "checkpoint-4 (optimizer.pt is corrupt" in caplog.text


# ---- the final evaluation and the final save ----------------------------------------------------------------------
@pytest.mark.slow  # minutes on 2 cores: the default run stays under 15 (README "Tests")
def test_a_kill_after_the_final_evaluation_is_recorded_keeps_it_in_the_history(tmp_path, caplog):
    out = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path.cwd()),
           TEST_FAULT_ENV: "final_evaluation_recorded:kill"}  # fmt: skip
    proc = subprocess.run([sys.executable, "-m", "training.train", *args(out, "--max_steps", "2")], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    recorded = json.loads((out / "run_record.json").read_text())
    assert recorded["heldout_after"]["step"] == 2 and not (out / "adapter_model.safetensors").exists()

    summary = train.main([*args(out, "--max_steps", "2"), "--resume_from_checkpoint", "true"])
    assert [h["step"] for h in summary["heldout_history"]] == [0, 2]
    assert summary["heldout_history"][-1] == recorded["heldout_after"]  # reused, not evaluated again
    assert summary["heldout_reward_after"] == recorded["heldout_after"]["heldout/reward"]
    assert (out / "adapter_model.safetensors").exists()


def test_a_full_disk_in_the_final_save_is_one_error_line_and_loses_nothing(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    monkeypatch.setenv(TEST_FAULT_ENV, "final_save:disk_full")
    line = cli_error(monkeypatch, capsys, args(out, "--max_steps", "2"))
    assert line.startswith("error: disk full (ENOSPC) while writing adapter_model.safetensors: ")
    assert line.endswith(f"the last complete checkpoint is {out / 'checkpoint-2'}. Free some space, then resume with "
                         "--resume_from_checkpoint true")  # fmt: skip
    monkeypatch.delenv(TEST_FAULT_ENV)
    summary = train.main([*args(out, "--max_steps", "2"), "--resume_from_checkpoint", "true"])
    assert [h["step"] for h in summary["heldout_history"]] == [0, 2]
    assert [a["ended"].split(":")[0] for a in summary["attempts"]] == ["error", "completed"]
    assert load_file(out / "adapter_model.safetensors")


# ---- the recipe -----------------------------------------------------------------------------------------------------
def recorded_run(out: Path, **recipe) -> None:
    record = RunRecord.begin(out, resume=False, resume_step=0, resumed_from=None, started_monotonic=0.0)
    record.set_recipe(recipe, {})


def test_a_fixed_field_cannot_change_even_when_accepted(tmp_path):
    recorded_run(tmp_path, lora_r=16, learning_rate=0.003)
    with pytest.raises(RecipeChangeError, match=r"lora_r \(16 -> 8\); the model, the LoRA shape"):
        check_resume_recipe(tmp_path, {"lora_r": 8, "learning_rate": 0.003}, None)
    with pytest.raises(RecipeChangeError, match="accept_recipe_changes: lora_r cannot change on resume"):
        check_resume_recipe(tmp_path, {"lora_r": 8, "learning_rate": 0.003}, ["lora_r"])


def test_other_fields_need_acceptance_and_free_ones_do_not(tmp_path):
    recorded_run(tmp_path, learning_rate=0.003, max_steps=4, logging_steps=1, resume_from_checkpoint=None)
    new = {"learning_rate": 0.03, "max_steps": 8, "logging_steps": 2, "resume_from_checkpoint": "true"}
    with pytest.raises(RecipeChangeError) as err:
        check_resume_recipe(tmp_path, new, None)
    assert str(err.value).endswith(
        "learning_rate (0.003 -> 0.03); pass --accept_recipe_changes learning_rate to train the remaining steps with "
        "it, or resume with the run's values"
    )
    assert check_resume_recipe(tmp_path, new, ["learning_rate"]) == {
        "learning_rate": {"from": 0.003, "to": 0.03},
        "logging_steps": {"from": 1, "to": 2},
        "max_steps": {"from": 4, "to": 8},
    }
    with pytest.raises(RecipeChangeError, match="unknown field"):
        check_resume_recipe(tmp_path, new, ["learnig_rate"])


def test_a_run_recorded_before_the_log_prob_check_default_resumes_without_acceptance(tmp_path):
    """`logp_check_steps` went from 0 to null (on by default where a gap can arise, issue 42): a diagnostic's cadence,
    so a run recorded with the old default resumes with the new one, the change listed, not refused."""
    recorded_run(tmp_path, learning_rate=0.003, logp_check_steps=0, logp_diff_warn_threshold=0.01)
    new = {"learning_rate": 0.003, "logp_check_steps": None, "logp_diff_warn_threshold": None}
    assert check_resume_recipe(tmp_path, new, None) == {
        "logp_check_steps": {"from": 0, "to": None}, "logp_diff_warn_threshold": {"from": 0.01, "to": None}}


def test_a_field_added_since_the_run_was_recorded_is_no_change_at_its_default(tmp_path):
    """A run recorded before `step_credit` existed behaved as its default (off): resuming with the default is the same
    recipe; turning it on is a change that needs acceptance, named with the record's missing value."""
    recorded_run(tmp_path, learning_rate=0.003)
    defaults = {"step_credit": False, "step_credit_weight": 1.0}
    assert check_resume_recipe(tmp_path, {"learning_rate": 0.003, "step_credit": False, "step_credit_weight": 1.0},
                               None, defaults) == {}
    with pytest.raises(RecipeChangeError, match=r"step_credit \(None -> True\); pass --accept_recipe_changes step_credit"):
        check_resume_recipe(tmp_path, {"learning_rate": 0.003, "step_credit": True, "step_credit_weight": 1.0}, None,
                            defaults)


def test_changed_data_under_the_same_file_name_is_refused(tmp_path):
    data = tmp_path / "train.jsonl"
    shutil.copy("data/larger_number/train.jsonl", data)
    script_args, training_args, model_args = train.parse_args(args(tmp_path, "--train_file", str(data)))
    recipe, changes = attempt_recipe(script_args, training_args, model_args, resume=None)
    recorded_run(tmp_path, **recipe)
    assert attempt_recipe(script_args, training_args, model_args, resume=True) == (recipe, {})
    data.write_text("".join(data.read_text().splitlines(keepends=True)[:-1]))
    with pytest.raises(RecipeChangeError, match=r"train_file:sha256 \('[0-9a-f]{64}' -> '[0-9a-f]{64}'\); the model"):
        attempt_recipe(script_args, training_args, model_args, resume=True)


def test_resume_applies_an_accepted_learning_rate_and_free_fields_and_refuses_the_rest(tmp_path, monkeypatch, capsys):
    base = tmp_path / "base"
    train.main(args(base, "--max_steps", "2"))
    same, faster = tmp_path / "same", tmp_path / "faster"
    shutil.copytree(base, same)
    shutil.copytree(base, faster)
    resume = ["--resume_from_checkpoint", "true", "--max_steps", "4"]

    line = cli_error(monkeypatch, capsys, [*args(faster, *resume), "--learning_rate", "0.03"])
    assert "learning_rate (0.003 -> 0.03); pass --accept_recipe_changes learning_rate" in line
    line = cli_error(monkeypatch, capsys, [*args(faster, *resume), "--lora_r", "8"])
    assert "lora_r (16 -> 8); the model, the LoRA shape, the reward functions and the data cannot change" in line

    train.main(args(same, *resume))
    summary = train.main([*args(faster, *resume), "--learning_rate", "0.03", "--accept_recipe_changes",
                          "learning_rate", "--logging_steps", "2"])  # fmt: skip
    assert [(m["step"], m["learning_rate"]) for m in metrics(same)] == [(1, 3e-3), (2, 3e-3), (3, 3e-3), (4, 3e-3)]
    assert [(m["step"], m["learning_rate"]) for m in metrics(faster)] == [(1, 3e-3), (2, 3e-3), (4, 3e-2)]
    assert summary["training_args"]["learning_rate"] == 0.03
    changes = json.loads((faster / "run_record.json").read_text())["attempts"][-1]["recipe_changes"]
    assert changes["learning_rate"] == {"from": 0.003, "to": 0.03} and changes["logging_steps"] == {"from": 1, "to": 2}
    got, old_lr = (load_file(d / "adapter_model.safetensors") for d in (faster, same))
    assert any(not torch.equal(got[k], old_lr[k]) for k in got)


def test_applying_accepted_changes_replaces_what_the_checkpoint_restored():
    """The optimizer and scheduler as transformers leaves them after loading a checkpoint of a run at lr 0.003 with
    a linear decay over 10 steps, at step 4; the new recipe: lr 0.03 over 20 steps, other betas, epsilon, decay."""
    params = [torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(2))]
    groups = [{"params": [params[0]], "weight_decay": 0.1}, {"params": [params[1]], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=0.003, betas=(0.9, 0.999), eps=1e-8)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 - step / 20)
    for _ in range(4):
        optimizer.step()
        scheduler.step()
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.003 * 0.8)
    new = type("Args", (), dict(learning_rate=0.03, adam_beta1=0.5, adam_beta2=0.9, adam_epsilon=1e-6,
                                weight_decay=0.2, logging_steps=3, eval_steps=None, save_steps=5))()  # fmt: skip
    state = TrainerState(global_step=4, max_steps=20, logging_steps=1, save_steps=2)
    changes = {k: {"from": None, "to": None} for k in ("learning_rate", "adam_beta1", "adam_epsilon")}
    changes["weight_decay"] = {"from": 0.1, "to": 0.2}
    ApplyRecipeOnResume(changes).on_train_begin(new, state, None, optimizer=optimizer, lr_scheduler=scheduler)
    assert scheduler.base_lrs == [0.03, 0.03] and scheduler.get_last_lr() == [0.03 * 0.8] * 2
    assert [g["lr"] for g in optimizer.param_groups] == [0.03 * 0.8] * 2
    assert [g["betas"] for g in optimizer.param_groups] == [(0.5, 0.9)] * 2
    assert [g["eps"] for g in optimizer.param_groups] == [1e-6] * 2
    assert [g["weight_decay"] for g in optimizer.param_groups] == [0.2, 0.0]  # the no-decay group stays at 0
    assert (state.logging_steps, state.save_steps) == (3, 5)
    scheduler.step()
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.03 * 0.75)

    plain = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    with pytest.raises(RecipeChangeError, match="learning_rate changed on resume, but the scheduler StepLR"):
        ApplyRecipeOnResume({"learning_rate": {}}).on_train_begin(new, state, None, optimizer=optimizer,
                                                                  lr_scheduler=plain)  # fmt: skip
