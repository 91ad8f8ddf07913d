"""Rule-verifier reward functions in TRL's reward-function signature."""

from __future__ import annotations

from training.tasks.larger_number import ANSWER_PATTERN, parse_answer


def completion_text(completion) -> str:
    """The text of one completion, conversational (list of messages) or plain."""
    if isinstance(completion, str):
        return completion
    return "".join(m.get("content") or "" for m in completion if m.get("role") == "assistant")


def exact_answer_reward(completions: list, answer: list[str], **kwargs) -> list[float]:
    """1.0 when the first integer in the completion equals the row's `answer`, else 0.0.

    A completion with no integer is a wrong answer (0.0), not a verifier failure.
    """
    return [1.0 if parse_answer(completion_text(c)) == a else 0.0 for c, a in zip(completions, answer, strict=True)]


def answer_format_reward(completions: list, **kwargs) -> list[float]:
    """Format verifier for the bundled task: 1.0 when the completion is exactly "The larger number is N." for some
    integer N (right or wrong; correctness is `exact_answer_reward`'s job)."""
    return [1.0 if ANSWER_PATTERN.fullmatch(completion_text(c).strip()) else 0.0 for c in completions]
