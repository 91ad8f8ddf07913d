"""`training.tasks.causal.results`: tables across seeds and the paired, Holm-corrected test of each difference."""

import json

import numpy as np
import pytest

from training.analysis.stats import compare_paired
from training.tasks.causal.results import scm_averaged, significance, table


def records(shift: float, seed: int, n: int = 40) -> list[dict]:
    rng = np.random.default_rng(seed)
    base = rng.normal(size=n)  # the same episodes (row, episode) for every policy: paired
    return [{"row": i // 2, "episode": i % 2, "decoding": "sampled", "regret": 1.0 + 0.1 * base[i] - shift,
             "parent_f1": 0.5 + shift + 0.01 * rng.normal(), "info_gain": 0.3 + shift + 0.01 * rng.normal(),
             "reward": 0.4 + shift} for i in range(n)]


def write(path, recs):
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return str(path)


def test_scm_averaged_means_each_scm_over_its_episodes_and_the_seeds():
    by_seed = {"0": [{"row": 0, "episode": 1, "regret": 1.0}, {"row": 0, "episode": 0, "regret": 2.0},
                     {"row": 3, "episode": 0, "regret": 5.0}],
               "1": [{"row": 0, "episode": 1, "regret": 3.0}, {"row": 0, "episode": 0, "regret": 6.0}]}
    assert scm_averaged(by_seed, "regret") == {0: 3.0, 3: 5.0}


def test_the_unit_is_the_scm_not_the_episode():
    """4 episodes per SCM share a per-SCM effect whose mean is small against its spread: over the 80 episodes the
    difference looks real, over the 20 SCMs it is not."""
    rng = np.random.default_rng(2)
    effect = rng.normal(0.1, 0.3, 20)
    base_regret = 1.0 + rng.normal(0, 0.01, 80)
    rows = np.arange(80) // 4
    other_regret = base_regret - effect[rows] + rng.normal(0, 0.01, 80)
    assert compare_paired(other_regret, base_regret).p < 0.05  # what a test over episodes would say
    base, other = ([{"row": int(row), "episode": i % 4, "decoding": "sampled", "regret": float(x), "parent_f1": 0.5,
                     "info_gain": 0.3, "reward": 0.4} for i, (row, x) in enumerate(zip(rows, regret))]
                   for regret in (base_regret, other_regret))
    lines = significance({"other": {"0": other}, "base": {"0": base}}, "base")
    regret = next(line.split("|") for line in lines if line.startswith("| other | regret"))
    assert float(regret[5]) > 0.05 and int(regret[8]) == 20  # p over SCMs, 20 units


def test_a_better_policy_is_significant_after_holm_and_an_equal_one_is_not():
    episodes = {
        "better": {"0": records(0.3, 0), "1": records(0.3, 1)},
        "same": {"0": records(0.0, 0), "1": records(0.0, 1)},
        "base": {"0": records(0.0, 0), "1": records(0.0, 1)},
    }
    rows = {(r.split("|")[1].strip(), r.split("|")[2].strip()): r.split("|") for r in significance(episodes, "base")
            if r.startswith("| better") or r.startswith("| same")}
    assert len(rows) == 6
    regret = rows[("better", "regret")]
    assert float(regret[3]) < 0 and float(regret[6]) < 0.05  # lower regret, Holm-adjusted p < 0.05
    assert float(rows[("better", "info_gain")][3]) > 0 and float(rows[("better", "info_gain")][6]) < 0.05
    assert float(rows[("same", "regret")][3]) == 0.0 and float(rows[("same", "regret")][6]) >= 0.05
    # Holm over the 6 tests: the smallest p is multiplied by 6 (printed to 2 significant digits)
    smallest = min(rows.values(), key=lambda r: float(r[5]))
    assert float(smallest[6]) == pytest.approx(min(1.0, 6 * float(smallest[5])), rel=0.1)


def test_table_reads_seed_files_and_adds_the_tests(tmp_path):
    paths = {"trained": [write(tmp_path / f"trained_s{s}.jsonl", records(0.3, s)) for s in (0, 1, 2)],
             "warm_start": [write(tmp_path / f"warm_start_s{s}.jsonl", records(0.0, s)) for s in (0, 1, 2)],
             "random": [write(tmp_path / "random.jsonl", records(-0.1, 0))]}
    text = table(paths, "sampled", "warm_start")
    assert "| trained | 0 | yes" in text and "| random | - |" in text
    assert "Holm over 6 tests" in text


def test_one_scm_studied_alone_pairs_its_episodes_and_says_so():
    """A user's single SCM: the claim is about that SCM, its episodes (independent seeds) are the units."""
    base = [{**r, "row": 0, "episode": i} for i, r in enumerate(records(0.0, 0))]
    better = [{**r, "row": 0, "episode": i} for i, r in enumerate(records(0.3, 0))]
    lines = significance({"better": {"0": better}, "base": {"0": base}}, "base")
    assert "a claim about this SCM only" in lines[0] and lines[2].endswith("| episodes |")
    regret = next(line.split("|") for line in lines if line.startswith("| better | regret"))
    assert float(regret[6]) < 0.05 and int(regret[8]) == 40
