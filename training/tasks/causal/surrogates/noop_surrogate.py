"""The surrogate that learns nothing, for speed baselines: its posterior is the structure prior's, forever."""

from __future__ import annotations

import numpy as np

from training.tasks.causal.surrogates.exact_surrogate import ExactSurrogate
from training.tasks.causal.surrogates.linear_scores import check_batch
from training.tasks.causal.surrogates.registry import SurrogateKind, register_surrogate
from training.tasks.causal.surrogates.surrogate import ParentPosterior


class NoopSurrogate:
    """A surrogate that learns nothing: its posterior stays the structure prior's marginal for the target
    (`training.tasks.causal.surrogates.structure_posterior`) and `update` only checks its input. For speed baselines only."""

    name = "noop"

    def __init__(self, variables: list[str], target: str):
        self.variables, self.target = list(variables), target
        self._prior = ExactSurrogate(variables, target)  # the posterior on no data is the prior
        self.updates = 0

    def update(self, samples: np.ndarray, intervened: np.ndarray) -> None:
        check_batch(samples, intervened, len(self.variables))

    def posterior(self) -> ParentPosterior:
        return self._prior.posterior()

    def entropy(self) -> float:
        return self._prior.entropy()

    def expected_gain(self, do, mask, draws, rng) -> float:
        """A posterior that never moves is expected to gain nothing."""
        return 0.0

    def copy(self) -> NoopSurrogate:
        return self


register_surrogate(SurrogateKind("noop", lambda variables, target, max_parents=None: NoopSurrogate(variables, target),
                                None, bounded=False, sampled=False, lookahead=False))
