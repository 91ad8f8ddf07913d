"""The critical-fixes check passes on this tree, and fails, naming the check, when any one fix is reverted."""

import pytest

import training.features.reference
import training.run_setup.flags
import training.step.health
import training.tool_use.tool_names
import training.trainer
from scripts import critical_fixes
from tests.support.reverts import recompute_old_logps_at_loss_time
from training.features.forcing import Forcing
from training.features.value_head import ValueHeadFeature
from training.trainer import StrictGRPOTrainer


def _last_line(capsys) -> str:
    return capsys.readouterr().out.strip().splitlines()[-1]


def test_all_checks_pass(capsys):
    assert critical_fixes.main([]) == 0
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1] == f"{len(critical_fixes.CHECKS)} passed, 0 failed"
    assert "FAIL" not in out


_original_mark = Forcing.mark


def _forced_rows_left_in_the_loss(self, batch, plan, accelerator, metrics):
    _original_mark(self, batch, plan, accelerator, metrics)
    if "tool_mask" in batch:
        batch["tool_mask"][batch["forced"]] = batch["completion_mask"][batch["forced"]]


def _reverts():
    """(check name, what to patch, replacement): each replacement undoes one fix."""
    return [
        ("strict_trajectory_keys", (training.trainer, "check_generation_batch"), lambda *a, **k: None),
        ("no_forced_samples_in_rl", (Forcing, "mark"), _forced_rows_left_in_the_loss),
        ("tool_names_consistent", (training.tool_use.tool_names, "check_tool_names"), lambda *a, **k: None),
        ("value_head_trains", (ValueHeadFeature, "add_to_optimizer"), lambda self, optimizer: None),
        ("reference_sync_zero_diffs", (training.features.reference, "sync_reference"), lambda pairs, alpha: None),
        ("detectors_fire_on_broken_runs", (training.step.health, "detect"),
         lambda logs, reuse_pass: {name: False for name in training.step.health.ADVICE}),
        ("sample_time_ratio_second_pass", (StrictGRPOTrainer, "_compute_loss"), recompute_old_logps_at_loss_time),
        ("strict_flags_validated", (training.run_setup.flags, "_float_flag"), lambda name, raw, low, high: float(raw)),
    ]  # fmt: skip


@pytest.mark.parametrize("name,target,replacement", _reverts(), ids=[r[0] for r in _reverts()])
def test_reverting_a_fix_fails_its_check(name, target, replacement, monkeypatch, capsys):
    monkeypatch.setattr(*target, replacement)
    assert critical_fixes.main(["--only", name]) == 1
    out = capsys.readouterr().out
    assert f"{name}" in out and "FAIL" in out
    assert out.strip().splitlines()[-1] == "0 passed, 1 failed"
