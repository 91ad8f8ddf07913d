"""The additive surrogate's fast paths keep every value: its parent posteriors, entropies, lookahead entropies, expected
gains and option values equal, within 1e-10, those recorded from the code before them
(`tests/tasks/causal/additive_reference.py`, written at cb969d8; the 11- and 12-variable cases and the nonlinear Sachs
file, options included, at 68c1492, before issue 69's lookahead)."""

import numpy as np
import pytest

from tests.tasks.causal.additive_reference import CASES, FIXTURE, LARGE_CASES, LARGE_FIXTURE, case_state, case_values

REFERENCE = np.load(FIXTURE)
LARGE_REFERENCE = np.load(LARGE_FIXTURE)


@pytest.mark.parametrize("name", list(CASES) + list(LARGE_CASES))
def test_values_equal_the_recorded_ones(name):
    # the 8-variable case unbounded, as the recorded code scored it (the surrogate's default bound starts there)
    values = case_values(name, **({"max_parents": 7} if CASES.get(name) == 8 else {}))
    reference = LARGE_REFERENCE if name in LARGE_CASES else REFERENCE
    keys = sorted(k.split("/", 1)[1] for k in reference.files if k.startswith(f"{name}/"))
    assert sorted(values) == keys
    for key in keys:
        expected = reference[f"{name}/{key}"]
        if key == "shown":
            assert np.array_equal(values[key], expected), f"{name}: the options shown differ"
        else:
            np.testing.assert_allclose(values[key], expected, rtol=0, atol=1e-10, err_msg=f"{name}/{key}")


@pytest.mark.parametrize("groups, per_group, one_variable", [
    (3, 8, False),  # rows changing one or two variables of their base
    (70, 4, False),  # more anchors than a lane group holds (`additive_nested.MAX_LANES`)
    (2, 150, True),  # a run of data sets sharing anchor and agreement longer than a lane group
])
def test_rows_copied_from_their_anchor_equal_rows_scored_alone(groups, per_group, one_variable):
    from training.tasks.causal.surrogates.additive_anchors import anchor_rows
    from training.tasks.causal.surrogates.additive_moments import feature_rows, log_local_scores_single_rows

    _, surrogate, rng = case_state("sempler6")
    base = rng.normal(size=(groups, surrogate.d))  # each row changes one or two variables of its group's base
    rows = np.repeat(base, per_group, axis=0)
    changed = np.ones((len(rows), 2), dtype=int) if one_variable else rng.integers(0, surrogate.d, (len(rows), 2))
    rows[np.arange(len(rows)), changed[:, 0]] = rng.normal(size=len(rows))
    if not one_variable:
        rows[np.arange(len(rows))[::2], changed[::2, 1]] = rng.normal(size=len(rows) // 2)
    mask = np.zeros_like(rows, dtype=bool)
    mask[np.arange(len(rows)), changed[:, 0]] = True
    anchors, anchor_of = anchor_rows(rows, mask)
    assert len(anchors) == groups and np.all(anchor_of >= 0)
    features = feature_rows(rows)
    together = log_local_scores_single_rows(surrogate.moments, features, mask, surrogate.max_parents)
    alone = np.concatenate([log_local_scores_single_rows(surrogate.moments, features[i:i + 1], mask[i:i + 1],
                                                         surrogate.max_parents) for i in range(len(rows))])
    # a set with one member off its anchor is scored from the anchor's factor (`additive_nested._one_new_member`),
    # the same numbers as the nested step's up to rounding
    assert np.array_equal(np.isfinite(together), np.isfinite(alone))
    np.testing.assert_allclose(together, alone, rtol=0, atol=1e-10)


def test_the_lookahead_on_two_threads_equals_it_on_one(monkeypatch):
    from tests.tasks.causal.additive_reference import hypothetical_rows
    from training.tasks.causal.surrogates.lookahead_threads import parts

    scm, surrogate, rng = case_state("sempler6")
    rows, mask = hypothetical_rows(scm, rng, n=400)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    one = surrogate.what_if_rows(rows, mask)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert len(parts(len(rows))) == 2  # the nodes and the DP's data sets split over two threads
    assert np.array_equal(surrogate.what_if_rows(rows, mask), one)
