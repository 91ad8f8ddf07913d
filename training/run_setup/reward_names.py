"""Short names for reward functions in recipes (`reward_funcs: [optimization, structure, parent, exploration]`).

A short name is a task's (its `Task`'s `rewards`, training/run_setup/tasks.py: generic code finds a task's reward
functions by name without importing the task, and a task that moves changes its `task.py`, not every recipe) or a
judge's (`JUDGE_REWARDS`: judges/ is generic code beside training/, not a task, so its names are listed here). A
dotted path `module.function` is accepted wherever a name is.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable

from training.errors import BadInputError
from training.registries import Registry
from training.run_setup import tasks
from training.run_setup.input_checks import import_object

# the judges' ready-made rewards (judges/factories.py): name -> dotted path, imported only when a recipe names one
JUDGE_REWARDS: Registry = Registry("judge reward")
JUDGE_REWARDS.register("embedding_judge_reward", "judges.factories.embedding_judge_reward")
JUDGE_REWARDS.register("exact_match_reward", "judges.factories.exact_match_reward")


class UnknownRewardName(BadInputError):
    """A `reward_funcs` entry that is neither a registered name nor a dotted path; the message lists the names."""


def _task_rewards() -> dict[str, Callable]:
    task_rewards = tasks.rewards()
    if clash := sorted(set(task_rewards) & set(JUDGE_REWARDS)):
        raise ValueError(f"reward names that are both a task's and a judge's: {clash}")
    return task_rewards


def registered() -> list[str]:
    """Every short name: the tasks' and the judges'."""
    return sorted([*_task_rewards(), *JUDGE_REWARDS])


def reward_object(entry: str):
    """What a `reward_funcs` entry names: the dotted path's object, a task's reward function or a judge's reward."""
    entry = str(entry)
    if "." in entry:
        return import_object(entry, "reward_funcs entry")
    task_rewards = _task_rewards()
    if entry in task_rewards:
        return task_rewards[entry]
    if entry in JUDGE_REWARDS:
        return import_object(JUDGE_REWARDS[entry], "reward_funcs entry")
    names = registered()
    close = difflib.get_close_matches(entry, names, n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise UnknownRewardName(f"reward_funcs entry {entry!r} is not a registered reward name{hint} nor a dotted "
                            f"path 'module.function'; registered: {', '.join(names)}")
