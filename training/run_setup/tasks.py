"""The one task registry: every task is one `Task`, registered by one call, and generic code finds tasks only here.

A task is a folder under `training/tasks/` whose `task.py` builds its `Task` and calls `register(Task(...))`; the
module is listed in pyproject.toml's `strict_grpo.tasks` entry-point group under the task's name, and `load_tasks()`
imports each listed module once, checking that it registered exactly the one `Task` of that name. Generic code never
imports a task (tests/test_architecture.py): it asks `get(name)` or `all()`, or the lookups below that read every
task's pieces (`tiny_model`, `tokenizer_lines`, `rewards`, `metrics`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path

from training.errors import BadInputError
from training.registries import Registry

ENTRY_POINT_GROUP = "strict_grpo.tasks"


@dataclass(frozen=True)
class Task:
    """What a task brings to the generic code, in one place."""

    name: str  # its folder's name and its entry point's
    description: str
    # the short names recipes give in `reward_funcs` (`reward_funcs: [optimization, structure]`), each a TRL reward
    # function; a name belongs to one task
    rewards: dict[str, Callable] = field(default_factory=dict)
    # offline model names a recipe may give as `model_name_or_path` (`tiny-qwen3-causal`), each a function
    # `(cache_root, seed) -> model directory`
    tiny_models: dict[str, Callable[[Path, int], str]] = field(default_factory=dict)
    # text the default tiny tokenizer learns its merges from (the workspace task's words, so that copying a channel
    # name into a tool call is a few tokens)
    tokenizer_lines: Callable[[], list[str]] | None = None
    # its held-out evaluation, an `EvalTask` (training/evaluation/eval_tasks.py; not imported here, which would make
    # a circle through the recipe's reward names), named as the task; None: the generic evaluation that applies
    # (prompts scored by the reward functions, or an environment's goal checker)
    evaluation: object | None = None
    # its own names in every training-step log and when each is logged (training/step/metric_names.py)
    metrics: dict[str, str] = field(default_factory=dict)


class UnknownTaskName(BadInputError):
    """A task name no registered task has; the message lists the registered ones."""


_TASKS: Registry = Registry("task", unknown=UnknownTaskName)  # training/registries.py
_loaded = False


def _claimed(piece: str, task: Task) -> dict[str, str]:
    """Each name of `task`'s `piece` (rewards, tiny_models, metrics) already held by another task -> that task."""
    mine = getattr(task, piece)
    return {name: other.name for other in _TASKS.values() for name in getattr(other, piece) if name in mine}


def register(task: Task) -> Task:
    """Add a task; its name, and each of its reward, tiny-model and metric names, must be new."""
    if task.name in _TASKS:
        raise ValueError(f"task {task.name!r} is registered twice")  # a new Task object under a taken name too
    for piece in ("rewards", "tiny_models", "metrics"):
        if taken := _claimed(piece, task):
            raise ValueError(f"task {task.name!r} registers {piece} that other tasks hold: {taken}")
    if task.evaluation is not None and getattr(task.evaluation, "name", None) != task.name:
        raise ValueError(f"task {task.name!r}: its evaluation is named {getattr(task.evaluation, 'name', None)!r}, "
                         "not as the task")
    return _TASKS.register(task.name, task)


def load_tasks() -> None:
    """Import every task module of the entry-point group (once); each must register exactly the Task it is listed as."""
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
        before = set(_TASKS)
        try:
            importlib.import_module(ep.value)
        except ModuleNotFoundError as err:
            if err.name is None or not (ep.value == err.name or ep.value.startswith(err.name + ".")):
                raise  # the task module itself exists; something it imports is missing
            raise RuntimeError(f"task module {ep.value} (entry point {ep.name!r} of {ENTRY_POINT_GROUP!r}) does not "
                               "exist: the package's metadata is stale; reinstall it (pip install -e .)") from None
        added = sorted(set(_TASKS) - before)
        if added != [ep.name] and not (added == [] and ep.name in before):
            raise RuntimeError(f"task module {ep.value} (entry point {ep.name!r} of {ENTRY_POINT_GROUP!r}) "
                               f"registered {added or 'no task'}; it must register exactly one Task named {ep.name!r}")
    _loaded = True


def all() -> list[Task]:  # noqa: A001 - `tasks.all()` reads as what it is
    """Every registered task, by name."""
    load_tasks()
    return [_TASKS[name] for name in sorted(_TASKS)]


def get(name: str) -> Task:
    """The task named `name`; an unknown name is refused with the registered ones."""
    load_tasks()
    return _TASKS.named(name)


def tiny_model(name: str) -> Callable[[Path, int], str] | None:
    """The resolver of a task's offline model `name`, or None when no task has one so named."""
    return next((task.tiny_models[name] for task in all() if name in task.tiny_models), None)


def tokenizer_lines() -> list[str]:
    """Every task's tokenizer lines, in task-name order: the corpus, and so the tokenizer and its cache fingerprint,
    do not depend on the order entry points are listed in."""
    return [line for task in all() if task.tokenizer_lines is not None for line in task.tokenizer_lines()]


def rewards() -> dict[str, Callable]:
    """Every task's reward short names and their functions."""
    return {name: func for task in all() for name, func in task.rewards.items()}


def metrics() -> dict[str, str]:
    """Every task's own metric names and when each is logged."""
    return {name: when for task in all() for name, when in task.metrics.items()}

