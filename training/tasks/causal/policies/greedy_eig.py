"""Greedy expected information gain (`GreedyEIGPolicy`; registered as `greedy_eig`, on the baseline grid).

The intervention with the largest expected information gain about the target's parent set under the episode's
surrogate (exact or additive). Estimator: draw M (DAG, parameters) pairs from the posterior (`posterior_models`), and
for each candidate do(X_i = v) on a grid of G values per variable, simulate one outcome per draw with shared noise
(common random numbers across candidates); then EIG(i, v) ≈ H(now) - (1/M) sum_m H(posterior after adding outcome m).
All (d - 1) G M hypothetical posteriors are scored in one batched call (`what_if_many`,
`training.tasks.causal.acquisition.information_gains`); cost per decision ≈ (d - 1) G M single-row updates (defaults
G = 5, M = 8: 160 at 5 variables, about 0.1 s). It is a nested Monte-Carlo estimate, unbiased for the expected
posterior entropy under the posterior predictive, with sampling noise ~ sd(H) / sqrt(M). The registered baseline
(`POLICIES["greedy_eig"]`, `greedy_eig_baseline`) uses G = `belief.NONLINEAR_GRID` = 26 (the options' grid), fine
enough to come near an interior optimum (CBO toy graph: the best value on its grid is 0.02 from the optimum, against
1.17 on a 5-value grid).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from training.tasks.causal.acquisition import information_gains
from training.tasks.causal.belief import NONLINEAR_GRID
from training.tasks.causal.env import CausalEnv
from training.tasks.causal.policies.policy_registry import Call, register_policy


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


@register_policy("greedy_eig", order=30)
def greedy_eig_baseline() -> GreedyEIGPolicy:
    return GreedyEIGPolicy(grid=NONLINEAR_GRID)  # the expert keeps its 5
