"""SCMs at the sizes real benchmarks have (issue 35): the exact surrogate with an in-degree bound, checked against
brute-force enumeration of the bounded DAGs; the learned surrogate above the exact one's limit; one error line for an
SCM larger than the chosen surrogate handles; the shipped 11-, 12-, 20- and 30-variable files through the baselines."""

import json
from math import comb
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.tasks.causal.helpers import intervention_rows, observational_rows
from training.tasks.causal import evaluate_baselines, train_scm
from training.tasks.causal.scm.families import random_scm
from training.tasks.causal.scm.user_scm import load_user_scm
from training.tasks.causal.scm.write_scm import main as write_scm
from training.tasks.causal.surrogates.exact_surrogate import ExactSurrogate
from training.tasks.causal.surrogates.learned_surrogate import LearnedSurrogate
from training.tasks.causal.surrogates.linear_scores import NodeStats, log_local_scores, merge_rows
from training.tasks.causal.surrogates.structure_posterior import (
    all_dags,
    enumerate_parent_posterior,
    parent_log_posterior,
)
from training.tasks.causal.surrogates.subsets import EXACT_MAX_VARS, parent_bound

SCMS = Path(__file__).resolve().parents[3] / "examples" / "scms"


def scores(scm, rng, max_parents):
    batches = [observational_rows(scm, 12, rng), *(intervention_rows(scm, v, 2, rng) for v in scm.actionable)]
    st = merge_rows(NodeStats.empty(scm.d), np.vstack([b[0] for b in batches]), np.vstack([b[1] for b in batches]))
    return log_local_scores(st.count[None], st.mean[None], st.m2[None], max_parents)


@pytest.mark.parametrize("max_parents", [1, 2])
def test_the_bounded_posterior_equals_enumeration_over_the_dags_within_the_bound(max_parents):
    scm = random_scm("er", 5, 3)
    log_beta = scores(scm, np.random.default_rng(0), max_parents)
    t = scm.index[scm.target]
    dp = np.exp(parent_log_posterior(log_beta, t)[0][0])
    brute = enumerate_parent_posterior(log_beta[0], t)
    assert np.allclose(dp, brute, atol=1e-10)
    sizes = np.array([bin(m).count("1") for m in range(32)])
    assert dp[sizes > max_parents].max() == 0.0 and dp[sizes <= max_parents].sum() == pytest.approx(1.0)
    masks, _ = all_dags(5)  # the bound removes DAGs, not just sets of the target: some node has > k parents
    assert (np.vectorize(lambda m: bin(m).count("1"))(masks).max(axis=1) > max_parents).any()
    unbounded = np.exp(parent_log_posterior(scores(scm, np.random.default_rng(0), None), t)[0][0])
    assert not np.allclose(dp, unbounded, atol=1e-6)


def test_the_default_bound_is_none_up_to_10_variables_and_3_above():
    assert [parent_bound(d) for d in (4, 6, 10, 11, 16)] == [3, 5, 9, 3, 3]
    assert parent_bound(12, 5) == 5 and parent_bound(4, 9) == 3
    with pytest.raises(ValueError, match="max_parents: must be an int >= 1"):
        parent_bound(12, 0)


def test_the_exact_surrogate_on_12_variables_lists_only_the_sets_within_the_bound():
    scm = random_scm("er", 12, 0)
    sur = ExactSurrogate(scm.variables, scm.target)
    rng = np.random.default_rng(1)
    sur.update(*observational_rows(scm, 20, rng))
    post = sur.posterior()
    assert len(post.sets) == sum(comb(11, k) for k in range(4)) == 232
    assert max(len(s) for s in post.sets) == 3
    marginals = sur.edge_marginals()
    assert [post.marginals[v] for v in scm.variables if v != scm.target] == pytest.approx(
        [marginals[i] for i, v in enumerate(scm.variables) if v != scm.target])
    gain = sur.expected_gain((0, 1.0), np.eye(12, dtype=bool)[[0]], 4, rng)
    assert gain is not None and np.isfinite(gain)


def test_the_learned_surrogate_on_30_variables_draws_acyclic_models_without_listing_sets():
    scm = random_scm("er", 30, 0)
    sur = LearnedSurrogate(scm.variables, scm.target)
    rng = np.random.default_rng(0)
    sur.update(*observational_rows(scm, 10, rng))
    post = sur.posterior()
    assert len(post.marginals) == 29 and post.entropy() == pytest.approx(sur.entropy())
    assert post.probability(post.map_set()) > 0
    models = sur.posterior_models(8, rng)
    for m in models:  # a topological order exists: every parent comes before its child
        place = {v: i for i, v in enumerate(m.order)}
        assert all(place[p] < place[v] for v in range(30) for p in m.parents[v])
    x = models[0].simulate({3: 2.0}, rng.standard_normal((4, 30)))
    assert x.shape == (4, 30) and np.all(x[:, 3] == 2.0) and np.all(np.isfinite(x))
    assert np.isfinite(sur.expected_gain((3, 2.0), np.eye(30, dtype=bool)[[3]], 2, rng))


def test_a_written_scm_file_rebuilds_the_family_scm(tmp_path):
    out = write_scm(["--n_vars", "12", "--seed", "0", "--out", str(tmp_path / "er12.yaml")])
    built, original = load_user_scm(out), random_scm("er", 12, 0)
    assert built.target == original.target and built.parents() == original.parents()
    do = {original.actionable[0]: 1.5}  # the same noise gives the same rows
    assert np.allclose(built.sample(50, np.random.default_rng(4), do), original.sample(50, np.random.default_rng(4), do),
                       rtol=1e-12, atol=1e-12)
    shipped, written = (yaml.safe_load(p.read_text()) for p in (SCMS / "er12_linear.yaml", out))
    assert all(shipped[k] == written[k] for k in ("target", "goal", "variables", "edges"))  # the shipped file is current


@pytest.mark.parametrize("command", ["baselines", "train"])
def test_an_scm_larger_than_the_surrogate_is_one_error_line_naming_size_limit_and_the_one_that_handles_it(
        command, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as err:
        if command == "baselines":
            evaluate_baselines.main(["--scm", str(SCMS / "er20_linear.yaml"), "--surrogate", "exact", "--out", "b"])
        else:
            train_scm.main(["--scm", str(SCMS / "er20_linear.yaml"), "--surrogate", "exact", "--output_dir", "run"])
    assert err.value.code == 2
    message = capsys.readouterr().err.strip()
    assert message.startswith("error: ") and "\n" not in message
    assert f"the SCM has 20 variables, more than the {EXACT_MAX_VARS} the exact surrogate handles" in message
    assert "learned handles 20 (--surrogate learned)" in message
    assert not any(tmp_path.iterdir())  # nothing written


def test_greedy_eig_with_the_learned_surrogate_is_refused_by_name(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as err:
        evaluate_baselines.main(["--scm", str(SCMS / "er20_linear.yaml"), "--surrogate", "learned", "--policies",
                                 "random,greedy_eig"])
    assert err.value.code == 2 and "['greedy_eig'] need a surrogate with a batched lookahead" in capsys.readouterr().err


def test_max_parents_is_refused_for_a_surrogate_without_a_bound(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as err:
        evaluate_baselines.main(["--scm", str(SCMS / "er20_linear.yaml"), "--surrogate", "learned", "--max_parents",
                                 "2", "--policies", "random"])
    message = "max_parents: the learned surrogate has no in-degree bound (surrogates with one: exact, additive)"
    assert err.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("name,surrogate", [("sachs_linear", "exact"), ("er12_linear", "exact"),
                                            ("er20_linear", "learned"), ("er30_linear", "learned")])
def test_the_shipped_large_scms_run_through_the_baselines(name, surrogate, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    evaluate_baselines.main(["--scm", str(SCMS / f"{name}.yaml"), "--surrogate", surrogate, "--episodes_per_row", "1",
                             "--budget", "2", "--policies", "range_ends,teacher", "--out", "b"])
    from training.evaluation.episodes import read_episodes

    for policy in ("range_ends", "teacher"):
        (record,) = [e.extra for e in read_episodes(tmp_path / "b" / policy)]
        assert record["surrogate_kind"] == surrogate and record["n_vars"] == load_user_scm(
            SCMS / f"{name}.yaml").d and np.isfinite(record["regret"])


@pytest.mark.slow
@pytest.mark.parametrize("name,surrogate", [("sachs_linear", "exact"), ("er12_linear", "exact"),
                                            ("er20_linear", "learned"), ("er30_linear", "learned")])
def test_one_training_step_and_the_held_out_evaluation_on_a_large_scm(name, surrogate, tmp_path, monkeypatch):
    """About a minute each on 2 cores: rows with the teacher's traces, one GRPO step, held-out before and after."""
    monkeypatch.chdir(tmp_path)
    summary = train_scm.main(["--scm", str(SCMS / f"{name}.yaml"), "--surrogate", surrogate, "--output_dir", "run",
                              "--train_rows", "4", "--heldout_rows", "2", "--max_steps", "1",
                              "--per_device_train_batch_size", "4", "--num_generations", "4",
                              "--heldout_max_samples", "2"])
    assert summary["global_step"] == 1
    from training.evaluation.episodes import read_episodes

    records = [e.extra for e in read_episodes(tmp_path / "run")]
    assert records and all(r["n_vars"] == load_user_scm(SCMS / f"{name}.yaml").d for r in records)


def test_evaluate_refuses_greedy_eig_with_the_learned_surrogate_by_name(tmp_path, monkeypatch, capsys):
    from training.evaluate import cli
    from training.tasks.causal.episode_source import CAUSAL_RECIPE

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as err:
        cli(["--recipe", str(CAUSAL_RECIPE), "--baseline", "greedy_eig", "--surrogate", "learned", "--scm",
             str(SCMS / "er20_linear.yaml"), "--out", "g"])
    assert err.value.code == 2 and "['greedy_eig'] need a surrogate with a batched lookahead" in capsys.readouterr().err
    assert not (tmp_path / "g").exists()


def test_rows_with_the_teacher_for_a_large_scm_take_the_surrogate_that_handles_it(tmp_path, capsys):
    from training.run_setup.prompt_datasets import load_rows
    from training.tasks.causal import scm_rows

    with pytest.raises(SystemExit) as err:
        scm_rows.main(["--scm", str(SCMS / "er20_linear.yaml"), "--surrogate", "exact", "--out", str(tmp_path / "no"),
                       "--teacher"])
    assert err.value.code == 2 and "the SCM has 20 variables, more than the 16" in capsys.readouterr().err
    assert not (tmp_path / "no").exists()
    scm_rows.main(["--scm", str(SCMS / "er20_linear.yaml"), "--out", str(tmp_path / "rows"), "--teacher",
                   "--surrogate", "learned", "--train_rows", "1", "--heldout_rows", "1", "--budget", "2"])
    (row,) = load_rows(tmp_path / "rows" / "train.jsonl")
    assert row["n_vars"] == 20 and len(json.loads(row["reference_calls_json"])) >= 1
