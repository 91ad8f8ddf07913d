"""The end-of-run held-out change: paired per row, a Student-t 95% interval over rows, and the verdict in words."""

import json

import numpy as np
import pytest
from scipy import stats

from training.errors import BadInputError
from training.evaluation.episodes import Episode, write_episodes
from training.compare import main as compare
from training.evaluation.heldout_change import MetricChange, changes, paired_change, row_means, run_changes


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


def _evaluation(directory, scores, regrets, greedy_scores=None):
    """A held-out evaluation as training writes it: sampled episodes (2 per row) and, optionally, greedy ones."""
    episodes = [Episode(row=r, sample=s, seed=10 * r + s, score=scores[r][s], metrics={"regret": regrets[r][s]})
                for r in range(len(scores)) for s in range(2)]
    write_episodes(directory, episodes, {"metric_directions": {"score": "higher", "regret": "lower"}})
    if greedy_scores is not None:
        with open(directory / "eval_greedy.jsonl", "w") as f:
            for r, score in enumerate(greedy_scores):
                f.write(json.dumps(Episode(row=r, sample=0, seed=10 * r, score=score).as_json()) + "\n")


def test_a_finished_runs_comparison_is_rebuilt_from_its_files_the_greedy_reward_after_the_sampled_metrics(
        tmp_path, capsys):
    run = tmp_path / "run"
    _evaluation(run / "heldout" / "step-000000", [[0.1, 0.3], [0.2, 0.2], [0.5, 0.1], [0.0, 0.2]],
                [[2.0, 2.0], [1.0, 1.0], [3.0, 1.0], [2.0, 2.0]], greedy_scores=[0.2, 0.1, 0.3, 0.2])
    _evaluation(run / "heldout" / "step-000002", [[0.9, 0.9]] * 4, [[9.0, 9.0]] * 4)  # no greedy file
    _evaluation(run / "heldout" / "step-000004", [[0.3, 0.5], [0.2, 0.4], [0.4, 0.4], [0.3, 0.3]],
                [[1.0, 1.0], [0.5, 0.5], [1.0, 1.0], [1.0, 1.0]], greedy_scores=[0.6, 0.4, 0.7, 0.5])
    result = compare([str(run), "--since_start"])["heldout_change"]  # the last evaluation by default
    result = [MetricChange(**{**c, "ci95": tuple(c["ci95"]) if c["ci95"] else None}) for c in result]
    assert [c.metric for c in result] == ["regret", "reward", "greedy_reward"]
    by = {c.metric: c for c in result}
    # row means 0.2 0.2 0.3 0.1 -> 0.4 0.3 0.4 0.3
    assert by["reward"].diff == pytest.approx(np.mean([0.2, 0.1, 0.1, 0.2]))
    assert by["greedy_reward"].start == pytest.approx(0.2) and by["greedy_reward"].final == pytest.approx(0.55)
    assert by["greedy_reward"].diff == pytest.approx(0.35) and by["greedy_reward"].verdict == "improved"
    assert by["regret"].better == "lower" and by["regret"].verdict == "improved"
    assert "greedy_reward (higher is better): 0.200 -> 0.550" in capsys.readouterr().out
    # an evaluation without greedy episodes compares the sampled metrics only
    assert [c.metric for c in run_changes(run, step=2)] == ["regret", "reward"]
    with pytest.raises(BadInputError, match="--step 3: the held-out evaluations are at steps \\[0, 2, 4\\]"):
        run_changes(run, step=3)
    with pytest.raises(BadInputError, match="no held-out evaluation at step 0"):
        run_changes(tmp_path / "empty")
