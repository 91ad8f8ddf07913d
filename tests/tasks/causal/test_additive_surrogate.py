"""The additive (nonlinear) surrogate: its score against a hand-worked case and the model's definition, its DAG
posterior against brute-force enumeration, and what it sees that the linear one does not."""

from itertools import product
from math import comb, factorial

import numpy as np
import pytest
from scipy import integrate, stats

from training.tasks.causal.env import make_causal_env
from training.tasks.causal.scm.scm import SCM, ExpressionMechanism
from training.tasks.causal.surrogates.additive_scores import PRIOR_VAR, log_bayes_factors_rows, log_local_scores_rows
from training.tasks.causal.surrogates.additive_surrogate import AdditiveSurrogate
from training.tasks.causal.surrogates.exact_surrogate import ExactSurrogate
from training.tasks.causal.surrogates.structure_posterior import logsumexp, parent_log_posterior

# sin, tanh and x are odd, cos and x^2/(1+|x|) even: on x = (-1, 0, 1) every standardised odd column is
# a sqrt(3/2) with a = (-1, 0, 1), every even one -+ b / sqrt(2) with b = (-1, 2, -1) (a and b orthogonal).
HAND_X = np.array([-1.0, 0.0, 1.0])
HAND_Y = np.array([0.0, 0.0, 3.0])


def test_score_of_a_hand_worked_case():
    # K = Phi Lambda Phi' = (1 + .25 + .25) (3/2) a a' + (.25 + .25) (1/2) b b' = 2.25 a a' + 0.25 b b',
    # eigenvalues 2.25 |a|^2 = 4.5 along a and 0.25 |b|^2 = 1.5 along b. y_c = (-1, -1, 2) has squared components
    # (y_c . a)^2 / |a|^2 = 4.5 and (y_c . b)^2 / |b|^2 = 1.5 (Q_0 = 6), so
    # Q_S = 4.5 / 5.5 + 1.5 / 2.5, log BF = -1/2 log(5.5 * 2.5) - (3 - 1) / 2 log(Q_S / 6).
    assert list(PRIOR_VAR) == [1.0, 0.25, 0.25, 0.25, 0.25]  # the hand computation's prior
    data = np.column_stack([HAND_X, HAND_Y])
    lbf = log_bayes_factors_rows(data, np.zeros_like(data, dtype=bool))
    expected = -0.5 * np.log(5.5 * 2.5) - np.log((4.5 / 5.5 + 1.5 / 2.5) / 6.0)
    assert lbf[1, 0b01] == pytest.approx(expected, abs=1e-12)
    assert lbf[1, 0b00] == 0.0 and lbf[1, 0b10] == -np.inf


def test_two_rows_are_no_evidence_and_an_intervened_node_learns_nothing():
    data = np.array([[0.3, 1.0, -2.0], [1.7, -0.4, 5.0], [0.1, 0.2, 0.3]])
    mask = np.zeros_like(data, dtype=bool)
    mask[2, 2] = True  # node 2 has 2 rows: K has rank 1 in the 1-d centred space, BF = 1 whatever the parents
    lbf = log_bayes_factors_rows(data, mask)
    assert np.allclose(lbf[2, [0, 1, 2, 3]], 0.0, atol=1e-12)
    mask[:, 2] = True  # node 2 intervened in every row: no evidence about its parents
    assert np.allclose(log_bayes_factors_rows(data, mask)[2, [0, 1, 2, 3]], 0.0)


def _dictionary(x):
    """The features from their definition, standardised by hand (an independent path)."""
    cols = [x, np.sin(x), np.cos(x), np.tanh(x), x ** 2 / (1 + abs(x))]
    return np.column_stack([(c - c.mean()) / c.std() for c in cols])


def _direct_log_bf(y, xs):
    """log BF of parents `xs` (list of columns) in the n x n kernel form."""
    n = len(y)
    yc = y - y.mean()
    if not xs:
        return 0.0
    phi = np.column_stack([_dictionary(x) for x in xs])
    kernel = phi @ np.diag(np.tile(PRIOR_VAR, len(xs))) @ phi.T
    cov = np.eye(n) + kernel
    return -0.5 * np.linalg.slogdet(cov)[1] - 0.5 * (n - 1) * np.log(yc @ np.linalg.solve(cov, yc) / (yc @ yc))


def test_closed_form_matches_the_model_definition():
    """y | sigma^2 ~ N(0, sigma^2 (tau^2 11' + I + Phi Lambda Phi')) (intercept ~ N(0, tau^2 sigma^2), tau -> inf),
    p(sigma^2) ∝ 1 / sigma^2, integrated numerically; the factor tau * sigma turns the intercept prior flat."""
    rng = np.random.default_rng(0)
    n = 8
    x = rng.uniform(-3, 3, n)
    y = np.sin(x) + 0.5 * rng.normal(size=n) + 2.0
    phi = _dictionary(x)
    tau2 = 1e6

    def marginal(cov_unit):
        def integrand(log_s2):
            s2 = np.exp(log_s2)
            return np.exp(stats.multivariate_normal(np.zeros(n), s2 * cov_unit).logpdf(y) + 0.5 * log_s2 + 40.0)

        return integrate.quad(integrand, -20, 20, limit=400)[0]

    base = tau2 * np.ones((n, n)) + np.eye(n)
    bf = marginal(base + phi @ np.diag(PRIOR_VAR) @ phi.T) / marginal(base)
    data = np.column_stack([x, y])
    lbf = log_bayes_factors_rows(data, np.zeros_like(data, dtype=bool))
    assert np.exp(lbf[1, 1]) == pytest.approx(bf, rel=1e-4)


def _brute_force_parent_posterior(data, intervened, target, d):
    """P(Pa_target = S): every assignment of parent sets, kept if acyclic, weighted by its number of linear
    extensions times prod_v rho(Pa_v) BF_v(Pa_v), scores in the n x n form (`_direct_log_bf`)."""
    def log_beta(v, parents):
        rows = ~intervened[:, v]
        y = data[rows, v]
        lbf = 0.0 if rows.sum() < 2 else _direct_log_bf(y, [data[rows, j] for j in parents])
        return -np.log(comb(d - 1, len(parents))) + lbf

    options = [[tuple(j for j in range(d) if j != v and m >> j & 1) for m in range(1 << d) if not m >> v & 1]
               for v in range(d)]
    cache = {}
    weights, keys = [], []
    for graph in product(*options):
        orders = 0
        for perm in product(range(d), repeat=d):  # count orders: permutations with every parent placed first
            if len(set(perm)) == d and all(perm.index(p) < perm.index(v) for v in range(d) for p in graph[v]):
                orders += 1
        if not orders:
            continue
        w = np.log(orders)
        for v in range(d):
            if (v, graph[v]) not in cache:
                cache[v, graph[v]] = log_beta(v, graph[v])
            w += cache[v, graph[v]]
        weights.append(w), keys.append(frozenset(graph[target]))
    p = np.exp(np.array(weights) - logsumexp(np.array(weights), 0))
    out = {}
    for key, pi in zip(keys, p):
        out[key] = out.get(key, 0.0) + pi
    return out


@pytest.mark.parametrize("d", [3, 4])
def test_posterior_equals_brute_force_enumeration(d):
    assert factorial(d) <= 24
    rng = np.random.default_rng(d)
    n = 14
    data = rng.normal(size=(n, d))
    data[:, 1] += np.sin(2 * data[:, 0])
    data[:, d - 1] += np.tanh(data[:, 1]) - 0.5 * data[:, 0] ** 2
    intervened = np.zeros((n, d), dtype=bool)
    intervened[:4, 1] = True
    intervened[4:6, 0] = True
    variables = [f"X{i}" for i in range(d)]
    for target in range(d):
        s = AdditiveSurrogate(variables, variables[target])
        s.update(data[:7], intervened[:7])
        s.update(data[7:], intervened[7:])
        post = s.posterior()
        expected = _brute_force_parent_posterior(data, intervened, target, d)
        assert sum(expected.values()) == pytest.approx(1.0)
        for parents, p in expected.items():
            assert post.probability({variables[i] for i in parents}) == pytest.approx(p, abs=1e-9)


def _cosine_pair(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """X -> Y with Y = 2 cos(X) + 0.5 eps: no linear correlation on X ~ N(0, 1.5^2) (cos is even)."""
    rng = np.random.default_rng(seed)
    x = 1.5 * rng.normal(size=n)
    data = np.column_stack([x, 2 * np.cos(x) + 0.5 * rng.normal(size=n)])
    return data, np.zeros_like(data, dtype=bool)


def test_sees_an_even_mechanism_the_linear_surrogate_misses():
    data, mask = _cosine_pair(30, 1)
    additive, linear = AdditiveSurrogate(["X", "Y"], "Y"), ExactSurrogate(["X", "Y"], "Y")
    additive.update(data, mask), linear.update(data, mask)
    assert additive.posterior().marginals["X"] > 0.99
    assert linear.posterior().marginals["X"] < 0.5


def test_the_child_units_do_not_change_its_score_but_a_parent_units_do():
    data, mask = _cosine_pair(20, 2)
    base = log_local_scores_rows(data, mask)
    child = log_local_scores_rows(data * [1.0, 3.0] + [0.0, -7.0], mask)
    assert child[1, 1] == pytest.approx(base[1, 1], abs=1e-9)  # Y's score of {X}: Y in other units
    parent = log_local_scores_rows(data * [10.0, 1.0], mask)  # X in tenths: cos(X) is another shape of X / 10
    assert abs(parent[1, 1] - base[1, 1]) > 1.0


def test_posterior_models_reproduce_the_mechanism():
    data, mask = _cosine_pair(200, 3)
    s = AdditiveSurrogate(["X", "Y"], "Y")
    s.update(data, mask)
    rng = np.random.default_rng(0)
    models = s.posterior_models(40, rng)
    eps = rng.standard_normal((400, 2))
    for x, truth in ((0.0, 2.0), (np.pi / 2, 0.0), (2.5, 2 * np.cos(2.5))):
        means = [m.simulate({0: x}, eps)[:, 1].mean() for m in models]
        assert np.mean(means) == pytest.approx(truth, abs=0.2)
    m = models[0]
    each = m.simulate_each(np.array([0, 0]), np.array([0.5, 1.5]), eps[0])
    for i, value in enumerate((0.5, 1.5)):
        assert np.allclose(each[i], m.simulate({0: value}, eps[:1])[0])


def test_environment_runs_the_additive_surrogate_with_its_expected_gain():
    scm = SCM(["X", "Y"], {"X": ExpressionMechanism((), "0"), "Y": ExpressionMechanism(("X",), "2 * cos(X)")},
              {"X": 1.0, "Y": 0.5}, {"X": (-3.0, 3.0)}, "Y")
    env = make_causal_env("additive")()
    env.reset(scm_json=scm.to_json(), seed=0, budget=4, initial_samples=6)
    for value in (0.0, 3.0, -3.0):
        env.intervene("X", value)
    steps = env.trace.steps
    assert isinstance(env.surrogate, AdditiveSurrogate) and env.surrogate.updates == 4
    assert all(s.expected_info_gain is not None and np.isfinite(s.expected_info_gain) for s in steps)  # a MC estimate
    assert env.trace.final_posterior.marginals["X"] > env.trace.initial_posterior.marginals["X"]
    log_post = parent_log_posterior(env.surrogate.log_beta[None], 1)[0][0]
    assert np.exp(log_post[1]) == pytest.approx(env.trace.final_posterior.marginals["X"])
