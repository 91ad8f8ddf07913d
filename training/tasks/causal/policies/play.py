"""Playing a scripted policy in the environment, the one episode loop of every scripted player (baselines, the
teacher's traces, the starting policy's build): `run_policy(policy, row, k)` plays one episode (to the budget, or
until the policy returns None); `episode_messages` turns it into chat messages in Qwen3's tool-call format.
`python -m training.tasks.causal.evaluate_baselines` plays the registered policies on a split or an SCM file.

Which episode: episode k of a row is the environment seeded `environment_seed(row, k)`, for every player, a
language model's held-out episodes included (`policy_episodes.causal_reset`), so all are paired; k = None is the
row's own episode, the one GRPO plays (the teacher's `reference_calls_json` are its calls, what forcing replays).
The policy's generator follows the same seed (the seed rule: `training.evaluation.pairing_seeds`)."""

from __future__ import annotations

import json

from training.evaluation.pairing_seeds import POLICY_SEED_KEY, environment_seed, generator
from training.tasks.causal.env import make_causal_env
from training.tasks.causal.episode_traces import EpisodeTrace
from training.tasks.causal.policies.policy_registry import Policy


def run_policy(policy: Policy, row: dict, k: int | None, surrogate: str = "exact") -> EpisodeTrace:
    """Play episode `k` of `row` (`environment_seed`) to its budget, the policy's generator seeded alike."""
    seed = environment_seed(row, k)
    env = make_causal_env(surrogate)()
    env.reset(**{**row, "seed": seed})
    rng = generator(seed, POLICY_SEED_KEY)
    while env.trace.used < env.trace.budget:
        call = policy(env, rng)
        if call is None:  # the policy stops, leaving budget unused
            break
        getattr(env, call[0])(**call[1])
    return env.trace


def episode_messages(prompt: list[dict], record: EpisodeTrace, final_answer: str = "Done.") -> list[dict]:
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
