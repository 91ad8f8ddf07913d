"""What one call is expected to earn under the surrogate's posterior: the score the belief line ranks by.

For a candidate do(X = x), with M posterior draws (models) m and g(y) = y for the goal "max", -y for "min":

    score(X, x) = w_opt * EI(X, x) + w_str * EIG(X, x) / ((d - 1) ln 2) + w_exp * new_cell(X, x) / N

* EI: mean over the draws of max(0, g(E_m[target | do(X = x)]) - g(best_m)) / span_m, where best_m is draw m's best
  E[target | do] over the episode's interventions so far and no intervention at all, and span_m is draw m's spread
  of E[target | do] over all candidates. The optimization reward's own definition (progress of the best expected
  target, as a share of the span) with the unknown SCM replaced by each draw. A setting already made is among the
  incumbents, so it improves on nothing: its EI is set to exactly 0 (`made_settings`), not left to the rounding of
  two separately computed expectations, which differs between BLAS kernels (3.6e-18 on AVX-512, 0 on AVX2).
* EIG: the expected drop in the parent-set posterior's entropy (nats) if the call were made, each candidate's row
  as answered by `GAIN_DRAWS` of the draws: the structure reward's definition, normalised as it is.
* new_cell: 1 if the call reaches an exploration cell (variable, third of its range) the episode has not visited;
  N = min(budget, 3 (d - 1) + 1): the exploration reward's definition.

The weights are the reward's default weights (`reward_components.DEFAULT_WEIGHTS`); the parent component has no
term (it is scored against the true parents, which no draw knows; the information gain is its proxy). The score is
therefore the expected one-call reward of a one-step-greedy player: the rule MetaBO's learned acquisition function
is compared against, here written into the text the policy reads, so that imitating it is copying and doing better
than it is GRPO's to learn. A surrogate without a batched lookahead (`what_if_many`: the learned one) has no EIG
term: `call_scores` says so by returning `gains=None`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from training.tasks.causal.reward_components import DEFAULT_WEIGHTS, cell, exploration_unit
from training.tasks.causal.scm.scm import SCM

GAIN_DRAWS = 8  # draws that answer each candidate in the information-gain lookahead (greedy EIG's default)


@dataclass(frozen=True)
class CallScores:
    score: np.ndarray  # per candidate
    improvement: np.ndarray  # EI, a share of the span
    gains: np.ndarray | None  # EIG in nats; None: the surrogate has no batched lookahead
    novel: np.ndarray  # 1.0 where the candidate reaches a new exploration cell


def information_gains(surrogate, index: np.ndarray, values: np.ndarray, models: list,
                      rng: np.random.Generator) -> np.ndarray | None:
    """Expected entropy drop (nats) of each candidate do(X_index[i] = values[i]), one row per call, answered by
    `models` with common random numbers; None where the surrogate has no `what_if_many`."""
    if not hasattr(surrogate, "what_if_many"):
        return None
    eps = rng.standard_normal((len(models), surrogate.d))
    rows = np.stack([m.simulate_each(index, values, eps[k]) for k, m in enumerate(models)], axis=1)
    mask = np.zeros((len(index), len(models), surrogate.d), dtype=bool)
    mask[np.arange(len(index)), :, index] = True
    after = surrogate.what_if_rows(rows.reshape(-1, surrogate.d), mask.reshape(-1, surrogate.d))
    after = after.reshape(len(index), len(models))
    return surrogate.entropy() - after.mean(axis=1)


def expected_improvements(candidates: np.ndarray, incumbents: np.ndarray,
                          made: np.ndarray | None = None) -> np.ndarray:
    """`candidates` (draws, n) and `incumbents` (draws, k >= 1): g(E_m[target | do]) of each candidate and of what
    the episode has reached (no intervention first). Mean over the draws of the improvement as a share of the draw's
    span over the candidates; exactly 0 where `made` (n, bool) marks a candidate the episode has already set."""
    best = incumbents.max(axis=1, keepdims=True)
    span = candidates.max(axis=1, keepdims=True) - candidates.min(axis=1, keepdims=True)
    gain = np.maximum(candidates - best, 0.0)
    improvement = np.divide(gain, span, out=np.zeros_like(gain), where=span > 0).mean(axis=0)
    if made is not None:
        improvement[made] = 0.0
    return improvement


def made_settings(scm: SCM, index: np.ndarray, values: np.ndarray, made) -> np.ndarray:
    """Which candidates do(X_index[i] = values[i]) the episode has already made (`made`: (variable, value) pairs)."""
    done = {(scm.index[v], float(x)) for v, x in made}
    return np.array([(int(i), float(x)) in done for i, x in zip(index, values)], dtype=bool)


def new_cells(scm: SCM, index: np.ndarray, values: np.ndarray, made) -> np.ndarray:
    seen = {cell(scm, call) for call in made}
    return np.array([float(cell(scm, (scm.variables[i], float(x))) not in seen) for i, x in zip(index, values)])


def call_scores(surrogate, scm: SCM, index: np.ndarray, values: np.ndarray, candidates: np.ndarray,
                incumbents: np.ndarray, models: list, made, budget: int, rng: np.random.Generator) -> CallScores:
    """The score of every candidate (see the module docstring); `candidates`/`incumbents` as in
    `expected_improvements`, computed by the caller from the same `models`."""
    improvement = expected_improvements(candidates, incumbents, made_settings(scm, index, values, made))
    gains = information_gains(surrogate, index, values, models[:GAIN_DRAWS], rng)
    novel = new_cells(scm, index, values, made)
    score = DEFAULT_WEIGHTS["optimization"] * improvement + DEFAULT_WEIGHTS["exploration"] * novel * \
        exploration_unit(scm, budget)
    if gains is not None:
        score = score + DEFAULT_WEIGHTS["structure"] * gains / ((scm.d - 1) * math.log(2.0))
    return CallScores(score, improvement, gains, novel)
