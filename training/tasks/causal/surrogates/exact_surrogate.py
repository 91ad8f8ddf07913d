"""The exact Bayesian surrogate for linear-Gaussian SCMs: a posterior over whole DAGs, read out for the target.

Each node's parent sets are scored by the Zellner g-prior marginal likelihood on the rows where that node was NOT
intervened on (`training.tasks.causal.surrogates.linear_scores`), and the target's parent-set posterior marginalises over every DAG with the
order-modular prior by the Koivisto-Sood dynamic programme (`training.tasks.causal.surrogates.structure_posterior`). Scoring the
whole graph is what keeps a child of the target from passing for a parent: a regression of the target alone on
the other variables favours its Markov blanket (children and their other parents included), whereas the graph
posterior explains the target-child dependence by the edge's direction, which the child's interventions reveal.

State: per-node sufficient statistics (`NodeStats`), updated incrementally; each `update()` rescores all parent
sets of all nodes in a few batched linear-algebra calls and reruns the DP: O(d 2^d (d^3 + ...)) numpy work, no
Python loop over parent sets. `update_many` does the same for the surrogates of several episodes at once (one
batched call for the whole GRPO group), and `what_if_many` scores many hypothetical additions without mutating.
"""

from __future__ import annotations

import copy

from dataclasses import dataclass

import numpy as np

from training.tasks.causal.surrogates.compiled_dp import target_log_posterior
from training.tasks.causal.surrogates.linear_scores import (
    NodeStats,
    check_batch,
    log_local_scores,
    log_local_scores_sparse,
    merge_rows,
    merge_single_rows,
)
from training.tasks.causal.surrogates.structure_posterior import (
    parent_log_posterior,
    sample_dags,
    sparse_parent_log_posterior,
)
from training.tasks.causal.surrogates.registry import SurrogateKind, register_surrogate
from training.tasks.causal.surrogates.subsets import EXACT_MAX_VARS, members, parent_bound, score_plan
from training.tasks.causal.surrogates.surrogate import (
    ParentPosterior,
    check_variables,
    entropy_nats,
    posterior_from_mask_probs,
)


# the DP's array per call in `what_if_many`: d 2^(d - 1) entries a data set (`linear_dp`), 64 MiB of float64 in all:
# 16 data sets a call at 16 variables (4 ran twice as slow a data set: the gathers move rows of B values)
LOOKAHEAD_ENTRIES = 1 << 23


@dataclass
class LinearModel:
    """One draw of a linear-Gaussian SCM from the posterior: a DAG (parent masks) and per-node parameters, in the
    centred form x_v = intercept_v + coef_v . (x_Pa - centre_v) + noise_sd_v * eps."""

    order: list[int]
    parents: list[list[int]]
    intercept: np.ndarray
    centre: list[np.ndarray]
    coef: list[np.ndarray]
    noise_sd: np.ndarray

    def simulate_each(self, variables: np.ndarray, values: np.ndarray, eps: np.ndarray) -> np.ndarray:
        """Row i under do(X_variables[i] = values[i]) with the shared noise `eps` (d,): (n, d), vectorised over i."""
        n = len(variables)
        x = np.zeros((n, len(self.order)))
        for v in self.order:
            pa = self.parents[v]
            free = self.intercept[v] + (x[:, pa] - self.centre[v]) @ self.coef[v] + self.noise_sd[v] * eps[v]
            x[:, v] = np.where(variables == v, values, free)
        return x

    def simulate(self, do: dict[int, float], eps: np.ndarray) -> np.ndarray:
        """Rows (n, d) under the hard interventions `do` with standard-normal noise `eps` (n, d)."""
        x = np.zeros_like(eps)
        for v in self.order:
            if v in do:
                x[:, v] = do[v]
            else:
                pa = self.parents[v]
                x[:, v] = self.intercept[v] + (x[:, pa] - self.centre[v]) @ self.coef[v] + self.noise_sd[v] * eps[:, v]
        return x


class ExactSurrogate:
    """Exact posterior over the target's parent set for linear-Gaussian data (see module docstring), over the DAGs
    whose nodes have at most `max_parents` parents (`subsets.parent_bound`: no bound up to 10 variables, 3 above,
    unless set)."""

    name = "exact"

    def __init__(self, variables: list[str], target: str, max_parents: int | None = None):
        check_variables(variables, target, "exact", EXACT_MAX_VARS)
        self.variables, self.target = list(variables), target
        self.t = self.variables.index(target)
        self.d = len(variables)
        self.max_parents = parent_bound(self.d, max_parents)
        self.stats = NodeStats.empty(self.d)
        self.updates = 0
        self._set_state(*self._score([self.stats]))

    # ---- core ------------------------------------------------------------------------------------------------
    def _score(self, stats_list: list[NodeStats]) -> tuple[np.ndarray, np.ndarray]:
        count = np.stack([s.count for s in stats_list])
        mean = np.stack([s.mean for s in stats_list])
        m2 = np.stack([s.m2 for s in stats_list])
        log_beta = log_local_scores(count, mean, m2, self.max_parents)
        log_post, _ = parent_log_posterior(log_beta, self.t)
        return log_beta, log_post

    def _set_state(self, log_beta: np.ndarray, log_post: np.ndarray, i: int = 0) -> None:
        self.log_beta = log_beta[i]
        self.mask_probs = np.exp(log_post[i])
        self._entropy = entropy_nats(self.mask_probs)

    def update(self, samples: np.ndarray, intervened: np.ndarray) -> None:
        samples, intervened = check_batch(samples, intervened, self.d)
        self.stats = merge_rows(self.stats, samples, intervened)
        self._set_state(*self._score([self.stats]))
        self.updates += 1

    def posterior(self) -> ParentPosterior:
        return posterior_from_mask_probs(self.mask_probs, self.variables, self.target, self.max_parents)

    def entropy(self) -> float:
        return self._entropy

    def edge_marginals(self) -> np.ndarray:
        """P(X_j ∈ Pa(target)) in variable order (0 for the target itself)."""
        bits = (np.arange(len(self.mask_probs))[:, None] >> np.arange(self.d)) & 1
        return self.mask_probs @ bits

    def copy(self) -> ExactSurrogate:
        new = object.__new__(ExactSurrogate)
        new.__dict__.update(self.__dict__)
        new.stats = self.stats.copy()
        return new

    def standardised(self) -> tuple[ExactSurrogate, np.ndarray]:
        """(copy, scale): a copy whose data are divided by `scale`, each variable's sample sd over its own
        non-intervened rows (1 where that is 0). Same posterior (the scores depend on the data through R^2 only),
        but draws from `posterior_models` that do not depend on the variables' units: numpy's multivariate normal
        factors each covariance afresh, so the same generator gives other draws in other units."""
        st = self.stats
        own = np.array([st.m2[v, v, v] for v in range(self.d)]) / np.maximum(st.count, 1.0)
        scale = np.where(own > 0, np.sqrt(own), 1.0)
        new = self.copy()
        new.stats.mean /= scale
        new.stats.m2 /= scale[None, :, None] * scale[None, None, :]
        new._set_state(*new._score([new.stats]))
        return new, scale

    # ---- lookahead -------------------------------------------------------------------------------------------
    def what_if_many(self, batches: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        """Entropy after adding each (samples, intervened) batch to the current data, without mutating: batched
        scoring + DP calls of at most `LOOKAHEAD_ENTRIES` entries each (one call for every batch up to 12 variables)."""
        checked = [check_batch(s, m, self.d) for s, m in batches]
        if checked and all(len(s) == 1 for s, _ in checked):
            return self.what_if_rows(np.concatenate([s for s, _ in checked]), np.concatenate([m for _, m in checked]))
        return self._in_steps(len(checked), lambda i, j: _stack_stats(
            [merge_rows(self.stats, s, m) for s, m in checked[i:j]]))

    def what_if_rows(self, samples: np.ndarray, intervened: np.ndarray) -> np.ndarray:
        """Entropy after adding each single row samples[i] (mask intervened[i]) to the current data, without
        mutating: `what_if_many` of one-row batches, checked once and merged by one vectorised Welford update."""
        samples, intervened = check_batch(samples, intervened, self.d)
        return self._in_steps(len(samples), lambda i, j: merge_single_rows(self.stats, samples[i:j], intervened[i:j]))

    def _in_steps(self, n: int, stats_of) -> np.ndarray:
        """The entropies of n hypothetical data sets, `stats_of(i, j)` giving stacked stats of data sets i..j - 1
        (`entropies_in_steps`)."""
        return entropies_in_steps(self.d, self.t, self.max_parents, n, lambda i, j: log_local_scores_sparse(
            *stats_of(i, j), self.max_parents))

    def what_if(self, samples: np.ndarray, intervened: np.ndarray) -> float:
        return float(self.what_if_many([(samples, intervened)])[0])

    def expected_gain(self, do: tuple[int, float] | None, mask: np.ndarray, draws: int,
                      rng: np.random.Generator) -> float | None:
        """The entropy drop the posterior expects of a call (nats): the current entropy minus the mean entropy after
        the call's rows (mask.shape, do(X_i = v) or none) as answered by `draws` models from `posterior_models`, the
        posterior predictive. None with fewer than 2 non-intervened rows for some node (nothing to sample from). The
        draws are made in standardised units, so the result does not depend on the variables' units."""
        return self.expected_gains([(do, mask)], draws, rng)[0]

    def expected_gains(self, calls: list[tuple[tuple[int, float] | None, np.ndarray]], draws: int,
                       rng: np.random.Generator) -> list[float | None]:
        """`expected_gain` of each (do, mask) call as a fresh `rng` in that state would give it, the posterior draws
        made once for all (what the options' what-ifs share: `CausalEnv.choices`)."""
        if np.any(self.stats.count < 2):
            return [None] * len(calls)
        unit, scale = self.standardised()
        models = unit.posterior_models(draws, rng)
        drawn = copy.deepcopy(rng)  # each call's answers draw from here, as its own expected_gain would
        out = []
        for do, mask in calls:
            answer_rng = copy.deepcopy(drawn)
            fixed = {} if do is None else {do[0]: do[1] / scale[do[0]]}
            answers = [(model.simulate(fixed, answer_rng.standard_normal(mask.shape)), mask) for model in models]
            out.append(float(unit.entropy() - unit.what_if_many(answers).mean()))
        return out

    def posterior_models(self, n: int, rng: np.random.Generator) -> list[LinearModel]:
        """n draws of (DAG, parameters) from the posterior: DAGs by `sample_dags`; then per node v with parents S the
        g-prior posterior on v's rows: sigma^2 ~ InvGamma(nu / 2, S_yy (1 - g R^2 / (1 + g)) / 2),
        beta | sigma^2 ~ N(g / (1 + g) beta_ols, g / (1 + g) sigma^2 (Xc'Xc)^+), intercept ~ N(ybar, sigma^2 / n)."""
        st = self.stats
        if np.any(st.count < 2):
            low = [self.variables[v] for v in np.flatnonzero(st.count < 2)]
            raise ValueError(f"posterior_models needs >= 2 non-intervened rows per node; too few for {low}")
        dags = sample_dags(self.log_beta, n, rng)
        pairs = [(v, int(m)) for v in range(self.d) for m in np.unique(dags[:, v])]
        regressions = _regressions(st.m2, pairs, self.d)
        intercept, sd = np.zeros((n, self.d)), np.zeros((n, self.d))
        coef = [[None] * self.d for _ in range(n)]
        for v, mask in pairs:  # the draws sharing a parent set of v get their parameters in one batch
            nv, shrink = st.count[v], st.count[v] / (1.0 + st.count[v])  # g = n_v
            syy = max(st.m2[v, v, v], 1e-300)
            factor, b_ols, r2 = regressions[v, mask]
            which = np.flatnonzero(dags[:, v] == mask)
            sigma2 = (syy * (1.0 - shrink * r2) / 2.0) / rng.gamma((nv - 1.0) / 2.0, size=len(which))
            z = rng.standard_normal((len(which), len(b_ols)))
            b = shrink * b_ols + np.sqrt(shrink * sigma2)[:, None] * (z @ factor.T)
            intercept[which, v] = st.mean[v, v] + rng.standard_normal(len(which)) * np.sqrt(sigma2 / nv)
            sd[which, v] = np.sqrt(sigma2)
            for k, i in enumerate(which):
                coef[i][v] = b[k]
        models = []
        for i, masks in enumerate(dags):
            parents = [members(int(m), self.d) for m in masks]
            centre = [st.mean[v, parents[v]] for v in range(self.d)]
            models.append(LinearModel(topological_order(parents), parents, intercept[i], centre, coef[i], sd[i]))
        return models


def _regressions(m2: np.ndarray, pairs: list[tuple[int, int]], d: int) -> dict:
    """{(v, parent mask): (F with F F' = pinv(Sxx), the OLS coefficients, R^2)} of each node v on its parents, from
    its centred scatter `m2[v]`: a draw N(mu, c pinv(Sxx)) is mu + sqrt(c) F z with z standard normal. One batched
    factorisation per parent-set size (`_factor_and_solve`)."""
    out = {}
    by_size: dict[int, list[tuple[int, int]]] = {}
    for v, mask in pairs:
        by_size.setdefault(bin(mask).count("1"), []).append((v, mask))
    for k, group in by_size.items():
        if k == 0:
            out.update({pair: (np.zeros((0, 0)), np.zeros(0), 0.0) for pair in group})
            continue
        vs = np.array([v for v, _ in group])
        pa = np.array([members(mask, d) for _, mask in group])  # (G, k)
        sxx = m2[vs[:, None, None], pa[:, :, None], pa[:, None, :]]
        sxy = m2[vs[:, None], pa, vs[:, None]]
        syy = np.maximum(m2[vs, vs, vs], 1e-300)
        factor, b_ols = _factor_and_solve(sxx, sxy)
        r2 = np.clip(np.einsum("gi,gi->g", sxy, b_ols) / syy, 0.0, 1.0)
        for j, pair in enumerate(group):
            out[pair] = (factor[j], b_ols[j], float(r2[j]))
    return out


def _factor_and_solve(sxx: np.ndarray, sxy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(F, pinv(Sxx) Sxy) for a stack of scatter matrices, with F F' = pinv(Sxx). F = L^-T from the Cholesky factor
    Sxx = L L' when every matrix is positive definite: unique and continuous in Sxx, so the standardised copies of
    the same data in other units (`ExactSurrogate.standardised`), equal up to rounding, give the same draws. A stack
    with a singular matrix (a parent constant on the node's rows) falls back to the eigendecomposition, whose
    pseudo-inverse drops the null directions."""
    try:
        low = np.linalg.cholesky(sxx)
    except np.linalg.LinAlgError:
        lam, vec = np.linalg.eigh(sxx)
        keep = lam > lam.max(axis=1, keepdims=True) * sxx.shape[-1] * np.finfo(float).eps
        inv = np.where(keep, 1.0 / np.where(keep, lam, 1.0), 0.0)
        return vec * np.sqrt(inv)[:, None, :], np.einsum("gij,gj,gkj,gk->gi", vec, inv, vec, sxy)
    factor = np.swapaxes(np.linalg.inv(low), 1, 2)
    return factor, np.einsum("gij,gkj,gk->gi", factor, factor, sxy)


def _stack_stats(stats: list[NodeStats]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return tuple(np.stack([getattr(st, k) for st in stats]) for k in ("count", "mean", "m2"))


def entropies_in_steps(d: int, target: int, max_parents: int, n: int, scores_of) -> np.ndarray:
    """The target's parent-set entropies of n hypothetical data sets, `scores_of(i, j)` giving the sparse scores
    (`score_plan(d, max_parents)`'s pairs) of data sets i..j - 1, in DP calls of at most `LOOKAHEAD_ENTRIES` entries
    (bounded memory at large d)."""
    step = max(1, LOOKAHEAD_ENTRIES // (d << (d - 1)))
    plan = score_plan(d, max_parents)
    scored = plan.sets[plan.nodes == target]  # the target's sets of nonzero probability
    out = [np.zeros(0)]
    for i in range(0, n, step):
        scores = scores_of(i, min(i + step, n))
        log_post, underflow = target_log_posterior(scores, plan.nodes, plan.sets, d, target)
        if underflow.any():  # those in log space (`linear_dp`)
            redo = np.flatnonzero(underflow)
            log_post[redo] = sparse_parent_log_posterior(scores[redo], plan.nodes, plan.sets, d, target)[0][:, scored]
        out.append(row_entropies(log_post))
    return np.concatenate(out)


def row_entropies(log_post: np.ndarray) -> np.ndarray:
    """Entropy (nats) of each row of log-probabilities (B, masks); -inf entries count 0."""
    p = np.exp(log_post)
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.where(p > 0, p * log_post, 0.0).sum(axis=1)


def topological_order(parents: list[list[int]]) -> list[int]:
    order, placed = [], set()
    while len(order) < len(parents):
        ready = [v for v in range(len(parents)) if v not in placed and set(parents[v]) <= placed]
        if not ready:
            raise ValueError("sampled graph has a cycle")
        order.append(ready[0]), placed.add(ready[0])
    return order


def update_many(surrogates: list[ExactSurrogate], batches: list[tuple[np.ndarray, np.ndarray]]) -> None:
    """`s.update(*batch)` for every pair, with one batched scoring + DP call per distinct (d, target, bound) group."""
    if len(surrogates) != len(batches):
        raise ValueError(f"{len(surrogates)} surrogates but {len(batches)} batches")
    groups: dict[tuple[int, int, int], list[int]] = {}
    for i, s in enumerate(surrogates):
        groups.setdefault((s.d, s.t, s.max_parents), []).append(i)
    for idx in groups.values():
        stats = [merge_rows(surrogates[i].stats, *check_batch(*batches[i], surrogates[i].d)) for i in idx]
        log_beta, log_post = surrogates[idx[0]]._score(stats)
        for j, i in enumerate(idx):
            surrogates[i].stats = stats[j]
            surrogates[i]._set_state(log_beta, log_post, j)
            surrogates[i].updates += 1


register_surrogate(SurrogateKind("exact", ExactSurrogate, EXACT_MAX_VARS, bounded=True, sampled=True, lookahead=True))
