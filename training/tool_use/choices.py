"""An environment's enumerable choices, what choice credit weighs a call against (training/features/choice_credit.py).

An environment may define a property `choices` (a property, not a method: TRL offers public methods as tools): the
calls it offers in its current state, each a `Choice` whose `terms()` are the reward terms that call would earn if
made now (by reward function name, as its `call_rewards` would then report them). The tool layer reads it just before
each turn's first call (`EpisodeTools`); when the model's call is one of them, the turn keeps which one, every
choice's call and every choice's terms (read then, before the call changes the environment). An environment's
choices should be the few it lists to the model (the causal environment: `choose(option=k)` for each option its
last reply numbered), calls that the model writes alike but for one token.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Choice:
    call: dict  # {"name": tool, "arguments": {...}}, as the model's tool call parses
    terms: Callable[[], dict[str, float]]  # the reward terms of making it now


@dataclass(frozen=True)
class TurnChoice:
    """What a turn chose from: the index of the call it made, every offered call, and every call's terms."""

    made: int
    calls: tuple[dict, ...]
    terms: tuple[dict[str, float], ...]


def offers_choices(env) -> bool:
    return hasattr(type(env), "choices")


def choices_reader(env) -> Callable[[], list[Choice]] | None:
    """What reads `env.choices`; None where the environment offers none."""
    return (lambda: env.choices) if offers_choices(env) else None


def chosen(offered: list[Choice], name: str, arguments: dict) -> TurnChoice | None:
    """The turn's choice when the call (`name`, `arguments`) is one of two or more `offered`, the terms read now; else
    None (one call offered is nothing to choose between, and its terms are not worked out)."""
    if len(offered) < 2:
        return None
    made = {"name": name, "arguments": arguments}
    index = next((k for k, c in enumerate(offered) if c.call == made), None)
    if index is None:
        return None
    return TurnChoice(index, tuple(c.call for c in offered), tuple(c.terms() for c in offered))
