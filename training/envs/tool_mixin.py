"""Trainer mixin: strict tool calls in TRL's multi-turn loop and their counts."""

from __future__ import annotations

from collections import Counter

import torch

from training.envs.tool_calls import MALFORMED_KINDS, EpisodeTools, install_strict_parsing, malformed_metric


class ToolCallMixin:
    """Every rollout's tools are schema-checked and budgeted (`max_tool_calls_per_episode`), malformed calls come
    back to the model as tool errors, and each generation batch logs `tools/malformed/{bad_json, unknown_tool,
    bad_arguments, too_many_turns}` (counts summed over the batch)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._tool_error_counts: Counter = Counter()
        if self.tools:
            install_strict_parsing(self._tokenizer)

    def _generate(self, prompts):
        if not self.tools:
            return super()._generate(prompts)
        self._tool_error_counts = Counter()
        # TRL built one {name: tool} dict per rollout just before this call; run those tools through EpisodeTools.
        self._sync_tool_dicts = [
            EpisodeTools(tools, self._tool_error_counts, self.args.max_tool_calls_per_episode).as_tool_dict()
            for tools in self._sync_tool_dicts
        ]
        result = super()._generate(prompts)
        mode = "train" if self.model.training else "eval"
        local = torch.tensor([self._tool_error_counts[k] for k in MALFORMED_KINDS], device=self.accelerator.device)
        totals = self.accelerator.gather(local.unsqueeze(0)).sum(dim=0).tolist()
        for kind, total in zip(MALFORMED_KINDS, totals, strict=True):
            self._metrics[mode][malformed_metric(kind)].append(float(total))
        return result
