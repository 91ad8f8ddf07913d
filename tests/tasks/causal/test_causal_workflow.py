"""workflows/causal_main.yaml at toy size, end to end: 2 seeds of one GRPO step each (from their own warm starts),
the warm starts, the trained policies again with a frozen surrogate, and two scripted baselines, on the same paired
held-out SCMs; the report compares regret, parent F1, information gain and the weighted reward, each in its own
direction."""

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
TOY = {"max_steps": 1, "warm_start_steps": 2, "per_device_train_batch_size": 4, "num_generations": 2,
       "max_completion_length": 160, "heldout_max_samples": 3, "heldout_samples_per_prompt": 1, "save_steps": 1000}


def test_the_causal_workflow_trains_evaluates_and_compares_every_policy(tmp_path):
    spec = yaml.safe_load((REPO / "workflows" / "causal_main.yaml").read_text())
    spec["seeds"] = [0, 1]
    spec["overrides"] = {**spec["overrides"], **TOY}
    spec["variants"]["warm_start"]["seeds"] = [0, 1]
    spec["variants"] = {k: v for k, v in spec["variants"].items() if k in ("trained", "warm_start", "frozen",
                                                                          "random", "oracle")}
    (tmp_path / "wf.yaml").write_text(yaml.safe_dump(spec))
    proc = subprocess.run(
        [sys.executable, "-m", "training.workflow", "--config", str(tmp_path / "wf.yaml"), "--jobs", "2",
         "--output-dir", str(tmp_path / "out"), "--progress-every", "600"],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    summary = json.loads((tmp_path / "out" / "workflow_summary.json").read_text())
    assert {r["name"]: r["status"] for r in summary["runs"]} == {
        name: "done" for name in ("trained-seed0", "trained-seed1", "warm_start-seed0", "warm_start-seed1",
                                  "frozen-seed0", "frozen-seed1", "random-seed0", "oracle-seed0")}
    comparison = summary["comparison"]
    assert comparison["metric"] == "regret" and list(comparison["by_metric"]) == ["parent_f1", "info_gain", "score"]
    assert {m["name"] for m in comparison["models"]} == {"trained", "warm_start", "frozen", "random", "oracle"}
    assert comparison["episodes"]["units"] == 3
    oracle = next(m for m in comparison["models"] if m["name"] == "oracle")
    assert oracle["mean"] == 0.0 and comparison["ranking"][0] == "oracle"
    runs = tmp_path / "out" / "runs"
    frozen = json.loads((runs / "frozen-seed1" / "eval_summary.json").read_text())
    assert frozen["adapter"].endswith("trained-seed1") and frozen["spec"]["environment_factory"].endswith("Frozen")
    # the trained run's own model: its warm-started base, not one warm-started on frozen-surrogate traces
    trained = json.loads((runs / "trained-seed1" / "run_summary.json").read_text())
    assert frozen["model_path"] == trained["resolved_model_path"]
    recipe = yaml.safe_load((tmp_path / "out" / "runs" / "trained-seed1" / "recipe.yaml").read_text())
    assert recipe["model_seed"] == 1  # seed_keys: each seed from its own warm start
    report = (tmp_path / "out" / "report.md").read_text()
    assert "on regret" in report and "## parent_f1 (higher is better)" in report.replace("### ", "## ")
