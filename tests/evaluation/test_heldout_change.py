"""The end-of-run held-out change: paired per row, a Student-t 95% interval over rows, and the verdict in words."""

import numpy as np
import pytest
from scipy import stats

from training.evaluation.heldout_change import changes, paired_change, row_means


def test_row_means_average_each_rows_episodes_and_leave_out_unscorable_ones():
    assert row_means([(0, 1.0), (0, 3.0), (1, None), (2, 5.0), (2, None)]) == {0: 2.0, 2: 5.0}
    assert row_means([(0, None)]) == {}


def test_a_worked_example_pairs_rows_and_gives_the_t_interval():
    start = {0: 1.0, 1: 2.0, 2: 3.0, 3: 4.0, 9: 100.0}  # row 9 was not scored at the end: not paired
    final = {0: 0.5, 1: 1.0, 2: 2.75, 3: 3.0}
    change = paired_change("regret", "lower", start, final)
    d = np.array([-0.5, -1.0, -0.25, -1.0])
    half = stats.t.ppf(0.975, 3) * d.std(ddof=1) / 2
    assert change.rows == 4 and change.start == 2.5 and change.final == 1.8125
    assert change.diff == pytest.approx(d.mean())
    assert change.ci95 == pytest.approx((d.mean() - half, d.mean() + half))
    assert change.ci95[1] < 0 and change.verdict == "improved"  # regret fell, and lower is better
    assert "regret (lower is better): 2.500 -> 1.812" in change.sentence() and "improved" in change.sentence()


def test_the_verdict_says_when_the_interval_includes_zero_and_which_way_is_worse():
    start = {i: 0.5 for i in range(6)}
    noisy = paired_change("reward", "higher", start, {i: 0.5 + (0.1 if i % 2 else -0.08) for i in range(6)})
    assert noisy.ci95[0] < 0 < noisy.ci95[1]
    assert noisy.verdict == "no detectable change (the 95% interval includes 0)"
    worse = changes({"reward": start, "regret": start}, {"reward": {i: 0.3 + 0.01 * i for i in range(6)},
                                                         "regret": {i: 0.3 + 0.01 * i for i in range(6)}},
                    {"reward": "higher", "regret": "lower"})
    assert [(c.metric, c.verdict) for c in worse] == [("reward", "got worse"), ("regret", "improved")]
    assert paired_change("reward", "higher", {0: 1.0}, {0: 2.0}).verdict == "too few rows to tell"
    with pytest.raises(ValueError, match="share no scored row"):
        paired_change("reward", "higher", {0: 1.0}, {1: 2.0})


def test_the_figure_line_keeps_the_numbers_and_the_verdict():
    change = paired_change("regret", "lower", {i: 1.0 for i in range(4)}, {i: 1.0 + 0.1 * (i % 2) for i in range(4)})
    assert change.short() == (f"regret: 1.000 -> 1.050 (+0.050, 95% CI [{change.ci95[0]:+.3f}, {change.ci95[1]:+.3f}], "
                              "4 rows): no detectable change")
