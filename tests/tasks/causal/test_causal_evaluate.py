"""The causal task through the one evaluation pipeline (`python -m training.evaluate`, `python -m training.compare`):
a policy evaluated twice gives identical records; two policies evaluated with the same seed see the same SCMs,
initial data and sampling streams; the scripted baselines run through the same command; the comparison tests
regret, parent F1 and information gain in their own directions."""

import json

from training.compare import main as compare
from training.evaluate import main as evaluate
from training.evaluation.episodes import read_episodes

RECIPE = ["--recipe", "recipes/causal_cpu.yaml", "--set", "warm_start_steps=0", "--set", "max_completion_length=96",
          "--max-rows", "4", "--samples-per-prompt", "2"]


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


def test_evaluate_policy_plays_the_episodes_training_evaluate_plays(tmp_path):
    """The causal front end for episodes from elsewhere (`evaluate_policy`) reads the recipe and loads the model as
    `training.evaluate` does, and plays through the same loop: the same model, rows and seed give the same records."""
    import yaml

    from training.tasks.causal import evaluate_policy

    summary = evaluate([*RECIPE, "--out", str(tmp_path / "evaluate")])
    recipe = yaml.safe_load(open("recipes/causal_cpu.yaml"))
    recipe.update(warm_start_steps=0, max_completion_length=96)
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    evaluate_policy.main(["--model", summary["model_path"], "--recipe", str(tmp_path / "recipe.yaml"), "--split",
                          "heldout", "--limit", "4", "--episodes", "2", "--out", str(tmp_path / "policy")])

    def played(directory):
        return [{**e.as_json(), "extra": {k: v for k, v in e.extra.items() if k not in ("policy", "split")}}
                for e in read_episodes(tmp_path / directory)]

    assert played("policy") == played("evaluate") and len(played("policy")) == 8
