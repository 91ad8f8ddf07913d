"""Playing a scripted policy in the environment: `run_policy(policy, row, seed)` plays one episode (to the budget, or
until the policy returns None); `episode_messages` turns it into chat messages in Qwen3's tool-call format.
`python -m training.tasks.causal.evaluate_baselines` plays the registered policies on a split or an SCM file."""

from __future__ import annotations

import json

import numpy as np

from training.evaluation.pairing_seeds import environment_seed
from training.tasks.causal.env import EpisodeRecord, make_causal_env
from training.tasks.causal.policies.policy_registry import Policy


def run_policy(policy: Policy, row: dict, seed: int, surrogate: str = "exact") -> EpisodeRecord:
    """Play one episode of `row` to its budget; the policy's generator and the environment's noise both follow
    `seed` (the environment's through `environment_seed`)."""
    env = make_causal_env(surrogate)()
    env.reset(**{**row, "seed": environment_seed(row, seed)})
    rng = np.random.default_rng(seed)
    while env.record.used < env.record.budget:
        call = policy(env, rng)
        if call is None:  # the policy stops (the teacher may), leaving budget unused
            break
        getattr(env, call[0])(**call[1])
    return env.record


def episode_messages(prompt: list[dict], record: EpisodeRecord, final_answer: str = "Done.") -> list[dict]:
    """The episode as chat messages: the prompt (reset's text appended to its last user message), then per call an
    assistant turn in Qwen3's tool-call text format and the tool's reply, then `final_answer`."""
    messages = [dict(m) for m in prompt]
    messages[-1]["content"] = f"{messages[-1]['content']}\n\n{record.reset_text}"
    for step in record.steps:
        call = json.dumps({"name": step.tool, "arguments": step.arguments})
        messages.append({"role": "assistant", "content": f"<tool_call>\n{call}\n</tool_call>"})
        messages.append({"role": "tool", "name": step.tool, "content": step.outcome})
    messages.append({"role": "assistant", "content": final_answer})
    return messages
