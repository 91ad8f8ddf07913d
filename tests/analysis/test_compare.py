"""`python -m training.compare` on synthetic eval.jsonl files: noise alone is not a difference, a real shift is; runs
are grouped by seed; episodes that do not match are named."""

import json
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from training.analysis.compared_runs import load_run
from training.analysis.comparison import ComparisonError, compare
from training.analysis.stats import compare_paired
from training.compare import main
from training.errors import BadInputError
from training.evaluation.episodes import Episode, write_episodes
from training.evaluation.pairing_seeds import episode_seed

ROWS, SAMPLES = 100, 2


def write_run(path, scores, history=None, heldout_seed=0, group=None, seed=None, samples=SAMPLES):
    ids = [(r, s) for r in range(len(scores) // samples) for s in range(samples)]
    episodes = [
        Episode(r, s, episode_seed(heldout_seed, r, s), None if np.isnan(x) else float(x))
        for (r, s), x in zip(ids, scores, strict=True)
    ]
    write_episodes(path, episodes)
    if history is not None:
        (path / "run_summary.json").write_text(json.dumps(
            {"heldout_history": [{"step": s, "heldout/reward": r} for s, r in history]}))
        (path / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "reward": r}) + "\n" for s, r in history))
    if group is not None:
        (path / "workflow_run.json").write_text(json.dumps({"group": group, "seed": seed}))
    return path


@pytest.fixture
def base():
    return np.random.default_rng(0).normal(0.5, 0.2, ROWS * SAMPLES)  # per-episode difficulty shared by all models


def test_noise_alone_is_not_a_significant_difference(tmp_path, base):
    rng = np.random.default_rng(1)
    a = write_run(tmp_path / "a", base + rng.normal(0, 0.05, base.size))
    b = write_run(tmp_path / "b", base + rng.normal(0, 0.05, base.size))
    result = main([str(a), str(b), "--out", str(tmp_path / "cmp")])
    (pair,) = result["pairwise"]
    assert pair["p_holm"] > 0.05 and not pair["significant"]
    assert pair["verdict"] == "no significant difference between a and b"
    assert pair["d_z_ci95"][0] < 0 < pair["d_z_ci95"][1]


def test_a_real_shift_is_significant_and_ranked_first(tmp_path, base):
    rng = np.random.default_rng(2)
    runs = {name: base + shift + rng.normal(0, 0.05, base.size) for name, shift in
            (("base", 0.0), ("noise", 0.0), ("better", 0.05))}
    dirs = [str(write_run(tmp_path / name, scores)) for name, scores in runs.items()]
    result = main([*dirs, "--out", str(tmp_path / "cmp"), "--baseline", "base"])
    pairs = {(p["a"], p["b"]): p for p in result["pairwise"]}
    assert pairs[("better", "base")]["significant"] and pairs[("better", "base")]["mean_diff"] > 0
    assert pairs[("better", "base")]["d_z"] > 0.5 and pairs[("better", "base")]["verdict"] == "better > base"
    assert not pairs[("noise", "base")]["significant"]
    assert result["ranking"][0] == "better"
    assert result["omnibus"]["p"] < 1e-6
    md = (tmp_path / "cmp" / "comparison.md").read_text()
    assert "| better vs base |" in md and "**better > base**" in md
    assert json.loads((tmp_path / "cmp" / "comparison.json").read_text())["ranking"][0] == "better"
    for plot in ("score_distributions.png", "reward_curves.png"):
        assert (tmp_path / "cmp" / plot).stat().st_size > 10_000


def test_seeds_of_one_configuration_form_one_model_with_a_curve_ci(tmp_path, base):
    rng = np.random.default_rng(3)
    dirs = []
    for seed in range(3):
        dirs.append(str(write_run(tmp_path / f"grpo-seed{seed}", base + 0.1 + rng.normal(0, 0.05, base.size),
                                  history=[(0, 0.5), (10, 0.6 + 0.01 * seed), (20, 0.62 + 0.01 * seed)])))
        dirs.append(str(write_run(tmp_path / f"x{seed}", base + rng.normal(0, 0.05, base.size),
                                  group="warm_start", seed=seed, history=[(0, 0.5)])))
    result = main([*dirs, "--out", str(tmp_path / "cmp")])
    models = {m["name"]: m for m in result["models"]}
    assert set(models) == {"grpo", "warm_start"}
    assert [r["seed"] for r in models["grpo"]["runs"]] == [0, 1, 2]
    curve = models["grpo"]["heldout_curve"]
    assert [c["step"] for c in curve] == [0, 10, 20] and curve[1]["mean"] == pytest.approx(0.61)
    assert curve[1]["ci95"][0] < 0.61 < curve[1]["ci95"][1] and curve[0]["ci95"] == (0.5, 0.5)
    # moving averages (window 3) .5, .555, .577: step 0 is outside the 0.05 band around the final .577
    assert [r["convergence"]["step"] for r in models["grpo"]["runs"]] == [10, 10, 10]
    (pair,) = result["pairwise"]
    assert pair["significant"] and pair["seed_level_welch"]["p"] < 0.05


def test_unmatched_episodes_and_unpaired_seeds_are_named(tmp_path, base):
    a = write_run(tmp_path / "a", base)
    lines = (a / "eval.jsonl").read_text().splitlines()
    short = tmp_path / "short"
    short.mkdir()
    (short / "eval.jsonl").write_text("\n".join(lines[:-3]) + "\n")
    with pytest.raises(ComparisonError, match=r"3 episode id\(s\) missing from short.*99:1"):
        main([str(a), str(short), "--out", str(tmp_path / "cmp")])
    other_seed = write_run(tmp_path / "other", base, heldout_seed=1)
    with pytest.raises(ComparisonError, match="different seeds in other and a"):
        main([str(a), str(other_seed), "--out", str(tmp_path / "cmp")])


def test_unscorable_episodes_are_left_out_and_counted(tmp_path, base):
    holes = base.copy()
    holes[:10] = np.nan
    one_hole = base.copy()
    one_hole[10] = np.nan  # in one seed of b only: the episode is unscorable for b, not averaged over the other seed
    result = main([str(write_run(tmp_path / "a", holes)), str(write_run(tmp_path / "b-seed0", base + 0.2)),
                   str(write_run(tmp_path / "b-seed1", one_hole + 0.2)), "--out", str(tmp_path / "cmp")])
    # rows 0-4 lose both samples, row 5 one: 95 rows remain, the tests' unit
    assert result["episodes"] == {"total": 200, "scorable_in_all": 189, "left_out": 11, "units": 95}
    assert result["pairwise"][0]["n"] == 95
    assert result["models"][0]["unscorable_episodes"] == 10 and result["models"][1]["unscorable_episodes"] == 1


def test_holm_turns_two_borderline_differences_into_no_significant_difference(tmp_path, base):
    # Two models each shifted from the baseline by differences with t = 2.2 (raw p = 0.029, exactly normal quantiles)
    # and unrelated to each other: Holm over the 3 pairs multiplies the two borderline p-values by 3 and 2.
    # One sample per row, so that the rows the tests run over are these episodes.
    n = base.size
    z = stats.norm.ppf((np.arange(n) + 0.5) / n)
    shift = 2.2 / np.sqrt(n)
    b = base + shift + z
    c = base + shift + np.random.default_rng(5).permutation(z)
    result = main([str(write_run(tmp_path / "base", base, samples=1)), str(write_run(tmp_path / "b", b, samples=1)),
                   str(write_run(tmp_path / "c", c, samples=1)), "--out", str(tmp_path / "cmp"), "--baseline",
                   "base"])
    pairs = {(p["a"], p["b"]): p for p in result["pairwise"]}
    for name in ("b", "c"):
        pair = pairs[(name, "base")]
        assert pair["test"] == "permutation" and pair["t_test"]["p"] == pytest.approx(0.0289, abs=5e-4)
        assert pair["p"] == pytest.approx(0.0289, abs=4e-3)  # the sign-flip test of the same mean: close to t
        assert pair["p_holm"] > 0.05 and not pair["significant"]
        assert pair["verdict"] == f"no significant difference between {name} and base"


def test_episodes_of_one_row_are_one_unit_not_many(tmp_path):
    """12 rows x 8 samples: the models differ by a per-row effect (shared by the row's 8 samples) whose mean is small
    against its spread across rows. Episode-level pairing counts 96 units and calls it significant; the rows are
    the independent units (12), and over them it is not."""
    rows, samples = 12, 8
    rng = np.random.default_rng(7)
    difficulty = np.repeat(rng.normal(0.5, 0.2, rows), samples)
    row_effect = np.repeat(rng.normal(0.08, 0.25, rows), samples)
    a = difficulty + rng.normal(0, 0.02, rows * samples)
    b = a + row_effect + rng.normal(0, 0.02, rows * samples)
    episode_level = compare_paired(b, a)
    assert episode_level.p < 0.05  # what the test over episodes would have said
    result = main([str(write_run(tmp_path / "a", a, samples=samples)), str(write_run(tmp_path / "b", b, samples=samples)),
                   "--out", str(tmp_path / "cmp")])
    (pair,) = result["pairwise"]
    assert pair["n"] == rows and result["episodes"]["units"] == rows
    assert pair["p"] > 0.05 and not pair["significant"]
    assert pair["mean_diff"] == pytest.approx(float(np.mean(a - b)))


def test_cli_names_a_directory_without_episodes(tmp_path, base):
    (tmp_path / "empty").mkdir()
    proc = subprocess.run([sys.executable, "-m", "training.compare", str(write_run(tmp_path / "a", base)),
                           str(tmp_path / "empty")], capture_output=True, text=True, cwd=tmp_path.parent, timeout=120)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].startswith(f"error: {tmp_path / 'empty'}")


def test_a_task_metric_is_compared_in_its_own_direction(tmp_path, base):
    """The causal task's regret: lower is better. A model with lower regret is ranked first and called better, the
    score beside it compared too, each with its own Holm family."""
    rng = np.random.default_rng(3)
    dirs = []
    for name, shift in (("base", 0.0), ("lower", -0.1)):
        regret = base + shift + rng.normal(0, 0.05, base.size)
        ids = [(r, s) for r in range(ROWS) for s in range(SAMPLES)]
        episodes = [Episode(r, s, episode_seed(0, r, s), 0.5, metrics={"regret": float(x)})
                    for (r, s), x in zip(ids, regret, strict=True)]
        write_episodes(tmp_path / name, episodes, {"metric_directions": {"score": "higher", "regret": "lower"}})
        dirs.append(str(tmp_path / name))
    result = main([*dirs, "--out", str(tmp_path / "cmp"), "--baseline", "base"])
    assert result["metric"] == "score" and set(result["by_metric"]) == {"regret"}
    regret = result["by_metric"]["regret"]
    (pair,) = regret["pairwise"]
    assert regret["better"] == "lower" and regret["ranking"] == ["lower", "base"]
    assert pair["significant"] and pair["mean_diff"] < 0
    assert pair["verdict"] == "lower better than base (lower is better)"
    only = main([*dirs, "--out", str(tmp_path / "cmp2"), "--metric", "regret"])
    assert only["metric"] == "regret" and only["by_metric"] == {}
    with pytest.raises(ComparisonError, match="not a metric of every run"):
        main([*dirs, "--out", str(tmp_path / "cmp3"), "--metric", "parent_f1"])


def test_a_caller_names_the_group_of_a_run(tmp_path, base):
    """`load_run(DIR, group=LABEL)` puts the run in LABEL whatever its directory name or workflow_run.json say (what
    a LABEL=GLOB argument does); without it, the group is read from the directory."""
    rng = np.random.default_rng(8)
    a0 = write_run(tmp_path / "trained_s0", base + 0.1 + rng.normal(0, 0.05, base.size))
    a1 = write_run(tmp_path / "other-seed1", base + 0.1 + rng.normal(0, 0.05, base.size), group="wf", seed=1)
    b = write_run(tmp_path / "ref-seed0", base + rng.normal(0, 0.05, base.size))
    assert [load_run(str(d)).group for d in (a0, a1, b)] == ["trained_s0", "wf", "ref"]
    runs = [load_run(str(a0), group="trained"), load_run(f"named={a1}", group="trained"), load_run(str(b), group="ref")]
    assert [(r.name, r.group, r.seed) for r in runs] == [("trained_s0", "trained", None), ("named", "trained", 1),
                                                         ("ref-seed0", "ref", 0)]
    result = compare(runs, baseline="ref")
    models = {m["name"]: m for m in result["models"]}
    assert set(models) == {"trained", "ref"}
    assert [r["name"] for r in models["trained"]["runs"]] == ["trained_s0", "named"]
    (pair,) = result["pairwise"]
    assert (pair["a"], pair["b"]) == ("trained", "ref") and pair["significant"] and pair["mean_diff"] > 0


def test_each_seed_is_tested_alone_against_the_baseline(tmp_path, base):
    """Two seeds shift the score up and one does not: pooled the model is better, and the per-seed tests say which
    seed carries it (Holm over the seeds)."""
    rng = np.random.default_rng(5)
    start = write_run(tmp_path / "start", base + rng.normal(0, 0.02, base.size))
    dirs = [str(start)]
    for seed, shift in enumerate((0.08, 0.08, 0.0)):
        run = write_run(tmp_path / f"trained-seed{seed}", base + shift + rng.normal(0, 0.02, base.size),
                        group="trained", seed=seed)
        dirs.append(str(run))
    result = main([*dirs, "--out", str(tmp_path / "cmp"), "--baseline", "start"])
    seeds = {t["seed"]: t for t in result["per_seed"]}
    assert [seeds[s]["significant"] for s in (0, 1, 2)] == [True, True, False]
    assert all(t["b"] == "start" and t["model"] == "trained" for t in result["per_seed"])
    assert "Each seed alone against start" in (tmp_path / "cmp" / "comparison.md").read_text()


def test_by_splits_the_rows_by_a_field_of_the_records(tmp_path, base):
    """The shift lives in half of the rows (`kind` b): within b it is significant, within a it is not."""
    rng = np.random.default_rng(6)
    kinds = ["a" if r % 2 else "b" for r in range(ROWS) for _ in range(SAMPLES)]
    shift = np.array([0.1 if k == "b" else 0.0 for k in kinds])
    paths = []
    for name, scores in (("start", base + rng.normal(0, 0.02, base.size)),
                         ("new", base + shift + rng.normal(0, 0.02, base.size))):
        path = write_run(tmp_path / name, scores)
        lines = [json.loads(x) for x in (path / "eval.jsonl").read_text().splitlines()]
        (path / "eval.jsonl").write_text("".join(json.dumps({**x, "extra": {"kind": k}}) + "\n"
                                                 for x, k in zip(lines, kinds, strict=True)))
        paths.append(str(path))
    result = main([*paths, "--out", str(tmp_path / "cmp"), "--baseline", "start", "--by", "kind"])
    within = {k: v["pairwise"][0] for k, v in result["subsets"].items()}
    assert within["kind=b"]["significant"] and not within["kind=a"]["significant"]
    assert result["subsets"]["kind=a"]["episodes"]["units"] == ROWS // 2
    assert "## Within kind=b (50 rows)" in (tmp_path / "cmp" / "comparison.md").read_text()
    with pytest.raises(ComparisonError, match="--by nothing: no episode"):
        main([*paths, "--out", str(tmp_path / "cmp2"), "--by", "nothing"])


def test_label_glob_makes_the_matching_directories_one_model(tmp_path, base):
    """`LABEL=GLOB` (what `training.tasks.causal.results` took alone): every matching directory is a seed of LABEL,
    named by its path; a JSONL file or a pattern matching nothing is named."""
    rng = np.random.default_rng(9)
    for s in (0, 1):
        write_run(tmp_path / f"trained_s{s}", base + 0.1 + rng.normal(0, 0.05, base.size))
    write_run(tmp_path / "start", base + rng.normal(0, 0.05, base.size))
    result = main([f"trained={tmp_path}/trained_s*", f"start={tmp_path}/start", "--out", str(tmp_path / "cmp"),
                   "--baseline", "start"])
    models = {m["name"]: m for m in result["models"]}
    assert set(models) == {"trained", "start"}  # NAME=DIR without a pattern names the run, as before
    assert [r["name"] for r in models["trained"]["runs"]] == [f"{tmp_path}/trained_s0", f"{tmp_path}/trained_s1"]
    assert result["decoding"] == "not recorded"
    with pytest.raises(BadInputError, match="matches nothing"):
        main([f"trained={tmp_path}/nothing*", str(tmp_path / "start"), "--out", str(tmp_path / "cmp2")])
    with pytest.raises(ComparisonError, match="--step: only with --since_start"):
        main([str(tmp_path / "start"), "--step", "2"])
