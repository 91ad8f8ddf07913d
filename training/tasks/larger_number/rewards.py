"""Rule-verifier reward functions in TRL's reward-function signature."""

from __future__ import annotations

from judges.protocol import completion_text
from training.tasks.larger_number.splits import ANSWER_PATTERN, parse_answer

__all__ = ["answer_format_reward", "completion_text", "exact_answer_reward"]


def exact_answer_reward(completions: list, answer: list[str], **kwargs) -> list[float]:
    """1.0 when the first integer in the completion equals the row's `answer`, else 0.0.

    A completion with no integer is a wrong answer (0.0), not a verifier failure.
    """
    return [1.0 if parse_answer(completion_text(c)) == a else 0.0 for c, a in zip(completions, answer, strict=True)]


def answer_format_reward(completions: list, **kwargs) -> list[float]:
    """Format verifier for the bundled task: 1.0 when the completion is exactly "The larger number is N." for some
    integer N (right or wrong; correctness is `exact_answer_reward`'s job)."""
    return [1.0 if ANSWER_PATTERN.fullmatch(completion_text(c).strip()) else 0.0 for c in completions]
