"""Rule verifiers behind the `GroupJudge` protocol: exact match, format, JSON validity, tool-call validity.

Each scores 1.0 or 0.0 per completion. A wrong or malformed completion is a 0 (that is the verdict, not a
failure); a missing reference column is a `JudgeConfigError` (the recipe is wrong, the run stops).
"""

from __future__ import annotations

import json
import re
from typing import Any

from judges.protocol import Group, GroupScores, JudgeConfigError

_FIRST_INTEGER = re.compile(r"-?\d+")
_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


def reference_of(group: Group, column: str, judge: str) -> Any:
    """The group's reference value from `column`, or a `JudgeConfigError` naming the column."""
    if column not in group.columns:
        raise JudgeConfigError(
            f"{judge}: the dataset has no {column!r} column (columns: {sorted(group.columns)}); "
            f"set the judge's reference_column"
        )
    return group.columns[column]


class ExactMatchJudge:
    """1.0 when the completion's extracted answer equals the reference column, else 0.0.

    Args:
        reference_column: the dataset column holding the reference answer.
        extract: `"first_integer"` (the first integer in the text, the bundled task's rule) or `"stripped"` (the
            whole text, whitespace-stripped).
    """

    def __init__(self, reference_column: str = "answer", extract: str = "first_integer"):
        if extract not in ("first_integer", "stripped"):
            raise JudgeConfigError(f"ExactMatchJudge: extract={extract!r}, expected 'first_integer' or 'stripped'")
        self.reference_column = reference_column
        self.extract = extract

    def _answer(self, text: str) -> str | None:
        if self.extract == "stripped":
            return text.strip()
        match = _FIRST_INTEGER.search(text)
        return match.group(0) if match else None

    def score_group(self, group: Group) -> GroupScores:
        reference = str(reference_of(group, self.reference_column, "ExactMatchJudge")).strip()
        return GroupScores([1.0 if self._answer(t) == reference else 0.0 for t in group.completions])


class FormatJudge:
    """1.0 when the whole (stripped) completion matches the regular expression `pattern`, else 0.0."""

    def __init__(self, pattern: str = r"-?\d+"):
        try:
            self.pattern = re.compile(pattern, re.DOTALL)
        except re.error as err:
            raise JudgeConfigError(f"FormatJudge: pattern {pattern!r} is not a regular expression: {err}") from None

    def score_group(self, group: Group) -> GroupScores:
        return GroupScores([1.0 if self.pattern.fullmatch(t.strip()) else 0.0 for t in group.completions])


class JsonValidityJudge:
    """1.0 when the whole completion is one JSON value (optionally required to be an object), else 0.0."""

    def __init__(self, require_object: bool = True):
        self.require_object = require_object

    def _valid(self, text: str) -> bool:
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            return False
        return isinstance(value, dict) or not self.require_object

    def score_group(self, group: Group) -> GroupScores:
        return GroupScores([1.0 if self._valid(t) else 0.0 for t in group.completions])


def tool_call_problems(text: str, tool_names: set[str] | None) -> tuple[int, int]:
    """(number of `<tool_call>` blocks, number of invalid ones) in Qwen3's tool-call format.

    A block is valid when it holds a JSON object with a string `name` (one of `tool_names` when given) and an object
    `arguments`.
    """
    blocks = _TOOL_CALL.findall(text)
    invalid = 0
    for block in blocks:
        try:
            call = json.loads(block)
        except json.JSONDecodeError:
            invalid += 1
            continue
        if not (
            isinstance(call, dict)
            and isinstance(call.get("name"), str)
            and isinstance(call.get("arguments"), dict)
            and (tool_names is None or call["name"] in tool_names)
        ):
            invalid += 1
    return len(blocks), invalid


class ToolCallValidityJudge:
    """1.0 when the completion has at least one `<tool_call>` block and all are valid, else 0.0.

    Args:
        tool_names: the tools the environment knows; a call to any other name is invalid. None accepts any name.
    Logs `judge/invalid_tool_call_frac` (invalid blocks over all blocks, per group).
    """

    def __init__(self, tool_names: list[str] | None = None):
        self.tool_names = set(tool_names) if tool_names is not None else None

    def score_group(self, group: Group) -> GroupScores:
        scores, total, invalid = [], 0, 0
        for text in group.completions:
            n, bad = tool_call_problems(text, self.tool_names)
            total, invalid = total + n, invalid + bad
            scores.append(1.0 if n > 0 and bad == 0 else 0.0)
        metrics = {"invalid_tool_call_frac": invalid / total} if total else {}
        return GroupScores(scores, metrics=metrics)
