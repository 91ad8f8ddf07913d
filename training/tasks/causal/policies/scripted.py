"""Scripted baselines that read little or nothing of the posterior: random, range ends, the oracle, epsilon mixing.

* `RandomPolicy` (`random`): a uniform non-target variable, a uniform value in its range (`random_call`).
* `RangeEndsPolicy` (`range_ends`): reads nothing, neither the belief line nor the samples: a uniformly random
  variable not yet set, at a uniformly random end of its range; once every variable is set, an end not yet set; then
  any end. Under a linear mechanism E[target | do(X = v)] is affine in v, so the optimum is at an end: this is what
  regret on the linear SCMs costs without reading anything, the floor a policy that reads the line must beat.
* `OraclePolicy` (`oracle`): knows the true SCM; its first call is the SCM's optimum (the best single intervention
  over every settable variable, an ancestor of the target included: the one regret is measured against, so its
  regret is 0 after one call), then the target's other true parents in turn, each at the value that optimises
  E[target | do(parent = v)] (endpoint for linear SCMs, grid + refinement otherwise), then the optimum again.
* `EpsilonPolicy(expert, epsilon)` (not registered: it wraps another policy): the expert's call, or with probability
  epsilon a random one (noisy demonstrations for a supervised warm start).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from training.tasks.causal.env import CausalEnv
from training.tasks.causal.policies.policy_registry import Call, Policy, register_policy
from training.tasks.causal.scm.optimum import best_value


def random_call(env: CausalEnv, rng: np.random.Generator) -> Call:
    var = env.scm.actionable[int(rng.integers(len(env.scm.actionable)))]
    lo, hi = env.scm.ranges[var]
    return "intervene", {"variable": var, "value": round(float(rng.uniform(lo, hi)), 2)}


@register_policy("random", order=10)
class RandomPolicy:
    name = "random"

    def __call__(self, env: CausalEnv, rng: np.random.Generator) -> Call:
        return random_call(env, rng)


@register_policy("range_ends", order=20)
class RangeEndsPolicy:
    name = "range_ends"

    def __call__(self, env: CausalEnv, rng: np.random.Generator) -> Call:
        scm = env.scm
        made = set(env.trace.interventions)
        ends = [(v, float(end)) for v in scm.actionable for end in scm.ranges[v]]
        unset = [c for c in ends if c[0] not in {v for v, _ in made}]
        fresh = [c for c in ends if c not in made]
        choices = unset or fresh or ends
        var, value = choices[int(rng.integers(len(choices)))]
        return "intervene", {"variable": var, "value": value}


@register_policy("oracle", order=80)
class OraclePolicy:
    name = "oracle"

    def __call__(self, env: CausalEnv, rng: np.random.Generator) -> Call:
        scm = env.scm
        key = id(scm)
        if getattr(self, "_key", None) != key:
            best = scm.optimum()
            others = {p: best_value(scm, p) for p in sorted(scm.parents()) if p != best.variable}
            ranked = sorted(others.values(), key=lambda o: o.expected, reverse=scm.goal == "max")
            self._key, self._plan = key, [best, *ranked]
        call = self._plan[env.trace.used % len(self._plan)]
        return "intervene", {"variable": call.variable, "value": call.value}


@dataclass
class EpsilonPolicy:
    expert: Policy
    epsilon: float
    name: str = "epsilon"

    def __post_init__(self):
        if not 0.0 <= self.epsilon <= 1.0:
            raise ValueError(f"epsilon: must be in [0, 1], got {self.epsilon}")

    def __call__(self, env: CausalEnv, rng: np.random.Generator) -> Call:
        return random_call(env, rng) if rng.random() < self.epsilon else self.expert(env, rng)
