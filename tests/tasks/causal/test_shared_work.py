"""Work shared between episodes in the same state (training/tasks/causal/shared_work.py): a group's rollouts that
make the same calls compute their options and lookahead once, and every episode's record (replies, options, expected
and realised gains, posteriors) is the one it computes alone, whichever episodes ran before it."""

from __future__ import annotations

import pytest

from tests.tasks.causal.helpers import chain5
from training.tasks.causal import shared_work
from training.tasks.causal.env import CausalEnv, make_causal_env


def row(seed: int = 3):
    return {"scm_json": chain5().to_json(), "seed": seed, "budget": 5, "initial_samples": 6}


# four rollouts of one row: two make the same calls, one shares their first two, one refuses a call first
CALLS = [
    [("choose", {"option": 1}), ("intervene", {"variable": "X0", "value": 1.5}), ("observe", {}),
     ("choose", {"option": 2})],
    [("choose", {"option": 1}), ("intervene", {"variable": "X0", "value": 1.5}), ("observe", {}),
     ("choose", {"option": 2})],
    [("choose", {"option": 1}), ("intervene", {"variable": "X0", "value": 1.5}), ("intervene",
     {"variable": "X3", "value": -1.0})],
    [("intervene", {"variable": "X2", "value": 99.0}), ("choose", {"option": 1}), ("observe", {})],
]


def play(env_class, seed: int = 3) -> list[list[tuple]]:
    played = []
    for calls in CALLS:
        env = env_class()
        env.reset(**row(seed))
        for tool, args in calls:
            getattr(env, tool)(**args)
        played.append([(s.tool, s.valid, s.outcome, s.expected_info_gain, s.info_gain, s.entropy_after,
                        None if s.posterior_after is None else sorted(s.posterior_after.marginals.items()))
                       for s in env.trace.steps])
    return played


@pytest.mark.parametrize("env_class", [CausalEnv, make_causal_env("exact", active=False),
                                       make_causal_env("additive")])
def test_an_episode_reads_the_same_record_with_and_without_shared_work(env_class, monkeypatch):
    shared_work.SHARED.clear()
    shared = play(env_class)
    assert shared_work.SHARED.hits > 0  # the group's common states were worked out once
    with monkeypatch.context() as patch:
        patch.setattr(shared_work.SharedWork, "get", lambda self, key, compute: compute())
        alone = play(env_class)
    assert repr(shared) == repr(alone)


def test_episodes_of_another_seed_or_environment_do_not_share():
    variants = [(CausalEnv, 3), (CausalEnv, 4), (make_causal_env("exact", active=False), 3)]
    alone = []
    for env_class, seed in variants:
        shared_work.SHARED.clear()
        play(env_class, seed)
        alone.append(shared_work.SHARED.hits)
    shared_work.SHARED.clear()
    for env_class, seed in variants:
        play(env_class, seed)
    assert min(alone) > 0 and shared_work.SHARED.hits == sum(alone)  # each shares only within itself
