"""Shaping rewards for tool agents, next to the environment's goal checker (TRL's `get_reward` column)."""

from __future__ import annotations

import json


def reference_tool_call_reward(completions: list, reference_calls_json: list[str], **kwargs) -> list[float]:
    """1.0 when a rollout's first assistant turn is a well-formed call to the tool its reference solution starts
    with, else 0.0. Malformed calls reach here renamed `invalid_tool_call`, so they score 0.0.

    Gives GRPO a signal while goal success is still rare; weight it below the goal checker (`reward_weights`).
    """
    scores = []
    for completion, reference in zip(completions, reference_calls_json, strict=True):
        expected = json.loads(reference)[0]["name"]
        calls = (completion[0].get("tool_calls") or []) if completion else []
        scores.append(1.0 if calls and calls[0]["function"]["name"] == expected else 0.0)
    return scores
