"""Trainer mixin: strict tool calls in TRL's multi-turn loop, their counts, and held-out success by goal checker."""

from __future__ import annotations

from collections import Counter

import torch

from training.envs.evaluation import environment_success
from training.envs.tool_calls import MALFORMED_KINDS, EpisodeTools, install_strict_parsing, malformed_metric


class ToolCallMixin:
    """Every rollout's tools are schema-checked and budgeted (`max_tool_calls_per_episode`), malformed calls come
    back to the model as tool errors, and each generation batch logs `tools/malformed/{bad_json, unknown_tool,
    bad_arguments, too_many_turns}` (counts summed over the batch). With an `environment_factory`, the held-out
    evaluation plays sampled and greedy episodes and reports the goal checker's success rates."""

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

    def evaluate_environment_heldout(self) -> dict[str, float]:
        """Held-out goal success of episodes in the environment: `heldout/reward` sampled as in training (fixed
        seed), `heldout/greedy_reward`, and `heldout/malformed_calls` (the malformed tool calls of both, counted as
        in training)."""
        if self._multi_environment:
            raise NotImplementedError("held-out evaluation supports a single environment_factory, not a dict")
        common = dict(
            model=self.accelerator.unwrap_model(self.model),
            tokenizer=self.processing_class,
            rows=self.heldout_rows[: self.args.heldout_max_samples],
            env_factory=self.environment_factories[None],
            chat_template=self.chat_template,
            template_kwargs=self.chat_template_kwargs,
            max_new_tokens=self.max_completion_length,
            max_turns=min(self.max_tool_calling_iterations, self.args.max_tool_calls_per_episode) + 1,
            max_tool_calls=self.args.max_tool_calls_per_episode,
        )
        sampled, counts = environment_success(
            **common,
            sampling={"temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k},
            num_samples=self.args.heldout_samples_per_prompt,
            seed=self.args.seed,
        )
        greedy, greedy_counts = environment_success(**common)
        malformed = float(sum((counts + greedy_counts).values()))
        return {"heldout/reward": sampled, "heldout/greedy_reward": greedy, "heldout/malformed_calls": malformed}
