"""State keys (training/tool_use/state_keys.py): read before each call, refused by name when unhashable or when two
rollouts that made the same calls disagree."""

from __future__ import annotations

from collections import Counter

import pytest

from training.tool_use.state_keys import StateKeyError, check_replays, state_reader
from training.tool_use.tool_calls import EpisodeTools


class Counting:
    """A toy environment: its state is the calls it has answered."""

    def __init__(self):
        self.answered = []

    @property
    def state_key(self):
        return tuple(self.answered)

    def add(self, n: int) -> str:
        """Add.

        Args:
            n: a number
        """
        self.answered.append(n)
        return "ok"


def test_each_turn_notes_the_state_its_first_call_was_made_in():
    env, turn = Counting(), [0]
    tools = EpisodeTools({"add": env.add}, Counter(), max_calls=5, clock=lambda: turn[0], state=state_reader(env))
    table = tools.as_tool_dict()
    table["add"](n=1)
    turn[0] = 1
    table["add"](n=2)
    table["add"](n=3)  # a second call in turn 1: the turn's state is the one before its first call
    turn[0] = 2
    with pytest.raises(ValueError):
        table["invalid_tool_call"](kind="bad_json", reason="x")  # a refused call is made in a state too
    assert tools.turn_states == {0: (0, ()), 1: (1, (1,)), 2: (3, (1, 2, 3))}
    assert tools.turn_histories[1] == ('{"arguments": {"n": 1}, "name": "add"}',)


def test_an_unhashable_key_is_refused_naming_the_environment():
    class Listy(Counting):
        @property
        def state_key(self):
            return list(self.answered)

    with pytest.raises(StateKeyError, match="Listy.state_key must be hashable, got a list"):
        state_reader(Listy())()


def test_an_environment_without_a_key_has_no_reader():
    assert state_reader(object()) is None


def test_the_same_calls_must_give_the_same_key():
    check_replays("Counting", [(), ("a",), ("a",)], ["s0", "s1", "s1"])
    with pytest.raises(StateKeyError, match=r"Counting.state_key differs between two rollouts that made the same "
                                            r"calls \['a'\]"):
        check_replays("Counting", [(), ("a",), ("a",)], ["s0", "s1", "s2"])
