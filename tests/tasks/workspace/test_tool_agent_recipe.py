"""The bundled tool-agent recipe end to end on CPU (minutes: marked slow): GRPO lifts held-out task success."""

import json

import pytest

from training.train import main


@pytest.mark.slow
def test_tool_agent_recipe_raises_heldout_success_and_tool_use(tmp_path):
    out = tmp_path / "run"
    main(["--config", "recipes/tool_agent_cpu.yaml", "--output_dir", str(out)])
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["heldout_reward_after"] >= summary["heldout_reward_before"] + 0.1, summary["heldout_history"]
    steps = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    calls = [s["tools/call_frequency"] for s in steps if "tools/call_frequency" in s]
    assert sum(calls[-5:]) / 5 > sum(calls[:5]) / 5 + 0.1, calls
    assert all(s["forced/rl_fraction"] == 0.0 for s in steps if "forced/rl_fraction" in s)
    # the per-turn counts (training/features/turn_limits.py) in every step that sampled, under the recipe's limit
    sampled = [s for s in steps if "tools/call_frequency" in s]
    assert all(s["turns/count"] > 0 and 0 <= s["turns/cut"] <= s["turns/count"] for s in sampled)
    assert all(0 < s["turns/max_tokens"] <= s["turns/limit"] for s in sampled)
