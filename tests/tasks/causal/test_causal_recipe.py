"""The causal recipe end to end on CPU, as the README runs it (minutes: marked slow).

The recipe as committed starts from the shipped starting policy, finishes within its wall-time guard, keeps every
reward finite, and its own end-of-run comparison (paired per held-out SCM, 95% interval) shows the weighted held-out
reward higher than at step 0 with the interval above 0, and regret not detectably worse. docs/results/causal.md reports
the same claim over runs of the README's command from a fresh clone (§1.1), and the 3-seed workflow against the
baselines (§1.2).
"""

import json

import pytest

from training.train import main as train

RECIPE = "recipes/causal_cpu.yaml"


@pytest.mark.slow
def test_the_recipe_improves_its_weighted_heldout_reward_with_an_interval_above_zero(tmp_path):
    out = tmp_path / "run"
    summary = train(["--config", RECIPE, "--output_dir", str(out)])
    assert summary["stopped_reason"] == "completed" or summary["stopped_reason"].startswith("max_wall_time_s="), summary
    assert summary["wall_time_s"] <= 13.5 * 60, summary["wall_time_s"]  # the README's 15 minutes with the ~100 s install
    steps = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert all(s["rewards/nonfinite_count"] == 0 for s in steps if "loss" in s)
    change = {c["metric"]: c for c in summary["heldout_change"]}
    assert change["reward"]["ci95"][0] > 0, change["reward"]
    assert change["regret"]["verdict"] != "got worse", change["regret"]
