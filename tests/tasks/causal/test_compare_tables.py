"""The causal task's tables over `training.compare` on evaluation directories (training/tasks/causal/compare_tables.py):
tables across seeds, the paired test of each difference over SCMs (not episodes), Holm within each metric, the pooled
causal table."""

import numpy as np
import pytest

from training.analysis.stats import compare_paired
from training.analysis.comparison import ComparisonError
from training.evaluation.episodes import write_episodes
from training.tasks.causal.evaluation_task import METRIC_DIRECTIONS, as_episode
from training.analysis.compared_runs import RunDirError, load_runs
from training.compare import main as compare
from training.tasks.causal.compare_tables import compare_policies, significance


def load_policies(specs: list[str]):
    """The results view's loading: every LABEL=PATH a model (training.analysis.compared_runs.load_runs)."""
    return load_runs(specs, grouped=True)
from training.tasks.causal.reward_components import COMPONENTS


def record(row: int, k: int, regret: float, parent_f1: float = 0.5, info_gain: float = 0.3, reward: float = 0.4,
           decoding: str = "sampled") -> dict:
    """A causal episode record, as training.tasks.causal.policy_episodes writes it (the fields results reads)."""
    return {"row": row, "episode": k, "decoding": decoding, "regret": regret, "parent_f1": parent_f1,
            "info_gain": info_gain, "final_entropy": 1.0, "reward": reward, **{c: 0.1 for c in COMPONENTS},
            "calls": 4.0, "invalid_calls": 0.0, "malformed_calls": 0.0, "best_expected": 2.0 - regret, "optimum": 2.0,
            "parent_marginals": {"X": 0.9, "Z": 0.1}, "interventions_on": {"X": 3, "Z": 1},
            "mechanism": ("linear", "nonlinear")[row % 2]}


def write_eval(path, records: list[dict]):
    """An evaluation directory (eval.jsonl, eval_summary.json) of causal records, as `training.evaluate` writes one."""
    sampled = records[0]["decoding"] != "greedy"
    write_episodes(path, [as_episode(r, 0, sampled) for r in records], {"task": "causal",
                                                                        "metric_directions": METRIC_DIRECTIONS})
    return str(path)


def policy(shift: float, seed: int, noise_seed: int, rows: int = 20, episodes: int = 2, noise: float = 0.05,
           decoding: str = "sampled") -> list[dict]:
    """`rows` SCMs x `episodes`: per-episode difficulty shared by every policy (from `seed`: paired), the policy's
    own noise (from `noise_seed`), regret lowered and parent F1, info gain and reward raised by `shift`."""
    base = np.random.default_rng(seed).normal(size=rows * episodes)
    own = np.random.default_rng(noise_seed).normal(0, noise, (4, rows * episodes))
    return [record(i // episodes, i % episodes, 1.0 + 0.1 * base[i] - shift + own[0, i], 0.5 + shift + own[1, i],
                   0.3 + shift + own[2, i], 0.4 + shift + own[3, i], decoding) for i in range(rows * episodes)]


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_the_unit_is_the_scm_not_the_episode(tmp_path):
    """4 episodes per SCM share a per-SCM effect whose mean is small against its spread: over the 80 episodes the
    difference looks real, over the 20 SCMs it is not."""
    rng = np.random.default_rng(2)
    effect = rng.normal(0.1, 0.3, 20)
    rows = np.arange(80) // 4
    base_regret = 1.0 + rng.normal(0, 0.01, 80)
    other_regret = base_regret - effect[rows] + rng.normal(0, 0.01, 80)
    assert compare_paired(other_regret, base_regret).p < 0.05  # what a test over episodes would say
    dirs = {}
    for name, regret in (("base", base_regret), ("other", other_regret)):
        noise = rng.normal(0, 0.01, (3, 80))
        dirs[name] = write_eval(tmp_path / name, [record(int(r), i % 4, float(x), 0.5 + noise[0, i], 0.3 + noise[1, i],
                                                         0.4 + noise[2, i])
                                                  for i, (r, x) in enumerate(zip(rows, regret, strict=True))])
    results = compare_policies(load_policies([f"base={dirs['base']}", f"other={dirs['other']}"]), "base")
    (pair,) = results["regret"]["pairwise"]
    assert (pair["a"], pair["b"]) == ("other", "base") and pair["n"] == 20
    assert results["regret"]["episodes"]["units"] == 20
    assert pair["p"] > 0.05 and not pair["significant"]
    assert pair["mean_diff"] == pytest.approx(float(np.mean(other_regret - base_regret)))
    line = next(cells(s) for s in significance(results, "base") if s.startswith("| other | base | regret |"))
    assert float(line[6]) > 0.05 and int(line[8]) == 20
    assert line[9] == "no significant difference between other and base"


def test_a_better_policy_is_significant_after_holm_and_an_equal_one_is_not(tmp_path):
    specs = []
    for label, shift, offset in (("better", 0.3, 10), ("same", 0.0, 20), ("base", 0.0, 30)):
        dirs = [write_eval(tmp_path / f"{label}_s{s}", policy(shift, s, offset + s)) for s in (0, 1)]
        assert len(dirs) == 2
        specs.append(f"{label}={tmp_path}/{label}_s*")
    results = compare_policies(load_policies(specs), "base")
    for metric in ("regret", "parent_f1", "info_gain", "score"):
        pairs = {(p["a"], p["b"]): p for p in results[metric]["pairwise"]}
        assert set(pairs) == {("better", "base"), ("same", "base"), ("better", "same")}  # the versus second
        better, same = pairs[("better", "base")], pairs[("same", "base")]
        assert better["significant"] and better["p_holm"] < 0.05
        assert not same["significant"] and same["p_holm"] >= 0.05
        assert better["mean_diff"] < 0 if metric == "regret" else better["mean_diff"] > 0
        # Holm within the metric, over its 3 pairs: the smallest p is multiplied by 3
        smallest = min(pairs.values(), key=lambda p: p["p"])
        assert smallest["p_holm"] == pytest.approx(min(1.0, 3 * smallest["p"]))
    regret = {(p["a"], p["b"]): p for p in results["regret"]["pairwise"]}
    assert regret[("better", "base")]["verdict"] == "better better than base (lower is better)"
    assert results["regret"]["ranking"][0] == "better" and results["info_gain"]["ranking"][0] == "better"
    lines = significance(results, "base")
    assert "Holm-corrected within each metric over its 3 pair(s)" in lines[0]
    rows = {(c[0], c[1], c[2]): c for c in map(cells, lines[4:])}
    assert len(rows) == 8 and all(b == "base" for _, b, _ in rows)  # 2 policies x 4 metrics, against base only
    info_gain = rows[("better", "base", "info_gain")]
    assert float(info_gain[3]) > 0 and float(info_gain[6]) < 0.05
    assert float(rows[("same", "base", "regret")][6]) >= 0.05


def test_each_scm_is_averaged_over_its_episodes_and_the_seeds_first(tmp_path):
    """An episode unscorable in one seed leaves its SCM with one episode: the SCM's mean over it, then the mean over
    SCMs, not the mean over the pooled episodes."""
    rows, episodes = 5, 2
    rng = np.random.default_rng(4)
    regret = {name: rng.uniform(0, 2, (rows * episodes,)) for name in ("a_s0", "a_s1", "b")}
    for name, values in regret.items():
        eps = [as_episode(record(i // episodes, i % episodes, float(x)), 0, True) for i, x in enumerate(values)]
        if name == "a_s0":
            eps[1].metrics["regret"] = None  # row 0, episode 1
            eps[1].extra = {**eps[1].extra, "regret": None}
        write_episodes(tmp_path / name, eps, {"metric_directions": METRIC_DIRECTIONS})
    results = compare_policies(load_policies([f"a={tmp_path}/a_s*", f"b={tmp_path}/b"]), "b")
    result = results["regret"]
    a = ((regret["a_s0"] + regret["a_s1"]) / 2).reshape(rows, episodes)
    b = regret["b"].reshape(rows, episodes)
    scm_diff = [(a[0, 0] - b[0, 0]), *(a[1:] - b[1:]).mean(axis=1)]  # row 0: its one scorable episode
    (pair,) = result["pairwise"]
    assert pair["n"] == rows and result["episodes"] == {"total": 10, "scorable_in_all": 9, "left_out": 1, "units": 5}
    assert pair["mean_diff"] == pytest.approx(float(np.mean(scm_diff)))
    pooled = np.delete((a - b).ravel(), 1)
    assert pair["mean_diff"] != pytest.approx(float(pooled.mean()))
    model = {m["name"]: m for m in result["models"]}["a"]
    assert [r["mean"] for r in model["runs"]] == pytest.approx([np.delete(regret["a_s0"], 1).mean(),
                                                                regret["a_s1"].mean()])


def test_the_cli_reads_seed_directories_and_prints_the_tables(tmp_path):
    for s in (0, 1, 2):
        write_eval(tmp_path / f"trained_s{s}", policy(0.3, s, 10 + s))
        write_eval(tmp_path / f"warm_start_s{s}", policy(0.0, s, 20 + s))
    random = policy(-0.1, 0, 30, decoding="policy")
    write_eval(tmp_path / "random", random)
    text = compare([f"trained={tmp_path}/trained_s*", f"warm_start={tmp_path}/warm_start_s*",
                    f"random={tmp_path}/random", "--baseline", "warm_start", "--out", str(tmp_path / "cmp")])["task_tables"]
    assert (tmp_path / "cmp" / "causal_tables.md").read_text() == text + "\n"
    lines = text.splitlines()
    assert lines[0] == "Decoding: sampled; baselines: their own policy."
    trained = cells(next(s for s in lines if s.startswith("| trained |")))
    seed_regret = [np.mean([r["regret"] for r in policy(0.3, s, 10 + s)]) for s in (0, 1, 2)]
    mean, std = (float(x) for x in trained[1].split(" ± "))
    assert mean == pytest.approx(np.mean(seed_regret), abs=1e-3) and std == pytest.approx(np.std(seed_regret, ddof=1),
                                                                                           abs=1e-3)
    assert trained[5].count("trained_s") == 3 and trained[5].startswith(f"trained_s0: {seed_regret[0]:.3f} / ")
    random_line = cells(next(s for s in lines if s.startswith("| random |")))
    assert "±" not in random_line[1] and random_line[1] == f"{np.mean([r['regret'] for r in random]):.3f}"
    tests = [cells(s) for s in lines if s.startswith(("| trained | ", "| random | ")) and len(cells(s)) == 11]
    assert {(c[0], c[1]) for c in tests} == {("trained", "warm_start"), ("random", "warm_start")}
    trained_regret = next(c for c in tests if c[:3] == ["trained", "warm_start", "regret"])
    assert float(trained_regret[3]) < 0 and float(trained_regret[6]) < 0.05 and int(trained_regret[8]) == 20
    assert float(trained_regret[10]) < 0.05  # three seeds each: Welch's t on the per-seed means
    random_regret = next(c for c in tests if c[:3] == ["random", "warm_start", "regret"])
    assert random_regret[10] == "n/a"  # one directory: no seed spread
    pooled = lines[lines.index("Pooled over seeds (episodes, not SCMs):") + 1:]
    trained_pooled = cells(next(s for s in pooled if s.startswith("| trained |")))
    assert "Within mechanism linear:" in lines and "Within mechanism nonlinear:" in lines
    linear = lines[lines.index("Within mechanism linear:"):]
    linear_trained = cells(next(s for s in linear if s.startswith("| trained |")))
    linear_regret = [np.mean([r["regret"] for r in policy(0.3, s, 10 + s) if r["row"] % 2 == 0]) for s in (0, 1, 2)]
    assert float(linear_trained[1].split(" ± ")[0]) == pytest.approx(np.mean(linear_regret), abs=1e-3)
    assert trained_pooled[-1] == "120" and trained_pooled[-2] == "X 0.75, Z 0.25"
    best = np.array([r["best_expected"] for s in (0, 1, 2) for r in policy(0.3, s, 10 + s)])  # over the episodes
    assert trained_pooled[8] == f"{best.mean():.3f} ± {best.std():.3f} (2.0000)"
    assert trained_pooled[5] == "4.000 ± 0.000" and trained_pooled[7] == " / ".join(["0.100"] * len(COMPONENTS))


def test_inputs_are_evaluation_directories(tmp_path):
    jsonl = tmp_path / "trained_s0.jsonl"
    jsonl.write_text("{}\n")
    base = write_eval(tmp_path / "base", policy(0.0, 0, 1))
    out = ["--out", str(tmp_path / "cmp")]
    with pytest.raises(RunDirError, match=f"{jsonl}: not a directory; pass evaluation directories"):
        compare([f"trained={jsonl}", f"base={base}", *out])
    with pytest.raises(RunDirError, match="matches nothing"):
        compare([f"trained={tmp_path}/nothing*", f"base={base}", *out])
    with pytest.raises(ComparisonError, match="need at least 2 models"):
        compare([f"base={base}", *out])
    with pytest.raises(ComparisonError, match="--baseline 'other' is not one of the models"):
        compare([f"base={base}", f"b={write_eval(tmp_path / 'b', policy(0.0, 0, 2))}", "--baseline", "other", *out])
    greedy = write_eval(tmp_path / "greedy", policy(0.0, 0, 3, episodes=1, decoding="greedy"))
    with pytest.raises(ComparisonError, match="greedy episodes .* pair only with greedy ones"):
        compare([f"greedy={greedy}", f"base={base}", *out])


def test_episodes_of_one_scm_are_one_unit_too_few_to_test(tmp_path):
    """training.compare has no per-episode mode: 20 episodes of one row are one SCM, and it refuses to test."""
    a = write_eval(tmp_path / "a", policy(0.0, 0, 1, rows=1, episodes=20))
    b = write_eval(tmp_path / "b", policy(0.3, 0, 2, rows=1, episodes=20))
    with pytest.raises(ComparisonError, match="only 1 rows have a value in every run; need at least 3"):
        compare([f"a={a}", f"b={b}", "--out", str(tmp_path / "cmp")])


def test_per_variable_columns_only_for_records_of_one_scm():
    """Final marginals and shares of interventions per variable mean something for one SCM's episodes; pooled over
    SCMs with their own variables (the bundled splits' names vary) they say so instead of listing every name."""
    from training.tasks.causal.compare_tables import summary_table

    one = [record(0, k, 0.1) for k in range(2)]
    other = {**record(1, 0, 0.2), "parent_marginals": {"PKA": 0.5}, "interventions_on": {"PKA": 2}}
    (line,) = [x for x in summary_table([("a", one)]).splitlines() if x.startswith("| a |")]
    assert "X 0.90, Z 0.10" in line and "X 0.75, Z 0.25" in line
    (line,) = [x for x in summary_table([("b", [*one, other])]).splitlines() if x.startswith("| b |")]
    assert cells(line)[9:11] == ["(several SCMs)", "(several SCMs)"] and "PKA" not in line
