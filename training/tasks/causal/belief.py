"""The surrogate's belief as the policy reads it: per settable variable, P(parent of the target) and what the
posterior expects of the target when that variable is set as the line recommends, with the uncertainty; the
variables ranked by what that call is expected to earn.

`Belief.of(surrogate, scm, rng, budget=..., made=...)` reads the surrogate's current posterior, given the episode's
budget and its interventions so far:

* `parent`: P(X ∈ Pa(target)), the posterior's marginal (`ParentPosterior.marginals`).
* For each settable variable X, candidate values x on a grid over its range (the two ends under a linear
  surrogate, whose E[target | do(X = x)] is affine in x under every draw, so an end is best; `NONLINEAR_GRID`
  values otherwise), `BELIEF_DRAWS` models from the surrogate's `posterior_models` and per draw m the expectation
  E_m(X, x) = E[target | do(X = x)] (`draw_expectations`). Each candidate's score is the reward the call is
  expected to earn under those draws (`training.tasks.causal.acquisition.call_scores`: expected improvement of the
  best E[target | do] reached, expected information gain, a new exploration cell). `value` is X's best-scoring x,
  `expected` the posterior mean of E_m(X, value), `sd` its standard deviation over the draws (the posterior's
  uncertainty about the effect, not the noise of a single sample).
* Entries are ordered by score, the best LAST, the call a one-step-greedy player would make right before the
  model's turn. Last rather than first so that the model's call copies tokens a fixed distance back (each name and
  number is one token) rather than a distance that grows with the number of variables. The teacher follows that
  rule on this very line (`training.tasks.causal.policies.belief_line`), so what it does is a function of what the
  policy sees. A setting already made expects no improvement and no new cell, so the line rarely offers it again.

Where the surrogate cannot draw models (it has none, as the no-op and learned surrogates; or fewer than 2
non-intervened rows for some node, as a frozen surrogate that never saw data) the effects are unknown: the line
gives the marginals only and says so. Nothing is made up.

`Belief.line()` is the compact text appended to reset's text and to every valid tool reply (one decimal; the value
written as a tool call's JSON writes it, `3.0`; a variable name and a number are one token each for the causal
tokenizer), e.g.
    Belief, best last: X3=3.0 Y 0.1±0.2 parent 0.1; X1=-3.0 Y 0.5±0.9 parent 0.3; X2=3.0 Y 2.1±0.4 parent 0.8.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from training.tasks.causal.acquisition import call_scores
from training.tasks.causal.scm.scm import SCM
from training.tasks.causal.surrogates.exact_surrogate import LinearModel

BELIEF_DRAWS = 16
BELIEF_SEED_KEY = 0xBE11EF  # separates the belief's generator from the episode's and the lookahead's
NONLINEAR_GRID = 9
NOISE_SAMPLES = 64  # per expectation under a nonlinear draw


def draw_expectations(model, target: int, variables: np.ndarray, values: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """E[target | do(variables[i] = values[i])] under one posterior draw, per i; variable index -1 means no
    intervention. `noise` (K, d): shared standard-normal noise vectors, used only by a nonlinear draw (a linear
    draw's target is linear in the noise, so its expectation is the noise-free propagation, exact)."""
    if isinstance(model, LinearModel):
        return model.simulate_each(variables, values, np.zeros(len(model.order)))[:, target]
    return np.mean([model.simulate_each(variables, values, eps)[:, target] for eps in noise], axis=0)


@dataclass(frozen=True)
class VariableBelief:
    variable: str
    parent: float  # P(variable ∈ Pa(target))
    value: float | None = None  # the best setting under the posterior mean (None: effects unknown)
    expected: float | None = None  # posterior mean of E[target | do(variable = value)]
    sd: float | None = None  # posterior sd of E[target | do(variable = value)]
    score: float | None = None  # the call's expected reward (`acquisition.call_scores`), what the line ranks by


@dataclass(frozen=True)
class Belief:
    target: str
    goal: str
    entries: tuple[VariableBelief, ...]  # best last (see module docstring)

    @property
    def best(self) -> VariableBelief:
        return self.entries[-1]

    @property
    def known(self) -> bool:
        return bool(self.entries) and self.entries[-1].expected is not None

    def line(self) -> str:
        if not self.known:
            parts = "; ".join(f"{e.variable} parent {e.parent:.1f}" for e in self.entries)
            return f"Belief (effects unknown): {parts}."
        parts = "; ".join(f"{e.variable}={e.value!r} {self.target} {e.expected:.1f}±{e.sd:.1f} parent {e.parent:.1f}"
                          for e in self.entries)
        return f"Belief, best last: {parts}."

    @classmethod
    def of(cls, surrogate, scm: SCM, rng: np.random.Generator, *, budget: int,
           made: tuple[tuple[str, float], ...] = (), draws: int = BELIEF_DRAWS) -> Belief:
        """The belief after the episode's valid interventions `made` (in order) with `budget` calls in all."""
        marginals = surrogate.posterior().marginals
        settable = list(scm.actionable)
        models = _models(surrogate, draws, rng)
        if models is None:
            entries = sorted((VariableBelief(v, marginals[v]) for v in settable), key=lambda e: e.parent)
            return cls(scm.target, scm.goal, tuple(entries))
        linear = all(isinstance(m, LinearModel) for m in models)
        grid = 2 if linear else NONLINEAR_GRID
        index = np.repeat([scm.index[v] for v in settable], grid)
        values = np.concatenate([np.round(np.linspace(*scm.ranges[v], grid), 1) for v in settable])
        reached_index = np.array([-1, *(scm.index[v] for v, _ in made)])  # -1: no intervention
        reached_values = np.array([0.0, *(x for _, x in made)])
        noise = rng.standard_normal((NOISE_SAMPLES, scm.d))
        t = scm.index[scm.target]
        e = np.stack([draw_expectations(m, t, np.concatenate([index, reached_index]),
                                        np.concatenate([values, reached_values]), noise) for m in models])
        sign = 1.0 if scm.goal == "max" else -1.0
        e_cand = e[:, :len(index)]
        scores = call_scores(surrogate, scm, index, values, sign * e_cand, sign * e[:, len(index):], models, made,
                             budget, rng).score
        mean, sd = e_cand.mean(axis=0), e_cand.std(axis=0)
        entries = []
        for k, v in enumerate(settable):
            cols = np.arange(k * grid, (k + 1) * grid)
            best = int(cols[np.argmax(scores[cols])])
            entries.append(VariableBelief(v, marginals[v], float(values[best]), float(mean[best]), float(sd[best]),
                                          float(scores[best])))
        entries.sort(key=lambda b: b.score)
        return cls(scm.target, scm.goal, tuple(entries))


def _models(surrogate, draws: int, rng: np.random.Generator):
    """The surrogate's posterior draws, or None where it has none to give (see module docstring)."""
    if not hasattr(surrogate, "posterior_models"):
        return None
    # rows per node that a draw could be fitted on: the additive surrogate's `counts`, the exact one's statistics
    counts = surrogate.counts if hasattr(surrogate, "counts") else surrogate.stats.count
    if np.any(np.asarray(counts) < 2):
        return None
    return surrogate.posterior_models(draws, rng)


def belief_rng(seed: int, updates: int) -> np.random.Generator:
    """The belief's generator after `updates` surrogate updates of the episode seeded `seed`: the same history gives
    the same line (a GRPO group's rollouts making the same calls see the same belief), and a surrogate that never
    updates (frozen) shows the same line at every call."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), int(updates), BELIEF_SEED_KEY]))
