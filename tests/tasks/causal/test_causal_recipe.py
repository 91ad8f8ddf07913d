"""The causal recipe end to end on CPU (minutes: marked slow).

* The recipe as committed (warm start included) finishes within its 15-minute wall-time guard and, on the held-out
  SCMs (sampled episodes, paired seeds), its policy has lower final regret and higher information gain than the
  warm start it began from. docs/causal.md reports the same over 3 seeds with the baselines.
* With one component alone, the recipe's 60 GRPO steps should move that component's own metric the right way
  (from the recipe's cached warm start): optimization alone lowers held-out regret; structure alone should raise
  held-out information gain but does so on some seeds only (xfail, not strict). docs/causal.md reports both over 3
  seeds (`workflows/causal_ablations.yaml`, variants `only_*`).

Held-out episodes are played under the recipe's own settings (`--recipe`: its budget of calls, completion length and
reward weights), as the measurements in docs/causal.md are.
"""

import json

import numpy as np
import pytest

from training.step.health import RunHealthError
from training.tasks.causal.evaluate_policy import main as evaluate
from training.train import main as train

RECIPE = "recipes/causal_cpu.yaml"
EPISODES = 2  # per held-out SCM: 64 paired episodes per policy


def heldout(model: str, out) -> dict[str, float]:
    records = evaluate(["--recipe", RECIPE, "--model", model, "--decoding", "sampled", "--episodes", str(EPISODES),
                        "--out", str(out)])  # an evaluation directory
    return {k: float(np.mean([r[k] for r in records])) for k in ("regret", "info_gain", "parent_f1", "reward")}


@pytest.mark.slow
def test_causal_recipe_finishes_in_time_and_improves_heldout_regret_and_information_gain(tmp_path):
    out = tmp_path / "run"
    summary = train(["--config", RECIPE, "--output_dir", str(out)])
    assert summary["stopped_reason"] == "completed" and summary["wall_time_s"] <= 15 * 60, summary["wall_time_s"]
    steps = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert all(s["rewards/nonfinite_count"] == 0 for s in steps if "loss" in s)
    before = heldout(summary["resolved_model_path"], tmp_path / "warm_start")
    after = heldout(str(out), tmp_path / "trained")
    assert after["regret"] < before["regret"] and after["info_gain"] > before["info_gain"], (before, after)


@pytest.mark.slow
@pytest.mark.parametrize(("component", "metric", "better"), [
    ("optimization", "regret", np.less),
    pytest.param("structure", "info_gain", np.greater, marks=pytest.mark.xfail(
        strict=False, raises=(RunHealthError, AssertionError), reason=(
            "measured, 3 seeds of the recipe (cosine lr): structure alone (expected-drop reward) moves held-out "
            "information gain by +0.14, -0.02, +0.05 nats (pooled +0.06, p 0.046): one seed of three goes the "
            "other way, and in-process the thread count changes the trajectory. docs/causal.md, One component "
            "alone"))),
])
def test_one_component_alone_moves_its_own_metric(tmp_path, component, metric, better):
    weights = {"optimization": "1.0 0 0 0", "structure": "0 0.5 0 0"}[component].split()  # their recipe weights
    out = tmp_path / component
    summary = train(["--config", RECIPE, "--output_dir", str(out), "--max_wall_time_s", "3600",
                     "--reward_weights", *weights])
    assert summary["stopped_reason"] == "completed", summary
    before = heldout(summary["resolved_model_path"], tmp_path / "warm_start")
    after = heldout(str(out), tmp_path / "trained")
    assert better(after[metric], before[metric]), (component, before, after)
