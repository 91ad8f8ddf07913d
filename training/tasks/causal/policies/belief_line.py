"""The policy that acts on the belief line it is shown: the starting policy's teacher and a scripted baseline.

`BeliefPolicy` reads the belief the environment's last reply showed (`CausalEnv.belief`, the same object whose
`line()` the model read) and sets the last variable listed, at the value the line gives for it: the call with the
largest expected reward under the posterior (expected improvement of the best E[target | do], expected information
gain, a new exploration cell; `training.tasks.causal.acquisition`), a one-step-greedy rule. Where the line says the
effects are unknown (the surrogate has no draws: too little data, or a surrogate without a posterior over models) it
observes, which is the call that makes them known. Its choice is a function of the text alone, so a model that
imitates it learns to read the line. Registered as the `belief_line` baseline.

`repeat` and `stop` make the flawed teacher of the starting policy (`teacher`): before each call after the first,
with probability `repeat` (`TEACHER_REPEAT`) it repeats its previous call to "confirm" it; and once it has made
`STOP_AFTER` calls, before each further call, with probability `stop` (`TEACHER_STOP`) it ends the episode (the call
is None: the episode's player answers the final answer instead of calling), leaving budget unused. The first is the
trait an earlier expert showed (53% of its decisions repeated its previous call); the second is an impatient
scientist's, put in on purpose. Both cost reward: a repeated call moves neither the best E[target | do] reached nor
the exploration cells, and an unused call earns nothing (docs/causal.md, "Measured", gives the cost). A policy can
drop both by reading its own previous calls and the line. The starting policy imitates this teacher; GRPO's job is
to surpass it. Registered as the `teacher` baseline.
"""

from __future__ import annotations

import numpy as np

from training.tasks.causal.policies.policy_registry import register_policy

TEACHER_REPEAT = 0.4  # the teacher's chance of repeating its previous call (the bundled traces depend on it)
TEACHER_STOP = 0.15  # its chance of stopping before each call once it made STOP_AFTER (the traces depend on it)
STOP_AFTER = 2


@register_policy("belief_line", order=60)
class BeliefPolicy:
    name = "belief_line"

    def __init__(self, repeat: float = 0.0, stop: float = 0.0):
        for name, value in (("repeat", repeat), ("stop", stop)):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name}: must be in [0, 1], got {value}")
        self.repeat, self.stop = repeat, stop

    def __call__(self, env, rng: np.random.Generator) -> tuple[str, dict] | None:
        belief = env.belief
        if belief is None:
            raise ValueError("BeliefPolicy: the environment has shown no belief yet (call reset first)")
        made = [s for s in env.record.steps if s.valid]
        if self.stop > 0 and len(made) >= STOP_AFTER and rng.random() < self.stop:
            return None
        if self.repeat > 0 and made and rng.random() < self.repeat:
            return made[-1].tool, dict(made[-1].arguments)
        if not belief.known:
            return "observe", {}
        best = belief.best
        return "intervene", {"variable": best.variable, "value": best.value}


@register_policy("teacher", order=70)
def teacher() -> BeliefPolicy:
    """The starting policy's teacher: the line follower that repeats its previous call with probability `TEACHER_REPEAT`
    and, after `STOP_AFTER` calls, stops with probability `TEACHER_STOP` before each call."""
    return BeliefPolicy(repeat=TEACHER_REPEAT, stop=TEACHER_STOP)
