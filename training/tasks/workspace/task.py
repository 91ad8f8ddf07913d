"""The workspace task, as one `Task` (training/run_setup/tasks.py): its shaping reward by short name and its words in
the default tiny tokenizer. Its evaluation is the generic one of an environment (its goal checker). Listed in
pyproject.toml's `strict_grpo.tasks` entry points."""

from __future__ import annotations

from training.run_setup.tasks import Task, register
from training.tasks.workspace.rewards import reference_tool_call_reward
from training.tasks.workspace.splits import CHANNELS, PRIORITY_WORDS, TEXTS, TITLES


def tokenizer_lines() -> list[str]:
    return [f"Post '{text}' to #{channel}." for channel in CHANNELS for text in TEXTS] + [
        f"Open a ticket '{title}', it is {word}." for title in TITLES for word in PRIORITY_WORDS
    ]


register(Task(
    name="workspace",
    description="a tool agent posts messages and opens tickets in a mock workspace (training/tasks/workspace/env.py)",
    rewards={"reference_tool_call_reward": reference_tool_call_reward},
    tokenizer_lines=tokenizer_lines,
))
