"""What a group judge is: one prompt's whole group of completions in, one score per completion out (or a raise)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


def completion_text(completion) -> str:
    """The text of one completion as TRL hands it to reward functions: conversational (a list of messages, the
    assistant's contents joined) or plain text."""
    if isinstance(completion, str):
        return completion
    return "".join(m.get("content") or "" for m in completion if m.get("role") == "assistant")


@dataclass(frozen=True)
class Group:
    """One prompt and all its sampled completions.

    Attributes:
        prompt: the prompt as the dataset holds it (chat messages or plain text).
        completions: the completion texts, in the order the batch holds them.
        columns: the dataset row's other columns (e.g. `answer`), identical for every completion of the group.
    """

    prompt: Any
    completions: list[str]
    columns: dict[str, Any] = field(default_factory=dict)


@dataclass
class GroupScores:
    """A judge's answer for one group.

    Attributes:
        scores: one finite score per completion, in the group's order.
        calls: how many judge calls (model forwards, HTTP requests) scoring the group took; an LLM judge scoring
            K shuffled orders makes K.
        metrics: per-group values averaged over the groups of a batch and logged as `judge/<name>`.
        raw_output: the judge's own last output, kept for error messages.
    """

    scores: list[float]
    calls: int = 1
    metrics: dict[str, float] = field(default_factory=dict)
    raw_output: str | None = None


class JudgeError(RuntimeError):
    """A judge could not score a group (exception, timeout, unparseable answer). Retried, then counted as a failure.

    `raw_output` is the judge's own output when it produced one, so the failure message can show it.
    """

    def __init__(self, message: str, raw_output: str | None = None):
        super().__init__(message)
        self.raw_output = raw_output


class JudgeConfigError(ValueError):
    """The judge is asked for something it can never do (a missing column, a missing model): not retried, raised."""


@runtime_checkable
class GroupJudge(Protocol):
    """Scores one prompt's group at once.

    `score_group` returns `GroupScores` (or a plain list of floats, read as one call) with exactly one finite score
    per completion, or raises `JudgeError` (retryable) / `JudgeConfigError` (fatal). It never returns a made-up
    score for something it could not judge.
    """

    def score_group(self, group: Group) -> GroupScores | list[float]: ...
