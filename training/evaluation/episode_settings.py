"""How held-out episodes are played, as one object: what every evaluation (single-turn reward functions, the one
multi-turn tool loop) takes instead of a dozen keyword arguments, built from the trainer (during training) or from an
evaluation spec (`python -m training.evaluate`). How many episodes share a batch is the player's own argument: it is
how the episodes are computed, not what they are.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace

# The sampler's settings that held-out sampled episodes mirror, with TRL's defaults (GRPOConfig): what
# `training.evaluation.episode_streams.seeded_sampling_kwargs` turns into logits processors.
SAMPLING_DEFAULTS = {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "min_p": None, "repetition_penalty": 1.0}


def sampling_of(source) -> dict:
    """The sampling settings of a trainer (its attributes, as TRL's `GRPOTrainer` keeps them) or of a recorded
    recipe's training arguments (a dict; a key it lacks takes TRL's default)."""
    if isinstance(source, dict):
        return {key: source.get(key, default) for key, default in SAMPLING_DEFAULTS.items()}
    return {key: getattr(source, key) for key in SAMPLING_DEFAULTS}


@dataclass(frozen=True)
class EpisodeSettings:
    """How held-out episodes are played: the decoding, the episodes per row and their seed, the rendering, and the
    limits TRL's trainer samples under (the tool fields apply to multi-turn episodes only)."""

    sampling: dict | None = None  # SAMPLING_DEFAULTS' keys (sampling_of); None: greedy
    episodes_per_row: int = 1
    seed: int = 0  # sampled episode (row, k) draws from episode_seed(seed, row, k)
    chat_template: str | None = None  # None: the one TRL's trainer renders tool conversations with for the tokenizer
    template_kwargs: dict = field(default_factory=dict)
    max_completion_length: int = 256  # tokens of the whole completion: every turn and every tool reply
    max_iterations: int = sys.maxsize  # rounds of tool calls (TRL's max_tool_calling_iterations; None: unbounded)
    max_tool_calls: int = 4  # per episode; later calls are refused as too_many_turns
    max_turn_tokens: int | None = None  # tokens a turn may sample; None: the default a run gets (turn_limits.py)
    end_turn_at_call: bool = True  # a turn ends at its call's closing token, the template's tail appended

    def greedy(self, episodes_per_row: int = 1) -> EpisodeSettings:
        return replace(self, sampling=None, episodes_per_row=episodes_per_row)

    @classmethod
    def from_trainer(cls, trainer, seed: int) -> EpisodeSettings:
        """Sampled as the trainer samples (`sampling_of`: temperature, top-p, top-k, min-p, repetition penalty; its
        template and limits), `heldout_samples_per_prompt` episodes per row."""
        return cls(
            sampling=sampling_of(trainer),
            episodes_per_row=trainer.args.heldout_samples_per_prompt, seed=seed,
            chat_template=trainer.chat_template, template_kwargs=dict(trainer.chat_template_kwargs or {}),
            max_completion_length=trainer.max_completion_length,
            max_iterations=trainer.max_tool_calling_iterations,
            max_tool_calls=trainer.args.max_tool_calls_per_episode,
            **cls._trainer_turns(trainer),
        )

    @staticmethod
    def _trainer_turns(trainer) -> dict:
        """How the trainer's sampler ends a turn: the strict trainer's turn limits (training/features/turn_limits.py);
        plain TRL (`trainer: trl`, training/step/plain_trl.py) has none, its turns run to the episode's budget."""
        limits = getattr(trainer, "turn_limits", None)
        if limits is None or not limits.enabled:
            return {"max_turn_tokens": trainer.max_completion_length, "end_turn_at_call": False}
        return {"max_turn_tokens": limits.limit, "end_turn_at_call": limits.spec.call_close is not None}

    @classmethod
    def from_spec(cls, spec) -> EpisodeSettings:
        """The settings of an evaluation spec (training/evaluation/spec.py): sampled, or greedy (one episode per
        row) when `spec.greedy`."""
        iterations = spec.max_tool_calling_iterations
        settings = cls(
            sampling=spec.sampling, episodes_per_row=spec.samples_per_prompt, seed=spec.heldout_seed,
            template_kwargs=dict(spec.template_kwargs),
            max_completion_length=spec.max_new_tokens,
            max_iterations=sys.maxsize if iterations is None else int(iterations),
            max_tool_calls=spec.max_tool_calls,
            max_turn_tokens=spec.max_turn_tokens, end_turn_at_call=spec.end_turn_at_call,
        )
        return settings.greedy() if spec.greedy else settings
