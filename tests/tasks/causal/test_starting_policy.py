"""The shipped starting policy is what its build record says: its files, the data and recipe it was built from, the
traces it imitated (rendered again), and its acceptance; a rebuild from scratch passes the acceptance check too."""

from __future__ import annotations

import json
import shutil

import pytest

from training.errors import BadInputError
from training.run_setup.prompt_datasets import load_rows
from training.tasks.causal.starting_policy import (
    BUILD_RECORD,
    DATA_FILES,
    STARTING_POLICY_DIR,
    BuildSettings,
    build,
    episodes,
    line_shares,
    play,
    teacher_traces,
    verify,
)


def test_the_shipped_starting_policy_matches_its_build_record():
    assert verify(STARTING_POLICY_DIR) == []
    record = json.loads((STARTING_POLICY_DIR / BUILD_RECORD).read_text())
    acceptance = record["acceptance"]
    assert acceptance["passed"] and acceptance["greedy"]["follows_line"] >= record["settings"]["acceptance_bar"]
    assert acceptance["rows"] == record["settings"]["acceptance_rows"] == 32
    assert record["command"].startswith("python -m training.tasks.causal.starting_policy build")
    assert record["commit"] and record["numerics"]["threads"] >= 1 and record["numerics"]["torch"]


def test_verify_names_a_changed_file_and_a_record_that_did_not_pass(tmp_path):
    copy = tmp_path / "policy"
    shutil.copytree(STARTING_POLICY_DIR, copy)
    weights = copy / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1] + b"\0")
    assert verify(copy) == ["model.safetensors: sha256 differs from the build record"]
    shutil.copy(STARTING_POLICY_DIR / "model.safetensors", weights)
    record = json.loads((copy / BUILD_RECORD).read_text())
    record["acceptance"]["passed"] = False
    (copy / BUILD_RECORD).write_text(json.dumps(record))
    assert verify(copy) == ["the build did not pass its acceptance check"]


def test_teacher_traces_refuse_train_rows_whose_calls_the_current_teacher_would_not_make():
    row = load_rows(DATA_FILES[0])[0]
    calls = json.loads(row["reference_calls_json"])
    calls[0]["arguments"]["value"] = -calls[0]["arguments"]["value"]
    with pytest.raises(BadInputError, match="regenerate the splits"):
        teacher_traces([{**row, "reference_calls_json": json.dumps(calls)}])
    ((played, messages),) = teacher_traces([row])
    assert played["reference_calls_json"] == row["reference_calls_json"]
    made = len(json.loads(row["reference_calls_json"]))  # the teacher may stop before the budget
    assert [m["role"] for m in messages].count("tool") == made <= row["budget"]


def test_stage_one_plays_each_row_on_its_own_and_the_paired_seeds_and_always_follows_the_line():
    rows = load_rows(DATA_FILES[0])[:2]
    played = play(episodes(rows, 3), "line")
    assert [r["seed"] for r, _ in played][::3] == [r["seed"] for r in rows]
    assert len({r["seed"] for r, _ in played}) == 6
    for row, _ in played:
        calls = json.loads(row["reference_calls_json"])
        assert len(calls) == row["budget"] and all(c["name"] == "intervene" for c in calls)


def test_line_shares_count_valid_calls_that_follow_the_line_or_repeat_the_previous_one():
    call = {"tool": "intervene", "variable": "X1", "value": 3.0, "valid": True}
    records = [{"call_log": [{**call, "follows_line": True}, {**call, "follows_line": False},
                             {**call, "valid": False, "follows_line": False},
                             {**call, "variable": "X2", "follows_line": True}]}]
    assert line_shares(records) == {"valid_calls": 3, "follows_line": 2 / 3, "repeats": 1 / 3}


@pytest.mark.slow
def test_a_build_from_scratch_passes_its_acceptance_check(tmp_path, monkeypatch):
    """The README's promise for the shipped files: one command rebuilds them from committed code and data (about
    15 minutes on 2 cores). On the machine and thread count of the shipped build, the files are identical."""
    monkeypatch.setenv("STRICT_GRPO_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "policy"
    record = build(BuildSettings(), out, "test", show_progress=False)
    assert record["acceptance"]["passed"], record["acceptance"]
    shipped = json.loads((STARTING_POLICY_DIR / BUILD_RECORD).read_text())
    assert record["traces"] == shipped["traces"] and record["data"] == shipped["data"]
    if record["numerics"] == shipped["numerics"]:
        assert record["files"] == shipped["files"]


def test_a_finished_build_replaces_an_existing_out_only_with_overwrite(tmp_path):
    """The build's files are written at its end; an existing --out is refused without --overwrite (before any file
    is touched) and replaced with it. Once, an existing --out made the atomic rename keep the old directory and drop
    the new build without a word."""
    from training.tasks.causal.starting_policy import write_build

    dest = tmp_path / "policy"

    def save(text):
        return lambda tmp: (tmp / "model.safetensors").write_text(text)

    write_build(dest, save("old"), {"build": 1}, overwrite=False)
    with pytest.raises(BadInputError, match="--overwrite"):
        write_build(dest, save("new"), {"build": 2}, overwrite=False)
    assert (dest / "model.safetensors").read_text() == "old"
    write_build(dest, save("new"), {"build": 2}, overwrite=True)
    assert (dest / "model.safetensors").read_text() == "new"
    assert json.loads((dest / BUILD_RECORD).read_text())["build"] == 2
