"""The sweep's table (`benchmarks/imitation_sweep.py`, issue 68) reads a cell as `benchmarks/imitation_ceiling.sh`
leaves it: the build record, the real `training.compare` reports over the cell's evaluations, the calls of its sampled
episodes and how many fell short of their budget. Here the evaluations are made up (8 rows, known scores and calls) and the comparisons are the real command's."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from benchmarks.imitation_sweep import cell_row
from training import compare
from training.tasks.causal.starting_policy import BUILD_RECORD, STARTING_POLICY_DIR

ROWS = 8


def _evaluation(path, scores, decoding, follows):
    path.mkdir(parents=True)
    lines = []
    for row, score in enumerate(scores):
        calls = [{"tool": "choose", "valid": True, "follows_teacher": False, "follows_one_step": f} for f in follows[row]]
        lines.append(json.dumps({"episode_id": f"{row}:0", "row": row, "sample": 0,
                                 "seed": None if decoding == "greedy" else 100 + row, "score": score,
                                 "components": {}, "success": None, "unscorable_reason": None, "metrics": {},
                                 "extra": {"decoding": decoding, "call_log": calls, "calls": len(calls),
                                           "budget": 3}}))
    (path / "eval.jsonl").write_text("\n".join(lines) + "\n")
    (path / "eval_summary.json").write_text(json.dumps({"metric_directions": {"score": "higher"}}))


def test_a_cells_row_holds_its_shape_build_and_paired_difference_from_the_rule(tmp_path):
    rng = np.random.default_rng(0)
    cell, shared = tmp_path / "cell", tmp_path / "shared"
    policy = cell / "rule_policy-rejected"
    shutil.copytree(STARTING_POLICY_DIR, policy)
    record = json.loads((policy / BUILD_RECORD).read_text())
    record["settings"].update(steps=3000, imitated="one_step", episodes_per_row=16)
    record["build_seconds"], record["training"]["final_loss"] = 3600.0, 0.125
    record["acceptance"]["greedy"]["follows_one_step"] = 0.75
    (policy / BUILD_RECORD).write_text(json.dumps(record))
    follows = [[True, False, True], [True]] * (ROWS // 2)  # 16 calls, 12 of them the rule's
    diffs = {}
    for where in ("main", "cbo"):
        rule = rng.uniform(0.5, 0.9, ROWS)
        ceiling = rule + rng.normal(-0.02, 0.01, ROWS)
        diffs[where] = float(np.mean(ceiling - rule))
        _evaluation(cell / where / "ceiling", ceiling, "sampled", follows)
        _evaluation(cell / where / "ceiling_greedy", ceiling + 0.01, "greedy", follows)
        _evaluation(shared / where / "one_step", rule, "policy", follows)
        _evaluation(shared / where / "start", rule - 0.05, "sampled", follows)
        _evaluation(shared / where / "start_greedy", rule - 0.04, "greedy", follows)
        s, o = shared / where, cell / where
        compare.main([f"ceiling={o}/ceiling", f"start={s}/start", f"one_step={s}/one_step", "--baseline", "one_step",
                      "--out", str(o / "compare")])
        compare.main([f"ceiling_greedy={o}/ceiling_greedy", f"start_greedy={s}/start_greedy", "--baseline",
                      "start_greedy", "--out", str(o / "compare_greedy")])
    cells = [c.strip() for c in cell_row("steps3000", cell).strip("|").split("|")]
    assert cells[:8] == ["steps3000", "128x4, 4 heads", "1.05M", "3000", "episodes_per_row 16", "60", "0.125", "0.750"]
    for k, where in enumerate(("main", "cbo")):
        sampled, greedy, agreement, versus, short = cells[8 + 5 * k: 13 + 5 * k]
        assert agreement == f"{12 / 16:.2f}"
        assert short == "0.50"  # every other row made 1 of its 3 calls
        assert float(versus.split(" [")[0]) == pytest.approx(diffs[where], abs=5e-4)  # printed to 3 decimals
        lo, hi = (float(x) for x in versus.split("[")[1].rstrip("]").split(","))
        assert lo < diffs[where] < hi < 0.0
        assert float(greedy) - float(sampled) == pytest.approx(0.01, abs=1.5e-3)  # each printed to 3 decimals
