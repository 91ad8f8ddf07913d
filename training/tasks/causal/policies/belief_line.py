"""Two rules that read the options the environment's last reply showed (`CausalEnv.belief`, the same object whose
`line()` the model read):

* `belief_line` (`OneStepPolicy`): the option of largest one-step expected reward under the posterior (expected
  improvement, expected information gain and a new exploration cell, weighed by the reward's default weights;
  `training.tasks.causal.acquisition`): the one-step rule. The policy is shown the terms, never this choice, so
  matching or beating it is learnt, not copied.
* `teacher` (`TeacherPolicy`): the option listed last, the largest expected information gain: a plausible rule (learn
  the graph, the optimum will follow) that reads the same evidence and leaves the target to chance. The starting
  policy imitates it (`training.tasks.causal.starting_policy`); GRPO's job is to surpass it, and the one-step rule.

Both call `choose(option=k)` with the option's number, as a policy that reads the reply does, and observe where the
options say the effects are unknown (the surrogate has no draws: too little data, or a surrogate without a posterior
over models), the call that makes them known.
"""

from __future__ import annotations

import numpy as np

from training.tasks.causal.policies.policy_registry import register_policy


def _shown(env):
    if env.belief is None:
        raise ValueError("the environment has shown no options yet (call reset first)")
    return env.belief


def _choose(belief, option) -> tuple[str, dict]:
    """`choose` the option by its number, as a policy reading the reply calls it; observe where none is shown."""
    if option is None:
        return "observe", {}
    return "choose", {"option": belief.number(option)}


@register_policy("belief_line", order=60)
class OneStepPolicy:
    name = "belief_line"

    def __call__(self, env, rng: np.random.Generator) -> tuple[str, dict]:
        belief = _shown(env)
        return _choose(belief, belief.best)


@register_policy("teacher", order=70)
class TeacherPolicy:
    """The rule; with `other_share` > 0, another listed option (uniformly) in that share of the calls that have one:
    how the starting policy's traces are played (`starting_policy.BuildSettings.other_option_share`), so that the
    student samples the options GRPO has to weigh instead of copying one deterministically. The baseline is the rule
    alone (0). `rule`: whose choice the traces make, "teacher" (the last option) or "one_step" (the one-step rule's,
    `Belief.best`): the imitation-ceiling build (`starting_policy.BuildSettings.imitated`), never the shipped one."""

    name = "teacher"

    def __init__(self, other_share: float = 0.0, rule: str = "teacher"):
        if not 0.0 <= other_share < 1.0:
            raise ValueError(f"other_share must be in [0, 1), got {other_share}")
        if rule not in IMITABLE_RULES:
            raise ValueError(f"rule must be one of {IMITABLE_RULES}, got {rule!r}")
        self.other_share = other_share
        self.rule = rule

    def __call__(self, env, rng: np.random.Generator) -> tuple[str, dict]:
        belief = _shown(env)
        choice = belief.teacher_choice if self.rule == "teacher" else belief.best
        if self.other_share and choice is not None and len(belief.options) > 1 and rng.random() < self.other_share:
            others = [o for o in belief.options if o is not choice]  # the teacher's: any but the last
            choice = others[int(rng.integers(len(others)))]
        return _choose(belief, choice)


IMITABLE_RULES = ("teacher", "one_step")  # `CallTrace.follows_<rule>` says whether a call made that rule's choice


def teacher(other_share: float = 0.0, rule: str = "teacher") -> TeacherPolicy:
    """The starting policy's teacher (`TeacherPolicy`)."""
    return TeacherPolicy(other_share, rule)
