"""Start-up check that every tool name the prompts, the recipe and the tasks mention exists in the environment, and
that every environment tool is advertised in the prompt. A mismatch stops the run naming both spellings."""

from __future__ import annotations

import difflib
import inspect
import json
import re

from training.errors import BadInputError

# A tool name as prompts write it: a snake_case identifier with at least one underscore (`send_slack_message`).
_TOOL_NAME = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")


class ToolNameError(BadInputError):
    """A tool name mentioned somewhere that the environment does not know, or an environment tool never advertised."""


def environment_tool_names(env_cls: type) -> list[str]:
    """The tools TRL exposes for an environment class: its public functions except `reset` and `get_reward`."""
    return sorted(
        name
        for name, _ in inspect.getmembers(env_cls, predicate=inspect.isfunction)
        if not name.startswith("_") and name not in ("reset", "get_reward")
    )


def mentioned_tool_names(text: str) -> set[str]:
    """The snake_case identifiers in a prompt text, each taken as a tool name."""
    return set(_TOOL_NAME.findall(text))


def task_tool_names(rows: list[dict]) -> dict[str, int]:
    """Tool names of the rows' `reference_calls_json`, each with the first row index that uses it."""
    names: dict[str, int] = {}
    for i, row in enumerate(rows):
        for call in json.loads(row.get("reference_calls_json") or "[]"):
            names.setdefault(call["name"], i)
    return names


def _nearest(name: str, candidates: list[str] | set[str]) -> str:
    close = difflib.get_close_matches(name, sorted(candidates), n=1, cutoff=0.0)
    return repr(close[0]) if close else "(none)"


def check_tool_names(
    env_tools: list[str],
    prompts: dict[str, str] | None = None,
    recipe_tools: list[str] | None = None,
    task_rows: dict[str, list[dict]] | None = None,
) -> None:
    """Raise `ToolNameError` on the first mismatch between the environment's tools and what mentions them.

    Args:
        env_tools: the environment's tool names.
        prompts: `{source: rendered prompt text}`; every tool name mentioned must exist, and every environment tool
            must be mentioned.
        recipe_tools: the recipe's `tool_names`, when it lists them; must equal the environment's set.
        task_rows: `{source: rows}`; every tool of a row's `reference_calls_json` must exist.
    """
    known = set(env_tools)
    problems = []
    for source, text in (prompts or {}).items():
        mentioned = mentioned_tool_names(text)
        for name in sorted(mentioned - known):
            problems.append(
                f"{source} mentions tool {name!r}, which the environment does not have "
                f"(nearest environment tool: {_nearest(name, known)})"
            )
        for name in sorted(known - mentioned):
            problems.append(
                f"environment tool {name!r} is not mentioned in {source} "
                f"(nearest name there: {_nearest(name, mentioned)})"
            )
    if recipe_tools is not None:
        for name in sorted(set(recipe_tools) - known):
            problems.append(f"recipe tool_names lists {name!r}, which the environment does not have "
                            f"(nearest environment tool: {_nearest(name, known)})")
        for name in sorted(known - set(recipe_tools)):
            problems.append(f"environment tool {name!r} is missing from the recipe's tool_names "
                            f"(nearest listed: {_nearest(name, recipe_tools)})")
    for source, rows in (task_rows or {}).items():
        for name, row in sorted(task_tool_names(rows).items()):
            if name not in known:
                problems.append(f"{source} row {row} calls tool {name!r}, which the environment does not have "
                                f"(nearest environment tool: {_nearest(name, known)})")
    if problems:
        raise ToolNameError("tool names disagree with the environment: " + "; ".join(problems))
