"""Deferred, batched surrogate updates give exactly the records of updating after every call; the environment's
episode metrics are a property (never a tool) that settles them first."""

import numpy as np
import pytest

from tests.causal.helpers import chain5
from training.causal import pending
from training.causal.env import CausalEnv, make_causal_env
from training.causal.exact_surrogate import ExactSurrogate
from training.envs.tool_names import environment_tool_names
from training.tasks.causal import scm_row
from training.causal.families import random_scm

CALLS = [("intervene", "X1", -3.0), ("observe",), ("intervene", "X4", 2.0), ("intervene", "X0", 1.5)]


def trajectory(env):
    r = env.record
    return [(s.entropy_before, s.entropy_after, s.info_gain, tuple(s.posterior_after.probs)) for s in r.steps]


def test_many_episodes_drained_together_match_episodes_settled_call_by_call(monkeypatch):
    rows = [scm_row(chain5(), seed=s, budget=6) for s in range(3)] + [scm_row(random_scm("er", 6, 5), seed=9)]
    calls = {i: [c if c[0] == "observe" or i < 3 else ("intervene", random_scm("er", 6, 5).actionable[j], 1.0)
                 for j, c in enumerate(CALLS)] for i in range(4)}
    # one by one: read the record after every call (each read drains that call's update)
    single = []
    for i, row in enumerate(rows):
        env = CausalEnv()
        env.reset(**row)
        for c in calls[i]:
            getattr(env, c[0])(*c[1:])
            env.record
        single.append(trajectory(env))
    # batched: all episodes' calls first, one drain, counting the batched update_many calls
    seen = []
    monkeypatch.setattr(pending, "update_many", lambda surs, batches: (seen.append(len(surs)),
                                                                      _update_many(surs, batches)))
    envs = [CausalEnv() for _ in rows]
    for env, row in zip(envs, rows):
        env.reset(**row)
    for i, env in enumerate(envs):
        for c in calls[i]:
            getattr(env, c[0])(*c[1:])
    assert all(len(env._pending) == len(CALLS) for env in envs)
    assert pending.drain() == len(CALLS)  # rounds
    assert seen == [4] * len(CALLS)  # each round: one batched update of all four episodes' surrogates
    for env, expected in zip(envs, single):
        got = trajectory(env)
        for a, b in zip(got, expected):
            np.testing.assert_allclose(a[:3], b[:3], rtol=0, atol=1e-10)
            np.testing.assert_allclose(a[3], b[3], rtol=0, atol=1e-10)


def _update_many(surs, batches):
    from training.causal.exact_surrogate import update_many

    return update_many(surs, batches)


def test_reading_the_surrogate_or_metrics_settles_pending_calls_and_frozen_envs_never_update():
    env = CausalEnv()
    env.reset(**scm_row(chain5(), seed=1, budget=4))
    env.intervene("X1", 1.0)
    assert env._pending and env._surrogate.updates == 1  # deferred
    metrics = env.episode_metrics
    assert not env._pending and env._surrogate.updates == 2 and metrics["surrogate/updates"] == 2.0
    assert set(metrics) == {"causal/info_gain", "causal/posterior_entropy", "causal/regret", "causal/parent_f1",
                            "causal/invalid_calls", "surrogate/updates"}
    frozen = make_causal_env(active=False)()
    frozen.reset(**scm_row(chain5(), seed=1, budget=4))
    frozen.intervene("X1", 1.0)
    assert frozen.record.steps[0].info_gain == 0.0 and frozen.surrogate.updates == 0
    assert isinstance(frozen.surrogate, ExactSurrogate)


def test_episode_metrics_is_not_a_tool():
    assert environment_tool_names(CausalEnv) == ["intervene", "observe"]
    assert isinstance(CausalEnv.__dict__["episode_metrics"], property)


def test_a_record_read_before_reset_is_none_and_tools_refuse():
    env = CausalEnv()
    assert env.record is None
    with pytest.raises(ValueError, match="before reset"):
        env.intervene("X1", 1.0)
