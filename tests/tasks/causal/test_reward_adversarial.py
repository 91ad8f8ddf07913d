"""Policies that try to game the reward do not gain: on the same SCMs and environment seeds, each exploit's mean
reward, in every component and weighted, is no more than the random baseline's.

One legitimate exception is guarded separately: a policy that only observes (3 observational rows per call) may
learn the parents as well as random interventions do or better (observational data carry real information about
the skeleton and v-structures), so its `parent` reward is not capped; every other component and the weighted reward
are."""

import json

import numpy as np
import pytest

from tests.tasks.causal.helpers import play
from training.tasks.causal.policies.scripted import random_call
from training.tasks.causal.reward_components import COMPONENTS, episode_rewards, weighted_reward
from training.tasks.causal.scm.scm import SCM
from training.tasks.causal.splits import DATA_DIR

BUDGET, EPISODES = 6, 3


@pytest.fixture(scope="module")
def scms() -> list[SCM]:
    with open(DATA_DIR / "heldout.jsonl") as f:
        rows = [json.loads(line) for line in f][:6]
    return [SCM.from_json(r["scm_json"]) for r in rows]


def mean_rewards(make_policy, scms, n_calls=BUDGET) -> dict[str, float]:
    per_episode = []
    for scm in scms:
        for k in range(EPISODES):
            per_episode.append(episode_rewards(play(make_policy(), scm, 900 + k, BUDGET, n_calls).trace))
    out = {c: float(np.mean([e[c] for e in per_episode])) for c in COMPONENTS}
    out["weighted"] = float(np.mean([weighted_reward(e) for e in per_episode]))
    return out


@pytest.fixture(scope="module")
def honest(scms):
    return mean_rewards(lambda: random_call, scms)


class RepeatFirst:
    """One random intervention, then the same call again and again."""

    def __init__(self):
        self.call = None

    def __call__(self, env, rng):
        self.call = self.call or random_call(env, rng)
        return self.call


def fixed(tool, **args):
    return lambda: (lambda env, rng: (tool, args))


def with_value(value):
    """A random variable, but this value."""
    def policy(env, rng):
        _, args = random_call(env, rng)
        return "intervene", {**args, "value": value}
    return lambda: policy


def target(env, rng):
    return "intervene", {"variable": env.scm.target, "value": 3.0}


EXPLOITS = {
    "repeat one intervention": (RepeatFirst, BUDGET),
    "only observe (more rows per call)": (fixed("observe"), BUDGET),  # parent: see the module docstring
    "intervene on the target itself": (lambda: target, BUDGET),
    "out-of-bound value": (with_value(1e6), BUDGET),
    "non-finite value (nan)": (with_value(float("nan")), BUDGET),
    "non-finite value (inf)": (with_value(float("inf")), BUDGET),
    "malformed value (a string)": (with_value("3.0"), BUDGET),
    "malformed value (a bool)": (with_value(True), BUDGET),
    "unknown variable": (fixed("intervene", variable="X99", value=1.0), BUDGET),
    "calls past the budget": (lambda: random_call, BUDGET + 4),
    "no call at all": (lambda: random_call, 0),
}


@pytest.mark.parametrize("exploit", list(EXPLOITS))
def test_exploit_earns_no_more_than_the_random_baseline(scms, honest, exploit):
    make_policy, n_calls = EXPLOITS[exploit]
    gamed = mean_rewards(make_policy, scms, n_calls)
    capped = [c for c in COMPONENTS if not (exploit.startswith("only observe") and c == "parent")]
    for key in (*capped, "weighted"):
        assert gamed[key] <= honest[key] + 1e-12, (exploit, key, gamed[key], honest[key])
    assert gamed["weighted"] < honest["weighted"]
