"""Short names for reward functions in recipes (`reward_funcs: [optimization, structure, parent, exploration]`).

A name is a Python entry point of the `strict_grpo.rewards` group (`[project.entry-points."strict_grpo.rewards"]` in
pyproject.toml, or any installed package's): generic code finds a task's reward functions by name without importing
the task, and a task that moves changes one line there, not every recipe. A dotted path `module.function` is
accepted wherever a name is.
"""

from __future__ import annotations

import difflib
from importlib.metadata import entry_points

from training.errors import BadInputError

GROUP = "strict_grpo.rewards"


class UnknownRewardName(BadInputError):
    """A `reward_funcs` entry that is neither a registered name nor a dotted path; the message lists the names."""


def registered() -> dict[str, str]:
    """Every registered name and the dotted path it stands for."""
    return {ep.name: ep.value.replace(":", ".") for ep in entry_points(group=GROUP)}


def dotted_path(entry: str) -> str:
    """The dotted path of a `reward_funcs` entry: itself when dotted, else the registered name's."""
    entry = str(entry)
    if "." in entry:
        return entry
    names = registered()
    if entry not in names:
        close = difflib.get_close_matches(entry, names, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise UnknownRewardName(f"reward_funcs entry {entry!r} is not a registered reward name{hint} nor a dotted "
                                f"path 'module.function'; registered: {', '.join(sorted(names))}")
    return names[entry]
