"""Scripted baselines that aim at regret under the episode's posterior: Thompson sampling (`thompson`) and expected
improvement (`expected_improvement`).

Both read the episode's own surrogate (exact or additive: any surrogate with `posterior_models`), whose draws are
(DAG, parameters) models with `simulate_each`, and search every actionable variable's whole range:

* E_m(v, x) = E[target | do(v = x)] under draw m (`draw_expectations`). A linear draw's target is linear in the
  noise, so E_m is the noise-free propagation (exact). Otherwise it is the mean over `NOISE_SAMPLES` standard-normal
  noise vectors, shared by every candidate and draw (common random numbers).
* Candidates: `grid` evenly spaced values per variable, ends included. Under a linear draw E_m is affine in x, so
  its optimum is at an end of the range and the grid holds it exactly; under a nonlinear draw the grid spacing is
  range / (grid - 1) (range / 100 by default).

`ThompsonPolicy`: one posterior draw per call; the (variable, value) optimising E_m under it (max for goal "max",
min for "min"); for a nonlinear draw the best grid value is refined by bounded Brent search between its neighbours.

`ExpectedImprovementPolicy`: M draws; with s = +1 (goal max) or -1 (goal min),
    EI(v, x) = (1 / M) sum_m max(0, s (E_m(v, x) - incumbent)),
    incumbent = the best (under the goal), over the episode's valid interventions so far (the record's steps with
                an intervention), of the posterior mean (1 / M) sum_m E_m(that variable, that value); before any
                intervention, (1 / M) sum_m E_m(no intervention) -- as the record's own "best so far" starts at
                E[target] without intervention.
The incumbent is the posterior's estimate of what the episode already reached, not the best noisy target sample
seen (whose maximum is biased by the noise, while regret counts E[target | do]). The call is the argmax of EI over
the grid; ties (e.g. every EI 0) go to the larger s * posterior mean.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize_scalar

from training.tasks.causal.belief import NOISE_SAMPLES, draw_expectations
from training.tasks.causal.env import CausalEnv
from training.tasks.causal.policies.policy_registry import register_policy
from training.tasks.causal.surrogates.exact_surrogate import LinearModel

FINE_GRID = 101  # values per variable


def posterior_draws(env: CausalEnv, n: int, rng: np.random.Generator, who: str) -> list:
    sur = env.surrogate
    if not hasattr(sur, "posterior_models"):
        raise TypeError(f"{who} needs a surrogate with posterior draws (exact or additive), the environment has "
                        f"{type(sur).__name__}")
    return sur.posterior_models(n, rng)


def grid_candidates(env: CausalEnv, grid: int) -> tuple[np.ndarray, np.ndarray]:
    """(variable indices, values): `grid` evenly spaced values over each actionable variable's range."""
    scm = env.scm
    index = np.repeat([scm.index[v] for v in scm.actionable], grid)
    values = np.concatenate([np.linspace(*scm.ranges[v], grid) for v in scm.actionable])
    return index, values


def as_call(env: CausalEnv, var_index: int, value: float) -> tuple[str, dict]:
    var = env.scm.variables[var_index]
    lo, hi = env.scm.ranges[var]
    return "intervene", {"variable": var, "value": float(np.clip(round(float(value), 2), lo, hi))}


def goal_sign(env: CausalEnv) -> float:
    return 1.0 if env.scm.goal == "max" else -1.0


@register_policy("thompson", order=40)
@dataclass
class ThompsonPolicy:
    grid: int = FINE_GRID
    name: str = "thompson"

    def __call__(self, env: CausalEnv, rng: np.random.Generator) -> tuple[str, dict]:
        (model,) = posterior_draws(env, 1, rng, "Thompson sampling")
        target, sign = env.scm.index[env.scm.target], goal_sign(env)
        noise = rng.standard_normal((NOISE_SAMPLES, env.scm.d))
        index, values = grid_candidates(env, self.grid)
        scores = sign * draw_expectations(model, target, index, values, noise)
        k = int(np.argmax(scores))
        var, value = int(index[k]), float(values[k])
        if not isinstance(model, LinearModel):
            value = self._refine(model, target, var, k, index, values, scores, noise, sign)
        return as_call(env, var, value)

    @staticmethod
    def _refine(model, target, var, k, index, values, scores, noise, sign) -> float:
        """Bounded Brent search between the best grid value's neighbours (same variable); never worse than it."""
        same = np.flatnonzero(index == var)
        a, b = values[max(k - 1, same[0])], values[min(k + 1, same[-1])]
        res = minimize_scalar(lambda x: -sign * draw_expectations(model, target, np.array([var]), np.array([x]),
                                                                  noise)[0],
                              bounds=(a, b), method="bounded", options={"xatol": 1e-4})
        return float(res.x) if -res.fun >= scores[k] else float(values[k])


@register_policy("expected_improvement", order=50)
@dataclass
class ExpectedImprovementPolicy:
    grid: int = FINE_GRID
    n_models: int = 16
    name: str = "expected_improvement"

    def scores(self, env: CausalEnv, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                         np.ndarray]:
        """(variable indices, values, EI, posterior mean of E[target | do]) of the grid candidates."""
        models = posterior_draws(env, self.n_models, rng, "expected improvement")
        target, sign = env.scm.index[env.scm.target], goal_sign(env)
        noise = rng.standard_normal((NOISE_SAMPLES, env.scm.d))
        index, values = grid_candidates(env, self.grid)
        done = [s.intervention for s in env.trace.steps if s.valid and s.intervention is not None]
        past_index = np.array([env.scm.index[v] for v, _ in done] or [-1])
        past_values = np.array([x for _, x in done] or [0.0])
        all_index, all_values = np.concatenate([index, past_index]), np.concatenate([values, past_values])
        e = np.stack([draw_expectations(m, target, all_index, all_values, noise) for m in models])  # (M, C + P)
        mean = e.mean(axis=0)
        incumbent = float(np.max(sign * mean[len(index):]))  # in sign units
        ei = np.maximum(0.0, sign * e[:, : len(index)] - incumbent).mean(axis=0)
        return index, values, ei, mean[: len(index)]

    def __call__(self, env: CausalEnv, rng: np.random.Generator) -> tuple[str, dict]:
        index, values, ei, mean = self.scores(env, rng)
        k = max(range(len(ei)), key=lambda i: (ei[i], goal_sign(env) * mean[i]))
        return as_call(env, int(index[k]), float(values[k]))
