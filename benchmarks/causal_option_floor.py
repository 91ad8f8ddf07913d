"""The arithmetic a causal call's lookahead needs, from the sizes alone, and the rate it could run at here: the floor
`causal_option_cost` compares its seconds a call against.

Flop model (one flop per add, multiply, divide, sqrt, exp or log; gathers and copies free). A call scores
`datasets_per_call` data sets: the options' lookahead (every candidate answered by `acquisition.GAIN_DRAWS` draws),
the structure reward's (`lookahead.LOOKAHEAD_DRAWS` answers), the update and the standardised copy. Per data set of d
variables with in-degree bound k (`subsets.parent_bound`), where n_j = d C(d - 1, j) node/parent-set pairs have j
parents:

* linear scores: sum_j n_j (j^3 / 3 + 2 j^2 + 12): the Cholesky factor, the forward solve and R^2, the Bayes factor;
* additive scores (`additive_nested`: each set's factor from its prefix's and its sibling's), F = 5 atoms a parent,
  for the d - 1 nodes a data set's row moves (the intervened one keeps its scores): per set of j parents
  2 F^3 (j - 2) + 8 F^3 / 3 + 4 F^2 + 12 (j >= 2: the sibling's block product, N^-1 times it, the Schur
  complement, the F x F factor and its inverse, r and z, the score) and 2 F^3 / 3 + 4 F^2 + 12 at j = 1; plus the
  node's scaled Gram, 4 (d F)^2;
* the DP over the 2^(d - 1) sets without each node (`linear_dp`), for the d - 1 nodes other than the target:
  subset sums (d - 1)^2 2^(d - 2), order sums (L without the target, R with it, a multiply and an add a term)
  4 (d - 1) 2^(d - 2), the superset sum and its products (d + 1) 2^(d - 2), and one exp a score and one log a set.

The rate is measured, not assumed: float64 adds a CPU second (process time: a shared machine's waits left out) of
numpy's in-place `a += b` on arrays that stay in L2 cache (256 KiB each), one thread: the speed of the elementwise
operations the fast paths are made of. So the floor is what the lookahead's arithmetic would cost at numpy's best on
this core; what it leaves out (sampling the SCM, the draws' expectations, Python) is part of what the ratio
measures.
"""

from __future__ import annotations

import time
from math import comb

import numpy as np

from training.tasks.causal.acquisition import GAIN_DRAWS
from training.tasks.causal.lookahead import LOOKAHEAD_DRAWS
from training.tasks.causal.surrogates.additive_scores import FEATURES


def score_flops(d: int, max_parents: int, additive: bool) -> float:
    total = 4.0 * (d - 1) * (d * FEATURES) ** 2 if additive else 0.0
    f = FEATURES
    for j in range(1, max_parents + 1):
        pairs = d * comb(d - 1, j)
        if additive:
            per_set = 2 * f ** 3 * (j - 2) + 8 * f ** 3 / 3 if j >= 2 else 2 * f ** 3 / 3
            total += pairs * (d - 1) / d * (per_set + 4 * f ** 2 + 12)
        else:
            total += pairs * (j ** 3 / 3 + 2 * j ** 2 + 12)
    return total


def dp_flops(d: int, max_parents: int) -> float:
    quarter = 2.0 ** (d - 2)
    scores = sum(d * comb(d - 1, j) for j in range(max_parents + 1))
    return ((d - 1) ** 2 + 4 * (d - 1) + d + 1) * quarter + scores + 2 * quarter


def datasets_per_call(candidates: int) -> int:
    return candidates * GAIN_DRAWS + LOOKAHEAD_DRAWS + 2


def call_flops(d: int, max_parents: int, candidates: int, additive: bool) -> float:
    """The lookahead arithmetic of one call (see the module docstring)."""
    return datasets_per_call(candidates) * (score_flops(d, max_parents, additive) + dp_flops(d, max_parents))


def add_rate(repeats: int = 500) -> float:
    """Float64 adds a CPU second of numpy's in-place add on two L2-resident arrays, best of 5, one thread."""
    a, b = np.ones(32768), np.full(32768, 1e-9)
    best = np.inf
    for _ in range(5):
        started = time.process_time()
        for _ in range(repeats):
            a += b
        best = min(best, time.process_time() - started)
    return repeats * len(a) / best
