"""The workspace task's entries in the generic registries (`training.run_setup.task_plugins`): its words in the
default tiny tokenizer. Listed in pyproject.toml's `strict_grpo.tasks` entry points."""

from __future__ import annotations

from training.run_setup.task_plugins import register_tokenizer_lines
from training.tasks.workspace.splits import CHANNELS, PRIORITY_WORDS, TEXTS, TITLES


def tokenizer_lines() -> list[str]:
    return [f"Post '{text}' to #{channel}." for channel in CHANNELS for text in TEXTS] + [
        f"Open a ticket '{title}', it is {word}." for title in TITLES for word in PRIORITY_WORDS
    ]


register_tokenizer_lines("workspace", tokenizer_lines)
