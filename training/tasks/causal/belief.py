"""The surrogate's belief as the policy reads it: per candidate call, the evidence the reward pays for, and nothing
that weighs it.

`Belief.of(surrogate, scm, rng, budget=..., made=...)` reads the surrogate's current posterior, given the episode's
budget and its interventions so far. Candidates: every settable variable X at values x on a grid over its range (the
two ends under a linear surrogate, whose E[target | do(X = x)] is affine in x under every draw, so an end is where
improvement lies; `NONLINEAR_GRID` values otherwise), each rounded to one decimal inside the range. For each
candidate, under `BELIEF_DRAWS` posterior draws (`training.tasks.causal.acquisition.call_scores`):

* `gain`: the expected improvement of the best E[target | do] reached, as a share of the draw's span (what the
  optimization reward pays; exactly 0 for a setting already made);
* `info`: the expected drop of the parent-set entropy, as a share of the structure reward's unit (d - 1) ln 2 (what
  the structure reward pays);
* `new`: whether the call reaches an exploration cell the episode has not visited (what the exploration reward pays);
* `parent`: P(X ∈ Pa(target)), the posterior's marginal (what the parent reward is scored against).

What the policy reads (`line()`) are the options: the candidates no other candidate beats on all three of gain, info
and new (the Pareto front; a call dominated on every term the reward pays is no option for any weighing of them),
listed by information gain, the largest last, ties in the SCM's order of variables, numbered from 1: the policy calls
`choose(option=k)` (`CausalEnv.choose`), one number token, whatever the SCM calls its variables. The gain and info are shown as whole
percentages, `parent` with one decimal, each number one token for the causal tokenizer; the calls left are in the
reply before it. Not shown: the weighted sum of the terms, and which option it ranks first. Weighing improvement now
against information for later, with the budget left in view, is the policy's to learn from the reward.

* `best`: the option of largest one-step expected reward (`acquisition.call_scores`, the reward's default weights):
  the one-step rule, played by the `belief_line` baseline and recorded for every call (`CallTrace.one_step`),
  never shown.
* `teacher_choice`: the last option, the largest expected information gain (the largest gain where the surrogate
  gives no info): the starting policy's teacher (`training.tasks.causal.policies.belief_line.teacher`), a rule that
  reads the same evidence and chases information only.

Where the surrogate cannot draw models (it has none, as the no-op surrogate; or fewer than 2 non-intervened rows for
some node, as an episode with too few initial samples) the effects are unknown: the line gives the marginals only
and says so, and the teacher observes. Nothing is made up.

Example (one decimal for values as a tool call's JSON writes them, `3.0`):
    Options:
    1: X2=-3.0 gain 0 info 2 new parent 0.4
    2: X1=3.0 gain 3 info 5 new parent 0.2
    3: X3=3.0 gain 41 info 9 seen parent 0.9
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from training.evaluation.pairing_seeds import BELIEF_SEED_KEY, generator
from training.tasks.causal.acquisition import call_scores
from training.tasks.causal.scm.scm import SCM
from training.tasks.causal.surrogates.exact_surrogate import LinearModel

BELIEF_DRAWS = 16
# Values per variable of the options and of the greedy-EIG baseline: near an interior optimum (CBO toy: Z = -3.0 is
# 0.02 from it; at 9 values the best option was 0.75 away, and every rule reading the options scored as random).
NONLINEAR_GRID = 26
NOISE_SAMPLES = 64  # per expectation under a nonlinear draw


def draw_expectations(model, target: int, variables: np.ndarray, values: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """E[target | do(variables[i] = values[i])] under one posterior draw, per i; variable index -1 means no
    intervention. `noise` (K, d): shared standard-normal noise vectors, used only by a nonlinear draw (a linear
    draw's target is linear in the noise, so its expectation is the noise-free propagation, exact)."""
    if isinstance(model, LinearModel):
        return model.simulate_each(variables, values, np.zeros(len(model.order)))[:, target]
    if hasattr(model, "expected_targets"):  # the additive draws: the target's ancestors only
        return model.expected_targets(target, variables, values, noise)
    if not getattr(model, "per_row_noise", False):
        return np.mean([model.simulate_each(variables, values, eps)[:, target] for eps in noise], axis=0)
    n = len(variables)  # every noise vector's rows in one call
    rows = model.simulate_each(np.tile(variables, len(noise)), np.tile(values, len(noise)), np.repeat(noise, n, axis=0))
    return rows[:, target].reshape(len(noise), n).mean(axis=0)


def grid_values(lo: float, hi: float, points: int) -> np.ndarray:
    """`points` values over [lo, hi], ends included, at one decimal and inside the range (the ends rounded inward)."""
    lo_in, hi_in = math.ceil(round(lo * 10, 9)) / 10, math.floor(round(hi * 10, 9)) / 10
    if lo_in > hi_in:  # a range narrower than one decimal: its own ends
        return np.array([lo, hi])
    return np.unique(np.clip(np.round(np.linspace(lo, hi, points), 1), lo_in, hi_in))


def pareto_front(terms: np.ndarray) -> np.ndarray:
    """Which rows of `terms` (n, k) no other row weakly beats in every column and strictly in one."""
    at_least = (terms[None, :, :] >= terms[:, None, :]).all(axis=2)  # [i, j]: j >= i everywhere
    better = (terms[None, :, :] > terms[:, None, :]).any(axis=2)
    return ~(at_least & better).any(axis=1)


@dataclass(frozen=True)
class Option:
    variable: str
    parent: float  # P(variable ∈ Pa(target))
    value: float | None = None  # None: effects unknown (no draws)
    gain: float | None = None  # expected improvement, a share of the span
    info: float | None = None  # expected information gain, a share of (d - 1) ln 2; None: no lookahead
    new: bool | None = None  # reaches an exploration cell not visited yet
    score: float | None = None  # one-step expected reward (`acquisition.call_scores`): never shown

    @property
    def call(self) -> tuple[str, float]:
        return self.variable, self.value

    def text(self) -> str:
        if self.value is None:
            return f"{self.variable} parent {self.parent:.1f}"
        info = "" if self.info is None else f" info {round(100 * self.info)}"
        return (f"{self.variable}={self.value!r} gain {round(100 * self.gain)}{info} "
                f"{'new' if self.new else 'seen'} parent {self.parent:.1f}")

    def line(self, number: int) -> str:
        """The option as listed: its number (what `CausalEnv.choose` takes), then `text`."""
        return f"{number}: {self.text()}" if self.value is not None else self.text()


@dataclass(frozen=True)
class Belief:
    target: str
    goal: str
    options: tuple[Option, ...]  # shown, in order (see module docstring)
    best: Option | None = None  # the one-step rule's choice; None: effects unknown
    candidates: tuple[Option, ...] = ()  # every scored candidate, shown or not (what a planner searches)

    @property
    def known(self) -> bool:
        return self.best is not None

    @property
    def teacher_choice(self) -> Option | None:
        """The option listed last: the largest expected information gain (the largest gain where the surrogate gives
        no info); None where the effects are unknown."""
        return self.options[-1] if self.known else None

    def number(self, option: Option) -> int:
        """The number an option is listed under (`choose(option=...)`)."""
        return self.options.index(option) + 1

    def line(self) -> str:
        """The options, one a line, numbered from 1 (the number is what `CausalEnv.choose` takes)."""
        head = "Options:" if self.known else "Options (effects unknown):"
        return "\n".join([head, *(o.line(k) for k, o in enumerate(self.options, start=1))])

    @classmethod
    def of(cls, surrogate, scm: SCM, rng: np.random.Generator, *, budget: int,
           made: tuple[tuple[str, float], ...] = (), draws: int = BELIEF_DRAWS) -> Belief:
        """The belief after the episode's valid interventions `made` (in order) with `budget` calls in all."""
        marginals = surrogate.posterior().marginals
        settable = list(scm.actionable)
        models = _models(surrogate, draws, rng)
        if models is None:
            return cls(scm.target, scm.goal, tuple(Option(v, marginals[v]) for v in settable))
        grid = 2 if all(isinstance(m, LinearModel) for m in models) else NONLINEAR_GRID
        per_variable = [grid_values(*scm.ranges[v], grid) for v in settable]
        index = np.concatenate([[scm.index[v]] * len(vals) for v, vals in zip(settable, per_variable)]).astype(int)
        values = np.concatenate(per_variable)
        reached_index = np.array([-1, *(scm.index[v] for v, _ in made)])  # -1: no intervention
        reached_values = np.array([0.0, *(x for _, x in made)])
        noise = rng.standard_normal((NOISE_SAMPLES, scm.d))
        t = scm.index[scm.target]
        e = np.stack([draw_expectations(m, t, np.concatenate([index, reached_index]),
                                        np.concatenate([values, reached_values]), noise) for m in models])
        sign = 1.0 if scm.goal == "max" else -1.0
        terms = call_scores(surrogate, scm, index, values, sign * e[:, :len(index)], sign * e[:, len(index):], models,
                            made, budget, rng)
        info = None if terms.gains is None else terms.gains / ((scm.d - 1) * math.log(2.0))
        candidates = [Option(scm.variables[i], marginals[scm.variables[i]], float(x), float(terms.improvement[k]),
                             None if info is None else float(info[k]), bool(terms.novel[k]), float(terms.score[k]))
                      for k, (i, x) in enumerate(zip(index, values))]
        columns = [terms.improvement, terms.novel] + ([] if info is None else [info])
        front = np.flatnonzero(pareto_front(np.stack(columns, axis=1)))
        order = terms.improvement if info is None else info
        shown = sorted(front, key=lambda k: (order[k], k))  # stable: ties in the SCM's order
        best = candidates[int(np.argmax(terms.score))]
        return cls(scm.target, scm.goal, tuple(candidates[k] for k in shown), best, tuple(candidates))


def _models(surrogate, draws: int, rng: np.random.Generator):
    """The surrogate's posterior draws, or None where it has none to give (see module docstring)."""
    if not hasattr(surrogate, "posterior_models"):
        return None
    # rows per node that a draw could be fitted on: the additive surrogate's `counts`, the exact one's statistics
    counts = surrogate.counts if hasattr(surrogate, "counts") else surrogate.stats.count
    if np.any(np.asarray(counts) < 2):
        return None
    return surrogate.posterior_models(draws, rng)


def shown_choices(belief: Belief | None) -> dict:
    """What the teacher and the one-step rule choose from the options `belief` shows (None where the effects are
    unknown), recorded with the call that answers them."""
    if belief is None or not belief.known:
        return {"teacher_call": None, "one_step_call": None}
    return {"teacher_call": belief.teacher_choice.call, "one_step_call": belief.best.call}


def belief_rng(seed: int, updates: int) -> np.random.Generator:
    """The belief's generator after `updates` surrogate updates of the episode whose environment seed is `seed`: the
    same history gives the same line (a GRPO group's rollouts making the same calls see the same belief), and a
    surrogate frozen after the initial rows shows the same options at every call."""
    return generator(seed, updates, BELIEF_SEED_KEY)
