"""A YAML error in one line: PyYAML's own message spans several lines (with a caret under the culprit), and a bad
input error must be a single `error:` line."""

from __future__ import annotations

import yaml


def yaml_problem(err: yaml.YAMLError | UnicodeDecodeError) -> str:
    """What is wrong, and where (line and column, 1-based), in one line."""
    if isinstance(err, UnicodeDecodeError):
        return f"not UTF-8 (byte {err.start}: {err.object[err.start:err.start + 1]!r})"
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or " ".join(str(err).split())
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else problem
