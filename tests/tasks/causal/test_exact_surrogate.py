"""The exact surrogate: the g-prior score, the DAG posterior against independent code paths, and its behaviour."""

from itertools import permutations, product

import numpy as np
import pytest
from scipy import integrate, stats

from tests.tasks.causal.helpers import CHAIN_VARS, chain5, intervention_rows, observational_rows
from training.tasks.causal.scm.families import random_scm
from training.tasks.causal.structure_metrics import parent_f1
from training.tasks.causal.surrogates.exact_surrogate import ExactSurrogate, update_many
from training.tasks.causal.surrogates.linear_scores import NodeStats, log_local_scores, merge_rows
from training.tasks.causal.surrogates.structure_posterior import (
    enumerate_parent_posterior,
    logsumexp,
    parent_log_posterior,
)


def g_prior_bayes_factor(y, x, g):
    """BF(X vs intercept only) from the model definition by numerical integration over sigma^2: y | sigma^2 is
    Gaussian with covariance sigma^2 (tau^2 11' + I + g P_X) (intercept ~ N(0, tau^2 sigma^2), tau -> inf); the
    factor tau * sigma turns that intercept prior into the flat one, and d sigma^2 / sigma^2 = d log sigma^2."""
    n = len(y)
    xc = x - x.mean(0)
    proj = xc @ np.linalg.pinv(xc.T @ xc) @ xc.T
    tau2 = 1e6
    one = np.ones((n, n))

    def marginal(cov_unit):
        def integrand(log_s2):
            s2 = np.exp(log_s2)
            return np.exp(stats.multivariate_normal(np.zeros(n), s2 * cov_unit).logpdf(y) + 0.5 * log_s2 + 50.0)

        return integrate.quad(integrand, -20, 20, limit=400)[0]

    return marginal(tau2 * one + np.eye(n) + g * proj) / marginal(tau2 * one + np.eye(n))


def test_g_prior_closed_form_matches_the_model_definition():
    rng = np.random.default_rng(0)
    n = 7
    x = rng.normal(size=(n, 2))
    y = 0.8 * x[:, 0] + rng.normal(size=n) + 3.0
    data = np.column_stack([x, y])
    st = merge_rows(NodeStats.empty(3), data, np.zeros_like(data, dtype=bool))
    log_beta = log_local_scores(st.count[None], st.mean[None], st.m2[None])[0]
    prior = -np.log([1, 2, 2, 1])  # rho(S) = 1 / C(2, |S|) for S = {}, {0}, {1}, {0, 1}
    for mask, cols in ((1, [0]), (2, [1]), (3, [0, 1])):
        closed = np.exp(log_beta[2, mask] - prior[[0, 1, 2, 3].index(mask)])
        assert closed == pytest.approx(g_prior_bayes_factor(y, x[:, cols], g=n), rel=1e-4)


def independent_posterior(data, intervened, target, d):
    """P(Pa_target = S) from scratch: per-node least squares on that node's non-intervened rows (lstsq with an
    intercept), the g-prior Bayes factor with g = n, every DAG from the orders (itertools), weights #linext x prior."""
    from math import comb

    def log_beta(v, parents):
        rows = ~intervened[:, v]
        y, n = data[rows, v], rows.sum()
        if parents:
            a = np.column_stack([np.ones(n), data[rows][:, parents]])
            resid = y - a @ np.linalg.lstsq(a, y, rcond=None)[0]
            r2 = 1 - resid @ resid / ((y - y.mean()) @ (y - y.mean()))
        else:
            r2 = 0.0
        k, nu, g = len(parents), n - 1, n
        return -np.log(comb(d - 1, k)) + 0.5 * (nu - k) * np.log1p(g) - 0.5 * nu * np.log1p(g * (1 - r2))

    weights = {}
    for order in permutations(range(d)):
        options = [[tuple(p) for p in product(*[[None, u] for u in order[:i]])] for i in range(d)]
        for combo in product(*options):
            graph = {order[i]: tuple(sorted(u for u in combo[i] if u is not None)) for i in range(d)}
            key = tuple(graph[v] for v in range(d))
            w = sum(log_beta(v, list(graph[v])) for v in range(d))
            weights[key] = np.logaddexp(weights.get(key, -np.inf), w)  # one term per linear extension
    keys = list(weights)
    lw = np.array([weights[k] for k in keys])
    p = np.exp(lw - logsumexp(lw, 0))
    out = {}
    for key, pi in zip(keys, p):
        out[frozenset(key[target])] = out.get(frozenset(key[target]), 0.0) + pi
    return out


def test_posterior_matches_an_independent_computation_on_three_variables():
    rng = np.random.default_rng(4)
    n = 9
    data = rng.normal(size=(n, 3))
    data[:, 1] += 1.5 * data[:, 0]
    data[:, 2] += -data[:, 1]
    intervened = np.zeros((n, 3), dtype=bool)
    intervened[[0, 1, 2], 1] = True  # three rows did do(X1)
    intervened[[3], 0] = True
    data[[0, 1, 2], 1] = [2.0, -1.0, 0.5]
    s = ExactSurrogate(["X0", "X1", "X2"], "X2")
    s.update(data[:5], intervened[:5])
    s.update(data[5:], intervened[5:])  # two updates: the incremental statistics must equal one pass
    expected = independent_posterior(data, intervened, 2, 3)
    post = s.posterior()
    for parents, p in expected.items():
        assert post.probability({f"X{i}" for i in parents}) == pytest.approx(p, abs=1e-8)


def test_no_data_gives_the_hand_computed_prior():
    # 3 nodes, rho(S) = 1 / C(2, |S|). Summing over the 6 orders (target at position 0, 1, 2):
    # {} : 2 * 1.5 * 3 + 2 * 1 * 3 + 2 * 1 * 1.5 = 18;  {a}: 1 * 0.5 * 3 + 2 * 0.5 * 1.5 = 3;  {a, b}: 2 * 1.5 = 3.
    post = ExactSurrogate(["A", "B", "C"], "C").posterior()
    assert post.probability(set()) == pytest.approx(18 / 27)
    assert post.probability({"A"}) == pytest.approx(3 / 27) and post.probability({"A", "B"}) == pytest.approx(3 / 27)
    assert post.marginals["A"] == pytest.approx(6 / 27)


@pytest.mark.parametrize("d", [3, 4, 5])
def test_dynamic_programme_equals_enumeration_over_all_dags(d):
    rng = np.random.default_rng(d)
    scm = random_scm("er", d, d)
    rows, mask = observational_rows(scm, 12, rng)
    for v in scm.actionable[:2]:
        r, m = intervention_rows(scm, v, 4, rng)
        rows, mask = np.vstack([rows, r]), np.vstack([mask, m])
    st = merge_rows(NodeStats.empty(d), rows, mask)
    log_beta = log_local_scores(st.count[None], st.mean[None], st.m2[None])
    for t in range(d):
        dp = np.exp(parent_log_posterior(log_beta, t)[0][0])
        assert np.abs(dp - enumerate_parent_posterior(log_beta[0], t)).max() < 1e-9


def test_posterior_is_invariant_to_rescaling_and_shifting_variables():
    rng = np.random.default_rng(5)
    scm = chain5()
    rows, mask = observational_rows(scm, 15, rng)
    r, m = intervention_rows(scm, "X3", 10, rng)
    rows, mask = np.vstack([rows, r]), np.vstack([mask, m])
    base = ExactSurrogate(CHAIN_VARS, "X2")
    base.update(rows, mask)
    scaled = ExactSurrogate(CHAIN_VARS, "X2")
    scaled.update(rows * np.array([1e-3, 1e3, 1.0, 1e3, 1e-3]) + np.array([5.0, -2e3, 0.0, 7.0, 1e-2]), mask)
    assert np.abs(base.mask_probs - scaled.mask_probs).max() < 1e-6


def test_posterior_concentrates_on_the_true_parents_of_a_chain():
    rng = np.random.default_rng(6)
    scm = chain5()
    s = ExactSurrogate(CHAIN_VARS, "X2")
    s.update(*observational_rows(scm, 5, rng))
    probs = [s.posterior().probability({"X1"})]
    for _ in range(10):
        for v in scm.actionable:
            s.update(*intervention_rows(scm, v, 5, rng))
        probs.append(s.posterior().probability({"X1"}))
    # the rest sits mostly on {X0, X1}: the g-prior's Occam factor for a superfluous regressor shrinks only like
    # (1 + n)^(-1/2)
    assert probs[-1] > 0.85 and probs[-1] > probs[0] + 0.5
    assert np.mean(np.diff(probs) > 0) >= 0.5  # mostly rising, not a single lucky jump
    post = s.posterior()
    assert parent_f1(post.map_set(), scm.parents()) == 1.0
    assert parent_f1(post.marginal_set(0.5), scm.parents()) == 1.0


def test_interventions_on_the_child_rule_it_out_where_observations_cannot():
    """The Markov-blanket trap: the target X2's child X3 predicts X2 as well as its parent X1 does. Whole-graph
    scoring on rows where each node is NOT intervened on tells them apart once X3 is intervened on."""
    rng = np.random.default_rng(0)
    scm = chain5()
    observational = ExactSurrogate(CHAIN_VARS, "X2")
    observational.update(*observational_rows(scm, 80, rng))
    mixed = ExactSurrogate(CHAIN_VARS, "X2")
    mixed.update(*observational_rows(scm, 40, rng))
    mixed.update(*intervention_rows(scm, "X3", 40, rng))
    p_obs, p_int = observational.posterior().marginals["X3"], mixed.posterior().marginals["X3"]
    assert p_obs > 0.25  # observational data cannot orient X2 - X3 (Markov equivalence)
    assert p_int < 0.01  # do(X3) leaves X2 unmoved: X3 is not a parent
    # the trap itself: scoring only the target's own regression keeps the child as a parent on observational data
    lb = observational.log_beta[2]
    naive = np.exp(lb - logsumexp(lb, 0))
    assert sum(naive[m] for m in range(32) if m >> 3 & 1) > 0.8


def test_update_really_changes_the_state_and_counts():
    rng = np.random.default_rng(7)
    scm = chain5()
    s = ExactSurrogate(CHAIN_VARS, "X2")
    h0, p0 = s.entropy(), s.posterior().probs.copy()
    s.update(*observational_rows(scm, 3, rng))
    assert s.updates == 1 and s.entropy() != h0 and not np.allclose(s.posterior().probs, p0)
    h1 = s.entropy()
    s.update(*intervention_rows(scm, "X1", 1, rng))
    assert s.updates == 2 and s.entropy() != h1


def test_what_if_and_batched_updates_agree_with_sequential_updates():
    rng = np.random.default_rng(8)
    scm = chain5()
    s = ExactSurrogate(CHAIN_VARS, "X2")
    s.update(*observational_rows(scm, 6, rng))
    batches = [intervention_rows(scm, v, 1, rng) for v in ("X0", "X1", "X3")]
    before = s.entropy()
    hyp = s.what_if_many(batches)
    assert s.entropy() == before and s.updates == 1  # no mutation
    copies = [s.copy() for _ in batches]
    for c, b in zip(copies, batches):
        c.update(*b)
    assert np.allclose(hyp, [c.entropy() for c in copies], atol=1e-12)
    grouped = [s.copy() for _ in batches]
    update_many(grouped, batches)
    assert all(np.allclose(g.mask_probs, c.mask_probs, atol=1e-12) and g.updates == 2 for g, c in zip(grouped, copies))
    assert s.updates == 1 and s.entropy() == before  # copies are independent


def test_bad_update_input_raises_naming_the_argument():
    s = ExactSurrogate(CHAIN_VARS, "X2")
    with pytest.raises(ValueError, match="samples"):
        s.update(np.zeros((2, 4)), np.zeros((2, 4), bool))
    with pytest.raises(ValueError, match="intervened"):
        s.update(np.zeros((2, 5)), np.zeros((2, 5)))
    with pytest.raises(ValueError, match="NaN"):
        s.update(np.full((1, 5), np.nan), np.zeros((1, 5), bool))
    assert s.updates == 0


def _surrogate_on_data(d: int, seed: int) -> ExactSurrogate:
    scm = random_scm("er", d, seed)
    sur = ExactSurrogate(scm.variables, scm.target)
    rng = np.random.default_rng(seed)
    sur.update(*observational_rows(scm, 12, rng))
    sur.update(*intervention_rows(scm, scm.actionable[0], 3, rng))
    return sur


@pytest.mark.parametrize("d", [3, 4])
def test_sampled_dags_follow_the_posterior_over_every_dag(d):
    """The vectorised backward sampler's DAG frequencies against the exact joint over every DAG on d nodes
    (#linext(G) prod_v beta_v(Pa_v), `all_dags`): chi-square over the DAGs expected >= 5 times (the rest pooled)."""
    from training.tasks.causal.surrogates.structure_posterior import all_dags, sample_dags

    sur = _surrogate_on_data(d, seed=d)
    masks, counts = all_dags(d)
    log_w = np.log(counts) + sum(sur.log_beta[v, masks[:, v]] for v in range(d))
    p = np.exp(log_w - log_w.max())
    p /= p.sum()
    n = 20_000
    drawn = sample_dags(sur.log_beta, n, np.random.default_rng(0))
    code = lambda m: sum(int(x) << (d * v) for v, x in enumerate(m))  # noqa: E731
    index = {code(m): i for i, m in enumerate(masks)}
    observed = np.bincount([index[code(m)] for m in drawn], minlength=len(p))
    big = p * n >= 5
    obs = np.append(observed[big], observed[~big].sum())
    exp = np.append(p[big] * n, p[~big].sum() * n)
    keep = exp > 0
    assert stats.chisquare(obs[keep], exp[keep]).pvalue > 1e-3
    # and the target's parent sets, read off the draws, against the DP's marginal
    t = sur.t
    freq = np.bincount(drawn[:, t], minlength=1 << d) / n
    assert np.abs(freq - enumerate_parent_posterior(sur.log_beta, t)).max() < 0.02


def test_parameter_draws_follow_the_g_prior_posterior_of_their_parent_set():
    """Given its parent set S, a node's coefficients have mean g/(1+g) beta_ols and covariance
    E[sigma^2] g/(1+g) pinv(Sxx), with sigma^2 ~ InvGamma((n-1)/2, S_yy (1 - g R^2/(1+g)) / 2), E = b / (a - 1)."""
    sur = _surrogate_on_data(4, seed=11)
    models = sur.posterior_models(6000, np.random.default_rng(1))
    st, v = sur.stats, sur.t
    sets = [tuple(m.parents[v]) for m in models]
    pa = max(set(sets), key=lambda s: (len(s) > 0, sets.count(s)))  # the most drawn non-empty parent set
    coefs = np.array([m.coef[v] for m, s in zip(models, sets) if s == pa])
    assert len(coefs) > 300
    nv, m2 = st.count[v], st.m2[v]
    sxx, sxy, syy = m2[np.ix_(pa, pa)], m2[list(pa), v], m2[v, v]
    b_ols = np.linalg.solve(sxx, sxy)
    shrink, r2 = nv / (1 + nv), sxy @ b_ols / syy
    a, b = (nv - 1) / 2, syy * (1 - shrink * r2) / 2
    cov = b / (a - 1) * shrink * np.linalg.inv(sxx)
    se = np.sqrt(np.diag(cov) / len(coefs))
    assert np.all(np.abs(coefs.mean(0) - shrink * b_ols) < 4 * se)
    assert np.allclose(np.cov(coefs.T).reshape(cov.shape), cov, rtol=0.25, atol=1e-3 * np.abs(cov).max())
