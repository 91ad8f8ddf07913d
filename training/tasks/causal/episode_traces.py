"""What an episode of the causal environment did, call by call (`CallTrace`) and as a whole (`EpisodeTrace`): the
episode's trace, read through `CausalEnv.trace`. (Called its record, `EpisodeRecord` and `StepRecord`, until "record"
was kept for the files that record how a run or a build was made.)

Every call is traced: the call, its validity, the text returned, the posterior entropy before and after, the
information gain (their difference), the target's sampled value and, for interventions, E[target | do] and the regret
after the call. Regret = optimum - best E[target | do] reached so far (mirrored for goal "min"), where the best starts
at E[target] without intervention and the result is clipped at 0. The EXPECTED value is used, not the noisy sampled
target: the policy controls which distribution it samples, not the noise, so rewarding the sample would reward luck
and make regret negative by chance; the expectation is exact for the linear family.

`EpisodeTrace.metrics` gives the episode's values of the logged metrics (`LOGGED_METRICS`): the `causal/*` metrics,
`surrogate/updates`, the calls accepted (`tools/valid_calls`) and refused by kind (`tools/refused/<kind>`); the
trainer logs their batch means (training/features/environment_metrics.py), and `health/no_valid_calls` reads the last
two.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from training.tasks.causal.scm.scm import SCM
from training.tasks.causal.structure_metrics import parent_f1
from training.tasks.causal.surrogates.surrogate import ParentPosterior

INVALID_KINDS = ("unknown_variable", "target_variable", "bad_value_type", "non_finite", "out_of_bounds",
                 "unknown_option", "budget_exceeded")
LOGGED_METRICS = ("causal/info_gain", "causal/posterior_entropy", "causal/regret", "causal/parent_f1",
                  "causal/invalid_calls", "surrogate/updates", "tools/valid_calls",
                  *(f"tools/refused/{kind}" for kind in INVALID_KINDS))  # `EpisodeTrace.metrics`, batch means


@dataclass
class CallTrace:
    tool: str
    arguments: dict
    valid: bool
    outcome: str
    error_kind: str | None = None
    entropy_before: float | None = None
    entropy_after: float | None = None
    info_gain: float = 0.0
    target_value: float | None = None  # the sampled target (mean of the rows for observe)
    expected_target: float | None = None  # E[target | do] (interventions only)
    regret: float | None = None  # after this call
    intervention: tuple[str, float] | None = None  # the checked do(variable = value); None for observe / refused
    rows: np.ndarray | None = None  # what the call sampled (valid calls)
    mask: np.ndarray | None = None  # which entries of `rows` were set by the intervention
    posterior_before: ParentPosterior | None = None  # valid calls, once the surrogate has seen `rows`
    posterior_after: ParentPosterior | None = None
    call_index: int | None = None  # valid calls before this one: keys its lookahead, shared by a GRPO group
    expected_info_gain: float | None = None  # the entropy drop the posterior expects of this call (`lookahead.look_ahead`)
    teacher_call: tuple[str, float] | None = None  # the options' last entry (the teacher's choice) when the call
    # was made; None: the effects were unknown (the teacher observes there)
    one_step_call: tuple[str, float] | None = None  # the one-step rule's choice then (never shown); None: unknown

    @property
    def follows_teacher(self) -> bool:
        """Whether the call is the teacher's (`policies.belief_line.TeacherPolicy`): the last option's setting, or
        observe where the effects were unknown."""
        return self._is(self.teacher_call)

    @property
    def follows_one_step(self) -> bool:
        """Whether the call is the one-step rule's (`policies.belief_line.OneStepPolicy`, the `belief_line` baseline)."""
        return self._is(self.one_step_call)

    def _is(self, call: tuple[str, float] | None) -> bool:
        if call is None:
            return self.tool == "observe"
        return self.intervention is not None and self.intervention[0] == call[0] and round(
            self.intervention[1], 1) == call[1]


@dataclass
class EpisodeTrace:
    scm: SCM
    budget: int
    initial_entropy: float
    initial_expected: float  # E[target] without intervention, where "best so far" starts
    optimum: float
    steps: list[CallTrace] = field(default_factory=list)
    invalid: Counter = field(default_factory=Counter)
    final_posterior: ParentPosterior | None = None
    initial_posterior: ParentPosterior | None = None  # after reset's observational rows
    surrogate_updates: int = 0
    reset_text: str = ""  # what reset returned (appended to the prompt)

    @property
    def used(self) -> int:
        return sum(s.valid for s in self.steps)

    @property
    def interventions(self) -> list[tuple[str, float]]:
        """The episode's accepted interventions, do(variable = value), in order."""
        return [s.intervention for s in self.steps if s.valid and s.intervention is not None]

    @property
    def best_expected(self) -> float:
        vals = [s.expected_target for s in self.steps if s.valid and s.expected_target is not None]
        best = self.initial_expected
        for v in vals:
            if self.scm.better(v, best):
                best = v
        return best

    @property
    def regret(self) -> float:
        gap = self.optimum - self.best_expected if self.scm.goal == "max" else self.best_expected - self.optimum
        return max(0.0, gap)

    @property
    def info_gain(self) -> float:
        return float(sum(s.info_gain for s in self.steps if s.valid))

    def agreement(self, rule: str) -> float | None:
        """The share of valid calls that made `rule`'s choice ("teacher" or "one_step"); None without valid calls."""
        valid = [s for s in self.steps if s.valid]
        return sum(getattr(s, f"follows_{rule}") for s in valid) / len(valid) if valid else None

    @property
    def final_entropy(self) -> float:
        valid = [s for s in self.steps if s.valid]
        return valid[-1].entropy_after if valid else self.initial_entropy

    @property
    def parent_f1(self) -> float:
        if self.final_posterior is None:
            raise ValueError("parent_f1: the episode has no posterior")
        return parent_f1(self.final_posterior.map_set(), self.scm.parents())

    def metrics(self) -> dict[str, float]:
        """This episode's values of the logged metrics (`LOGGED_METRICS`, in the metric contract): the causal ones,
        the calls accepted and the calls refused by kind (what `health/no_valid_calls` names)."""
        values = (self.info_gain, self.final_entropy, self.regret, self.parent_f1, float(sum(self.invalid.values())),
                  float(self.surrogate_updates), float(self.used), *(float(self.invalid[k]) for k in INVALID_KINDS))
        return dict(zip(LOGGED_METRICS, values, strict=True))


