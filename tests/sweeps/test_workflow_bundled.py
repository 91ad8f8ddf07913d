"""workflows/bundled_task.yaml end to end on 2 CPU cores (slow: about 10-20 minutes): GRPO, plain TRL and the warm
start alone, 3 seeds each, compared on the same paired held-out episodes; the report says whether GRPO beats the
warm start, with p-values and effect sizes."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUDGET_S = 20 * 60


@pytest.mark.slow
def test_bundled_task_workflow_reports_whether_grpo_beats_the_warm_start(tmp_path):
    started = time.time()
    proc = subprocess.run(
        [sys.executable, "-m", "training.workflow", "--config", "workflows/bundled_task.yaml", "--jobs", "2",
         "--output-dir", str(tmp_path / "wf"), "--progress-every", "60"],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=BUDGET_S,
    )
    elapsed = time.time() - started
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert elapsed <= BUDGET_S
    summary = json.loads((tmp_path / "wf" / "workflow_summary.json").read_text())
    assert [r["status"] for r in summary["runs"]] == ["done"] * 7
    comparison = summary["comparison"]
    assert {m["name"] for m in comparison["models"]} == {"grpo", "plain_trl", "warm_start"}
    assert comparison["episodes"]["scorable_in_all"] == 400
    pair = next(p for p in comparison["pairwise"] if (p["a"], p["b"]) == ("grpo", "warm_start"))
    assert 0 <= pair["p_holm"] <= 1 and pair["d_z"] is not None and pair["test"] == "permutation"
    report = (tmp_path / "wf" / "report.md").read_text()
    verdict = next(line for line in report.splitlines() if line.startswith("- **grpo "))
    assert "warm_start" in verdict and "p = " in verdict and "d_z = " in verdict
