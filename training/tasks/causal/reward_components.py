"""The four reward components of the causal job and their normalisation, as pure functions of one call.

A valid call is described by a `Step`: the SCM, the surrogate's parent-set posterior before and after it saw the
call's rows, the intervention do(X = v) (None for `observe`), the sampled outcome rows, the episode's earlier valid
calls, the budget and the call's expected information gain (measured by the environment's surrogate). Each
component maps a `Step` to a float; an episode's component reward is the sum over its valid calls
(`episode_rewards`), plus, for exploration only, a penalty per refused call. The recipe weighs them
(`reward_weights`, default optimization 1.0, structure 0.5, parent 0.3, exploration 0.1). With g(y) = y for the
goal "max" and g(y) = -y for "min":

* optimization: progress of the best expected target so far toward the optimum, as a share of the target's
  interventional span,

      r = (g(best_after) - g(best_before)) / (g(E_opt) - g(E_worst)),

  best_before = the best of E[target] (no intervention) and E[target | do] of the earlier calls; best_after also
  includes this call (so r >= 0, and a call that does not beat the best so far earns 0). E_opt / E_worst are the
  best / worst E[target | do(X_i = v)] over the non-target X_i and v in their ranges (`target_span`). An episode's
  sum is (g(best) - g(E[target])) / span in [0, 1], i.e. the share of the span its regret closed. Expected values,
  not the noisy samples, so luck earns nothing. Normalisation: an affine change of the target's units scales
  numerator and span alike; a rescaled intervened variable (its range rescaled with it) gives the same E[target]
  at the same position in its range; so r is unit-free. Linear family: E_opt and E_worst are exact (endpoints of
  the range, by the sign of the total effect). Nonlinear: E[target | do] is the common-random-numbers Monte-Carlo
  estimate (`SCM.expected_target`, 4096 draws), E_opt its grid + Brent optimum (`training.tasks.causal.scm.optimum`), E_worst
  its minimum over a `WORST_GRID`-point grid per variable (a normaliser, so grid accuracy suffices). A span below
  `MIN_SPAN` of the target's scale (nothing moves the target) gives r = 0.
* structure: the drop in the posterior entropy over the target's parent sets that the call is expected to buy, as
  a share of the largest possible entropy (uniform over the 2^(d-1) sets),

      r = (H(before) - mean_m H(before + rows_m)) / ((d - 1) log 2),

  rows_m being the call's rows as answered by `LOOKAHEAD_DRAWS` models drawn from the posterior before it (the
  posterior predictive: the expected information gain of Bayesian experimental design, which the greedy EIG
  expert maximises; `ExactSurrogate.expected_gain`). Not the realised drop H(before) - H(after): the policy
  chooses the call, not the noise of its one row, and the realised drop is mostly that noise
  (`benchmarks/structure_reward_signal.py`, docs/results/causal.md §6.1). An expected gain is >= 0 but for
  Monte-Carlo error.
  Its draws are keyed by (environment seed, call index), so a group's rollouts making the same call are credited
  alike. The g-prior scores depend on the data only through R^2 (`training.tasks.causal.surrogates.linear_scores`) and the draws are made
  in standardised units, so r does not change when a variable is rescaled. A frozen or no-op surrogate gains 0.
  Where the posterior cannot be sampled (the learned surrogate, or row `initial_samples` < 2) there is no expected
  gain, and structure raises.
* parent: the gain in the posterior's balanced marginal accuracy about the target's true parents Pa,

      A(P) = 1/2 mean_{j in Pa} P(j in Pa) + 1/2 mean_{j not in Pa, j != target} (1 - P(j in Pa)),   r = A(after) - A(before)

  (a half is dropped when its group is empty). A child or another non-parent believed to be a parent costs as much
  as a missed parent, so claiming every variable earns nothing. Probabilities, so unit-free, in [-1, 1].
* exploration: diversity of the calls. A call's cell is (variable, third of its range: low / mid / high) for an
  intervention, or the single cell `observe`; N = min(budget, 3 (d - 1) + 1). A call reaching a new cell earns
  1/N, a call to a cell already visited earns 0 (repetition cannot farm it), a refused call (invalid, or past the
  budget) costs 1/N. An episode's sum is at most 1. Positions within the range, so unit-free.

Refused calls sample nothing and change no posterior: they earn 0 in the first three components.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from training.tasks.causal.scm.optimum import find_optimum
from training.tasks.causal.scm.scm import SCM
from training.tasks.causal.surrogates.surrogate import ParentPosterior

COMPONENTS = ("optimization", "structure", "parent", "exploration")
DEFAULT_WEIGHTS = {"optimization": 1.0, "structure": 0.5, "parent": 0.3, "exploration": 0.1}
RANGE_BINS = 3  # low / mid / high third of a variable's range
WORST_GRID = 101
MIN_SPAN = 1e-9

Intervention = tuple[str, float] | None  # do(variable = value); None for observe


@dataclass(frozen=True)
class Step:
    """One valid call, all a component may look at."""

    scm: SCM
    before: ParentPosterior
    after: ParentPosterior
    intervention: Intervention
    outcome: np.ndarray  # the rows the call sampled (n, d)
    history: tuple[Intervention, ...]  # the episode's earlier valid calls, in order
    budget: int
    expected_gain: float | None  # nats: H(before) - E[H(after)] under the posterior predictive; None: unknown


# ---- normalisers ---------------------------------------------------------------------------------------------------
def _g(scm: SCM, y: float) -> float:
    return y if scm.goal == "max" else -y


def _worst(scm: SCM) -> float:
    """The worst E[target | do(X_i = v)]: exact for the linear family (an endpoint), else the grid's worst."""
    flipped = copy.copy(scm)
    flipped.goal = "min" if scm.goal == "max" else "max"
    flipped.__dict__.pop("_optimum", None)
    if scm.is_linear:
        return find_optimum(flipped).expected
    values = [float(y) for v in scm.actionable for y in scm.expected_targets(v, np.linspace(*scm.ranges[v],
                                                                                               WORST_GRID))]
    return float(min(values, key=lambda y: _g(scm, y)))


def target_span(scm: SCM) -> tuple[float, float]:
    """(E_opt, E_worst) of the target over single hard interventions; cached on the SCM object."""
    if "_target_span" not in scm.__dict__:
        scm.__dict__["_target_span"] = (scm.optimum().expected, _worst(scm))
    return scm.__dict__["_target_span"]


def baseline_expected(scm: SCM) -> float:
    """E[target] without intervention, where the best so far starts; cached on the SCM object."""
    if "_baseline_expected" not in scm.__dict__:
        scm.__dict__["_baseline_expected"] = scm.expected_target()
    return scm.__dict__["_baseline_expected"]


def best_so_far(scm: SCM, history: tuple[Intervention, ...]) -> float:
    best = baseline_expected(scm)
    for call in history:
        if call is not None:
            e = scm.expected_target({call[0]: call[1]})
            if scm.better(e, best):
                best = e
    return best


def cell(scm: SCM, intervention: Intervention) -> tuple[str, int | None]:
    """The exploration cell of a call: (variable, range third) or ("observe", None)."""
    if intervention is None:
        return "observe", None
    var, val = intervention
    lo, hi = scm.ranges[var]
    return var, min(int(RANGE_BINS * (val - lo) / (hi - lo)), RANGE_BINS - 1)


def exploration_unit(scm: SCM, budget: int) -> float:
    return 1.0 / min(budget, RANGE_BINS * len(scm.actionable) + 1)


def balanced_accuracy(posterior: ParentPosterior, scm: SCM) -> float:
    """A(P): the mean of (mean marginal of the true parents) and (mean 1 - marginal of the other candidates)."""
    return balanced_accuracy_of(posterior.marginals, scm.parents())


def balanced_accuracy_of(marginals: dict[str, float], truth) -> float:
    """A(P) of parent marginals against the parent set `truth` (the SCM's, or a posterior draw's)."""
    hits = [p for v, p in marginals.items() if v in truth]
    rejections = [1.0 - p for v, p in marginals.items() if v not in truth]
    halves = [float(np.mean(h)) for h in (hits, rejections) if h]
    return float(np.mean(halves)) if halves else 0.0


# ---- the four components -------------------------------------------------------------------------------------------
def optimization(step: Step) -> float:
    scm = step.scm
    if step.intervention is None:
        return 0.0
    opt, worst = target_span(scm)
    span = _g(scm, opt) - _g(scm, worst)
    if not span > MIN_SPAN * max(1.0, abs(opt), abs(worst)):
        return 0.0
    before = best_so_far(scm, step.history)
    after = best_so_far(scm, (*step.history, step.intervention))
    return (_g(scm, after) - _g(scm, before)) / span


def structure(step: Step) -> float:
    if step.expected_gain is None:
        raise ValueError(f"structure: the call {step.intervention or 'observe'} has no expected information gain: "
                         "it needs a posterior that can be sampled: the exact surrogate (make_causal_env('exact')) "
                         "and at least 2 observational rows per variable (row 'initial_samples' >= 2)")
    return step.expected_gain / ((step.scm.d - 1) * math.log(2.0))


def parent(step: Step) -> float:
    return balanced_accuracy(step.after, step.scm) - balanced_accuracy(step.before, step.scm)


def exploration(step: Step) -> float:
    seen = {cell(step.scm, c) for c in step.history}
    return 0.0 if cell(step.scm, step.intervention) in seen else exploration_unit(step.scm, step.budget)


STEP_COMPONENTS: dict[str, Callable[[Step], float]] = {"optimization": optimization, "structure": structure,
                                                        "parent": parent, "exploration": exploration}


def refused_call(name: str, scm: SCM, budget: int) -> float:
    """A refused call's value in component `name`: -1/N for exploration, 0 elsewhere (it changed nothing)."""
    return -exploration_unit(scm, budget) if name == "exploration" else 0.0


# ---- episodes ------------------------------------------------------------------------------------------------------
def episode_steps(record) -> list[Step | None]:
    """A `Step` per call of an `EpisodeTrace` (read through `CausalEnv.trace`, so posteriors are settled); None
    for a refused call."""
    out, history = [], []
    for s in record.steps:
        if not s.valid:
            out.append(None)
            continue
        if s.posterior_after is None or s.posterior_before is None:
            raise ValueError(f"step {len(out)} ({s.tool} {s.arguments}) has no posterior yet: read the record "
                             "through CausalEnv.trace, which applies the queued surrogate updates")
        out.append(Step(record.scm, s.posterior_before, s.posterior_after, s.intervention, s.rows, tuple(history),
                        record.budget, s.expected_info_gain))
        history.append(s.intervention)
    return out


def step_rewards(record) -> list[dict[str, float]]:
    """Every component's value for every call of the episode, in order. Computed once per finished episode (the
    reward functions, the per-call credit and the records all ask; a nonlinear SCM's optimization term is a
    Monte-Carlo estimate per call) and kept on the record, keyed by its number of calls (refused ones are steps too),
    so a record that grew since is scored again."""
    cached = getattr(record, "_step_rewards", None)
    if cached is None or cached[0] != len(record.steps):
        per_step = [
            {name: (fn(step) if step is not None else refused_call(name, record.scm, record.budget))
             for name, fn in STEP_COMPONENTS.items()}
            for step in episode_steps(record)
        ]
        cached = record._step_rewards = (len(record.steps), per_step)
    return [dict(terms) for terms in cached[1]]


def episode_rewards(record) -> dict[str, float]:
    """The episode's reward per component: the sum over its calls (0 for an episode without calls)."""
    per_step = step_rewards(record)
    return {name: float(sum(r[name] for r in per_step)) for name in COMPONENTS}


def weighted_reward(components: dict[str, float], weights: dict[str, float] | None = None) -> float:
    weights = DEFAULT_WEIGHTS if weights is None else weights
    return float(sum(weights[name] * components[name] for name in COMPONENTS))
