"""workflows/causal_main.yaml at toy size, end to end: 2 seeds of one GRPO step each from the shipped starting
policy, that starting policy, the trained policies again with a frozen surrogate, and two scripted baselines, on the
same paired held-out SCMs; the report compares the weighted reward, regret, parent F1 and information gain, each in
its own direction, pooled, per seed and per mechanism family."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from training.run_setup.prompt_datasets import load_rows
from training.tasks.causal.splits import DATA_DIR

REPO = Path(__file__).resolve().parents[3]
TOY = {"max_steps": 1, "per_device_train_batch_size": 4, "num_generations": 2, "heldout_max_samples": 4,
       "heldout_samples_per_prompt": 1, "save_steps": 1000}


@pytest.mark.slow  # minutes on 2 cores: the default run stays under 15 (README "Tests")
def test_the_causal_workflow_trains_evaluates_and_compares_every_policy(tmp_path):
    spec = yaml.safe_load((REPO / "workflows" / "causal_main.yaml").read_text())
    spec["seeds"] = [0, 1]
    rows = load_rows(DATA_DIR / "heldout.jsonl")
    linear = [r for r in rows if r["mechanism"] == "linear"][:3]
    heldout = tmp_path / "heldout.jsonl"  # three linear SCMs and one nonlinear, whatever the split's order
    heldout.write_text("".join(json.dumps(r) + "\n" for r in [*linear, next(r for r in rows if r["mechanism"] != "linear")]))
    spec["overrides"] = {**spec["overrides"], **TOY, "heldout_file": str(heldout)}
    spec["variants"] = {k: v for k, v in spec["variants"].items() if k in ("trained", "starting_policy", "frozen",
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
        name: "done" for name in ("trained-seed0", "trained-seed1", "starting_policy-seed0", "frozen-seed0",
                                  "frozen-seed1", "random-seed0", "oracle-seed0")}
    comparison = summary["comparison"]
    assert comparison["metric"] == "score" and list(comparison["by_metric"]) == ["regret", "parent_f1", "info_gain"]
    assert {m["name"] for m in comparison["models"]} == {"trained", "starting_policy", "frozen", "random", "oracle"}
    assert comparison["episodes"]["units"] == 4
    oracle = next(m for m in comparison["by_metric"]["regret"]["models"] if m["name"] == "oracle")
    assert oracle["mean"] == 0.0 and comparison["by_metric"]["regret"]["ranking"][0] == "oracle"
    assert {t["a"] for t in comparison["per_seed"]} == {"trained-seed0", "trained-seed1", "frozen-seed0",
                                                         "frozen-seed1"}
    assert set(comparison["subsets"]) == {"mechanism=linear", "mechanism=nonlinear"}
    assert comparison["subsets"]["mechanism=linear"]["episodes"]["units"] == 3
    assert "need at least 3" in comparison["subsets"]["mechanism=nonlinear"]["error"]  # one nonlinear SCM of 4
    runs = tmp_path / "out" / "runs"
    frozen = json.loads((runs / "frozen-seed1" / "eval_summary.json").read_text())
    assert frozen["adapter"].endswith("trained-seed1") and frozen["spec"]["environment_settings"] == {"active": False}
    frozen_records = [json.loads(line)["extra"] for line in (runs / "frozen-seed1" / "eval.jsonl").open()]
    assert frozen_records and all(r["surrogate"] == "frozen" for r in frozen_records)
    # the trained run's own model: the starting policy it trained from
    trained = json.loads((runs / "trained-seed1" / "run_summary.json").read_text())
    assert frozen["model_path"] == trained["resolved_model_path"]
    report = (tmp_path / "out" / "report.md").read_text()
    assert "on regret" in report and "## parent_f1 (higher is better)" in report.replace("### ", "## ")
    assert "within mechanism=linear" in report and "within mechanism=nonlinear: no comparison" in report
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert summary["git"]["commit"] == head.strip() and f"commit {head[:12]}" in report  # the code that ran
