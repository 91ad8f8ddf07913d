"""The policy that acts on the belief line it is shown: the warm-start expert and a scripted baseline.

`BeliefPolicy` reads the belief the environment's last reply showed (`CausalEnv.belief`, the same object whose
`line()` the model read) and sets the last variable listed, the one with the best optimistic value
E[target | do] + sd (goal max; - sd for min), to the value the line gives for it: an upper-confidence-bound rule on
the posterior, one draw-based standard deviation wide. Where the line says the effects are unknown (the surrogate has
no draws: too little data, or a surrogate without a posterior over models) it observes, which is the call that makes
them known. Its choice is a function of the text alone, so a model that imitates it can learn to read the line; the
expert of the bundled traces is `EpsilonPolicy(BeliefPolicy(), EXPERT_EPSILON)` (training.tasks.causal.splits), with
EXPERT_EPSILON = 0.
"""

from __future__ import annotations

import numpy as np


class BeliefPolicy:
    name = "belief_ucb"

    def __call__(self, env, rng: np.random.Generator) -> tuple[str, dict]:
        belief = env.belief
        if belief is None:
            raise ValueError("BeliefPolicy: the environment has shown no belief yet (call reset first)")
        if not belief.known:
            return "observe", {}
        best = belief.best
        return "intervene", {"variable": best.variable, "value": best.value}
