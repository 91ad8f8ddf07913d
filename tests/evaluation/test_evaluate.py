"""`python -m training.evaluate`: a finished run re-evaluated reproduces its own per-episode file; the base model and
the tool agent are scored on the same paired episodes; bad input is named."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from training.analysis.compared_runs import load_run
from training.analysis.comparison import compare
from training.evaluate import main
from training.evaluation.episodes import read_episodes, summarize
from training.evaluation.spec import EvalSpecError


def test_a_run_reevaluated_reproduces_its_training_episodes(launched_cpu_run, tmp_path):
    run = launched_cpu_run["out"]
    summary = main([str(run), "--out", str(tmp_path / "again")])
    trained = read_episodes(run / "eval.jsonl")
    again = read_episodes(tmp_path / "again")
    assert [e.as_json() for e in again] == [e.as_json() for e in trained]
    assert summary["adapter"] == str(run) and summary["task"] == "reward_functions"

    base = main([str(run), "--adapter", "none", "--out", str(tmp_path / "base")])
    assert base["adapter"] is None and base["n"] == summary["n"]
    base_episodes = read_episodes(tmp_path / "base")
    assert [(e.id, e.seed) for e in base_episodes] == [(e.id, e.seed) for e in trained]  # paired with the run
    assert [e.extra["completion"] for e in base_episodes] != [e.extra["completion"] for e in trained]
    result = compare([load_run(f"trained={run}"), load_run(f"base={tmp_path / 'base'}")])
    assert result["episodes"]["scorable_in_all"] == len(trained)

    greedy = main([str(run), "--greedy", "--heldout_seed", "3", "--out", str(tmp_path / "greedy")])
    assert greedy["n"] == 4 and all(e.seed is None for e in read_episodes(tmp_path / "greedy"))
    with pytest.raises(EvalSpecError, match="already holds an eval.jsonl"):
        main([str(run), "--out", str(tmp_path / "again")])


def test_a_run_that_did_not_finish_is_evaluated_at_a_checkpoint_from_its_record(launched_cpu_run, tmp_path):
    """What a stopped run leaves (its record and checkpoints, no summary, no final adapter): evaluating it names its
    checkpoints; its last checkpoint, the final adapter's weights, gives the finished run's own episodes."""
    run = launched_cpu_run["out"]
    stopped = tmp_path / "stopped"
    final = {"run_summary.json", "adapter_model.safetensors", "adapter_config.json", "eval.jsonl"}
    shutil.copytree(run, stopped, ignore=lambda d, names: [n for n in names if Path(d) == run and n in final])
    with pytest.raises(EvalSpecError, match=r"did not finish .* --adapter .*checkpoint-N \(its checkpoints: "
                                            r"checkpoint-1, checkpoint-2\)"):
        main([str(stopped), "--out", str(tmp_path / "refused")])
    summary = main([str(stopped), "--adapter", str(stopped / "checkpoint-2"), "--out", str(tmp_path / "at2")])
    assert summary["adapter"] == str(stopped / "checkpoint-2")
    assert [e.as_json() for e in read_episodes(tmp_path / "at2")] == [e.as_json() for e in read_episodes(run)]


def test_the_tool_agent_is_scored_by_goal_success(tmp_path):
    summary = main(["--recipe", "recipes/tool_agent_cpu.yaml", "--set", "warm_start_steps=0", "--max_rows", "3",
                    "--episodes_per_row", "2", "--set", "max_completion_length=24", "--out", str(tmp_path / "e")])
    assert summary["task"] == "environment" and summary["n_total"] == 6
    episodes = read_episodes(tmp_path / "e")
    assert all(e.success is (e.score >= 1.0) for e in episodes)
    assert summary["success_rate"] == summarize(episodes).success_rate
    assert set(summary["counts"]) == {"malformed_calls", "tool_errors", "ended_at_limit"}
    assert summary["counts"]["ended_at_limit"] == 6  # 24 tokens hold no finished episode of this model
    assert json.loads((tmp_path / "e" / "eval_summary.json").read_text())["spec"]["heldout_seed"] == 0


def test_bad_input_is_named_in_one_line(tmp_path):
    (tmp_path / "not_a_run").mkdir()
    proc = subprocess.run([sys.executable, "-m", "training.evaluate", str(tmp_path / "not_a_run"), "--out",
                           str(tmp_path / "o")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        f"error: {tmp_path / 'not_a_run'}: no run_summary.json and no recorded recipe (not a run directory; pass "
        "--recipe and --adapter)")
    with pytest.raises(EvalSpecError, match="--task 'chess' is not a known task"):
        main(["--recipe", "recipes/tiny_cpu.yaml", "--task", "chess", "--out", str(tmp_path / "o")])
    with pytest.raises(EvalSpecError, match="expected KEY=VALUE"):
        main(["--recipe", "recipes/tiny_cpu.yaml", "--set", "heldout_max_samples", "--out", str(tmp_path / "o")])
    with pytest.raises(EvalSpecError, match="task 'reward_functions' has no baseline 'random'"):
        main(["--recipe", "recipes/tiny_cpu.yaml", "--set", "warm_start_steps=0", "--baseline", "random", "--out",
              str(tmp_path / "o")])


def test_a_run_is_evaluated_with_changed_settings_on_its_own_model(tmp_path):
    """`training.evaluate RUN_DIR --set KEY=VALUE`: the run's base model and adapter, another setting (the causal
    workflow's frozen surrogate); a key the run does not have is named."""
    from training.evaluation.spec import EvalSpecError, spec_from_run

    base = tmp_path / "base"
    base.mkdir()
    run = tmp_path / "run"
    run.mkdir()
    (run / "adapter_config.json").write_text("{}")
    (run / "run_summary.json").write_text(json.dumps({
        "resolved_model_path": str(base), "model_args": {"model_name_or_path": "tiny-qwen3"},
        "script_args": {"heldout_file": "h.jsonl", "environment_factory": "a.Env", "reward_funcs": []},
        "training_args": {"heldout_max_samples": 8, "seed": 0}}))
    spec = spec_from_run(run, {"environment_factory": "b.Frozen", "heldout_max_samples": "3"})
    assert (spec.model_path, spec.adapter) == (str(base), str(run))
    assert (spec.environment_factory, spec.max_rows) == ("b.Frozen", 3)
    with pytest.raises(EvalSpecError, match="--set nope: not a setting of the run"):
        spec_from_run(run, {"nope": "1"})
