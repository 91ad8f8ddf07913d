"""Baseline policies in the intervention environment; they bound the score scale of every later report.

A policy maps the episode so far (the environment: its SCM spec, surrogate and record) and a generator to the next
call, ``(tool name, arguments)``:

* `RandomPolicy`: a uniform non-target variable, a uniform value in its range.
* `GreedyEIGPolicy`: the intervention with the largest expected information gain about the target's parent set
  under the episode's surrogate (exact or additive). Estimator: draw M (DAG, parameters) pairs from the posterior
  (`posterior_models`), and for each candidate do(X_i = v) on a grid of G values per variable,
  simulate one outcome per draw with shared noise (common random numbers across candidates); then
  EIG(i, v) ≈ H(now) - (1/M) sum_m H(posterior after adding outcome m). All (d - 1) G M hypothetical posteriors are
  scored in one batched call (`what_if_many`); cost per decision ≈ (d - 1) G M single-row updates
  (defaults G = 5, M = 8: 160 at 5 variables, about 0.1 s). It is a nested Monte-Carlo estimate, unbiased for the
  expected posterior entropy under the posterior predictive, with sampling noise ~ sd(H) / sqrt(M). The registered
  baseline (`POLICIES["greedy_eig"]`) uses G = `BASELINE_EIG_GRID` = 26, fine enough to come near an interior
  optimum (CBO toy graph: the best value on its grid is 0.02 from the optimum, against 1.17 on a 5-value grid).
* `ThompsonPolicy`, `ExpectedImprovementPolicy` (`training.tasks.causal.regret_policies`): aim at regret under the same
  posterior draws, over fine grids of values (Thompson sampling: the best call of one draw; expected improvement
  over the best intervention so far).
* `RangeEndsPolicy`: reads nothing, neither the belief line nor the samples: a uniformly random variable not yet
  set, at a uniformly random end of its range; once every variable is set, an end not yet set; then any end. Under
  a linear mechanism E[target | do(X = v)] is affine in v, so the optimum is at an end: this is what regret on the
  linear SCMs costs without reading anything, the floor a policy that reads the line must beat.
* `OraclePolicy`: knows the true SCM; its first call is the SCM's optimum (the best single intervention over every
  settable variable, an ancestor of the target included: the one regret is measured against, so its regret is 0
  after one call), then the target's other true parents in turn, each at the value that optimises
  E[target | do(parent = v)] (endpoint for linear SCMs, grid + refinement otherwise), then the optimum again.
* `EpsilonPolicy(expert, epsilon)`: the expert's call, or with probability epsilon a random one (noisy
  demonstrations for a supervised warm start).

`run_policy(policy, row, seed)` plays one episode (to the budget, or until the policy returns None);
`episode_messages` turns it into chat messages in Qwen3's
tool-call format. `python -m training.tasks.causal.evaluate_baselines` plays them on a split or an SCM file.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from training.evaluation.pairing_seeds import environment_seed
from training.tasks.causal.acquisition import information_gains
from training.tasks.causal.belief_policy import BeliefPolicy, teacher
from training.tasks.causal.env import CausalEnv, EpisodeRecord, make_causal_env
from training.tasks.causal.regret_policies import ExpectedImprovementPolicy, ThompsonPolicy
from training.tasks.causal.scm.optimum import best_value

Call = tuple[str, dict]
Policy = Callable[[CausalEnv, np.random.Generator], Call | None]  # None: stop, leaving budget unused


def random_call(env: CausalEnv, rng: np.random.Generator) -> Call:
    var = env.scm.actionable[int(rng.integers(len(env.scm.actionable)))]
    lo, hi = env.scm.ranges[var]
    return "intervene", {"variable": var, "value": round(float(rng.uniform(lo, hi)), 2)}


class RandomPolicy:
    name = "random"

    def __call__(self, env: CausalEnv, rng: np.random.Generator) -> Call:
        return random_call(env, rng)


class RangeEndsPolicy:
    name = "range_ends"

    def __call__(self, env: CausalEnv, rng: np.random.Generator) -> Call:
        scm = env.scm
        made = set(env.record.interventions)
        ends = [(v, float(end)) for v in scm.actionable for end in scm.ranges[v]]
        unset = [c for c in ends if c[0] not in {v for v, _ in made}]
        fresh = [c for c in ends if c not in made]
        choices = unset or fresh or ends
        var, value = choices[int(rng.integers(len(choices)))]
        return "intervene", {"variable": var, "value": value}


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
        call = self._plan[env.record.used % len(self._plan)]
        return "intervene", {"variable": call.variable, "value": call.value}


@dataclass
class GreedyEIGPolicy:
    grid: int = 5
    n_models: int = 8
    name: str = "greedy_eig"

    def candidates(self, env: CausalEnv) -> list[tuple[str, float]]:
        return [(v, float(x)) for v in env.scm.actionable for x in np.linspace(*env.scm.ranges[v], self.grid)]

    def eig(self, env: CausalEnv, rng: np.random.Generator) -> tuple[list[tuple[str, float]], np.ndarray]:
        sur = env.surrogate
        if not (hasattr(sur, "posterior_models") and hasattr(sur, "what_if_many")):
            raise TypeError(f"greedy EIG needs a surrogate with posterior draws (exact or additive), the environment "
                            f"has {type(sur).__name__}")
        cands = self.candidates(env)
        models = sur.posterior_models(self.n_models, rng)
        index = np.array([env.scm.index[var] for var, _ in cands])
        values = np.array([val for _, val in cands])
        return cands, information_gains(sur, index, values, models, rng)

    def __call__(self, env: CausalEnv, rng: np.random.Generator) -> Call:
        cands, gains = self.eig(env, rng)
        var, val = cands[int(np.argmax(gains))]
        return "intervene", {"variable": var, "value": round(val, 2)}


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


BASELINE_EIG_GRID = 26  # the registered greedy-EIG baseline's values per variable (the expert keeps its 5)


def greedy_eig_baseline() -> GreedyEIGPolicy:
    return GreedyEIGPolicy(grid=BASELINE_EIG_GRID)


POLICIES: dict[str, Callable[[], Policy]] = {"random": RandomPolicy, "range_ends": RangeEndsPolicy,
                                             "greedy_eig": greedy_eig_baseline, "thompson": ThompsonPolicy,
                                             "expected_improvement": ExpectedImprovementPolicy,
                                             "belief_line": BeliefPolicy, "teacher": teacher,
                                             "oracle": OraclePolicy}


def run_policy(policy: Policy, row: dict, seed: int, surrogate: str = "exact") -> EpisodeRecord:
    """Play one episode of `row` to its budget; the policy's generator and the environment's noise both follow
    `seed` (the environment's through `environment_seed`)."""
    env = make_causal_env(surrogate)()
    env.reset(**{**row, "seed": environment_seed(row, seed)})
    rng = np.random.default_rng(seed)
    while env.record.used < env.record.budget:
        call = policy(env, rng)
        if call is None:  # the policy stops (the teacher may), leaving budget unused
            break
        getattr(env, call[0])(**call[1])
    return env.record


def episode_messages(prompt: list[dict], record: EpisodeRecord, final_answer: str = "Done.") -> list[dict]:
    """The episode as chat messages: the prompt (reset's text appended to its last user message), then per call an
    assistant turn in Qwen3's tool-call text format and the tool's reply, then `final_answer`."""
    messages = [dict(m) for m in prompt]
    messages[-1]["content"] = f"{messages[-1]['content']}\n\n{record.reset_text}"
    for step in record.steps:
        call = json.dumps({"name": step.tool, "arguments": step.arguments})
        messages.append({"role": "assistant", "content": f"<tool_call>\n{call}\n</tool_call>"})
        messages.append({"role": "tool", "name": step.tool, "content": step.outcome})
    messages.append({"role": "assistant", "content": final_answer})
    return messages
