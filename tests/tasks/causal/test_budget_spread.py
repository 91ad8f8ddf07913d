"""A build's budget spread (`starting_policy build --budget_spread N`): episodes after a row's first play budgets
drawn within N calls of the row's, each trace makes as many calls as its prompt's budget, the draw is the same on every
play (the build's digest holds), no spread leaves the traces as they were, and a spread that would leave an episode
no call is refused naming the flag."""

from __future__ import annotations

import re

import pytest

from training.errors import BadInputError
from training.run_setup.prompt_datasets import load_rows
from training.tasks.causal.starting_policy import DATA_FILES, BuildSettings, play


def budgets_and_calls(traces):
    out = []
    for messages in traces:
        budget = int(re.search(r"Budget: (\d+) calls", messages[0]["content"]).group(1))
        calls = sum(len(m.get("tool_calls") or []) for m in messages if m["role"] == "assistant")
        out.append((budget, calls))
    return out


@pytest.fixture(scope="module")
def rows():
    return load_rows(DATA_FILES[0])[:3]


def test_episodes_after_the_first_play_drawn_budgets_and_spend_them(rows):
    spread = budgets_and_calls(play(rows, 4, rule="one_step", budget_spread=2))
    assert all(budget == calls for budget, calls in spread)
    own = [row["budget"] for row in rows]
    assert [spread[4 * i][0] for i in range(len(rows))] == own  # episode 0 is the row itself
    later = [spread[4 * i + k][0] - own[i] for i in range(len(rows)) for k in range(1, 4)]
    assert all(-2 <= d <= 2 for d in later) and len(set(later)) > 1
    assert budgets_and_calls(play(rows, 4, rule="one_step", budget_spread=2)) == spread


def test_no_spread_leaves_the_traces_as_they_were(rows):
    assert play(rows, 2, rule="one_step", budget_spread=0) == play(rows, 2, rule="one_step")
    assert {budget for budget, _ in budgets_and_calls(play(rows, 2, rule="one_step"))} == {row["budget"] for row in rows}


def test_a_spread_that_leaves_an_episode_no_call_is_refused():
    smallest = min(row["budget"] for row in load_rows(DATA_FILES[0]))
    with pytest.raises(BadInputError, match="--budget_spread"):
        BuildSettings(budget_spread=smallest)
    with pytest.raises(BadInputError, match="--budget_spread"):
        BuildSettings(budget_spread=-1)
