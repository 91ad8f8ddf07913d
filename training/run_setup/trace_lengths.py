"""How long the rows' reference episodes are: each row's `reference_calls_json` replayed in the environment and
rendered as the trainer renders a tool conversation, its tokens counted. A run whose completion limit or context is
shorter than these cuts its episodes before their budget is spent, and the calls never made get no credit."""

from __future__ import annotations

from dataclasses import dataclass

from training.evaluation.tool_loop import sampling_chat_template
from training.run_setup.warm_start_tools import encode_trace


@dataclass(frozen=True)
class TraceLength:
    prompt: int  # tokens before the first assistant token: the prompt the policy samples after
    completion: int  # every turn and every tool reply after it


def reference_lengths(tokenizer, rows: list[dict], env_factory, template_kwargs: dict) -> list[TraceLength]:
    """The length of each row's reference episode (rows without `reference_calls_json` are skipped)."""
    template = sampling_chat_template(tokenizer)
    lengths = []
    for row in rows:
        if not row.get("reference_calls_json"):
            continue
        ids, labels = encode_trace(tokenizer, row, env_factory, template, template_kwargs)
        first = next(i for i, label in enumerate(labels) if label != -100)
        lengths.append(TraceLength(prompt=first, completion=len(ids) - first))
    return lengths


# A policy's own episodes can outgrow its teacher's (its choices lead to replies that list other options): a quarter
# to spare.
COMPLETION_MARGIN = 1.25
SIZED_ROWS = 16  # reference episodes measured: the first 16 train rows'


@dataclass(frozen=True)
class FittedLimits:
    """A completion limit and a context that hold the reference episodes, `COMPLETION_MARGIN` to spare."""

    max_completion_length: int
    context: int  # prompt + completion: at least the model's own
    longest_completion: int

    def grew(self, max_completion_length: int, context: int) -> bool:
        return self.max_completion_length > max_completion_length or self.context > context


def _round_up(n: int, step: int) -> int:
    return -(-n // step) * step


def fitted_limits(lengths: list[TraceLength], max_completion_length: int, context: int) -> FittedLimits:
    """The limits under which every episode of `lengths`, its completion `COMPLETION_MARGIN` times longer, is
    whole: never below the given ones; a completion limit that has to grow in steps of 64 tokens, a context in
    steps of 256."""
    if not lengths:
        raise ValueError("no reference episodes to fit the limits to")
    grown = [(length.prompt, int(COMPLETION_MARGIN * length.completion + 0.5)) for length in lengths]
    completion = max(c for _, c in grown)
    completion = max_completion_length if completion <= max_completion_length else _round_up(completion, 64)
    needed = max(p + c for p, c in grown)
    return FittedLimits(completion, context if needed <= context else _round_up(needed, 256),
                        max(length.completion for length in lengths))
