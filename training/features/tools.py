"""Strict tool calls in TRL's multi-turn loop: every rollout's tools are schema-checked and budgeted
(`max_tool_calls_per_episode`), malformed calls come back to the model as tool errors (training/tool_use/tool_calls.py),
and each generation batch logs `tools/malformed/{bad_json, unknown_tool, bad_arguments, too_many_turns}` (counts
summed over the batch and processes)."""

from __future__ import annotations

from collections import Counter

import torch

from training.tool_use.tool_calls import MALFORMED_KINDS, EpisodeTools, install_strict_parsing, malformed_metric


class ToolCalls:
    def __init__(self, tokenizer, has_tools: bool, max_calls: int):
        self.enabled = has_tools
        self.max_calls = max_calls
        if has_tools:
            install_strict_parsing(tokenizer)

    def wrap(self, sync_tool_dicts: list[dict], clock=None, states: list | None = None,
             choices: list | None = None) -> tuple[list[dict], Counter, list[EpisodeTools]]:
        """TRL's per-rollout `{name: tool}` dicts, each run through `EpisodeTools` (which notes the turn `clock` gives
        for every call it passes on and, with `states` and `choices` (a reader per rollout), the state each turn's
        call was made in and the offered choice it made), the counter they share, and the `EpisodeTools`
        themselves."""
        counts: Counter = Counter()
        states = states or [None] * len(sync_tool_dicts)
        choices = choices or [None] * len(sync_tool_dicts)
        episodes = [EpisodeTools(tools, counts, self.max_calls, clock, state, offered)
                    for tools, state, offered in zip(sync_tool_dicts, states, choices, strict=True)]
        return [e.as_tool_dict() for e in episodes], counts, episodes

    @staticmethod
    def log(counts: Counter, accelerator, metrics: dict) -> None:
        local = torch.tensor([counts[k] for k in MALFORMED_KINDS], device=accelerator.device)
        totals = accelerator.gather(local.unsqueeze(0)).sum(dim=0).tolist()
        for kind, total in zip(MALFORMED_KINDS, totals, strict=True):
            metrics[malformed_metric(kind)].append(float(total))
