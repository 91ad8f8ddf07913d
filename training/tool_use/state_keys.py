"""An environment's name for its state, what step-level credit groups calls by (training/features/step_credit.py).

An environment may define a property `state_key` (a property, not a method: TRL offers public methods as tools): a
hashable value that is equal for two instances exactly when everything their later answers depend on is equal (the
causal environment: its row, settings and the valid calls so far). The tool layer reads it just before each call the
model makes (`EpisodeTools`), so every call is known with the state it was made in. Two checks, each naming the
environment: a key that cannot be hashed, and two rollouts of one group that made the same calls but report
different keys (a key that is not a function of the calls: `check_replays`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable


class StateKeyError(ValueError):
    """An environment's `state_key` cannot group calls: unhashable, or not the same for the same calls."""


def names_state(env) -> bool:
    """Whether the environment defines `state_key`."""
    return hasattr(type(env), "state_key")


def state_reader(env) -> Callable[[], Hashable] | None:
    """What reads `env.state_key`, checked hashable; None where the environment names no state."""
    if not names_state(env):
        return None

    def read() -> Hashable:
        key = env.state_key
        try:
            hash(key)
        except TypeError as err:
            raise StateKeyError(f"{type(env).__name__}.state_key must be hashable, got a {type(key).__name__} "
                                f"({err})") from None
        return key

    return read


def check_replays(env_name: str, histories: list[tuple], keys: list[Hashable]) -> None:
    """Rollouts whose call histories are equal must report equal state keys; else `StateKeyError` naming the
    environment and the history."""
    seen: dict[tuple, Hashable] = {}
    for history, key in zip(histories, keys, strict=True):
        if history in seen and seen[history] != key:
            raise StateKeyError(f"{env_name}.state_key differs between two rollouts that made the same calls "
                                f"{list(history)!r}: {seen[history]!r} and {key!r}; a state key must be a function of "
                                "the row and the calls so far")
        seen.setdefault(history, key)
