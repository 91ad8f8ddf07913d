"""A build's additive share (`starting_policy build --additive_share F`): the last round(F x episodes_per_row)
episodes of each row play the additive surrogate, the others are the traces without it; episode 0 always plays the
exact one, and a share that would take it is refused naming the flag."""

from __future__ import annotations

import pytest

from training.errors import BadInputError
from training.run_setup.prompt_datasets import load_rows
from training.tasks.causal.policies.belief_line import teacher
from training.tasks.causal.policies.play import run_policy
from training.tasks.causal.starting_policy import (DATA_FILES, BuildSettings, additive_episodes, episode_row, play,
                                                   trace_messages)


@pytest.fixture(scope="module")
def row():
    return load_rows(DATA_FILES[0])[0]


def test_the_last_episodes_play_the_additive_surrogate(row):
    plain, shared = play([row], 4, other_share=0.3), play([row], 4, other_share=0.3, additive_share=0.5)
    assert additive_episodes(4, 0.5) == 2 and shared[:2] == plain[:2]
    for k in (2, 3):
        played = episode_row(row, k)
        additive = trace_messages(played, run_policy(teacher(0.3), played, k, "additive"))
        assert shared[k] == additive and shared[k] != plain[k]


def test_a_share_that_takes_episode_0_is_refused():
    with pytest.raises(BadInputError, match="--additive_share"):
        BuildSettings(additive_share=1.0)
    with pytest.raises(BadInputError, match="--additive_share"):
        BuildSettings(additive_share=-0.1)
