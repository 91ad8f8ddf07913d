"""A run directory written before the causal commands shared one episode source (`train_scm` on the CBO file at
cb969d8: tests/fixtures/cbo_run_cb969d8/, its recorded recipe, summary, adapter, rows and held-out episodes; paths
written as {OUT}, {OUT_PARENT} and {REPO}) still evaluates to the same episodes (the same calls; its floats to 1e-9), and still resumes: the same command
line makes the same rows (their sha256 is in the recorded recipe) and records the same environment
(`environment_factory` and `environment_settings` as they were recorded), so the resume's recipe check passes."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import torch

from training import train
from training.evaluate import main as evaluate
from training.outputs.checkpoints import file_sha256
from training.run_setup.run_recipe import recorded_recipe
from training.tasks.causal import train_scm

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "cbo_run_cb969d8"
TEXT = (".json", ".jsonl", ".jinja")
ADDED_SINCE = "ended_at_limit"  # the one field an episode's record gained after cb969d8


def old_run(into: Path) -> Path:
    """The fixture as a run directory at `into`, its paths pointing there and at this checkout."""
    run = into / "runs" / "cbo"
    shutil.copytree(FIXTURE, run)
    for path in run.rglob("*"):
        if path.suffix in TEXT:
            text = path.read_text().replace("{OUT}", str(run)).replace("{OUT_PARENT}", str(into))
            path.write_text(text.replace("{REPO}", str(ROOT)))
    return run


def test_an_old_run_directory_evaluates_to_its_own_episodes(tmp_path):
    run = old_run(tmp_path)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the run was evaluated (benchmarks/causal_command_records.sh)
    try:
        summary = evaluate([str(run), "--out", str(tmp_path / "again")])
    finally:
        torch.set_num_threads(threads)
    assert summary["n"] == 3 and summary["spec"]["environment_settings"] == {"surrogate_kind": "additive"}
    again = [json.loads(line) for line in (tmp_path / "again" / "eval.jsonl").read_text().splitlines()]
    recorded = [json.loads(line) for line in (run / "eval.jsonl").read_text().splitlines()]
    assert [e["extra"]["call_log"] for e in again] == [e["extra"]["call_log"] for e in recorded]
    for episode in again:  # what a record holds since: the episode ended before a limit cut it
        assert episode["extra"].pop(ADDED_SINCE) == 0.0
    assert_same_episodes(again, recorded)


def assert_same_episodes(again, recorded, where="eval.jsonl"):
    """Equal but for the last bits of a float: the additive surrogate's compiled scores (issue 62) round apart from
    cb969d8's numpy ones by about 1e-16 relative; every choice, count and string must be the same."""
    if isinstance(recorded, float) and isinstance(again, float):
        assert math.isclose(again, recorded, rel_tol=1e-9, abs_tol=1e-12), (where, again, recorded)
    elif isinstance(recorded, dict):
        assert isinstance(again, dict) and again.keys() == recorded.keys(), where
        for key in recorded:
            assert_same_episodes(again[key], recorded[key], f"{where}.{key}")
    elif isinstance(recorded, list):
        assert isinstance(again, list) and len(again) == len(recorded), where
        for i, (a, r) in enumerate(zip(again, recorded)):
            assert_same_episodes(a, r, f"{where}[{i}]")
    else:
        assert again == recorded, (where, again, recorded)


def test_an_old_run_directory_resumes_with_its_own_recipe(tmp_path):
    run = old_run(tmp_path)
    recorded = recorded_recipe(run)
    recipe = train_scm.scm_recipe([
        "--scm", str(ROOT / "examples" / "scms" / "cbo_toy.yaml"), "--output_dir", str(run), "--max_steps", "1",
        "--per_device_train_batch_size", "4", "--num_generations", "4", "--save_steps", "1", "--logging_steps", "1",
        "--train_rows", "8", "--heldout_rows", "3", "--heldout_max_samples", "3", "--heldout_samples_per_prompt", "1",
        "--resume_from_checkpoint", "true"])
    for name in ("train_file", "heldout_file"):
        assert file_sha256(getattr(recipe.script_args, name)) == recorded[f"{name}:sha256"]
    prepared = train.prepare(recipe)  # a changed fixed field (the rows, the environment) would be refused here
    assert (prepared.script_args.environment_factory, prepared.script_args.environment_settings) == (
        recorded["environment_factory"], recorded["environment_settings"]) == (
        "training.tasks.causal.env.CausalEnv", {"surrogate_kind": "additive"})
