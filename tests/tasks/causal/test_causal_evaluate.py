"""The causal task through the one evaluation pipeline (`python -m training.evaluate`, `python -m training.compare`):
a policy evaluated twice gives identical records; two policies evaluated with the same seed see the same SCMs,
initial data and sampling streams; the scripted baselines run through the same command; the comparison tests
regret, parent F1 and information gain in their own directions."""

import json

from training.compare import main as compare
from training.evaluate import main as evaluate
from training.evaluation.episodes import read_episodes

RECIPE = ["--recipe", "recipes/causal_cpu.yaml", "--set", "warm_start_steps=0", "--set", "max_completion_length=96",
          "--max_rows", "4", "--episodes_per_row", "2"]


def test_the_causal_task_is_evaluated_reproducibly_and_paired(tmp_path, causal_model_dir):
    evaluate([*RECIPE, "--out", str(tmp_path / "a")])
    evaluate([*RECIPE, "--out", str(tmp_path / "again")])
    evaluate([*RECIPE, "--set", "model_name_or_path=tiny-qwen3-causal", "--out", str(tmp_path / "other")])  # another
    a, again, other = (read_episodes(tmp_path / d) for d in ("a", "again", "other"))
    assert [e.as_json() for e in a] == [e.as_json() for e in again]
    assert [(e.id, e.seed, e.extra["env_seed"], e.extra["scm_seed"]) for e in a] == \
        [(e.id, e.seed, e.extra["env_seed"], e.extra["scm_seed"]) for e in other]
    assert len({e.seed for e in a}) == len(a)  # every episode its own sampling stream
    summary = json.loads((tmp_path / "a" / "eval_summary.json").read_text())
    assert summary["task"] == "causal" and summary["metric_directions"]["regret"] == "lower"
    assert all({"regret", "parent_f1", "info_gain"} <= set(e.metrics) for e in a)
    assert all(e.score == e.extra["reward"] for e in a)


def test_episodes_cut_at_the_completion_limit_are_counted_and_warned_of(tmp_path, causal_model_dir, caplog):
    """At 96 completion tokens every episode is cut before its budget is spent: each record says so, the summary
    counts them and the command warns, naming the flag; at the recipe's 720 the bundled rows' episodes end whole."""
    caplog.set_level("WARNING", logger="training.evaluate")
    cut = evaluate([*RECIPE, "--out", str(tmp_path / "cut")])
    episodes = read_episodes(tmp_path / "cut")
    assert cut["counts"]["ended_at_limit"] == len(episodes) == 8
    assert all(e.extra["ended_at_limit"] == 1.0 and e.extra["calls"] < e.extra["budget"] for e in episodes)
    assert "8 of 8 episodes ended at the completion limit (max_completion_length 96)" in caplog.text
    assert "--set max_completion_length=N" in caplog.text
    caplog.clear()
    whole = evaluate([*RECIPE[:4], "--max_rows", "2", "--episodes_per_row", "1", "--out", str(tmp_path / "whole")])
    assert whole["counts"]["ended_at_limit"] == 0 and "ended at the completion limit" not in caplog.text
    assert all(e.extra["calls"] == e.extra["budget"] for e in read_episodes(tmp_path / "whole"))


def test_baselines_run_through_the_same_command_and_compare_per_metric(tmp_path):
    for name in ("random", "oracle"):
        evaluate([*RECIPE, "--baseline", name, "--out", str(tmp_path / name)])
    oracle = read_episodes(tmp_path / "oracle")
    assert all(e.metrics["regret"] == 0.0 for e in oracle)  # the oracle's first call is the optimum
    assert [e.seed for e in oracle] == [e.seed for e in read_episodes(tmp_path / "random")]
    result = compare([str(tmp_path / "random"), str(tmp_path / "oracle"), "--out", str(tmp_path / "cmp"),
                      "--metric", "regret", "--metric", "parent_f1", "--metric", "info_gain"])
    assert result["metric"] == "regret" and set(result["by_metric"]) == {"parent_f1", "info_gain"}
    assert result["ranking"][0] == "oracle" and result["episodes"]["units"] == 4
    assert "## parent_f1 (higher is better)" in (tmp_path / "cmp" / "comparison.md").read_text()


def test_a_causal_run_reevaluated_gives_the_records_of_its_heldout_evaluation_during_training(tmp_path):
    """One entry for both: the run's own eval.jsonl and eval_greedy.jsonl (written by the evaluation during training)
    and `python -m training.evaluate RUN_DIR` (sampled, then --greedy) hold the same records, line for line; the
    causal options are the recipe's environment settings (`--frozen` = `--set environment_settings=...`)."""
    from training.train import main as train

    run = tmp_path / "run"
    train(["--config", "recipes/causal_cpu.yaml", "--output_dir", str(run), "--max_steps", "1",
           "--per_device_train_batch_size", "4", "--num_generations", "4", "--heldout_max_samples", "2",
           "--heldout_samples_per_prompt", "2", "--heldout_eval_steps", "0"])

    def lines(path):
        return path.read_text().splitlines()

    evaluate([str(run), "--out", str(tmp_path / "sampled")])
    evaluate([str(run), "--greedy", "--out", str(tmp_path / "greedy")])
    assert len(lines(run / "eval.jsonl")) == 4
    assert lines(tmp_path / "sampled" / "eval.jsonl") == lines(run / "eval.jsonl")
    assert lines(tmp_path / "greedy" / "eval.jsonl") == lines(run / "eval_greedy.jsonl")
    evaluate([str(run), "--frozen", "--out", str(tmp_path / "frozen")])
    evaluate([str(run), "--set", "environment_settings={active: false}", "--out", str(tmp_path / "frozen_set")])
    frozen = read_episodes(tmp_path / "frozen")
    assert lines(tmp_path / "frozen" / "eval.jsonl") == lines(tmp_path / "frozen_set" / "eval.jsonl")
    assert all(e.extra["surrogate"] == "frozen" and e.metrics["info_gain"] == 0.0 for e in frozen)
