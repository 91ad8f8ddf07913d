"""The additive surrogate: the exact DAG posterior of `ExactSurrogate`, with local scores that see nonlinear effects.

Each node's parent sets are scored on the rows where that node was NOT intervened on, by the closed-form marginal
likelihood of an additive model on a fixed dictionary of each parent (`training.tasks.causal.surrogates.additive_scores`: x, sin x,
cos x, tanh x, x^2 / (1 + |x|), a conjugate Gaussian prior on the weights); the same Koivisto-Sood DP
(`training.tasks.causal.surrogates.structure_posterior`) turns them into the target's parent-set posterior, and the same backward
sampler draws DAGs for `posterior_models`. Over the DAGs whose nodes have at most `max_parents` parents
(`subsets.parent_bound` with `ADDITIVE_FULL_SPACE_VARS`: every parent set up to 7 variables, at most 3 parents
above, unless set), up to `ADDITIVE_MAX_VARS` variables.

The features are standardised over each node's rows, so an update rescores from the rows (kept whole). The
lookahead (`what_if_rows`: the options' expected information gain, thousands of hypothetical data sets of one more
row each) scores from the feature moments, one row's Welford update a node (`additive_moments`), every parent
set's Cholesky factor built from its prefix's and its sibling's (`additive_nested`), a data set copying from its
group's anchor row the sets whose family it shares with it (`additive_anchors`) and scoring a set with one member
off the anchor from the anchor's factor of the others, data sets side by side in SIMD lanes, and runs the compiled
DP (`compiled_dp`) in chunks of bounded memory. Its cost a call: BENCHMARKS.md "Nonlinear SCMs: seconds per call
under the additive surrogate".
"""

from __future__ import annotations

import copy

from dataclasses import dataclass

import numpy as np

from training.tasks.causal.surrogates.additive_moments import (
    empty_moments,
    feature_rows,
    log_local_scores_moments,
    log_local_scores_single_rows,
)
from training.tasks.causal.surrogates.additive_scores import NodeDesign, log_local_scores_rows, node_design
from training.tasks.causal.surrogates.exact_surrogate import entropies_in_steps, topological_order
from training.tasks.causal.surrogates.linear_scores import check_batch, merge_rows
from training.tasks.causal.surrogates.structure_posterior import parent_log_posterior, sample_dags
from training.tasks.causal.surrogates.registry import SurrogateKind, register_surrogate
from training.tasks.causal.surrogates.subsets import members, parent_bound
from training.tasks.causal.surrogates.surrogate import (
    ParentPosterior,
    check_variables,
    entropy_nats,
    posterior_from_mask_probs,
)

ADDITIVE_FULL_SPACE_VARS = 7  # every parent set scored up to this many variables; `DEFAULT_MAX_PARENTS` above
ADDITIVE_MAX_VARS = 12  # the lookahead's DP over 2^d node sets for thousands of data sets a call


@dataclass
class AdditiveModel:
    """One posterior draw: a DAG and per node x_v = intercept_v + sum_{j in Pa(v)} features_v,j(x_j) . w_v,j
    + noise_sd_v * eps (the node's standardised dictionary, `NodeDesign.features`). `simulate` and `simulate_each`
    behave like `LinearModel`'s."""

    order: list[int]
    parents: list[list[int]]
    intercept: np.ndarray
    designs: list[NodeDesign]
    weights: list[np.ndarray]  # per node: (|Pa|, F)
    noise_sd: np.ndarray
    per_row_noise = True  # `simulate_each` takes one noise vector per row (`belief.draw_expectations` batches them)

    def _mean(self, v: int, atoms_of: dict[int, np.ndarray], n: int) -> np.ndarray:
        out = np.full(n, self.intercept[v])
        for j, w in zip(self.parents[v], self.weights[v], strict=True):
            out = out + self.designs[v].standardised(j, atoms_of[j]) @ w
        return out

    def _propagate(self, order: list[int], variables: np.ndarray, values: np.ndarray, eps: np.ndarray,
                   keep_atoms: set[int]) -> np.ndarray:
        """Rows (n, d) of the columns in `order` (the others 0), each variable's atoms computed once, for its
        children (`keep_atoms`)."""
        x = np.zeros((len(variables), len(self.order)))
        atoms_of = {}
        for v in order:
            x[:, v] = np.where(variables == v, values, self._mean(v, atoms_of, len(x)) + self.noise_sd[v] * eps[..., v])
            if v in keep_atoms:
                atoms_of[v] = self.designs[v].basis.atoms(x[:, v])
        return x

    def simulate_each(self, variables: np.ndarray, values: np.ndarray, eps: np.ndarray) -> np.ndarray:
        """Row i under do(X_variables[i] = values[i]) with the shared noise `eps` (d,), or row i's own eps[i]
        (n, d): (n, d)."""
        return self._propagate(self.order, variables, values, eps, {j for pa in self.parents for j in pa})

    def expected_targets(self, target: int, variables: np.ndarray, values: np.ndarray, noise: np.ndarray
                         ) -> np.ndarray:
        """E[target | do(X_variables[i] = values[i])] per i (variable -1: no intervention), the mean over the noise
        vectors `noise` (K, d) shared by every i. Only the target's ancestors are simulated: once without
        intervention, then, per intervened ancestor j, only j's descendants among them (the rest keep their values
        without intervention); an intervention elsewhere leaves the target as no intervention does."""
        needed = self._ancestors(target) | {target}
        order = [v for v in self.order if v in needed]
        children = {v: [c for c in order if v in self.parents[c]] for v in order}
        k = len(noise)
        base = self._propagate(order, np.full(k, -1), np.zeros(k), noise, needed - {target})
        base_atoms = {j: self.designs[j].basis.atoms(base[:, j]) for j in needed - {target}}
        out = np.full(len(variables), base[:, target].mean())
        for j in np.unique(variables[np.isin(variables, order)]):
            which = np.flatnonzero(variables == j)
            moved, grow = {int(j)}, [int(j)]
            while grow:
                grow = [c for v in grow for c in children[v] if c not in moved]
                moved.update(grow)
            n = len(which)
            x = np.repeat(base, n, axis=0)
            x[:, j] = np.tile(values[which], k)
            eps = np.repeat(noise, n, axis=0)
            atoms_of = {v: np.repeat(a, n, axis=0) for v, a in base_atoms.items() if v not in moved}
            if j != target:
                atoms_of[j] = self.designs[j].basis.atoms(x[:, j])
            for v in order:
                if v in moved and v != j:
                    x[:, v] = self._mean(v, atoms_of, len(x)) + self.noise_sd[v] * eps[:, v]
                    if v != target:
                        atoms_of[v] = self.designs[v].basis.atoms(x[:, v])
            out[which] = x[:, target].reshape(k, n).mean(axis=0)
        return out

    def _ancestors(self, v: int) -> set[int]:
        found, grow = set(), [v]
        while grow:
            grow = [j for u in grow for j in self.parents[u] if j not in found]
            found.update(grow)
        return found

    def simulate(self, do: dict[int, float], eps: np.ndarray) -> np.ndarray:
        """Rows (n, d) under the hard interventions `do` with standard-normal noise `eps` (n, d)."""
        x, atoms_of = np.zeros_like(eps), {}
        for v in self.order:
            x[:, v] = do[v] if v in do else self._mean(v, atoms_of, len(x)) + self.noise_sd[v] * eps[:, v]
            atoms_of[v] = self.designs[v].basis.atoms(x[:, v])
        return x


def _score_many(datasets: list[tuple[np.ndarray, np.ndarray]], t: int, max_parents: int
                ) -> tuple[np.ndarray, np.ndarray]:
    log_beta = np.stack([log_local_scores_rows(s, m, max_parents=max_parents) for s, m in datasets])
    return log_beta, parent_log_posterior(log_beta, t)[0]


class AdditiveSurrogate:
    """Exact posterior over the target's parent set for additive nonlinear mechanisms (see module docstring), over
    the DAGs whose nodes have at most `max_parents` parents."""

    name = "additive"

    def __init__(self, variables: list[str], target: str, max_parents: int | None = None):
        check_variables(variables, target, "additive", ADDITIVE_MAX_VARS)
        self.variables, self.target = list(variables), target
        self.t, self.d = self.variables.index(target), len(variables)
        self.max_parents = parent_bound(self.d, max_parents, ADDITIVE_FULL_SPACE_VARS)
        self.samples = np.zeros((0, self.d))
        self.intervened = np.zeros((0, self.d), dtype=bool)
        self.moments = empty_moments(self.d)  # the lookahead's statistics of the rows (`additive_moments`)
        self.updates = 0
        self._set_state(*_score_many([(self.samples, self.intervened)], self.t, self.max_parents))

    def _set_state(self, log_beta: np.ndarray, log_post: np.ndarray) -> None:
        self._fits = None  # the draws' designs and fits of this state (`posterior_models`), made on first use
        self.log_beta = log_beta[0]
        self.mask_probs = np.exp(log_post[0])
        self._entropy = entropy_nats(self.mask_probs)

    @property
    def counts(self) -> np.ndarray:
        """Rows per node where it was not intervened on (what its score is fitted on)."""
        return (~self.intervened).sum(axis=0)

    def update(self, samples: np.ndarray, intervened: np.ndarray) -> None:
        samples, intervened = check_batch(samples, intervened, self.d)
        self.samples = np.concatenate([self.samples, samples])
        self.intervened = np.concatenate([self.intervened, intervened])
        self.moments = merge_rows(self.moments, feature_rows(samples), intervened)
        self._set_state(*_score_many([(self.samples, self.intervened)], self.t, self.max_parents))
        self.updates += 1

    def posterior(self) -> ParentPosterior:
        return posterior_from_mask_probs(self.mask_probs, self.variables, self.target, self.max_parents)

    def entropy(self) -> float:
        return self._entropy

    def copy(self) -> AdditiveSurrogate:
        new = object.__new__(AdditiveSurrogate)
        new.__dict__.update(self.__dict__)  # the arrays are replaced, never mutated, by update
        return new

    def what_if_many(self, batches: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        """Entropy after adding each (samples, intervened) batch to the current data, without mutating: scored from
        the feature moments (`additive_moments`), all batches in one call."""
        if not batches:
            return np.zeros(0)
        checked = [check_batch(s, m, self.d) for s, m in batches]
        if all(len(s) == 1 for s, _ in checked):
            return self.what_if_rows(np.concatenate([s for s, _ in checked]), np.concatenate([m for _, m in checked]))

        def scores(i: int, j: int) -> np.ndarray:
            stats = [merge_rows(self.moments, feature_rows(s), m) for s, m in checked[i:j]]
            return log_local_scores_moments(*(np.stack([getattr(st, k) for st in stats])
                                              for k in ("count", "mean", "m2")), self.max_parents)

        return entropies_in_steps(self.d, self.t, self.max_parents, len(checked), scores)

    def what_if_rows(self, samples: np.ndarray, intervened: np.ndarray) -> np.ndarray:
        """Entropy after adding each single row samples[i] (mask intervened[i]), without mutating: each node's
        moments updated by the row, one node at a time (`additive_moments.log_local_scores_single_rows`)."""
        samples, intervened = check_batch(samples, intervened, self.d)
        features = feature_rows(samples)
        return entropies_in_steps(self.d, self.t, self.max_parents, len(samples), lambda i, j: (
            log_local_scores_single_rows(self.moments, features[i:j], intervened[i:j], self.max_parents)))

    def expected_gain(self, do: tuple[int, float] | None, mask: np.ndarray, draws: int,
                      rng: np.random.Generator) -> float | None:
        """The entropy drop the posterior expects of a call (nats), as `ExactSurrogate.expected_gain`: the current
        entropy minus the mean entropy after the call's rows answered by `draws` posterior models. None with fewer
        than 2 non-intervened rows for some node."""
        return self.expected_gains([(do, mask)], draws, rng)[0]

    def expected_gains(self, calls: list[tuple[tuple[int, float] | None, np.ndarray]], draws: int,
                       rng: np.random.Generator) -> list[float | None]:
        """`expected_gain` of each (do, mask) call as a fresh `rng` in that state would give it, the posterior draws
        made once for all (what the options' what-ifs share: `CausalEnv.choices`)."""
        if np.any(self.counts < 2):
            return [None] * len(calls)
        models = self.posterior_models(draws, rng)
        drawn = copy.deepcopy(rng)  # each call's answers draw from here, as its own expected_gain would
        out = []
        for do, mask in calls:
            answer_rng = copy.deepcopy(drawn)
            fixed = {} if do is None else {do[0]: do[1]}
            answers = [(model.simulate(fixed, answer_rng.standard_normal(mask.shape)), mask) for model in models]
            out.append(float(self.entropy() - self.what_if_many(answers).mean()))
        return out

    def posterior_models(self, n: int, rng: np.random.Generator) -> list[AdditiveModel]:
        """n draws of (DAG, parameters): DAGs by `sample_dags`; then per node v with parents S, on v's rows, in the
        prior's scaled coordinates (u = Lambda^-1/2 w, A = I + Phi~' Phi~, Phi~ = Phi Lambda^1/2):
        sigma^2 ~ InvGamma((n - 1) / 2, Q_S / 2), u | sigma^2 ~ N(A^-1 Phi~' y_c, sigma^2 A^-1),
        intercept ~ N(ybar, sigma^2 / n)."""
        if np.any(self.counts < 2):
            low = [self.variables[v] for v in np.flatnonzero(self.counts < 2)]
            raise ValueError(f"posterior_models needs >= 2 non-intervened rows per node; too few for {low}")
        if self._fits is None:  # shared by the state's draws: the options' and the structure reward's
            designs = [node_design(self.samples, self.intervened, v) for v in range(self.d)]
            self._fits = designs, [(len(de.y), de.y.mean()) for de in designs], {}
        # fits: (node, parent mask) -> (posterior mean of u, (Cholesky factor of A)'^-1, Q_S, prior sds)
        designs, rows, fits = self._fits
        models = []
        for masks in sample_dags(self.log_beta, n, rng):
            parents = [members(int(m), self.d) for m in masks]
            intercept, weights, sd = np.zeros(self.d), [], np.zeros(self.d)
            for v in range(self.d):
                key = (v, int(masks[v]))
                if key not in fits:
                    fits[key] = _fit(designs[v], parents[v])
                mean_u, chol_t_inv, q, scale = fits[key]
                count, ybar = rows[v]
                sigma2 = (q / 2.0) / rng.gamma((count - 1.0) / 2.0)
                noise = rng.standard_normal(len(mean_u))
                u = mean_u + np.sqrt(sigma2) * (chol_t_inv @ noise) if len(mean_u) else mean_u
                weights.append((u * scale).reshape(len(parents[v]), designs[v].basis.size))
                intercept[v] = ybar + rng.normal() * np.sqrt(sigma2 / count)
                sd[v] = np.sqrt(sigma2)
            models.append(AdditiveModel(topological_order(parents), parents, intercept, designs, weights, sd))
        return models


def _fit(design: NodeDesign, parents: list[int]) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
    """(posterior mean of the scaled weights, the inverse of the Cholesky factor of A transposed (a draw's
    A^-1/2 z), Q_S, the features' prior sds) of a node on `parents`."""
    yc = design.y - design.y.mean()
    q0 = max(float(yc @ yc), 1e-300)
    if not parents:
        return np.zeros(0), np.zeros((0, 0)), q0, np.zeros(0)
    scale = np.tile(np.sqrt(design.basis.prior_var), len(parents))
    phi = design.phi[:, parents].reshape(len(yc), -1) * scale
    a = np.eye(phi.shape[1]) + phi.T @ phi
    b = phi.T @ yc
    mean_u = np.linalg.solve(a, b)
    return mean_u, np.linalg.inv(np.linalg.cholesky(a).T), max(q0 - float(b @ mean_u), 1e-300), scale


register_surrogate(SurrogateKind("additive", AdditiveSurrogate, ADDITIVE_MAX_VARS, bounded=True, sampled=True,
                                lookahead=True))
