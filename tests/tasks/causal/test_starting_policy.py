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
    call_shares,
    play,
    verify,
)
from training.tasks.causal.policies.belief_line import TeacherPolicy
from training.tasks.causal.splits import teacher_calls


def test_the_shipped_starting_policy_matches_its_build_record():
    assert verify(STARTING_POLICY_DIR) == []
    record = json.loads((STARTING_POLICY_DIR / BUILD_RECORD).read_text())
    acceptance = record["acceptance"]
    assert acceptance["passed"] and acceptance["greedy"]["follows_teacher"] >= record["settings"]["acceptance_bar"]
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


def test_the_train_rows_reference_calls_are_the_current_teachers_calls_on_their_own_episode():
    """The committed data is in step with the code: a change to the environment, the options or the teacher that
    would change the traces shows here (regenerate with python -m training.tasks.causal.splits)."""
    for row in load_rows(DATA_FILES[0])[:8]:
        assert teacher_calls(row) == json.loads(row["reference_calls_json"])


def test_the_build_plays_each_rows_paired_episodes_and_always_makes_the_teachers_choice():
    rows = load_rows(DATA_FILES[0])[:2]
    traces = play(rows, 3)
    assert len(traces) == 6
    first_replies = [next(m["content"] for m in t if m["role"] == "tool") for t in traces]
    assert len(set(first_replies)) == 6  # three environment seeds per row: other samples, other options
    for messages in traces:
        calls = [m["tool_calls"][0]["function"] for m in messages if m["role"] == "assistant" and m.get("tool_calls")]
        assert all(c["name"] == "choose" for c in calls)
        replies = [m["content"] for m in messages if m["role"] == "tool"]
        options = [messages[0]["content"], *replies[:-1]]  # what each call was chosen from
        for call, shown in zip(calls, options, strict=True):
            last = shown.splitlines()[-1]  # the teacher's: the last option listed
            assert last.startswith(f"{call['arguments']['option']}: ")


def test_call_shares_count_valid_calls_that_make_each_rules_choice_or_repeat_the_previous_one():
    call = {"tool": "intervene", "variable": "X1", "value": 3.0, "valid": True}
    records = [{"call_log": [{**call, "follows_teacher": True, "follows_one_step": False},
                             {**call, "follows_teacher": False, "follows_one_step": False},
                             {**call, "valid": False, "follows_teacher": False, "follows_one_step": False},
                             {**call, "variable": "X2", "follows_teacher": True, "follows_one_step": True}]}]
    assert call_shares(records) == {"valid_calls": 3, "follows_teacher": 2 / 3, "follows_one_step": 1 / 3,
                                    "repeats": 1 / 3}


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


def test_episodes_after_the_first_rename_the_variables_and_the_teacher_makes_the_same_calls_under_the_new_names():
    from training.tasks.causal.policies.belief_line import teacher
    from training.tasks.causal.policies.play import run_policy
    from training.tasks.causal.scm.scm import SCM
    from training.tasks.causal.starting_policy import episode_row

    row = load_rows(DATA_FILES[0])[1]
    assert episode_row(row, 0) is row
    renamed = episode_row(row, 1)
    before, after = SCM.from_json(row["scm_json"]), SCM.from_json(renamed["scm_json"])
    mapping = dict(zip(before.variables, after.variables))
    assert set(mapping.values()).isdisjoint(before.variables) and mapping[before.target] == after.target
    assert renamed["prompt"][0]["content"].startswith(f"Variables: {', '.join(after.variables)}.")
    calls = [(v, x) for v, x in run_policy(teacher(), row, 1).interventions]
    again = run_policy(teacher(), renamed, 1).interventions
    assert [(mapping[v], x) for v, x in calls] == again
    assert len({episode_row(row, k)["target"] for k in range(8)}) == 8  # eight episodes, eight names for the target


def test_the_builds_teacher_takes_another_listed_option_in_its_share_of_the_calls_that_have_one():
    """The build's traces (`other_option_share`): the teacher's own choice, or another option the reply listed in
    about that share of the calls with more than one option; with share 0 (the `teacher` baseline) always its own."""
    rows = load_rows(DATA_FILES[0])[:6]
    mine = other = 0
    for messages in play(rows, 4, other_share=0.3):
        calls = [m["tool_calls"][0]["function"] for m in messages if m["role"] == "assistant" and m.get("tool_calls")]
        replies = [m["content"] for m in messages if m["role"] == "tool"]
        for call, shown in zip(calls, [messages[0]["content"], *replies[:-1]], strict=True):
            listed = [line.split(":")[0] for line in shown.splitlines() if line[:1].isdigit() and ": " in line]
            assert call["name"] == "choose" and str(call["arguments"]["option"]) in listed
            if len(listed) > 1:
                mine += str(call["arguments"]["option"]) == listed[-1]
                other += str(call["arguments"]["option"]) != listed[-1]
    assert mine + other >= 40 and 0.15 <= other / (mine + other) <= 0.45, (mine, other)
    with pytest.raises(ValueError, match="other_share"):
        TeacherPolicy(1.0)
