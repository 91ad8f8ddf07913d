"""Where tasks plug into the generic code, so that generic code never imports a task.

A task is a folder under `training/tasks/`; its `registration.py` is listed in the `strict_grpo.tasks` entry-point
group (pyproject.toml) and, when `load_tasks()` imports it, adds to the registries here (and to the evaluation
registry, `training.evaluation.task_registry`):

* `TINY_MODELS`: offline model names a recipe may give as `model_name_or_path` (`tiny-qwen3-causal`), each a
  function `(cache_root, seed) -> model directory`.
* `TOKENIZER_LINES`: text the default tiny tokenizer learns its merges from, per task (the workspace task's words,
  so that copying a channel name into a tool call is a few tokens). Read in task-name order: the corpus, and so the
  tokenizer and its cache fingerprint, do not depend on the order entry points are listed in.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path

ENTRY_POINT_GROUP = "strict_grpo.tasks"

TINY_MODELS: dict[str, Callable[[Path, int], str]] = {}
TOKENIZER_LINES: dict[str, Callable[[], list[str]]] = {}


_loaded = False


def load_tasks() -> None:
    """Import every registered task's registration module (once)."""
    global _loaded
    if _loaded:
        return
    found = sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name)
    if not found:
        raise RuntimeError(
            f"no task is registered under the entry-point group {ENTRY_POINT_GROUP!r}: the package's metadata is "
            "missing or stale; reinstall it (pip install -e .)"
        )
    for ep in found:
        importlib.import_module(ep.value)
    _loaded = True


def _register(registry: dict, name: str, value, what: str) -> None:
    if name in registry and registry[name] is not value:
        raise ValueError(f"{what} {name!r} is registered twice")
    registry[name] = value


def register_tiny_model(name: str, resolve: Callable[[Path, int], str]) -> None:
    _register(TINY_MODELS, name, resolve, "tiny model")


def register_tokenizer_lines(task: str, lines: Callable[[], list[str]]) -> None:
    _register(TOKENIZER_LINES, task, lines, "tokenizer lines of task")


def tiny_model(name: str) -> Callable[[Path, int], str] | None:
    load_tasks()
    return TINY_MODELS.get(name)


def task_tokenizer_lines() -> list[str]:
    load_tasks()
    return [line for task in sorted(TOKENIZER_LINES) for line in TOKENIZER_LINES[task]()]
