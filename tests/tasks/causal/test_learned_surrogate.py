"""The learned surrogate: cached behavioural-cloning pretraining, and updates that really train on the data."""

from itertools import product

import numpy as np
import pytest
import torch

from tests.tasks.causal.helpers import CHAIN_VARS, chain5, intervention_rows, observational_rows
from training.tasks.causal.surrogates import learned_surrogate as ls

SMALL = {**ls.PRETRAIN, "n_scms": 16, "snapshots": [0, 6], "steps": 60}


@pytest.fixture
def small_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("STRICT_GRPO_CACHE", str(tmp_path))
    ls._pretrained_cached.cache_clear()
    yield tmp_path
    ls._pretrained_cached.cache_clear()


def test_pretraining_is_cached_under_a_fingerprint_and_reused(small_cache, monkeypatch):
    model = ls.pretrained_model(SMALL)
    path = ls.cache_path(SMALL)
    assert path.exists() and path.parent.parent == small_cache and not list(path.parent.glob("*.tmp"))
    assert ls.cache_path({**SMALL, "steps": 61}) != path  # any setting changes the fingerprint
    ls._pretrained_cached.cache_clear()
    monkeypatch.setattr(ls, "pretrain", lambda settings: pytest.fail("retrained despite the cache"))
    again = ls.pretrained_model(SMALL)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values()))


def test_update_changes_weights_and_lowers_the_loss_on_the_new_data(small_cache):
    rng = np.random.default_rng(0)
    scm = chain5()
    s = ls.LearnedSurrogate(CHAIN_VARS, "X2", settings=SMALL)
    s.update(*observational_rows(scm, 5, rng))
    new = intervention_rows(scm, "X3", 6, rng)
    before_params = [p.detach().clone() for p in (s.gamma, s.weight, s.bias, s.log_sd)]
    with torch.no_grad():
        before = float(s.data_nll(*new))
    s.update(*new)
    with torch.no_grad():
        after = float(s.data_nll(*new))
    assert after < before
    assert all(not torch.equal(a, p) for a, p in zip(before_params, (s.gamma, s.weight, s.bias, s.log_sd)))
    assert s.updates == 2


def test_posterior_is_a_distribution_with_consistent_marginals(small_cache):
    rng = np.random.default_rng(1)
    scm = chain5()
    s = ls.LearnedSurrogate(CHAIN_VARS, "X2", settings=SMALL)
    s.update(*observational_rows(scm, 8, rng))
    post = s.posterior()  # independent candidates: the 16 parent sets, never listed by the surrogate itself
    sets = [frozenset(c for c, b in zip(post.marginals, bits) if b) for bits in product((0, 1), repeat=4)]
    probs = np.array([post.probability(st) for st in sets])
    assert probs.sum() == pytest.approx(1.0)
    for v, p in post.marginals.items():
        assert p == pytest.approx(sum(pi for st, pi in zip(sets, probs) if v in st))
    assert s.entropy() == pytest.approx(-(probs * np.log(probs)).sum(), abs=1e-6)
    assert post.map_set() == sets[int(np.argmax(probs))]
    with pytest.raises(ValueError, match="samples"):
        s.update(np.zeros((1, 3)), np.zeros((1, 3), bool))
