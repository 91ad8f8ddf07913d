"""The policy that acts on the belief line it is shown: the warm start's teacher and a scripted baseline.

`BeliefPolicy` reads the belief the environment's last reply showed (`CausalEnv.belief`, the same object whose
`line()` the model read) and sets the last variable listed, the one whose best setting not yet made has the best
optimistic value E[target | do] + sd (goal max; - sd for min), to the value the line gives for it: an
upper-confidence-bound rule on the posterior, one draw-based standard deviation wide, that never repeats a setting
while the line has an untried one (`training.tasks.causal.belief`). Where the line says the effects are unknown (the
surrogate has no draws: too little data, or a surrogate without a posterior over models) it observes, which is the
call that makes them known. Its choice is a function of the text alone, so a model that imitates it can learn to
read the line.

`repeat` > 0 makes the flawed teacher of the starting policy (`TEACHER_REPEAT`): before each call after the first,
with probability `repeat`, it repeats its previous call to "confirm" it instead. That is the trait the earlier
belief-UCB expert showed (53% of its decisions repeated its previous call): a repeated call moves neither the best
E[target | do] reached nor the exploration cells, so it costs reward (about 0.04 of weighted reward at 0.4 on the 128
held-out SCMs; docs/causal.md), and a policy can stop doing it by reading its own previous call and the line. The
starting policy imitates this teacher; GRPO's job is to surpass it.
"""

from __future__ import annotations

import numpy as np

TEACHER_REPEAT = 0.4  # the teacher's chance of repeating its previous call (the bundled traces depend on it)


class BeliefPolicy:
    name = "belief_ucb"

    def __init__(self, repeat: float = 0.0):
        if not 0.0 <= repeat <= 1.0:
            raise ValueError(f"repeat: must be in [0, 1], got {repeat}")
        self.repeat = repeat

    def __call__(self, env, rng: np.random.Generator) -> tuple[str, dict]:
        belief = env.belief
        if belief is None:
            raise ValueError("BeliefPolicy: the environment has shown no belief yet (call reset first)")
        if self.repeat > 0:
            made = [s for s in env.record.steps if s.valid]
            if made and rng.random() < self.repeat:
                return made[-1].tool, dict(made[-1].arguments)
        if not belief.known:
            return "observe", {}
        best = belief.best
        return "intervene", {"variable": best.variable, "value": best.value}


def teacher() -> BeliefPolicy:
    """The starting policy's teacher: belief UCB that repeats its previous call with probability `TEACHER_REPEAT`."""
    return BeliefPolicy(repeat=TEACHER_REPEAT)
