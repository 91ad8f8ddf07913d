"""Tables of causal evaluation records (training.tasks.causal.evaluate_policy's JSONL, or `eval.jsonl`) across seeds.

    python -m training.tasks.causal.results trained=runs/causal/eval/trained_s*.jsonl \\
        warm_start=runs/causal/eval/warm_start_s*.jsonl random=runs/causal/eval/random.jsonl ...

Each `LABEL=GLOB` is one policy; each file matching GLOB is one training seed (a baseline has one file: it does not
train). Per file, the mean over its episodes (records with `--decoding`, default sampled; baselines' records are
all kept) of final regret, parent F1, information gain and weighted reward; per policy, the mean ± std over its
files and the per-file values. `--versus LABEL` adds, per seed, whether each policy beats LABEL on regret (lower)
and information gain (higher), with the paired difference over held-out SCMs, and a test per policy and metric of
whether the difference is real. The unit of replication is the SCM (the record's `row`): its episodes share it and
are not independent, so each SCM's metric is averaged over its episodes (and the seeds), then
`training.analysis.stats.compare_paired` (paired t, or Wilcoxon when the differences are far from normal) runs over SCMs,
with Cohen's d_z, Holm-adjusted over every test in the table. Records of a single SCM (a user's own, studied alone)
make a claim about that SCM only: there the episodes (independent environment seeds) are the units, and the table
says so.
Then, pooled over each policy's files (`summary_table`, also what the evaluation and baseline commands print): the
best E[target | do] reached against the optimum, the final parent marginals and each variable's share of the
interventions.
"""

from __future__ import annotations

import argparse
import glob
import json
import re
from collections import Counter
from pathlib import Path

import numpy as np

from training.analysis.stats import compare_paired, holm, unit_means
from training.evaluation.episodes import EVAL_FILE

METRICS = ("regret", "parent_f1", "info_gain", "reward")


def load(path: str, decoding: str) -> list[dict]:
    """The causal records of a JSONL file: evaluate_policy's, or an `eval.jsonl` (training.evaluate, a run's held-out
    evaluation; a directory holding one is read too), whose episodes carry them in `extra`."""
    if Path(path).is_dir():
        path = str(Path(path) / EVAL_FILE)
    with open(path) as f:
        records = [json.loads(line) for line in f if line.strip()]
    records = [r["extra"] if "episode_id" in r else r for r in records]
    return [r for r in records if r.get("decoding") in (decoding, "policy")]


def seed_of(path: str) -> str:
    m = re.search(r"s(?:eed)?(\d+)", path.rsplit("/", 1)[-1])
    return m.group(1) if m else "-"  # a baseline: one file, no training seed


def table(policies: dict[str, list[str]], decoding: str, versus: str | None) -> str:
    lines = ["| policy | final regret | parent F1 | info gain (nats) | reward | per seed (regret / F1 / info gain) |",
             "| --- | --- | --- | --- | --- | --- |"]
    per_seed: dict[str, dict[str, dict[str, float]]] = {}
    episodes: dict[str, dict[str, list[dict]]] = {}
    for label, paths in policies.items():
        per_seed[label], episodes[label] = {}, {}
        for p in sorted(paths):
            recs = load(p, decoding)
            if not recs:
                raise ValueError(f"{p}: no records with decoding {decoding!r}")
            per_seed[label][seed_of(p)] = {m: float(np.mean([r[m] for r in recs])) for m in METRICS}
            episodes[label][seed_of(p)] = recs
        means = {m: [v[m] for v in per_seed[label].values()] for m in METRICS}
        cells = [f"{np.mean(means[m]):.3f} ± {np.std(means[m]):.3f}" for m in METRICS]
        seeds = "; ".join(f"{v['regret']:.3f} / {v['parent_f1']:.3f} / {v['info_gain']:.3f}"
                          for v in per_seed[label].values())
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {seeds} |")
    if versus:
        lines += ["", f"Against `{versus}`, per seed (paired difference over SCMs, mean ± s.e.):", "",
                  "| policy | seed | regret: lower? (diff) | info gain: higher? (diff) |", "| --- | --- | --- | --- |"]
        for label in policies:
            if label == versus:
                continue
            for seed, recs in episodes[label].items():
                ref = episodes[versus].get(seed) or next(iter(episodes[versus].values()))
                key = {(r["row"], r["episode"]): r for r in ref}
                pairs = [(r, key[(r["row"], r["episode"])]) for r in recs if (r["row"], r["episode"]) in key]
                cells = []
                units = [unit_key(a, single_scm(episodes)) for a, _ in pairs]
                for m, sign in (("regret", -1), ("info_gain", 1)):
                    _, d = unit_means([a[m] - b[m] for a, b in pairs], units)
                    won = sign * d.mean() > 0
                    cells.append(f"{'yes' if won else 'NO'} ({d.mean():+.3f} ± {d.std(ddof=1) / np.sqrt(len(d)):.3f})")
                lines.append(f"| {label} | {seed} | " + " | ".join(cells) + " |")
        lines += ["", *significance(episodes, versus)]
    return "\n".join(lines)


def single_scm(episodes: dict[str, dict[str, list[dict]]]) -> bool:
    """Whether every record of every policy plays the same SCM (row)."""
    return len({r["row"] for by_seed in episodes.values() for recs in by_seed.values() for r in recs}) == 1


def unit_key(record: dict, one_scm: bool):
    """The unit of replication a record belongs to: its SCM, or, when only one SCM was played, its episode."""
    return (record["row"], record["episode"]) if one_scm else record["row"]


def scm_averaged(episodes: dict[str, list[dict]], metric: str, one_scm: bool = False) -> dict:
    """Per held-out SCM (row), the metric averaged over its episodes and the seeds (files) that played them; per
    episode, averaged over the seeds, when `one_scm`."""
    records = [r for recs in episodes.values() for r in recs]
    units, means = unit_means([float(r[metric]) for r in records], [unit_key(r, one_scm) for r in records])
    return dict(zip(units, means.tolist(), strict=True))


def significance(episodes: dict[str, dict[str, list[dict]]], versus: str) -> list[str]:
    """Paired tests of every policy against `versus` on regret, parent F1 and information gain, Holm-adjusted."""
    rows = []
    one_scm = single_scm(episodes)
    unit = "episodes" if one_scm else "SCMs"
    for label in episodes:
        if label == versus:
            continue
        for metric in ("regret", "parent_f1", "info_gain"):
            a, b = scm_averaged(episodes[label], metric, one_scm), scm_averaged(episodes[versus], metric, one_scm)
            common = sorted(set(a) & set(b))
            if len(common) < 3:
                raise ValueError(f"{label} and {versus} share {len(common)} {unit}: too few to compare")
            rows.append((label, metric, compare_paired([a[k] for k in common], [b[k] for k in common])))
    if not rows:
        return []
    _, adjusted = holm([c.p for _, _, c in rows])
    per = ("Per episode of the one SCM played (a claim about this SCM only), the difference of its seed-averaged "
           "metric" if one_scm else "Per held-out SCM, the difference of its episode- and seed-averaged metric")
    lines = [f"Is the difference from `{versus}` real? {per}; Holm over {len(rows)} tests:", "",
             f"| policy | metric | mean diff | test | p | p (Holm) | d_z | {unit} |",
             "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: |"]
    for (label, metric, c), p_holm in zip(rows, adjusted, strict=True):
        d_z = "n/a" if c.d_z is None else f"{c.d_z:+.2f}"
        lines.append(f"| {label} | {metric} | {c.mean_diff:+.3f} | {c.test} | {c.p:.2g} | {p_holm:.2g} | {d_z} | "
                     f"{c.n} |")
    return lines


def intervention_shares(records: list[dict]) -> dict[str, float]:
    """Each variable's share of the records' valid interventions (0 .. 1), in order of first appearance."""
    counts = Counter()
    for r in records:
        counts.update(r["interventions_on"])
    total = sum(counts.values())
    return {v: c / total for v, c in counts.items()} if total else {}


def summary_table(runs: list[tuple[str, list[dict]]]) -> str:
    """A markdown table, one line per (policy name, records): mean ± std over episodes of the final regret, parent
    F1, information gain, reward and invalid calls; the mean best E[target | do] against the optimum; the mean
    final parent marginals; each variable's share of the interventions."""
    lines = ["| policy | final regret | parent F1 | info gain (nats) | reward | invalid calls | best E[target | do] "
             "(optimum) | final P(v ∈ Pa(target)) | share of interventions | episodes |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | ---: |"]
    for name, records in runs:
        cells = []
        for key in ("regret", "parent_f1", "info_gain", "reward", "invalid_calls"):
            v = np.array([r[key] for r in records])
            cells.append(f"{v.mean():.3f} ± {v.std():.3f}")
        best = np.array([r["best_expected"] for r in records])
        cells.append(f"{best.mean():.3f} ± {best.std():.3f} ({np.mean([r['optimum'] for r in records]):.4f})")
        names = list(records[0]["parent_marginals"])
        marg = {v: np.mean([r["parent_marginals"].get(v, np.nan) for r in records]) for v in names}
        cells.append(", ".join(f"{v} {p:.2f}" for v, p in marg.items()))
        cells.append(", ".join(f"{v} {p:.2f}" for v, p in intervention_shares(records).items()) or "none")
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {len(records)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policies", nargs="+", help="LABEL=GLOB")
    parser.add_argument("--decoding", default="sampled", choices=["sampled", "greedy"])
    parser.add_argument("--versus", default=None, help="a LABEL to compare every policy against, seed by seed")
    args = parser.parse_args(argv)
    policies = {}
    for spec in args.policies:
        label, _, pattern = spec.partition("=")
        paths = sorted(glob.glob(pattern))
        if not paths:
            raise SystemExit(f"error: {spec!r} matches no file")
        policies[label] = paths
    text = table(policies, args.decoding, args.versus)
    runs = [(label, [r for p in paths for r in load(p, args.decoding)]) for label, paths in policies.items()]
    if all("best_expected" in r for _, recs in runs for r in recs):
        text += "\n\nPooled over seeds:\n" + summary_table(runs)
    else:  # records written before they carried the best E[target | do] and the final marginals
        text += "\n\n(no best-E[target | do] table: some records predate its fields)"
    print(text)
    return text


if __name__ == "__main__":
    main()
