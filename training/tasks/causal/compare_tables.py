"""The causal task's tables over `training.compare`'s comparison (`report`, the causal task's `EvalTask.report`, which
`python -m training.compare` prints after its own report when the evaluations are the causal task's): policies across
training seeds, tested over held-out SCMs. The loading (`LABEL=GLOB`), the decoding check and every test are the
comparison library's (training/analysis/); this module only lays the results out for the causal metrics and adds the
pooled causal table. (The command `python -m training.tasks.causal.results ... --versus B` it once had is
`python -m training.compare ... --baseline B`.)

    python -m training.compare trained='runs/causal/eval/trained_s*' \\
        starting_policy='runs/causal/eval/starting_policy_s*' random=runs/causal/eval/random --baseline random

The tables compare the policies (`LABEL=GLOB` groups) on regret, parent F1, information gain and the score, each
within each mechanism too, laid out as below.

Each `LABEL=GLOB` is one policy; each directory matching GLOB is an evaluation of one training seed of it, holding
`eval.jsonl` and `eval_summary.json` (`python -m training.evaluate ... --out DIR`, or a run directory whose held-out
evaluation wrote them); a baseline has one directory (`training.evaluate --baseline NAME`): it does not train. Every
number in the first two tables is `training.compare`'s (`compare_metrics`, the labels as its models, `--baseline` as its
baseline), on final regret (lower is better), parent F1, information gain and the score (the weighted reward), each in
its own direction:

* per policy, the mean over the held-out SCMs, ± the std of the per-seed means (training noise; none for one seed),
  and each seed's mean over its episodes;
* is the difference real: the unit of replication is the SCM (the episode's `row`): its episodes share it and are not
  independent, so each SCM's metric is averaged over its episodes and the policy's seeds, and the paired test (a
  sign-flip permutation test of the mean difference, with its paired t interval; Cohen's d_z) runs over SCMs, Holm-corrected within each
  metric over every pair of policies; beside it, Welch's t on the per-seed means. Without `--baseline`, every pair.

Episodes are matched by id (row, sample) and seed across all directories (`training.compare`): evaluate every policy
on the same held-out rows with the same eval seed. The episodes of one decoding are compared: a directory holds one
(`training.evaluate` writes sampled episodes, or greedy ones with `--greedy`; a run's `eval.jsonl` holds the sampled
ones, `eval_greedy.jsonl` beside it the greedy ones), and greedy episodes (one per row, no seed) pair only with greedy
ones. The rows are the units, so a single SCM studied alone is compared over held-out rows that are episodes of it
with their own noise (`python -m training.tasks.causal.scm_rows --scm FILE`): a claim about that SCM only; many
episodes of one row are one unit, too few to test.
The same two tables follow within each mechanism family (linear, nonlinear). Then, pooled over each policy's
directories (`summary_table`, also what the evaluation and baseline commands print, from the episodes' causal
records, `extra`; each family's lines after the policy's): the best E[target | do] reached against the optimum, the
final parent marginals and each variable's share of the interventions.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from training.analysis.compared_runs import ComparedRun
from training.analysis.comparison import compare_metrics, decodings, group_runs, split_by
from training.evaluation.episodes import SCORE
from training.errors import BadInputError
from training.tasks.causal.reward_components import COMPONENTS

METRICS = ("regret", "parent_f1", "info_gain", SCORE)  # compared, each in the direction its evaluation gives it
NAMES = {"regret": "final regret", "parent_f1": "parent F1", "info_gain": "info gain (nats)",
         SCORE: "score (weighted reward)"}


class ResultsInputError(BadInputError):
    """An argument the results view cannot use; the message names it."""


def compare_policies(runs: list[ComparedRun], versus: str | None = None) -> dict[str, dict]:
    """`training.analysis.comparison.compare_metrics` of the policies (the runs' groups) on `METRICS`, `versus` as the baseline:
    one comparison per metric."""
    labels = list(group_runs(runs))
    if len(labels) < 2:
        raise ResultsInputError(f"one policy {labels}: give at least two (training.compare compares policies; one "
                                "policy's own numbers are in its eval_summary.json)")
    if versus is not None and versus not in labels:
        raise ResultsInputError(f"--baseline {versus!r} is not one of the policies {labels}")
    result = compare_metrics(runs, list(METRICS), baseline=versus)
    by_metric = {result["metric"]: {k: v for k, v in result.items() if k != "by_metric"}, **result["by_metric"]}
    return {m: by_metric[m] for m in METRICS}


def _cell(mean: float, std: float | None) -> str:
    return f"{mean:.3f} ± {std:.3f}" if std is not None else f"{mean:.3f}"


def policy_table(results: dict[str, dict]) -> list[str]:
    """One line per policy: each metric's mean over SCMs ± the std of the seeds' means; each seed's means."""
    first = results[METRICS[0]]
    lines = [f"Per policy (training.compare, {first['episodes']['units']} held-out SCMs; each SCM's value averaged "
             "over its episodes and the policy's seeds): the mean over SCMs ± the std of the per-seed means (training "
             "noise; none for one seed), and per seed its mean over its episodes.", "",
             "| policy | " + " | ".join(NAMES[m] for m in METRICS) + " | per seed (regret / F1 / info gain) |",
             "| --- | " + " | ".join("---" for _ in METRICS) + " | --- |"]
    models = {m: {model["name"]: model for model in results[m]["models"]} for m in METRICS}
    for label, model in models[METRICS[0]].items():
        cells = [_cell(models[m][label]["mean"], models[m][label]["seed_means_std"]) for m in METRICS]
        per_run = zip(*(models[m][label]["runs"] for m in ("regret", "parent_f1", "info_gain")), strict=True)
        seeds = "; ".join(f"{_seed_name(regret)}: {regret['mean']:.3f} / {f1['mean']:.3f} / {gain['mean']:.3f}"
                          for regret, f1, gain in per_run)
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {seeds} |")
    return lines


def _seed_name(run: dict) -> str:
    return f"seed {run['seed']}" if run["seed"] is not None else Path(run["path"]).name


def significance(results: dict[str, dict], versus: str | None = None) -> list[str]:
    """The paired tests of training.compare, every metric: against `versus` (mean diff = policy minus `versus`), or
    every pair when None."""
    first = results[METRICS[0]]
    n_pairs = len(first["pairwise"])
    against = f"from `{versus}`" if versus else "between each pair of policies"
    episodes = first["episodes"]
    left_out = (f"; {episodes['left_out']} of {episodes['total']} episodes unscorable in some directory, left out"
                if episodes["left_out"] else "")
    lines = [f"Is the difference {against} real? training.compare: per held-out SCM, the metric averaged over its "
             "episodes and each policy's seeds; a paired test over the SCMs (the unit of replication, not the "
             f"episodes), Holm-corrected within each metric over its {n_pairs} pair(s) of policies{left_out}. "
             "Regret: lower is better. Last column: Welch's t on the per-seed means (none with one seed).", "",
             "| policy | versus | metric | mean diff | test | p | p (Holm) | d_z | SCMs | verdict | seeds: Welch p |",
             "| --- | --- | --- | ---: | --- | ---: | ---: | ---: | ---: | --- | ---: |"]
    for metric in METRICS:
        for pair in results[metric]["pairwise"]:
            if versus is not None and pair["b"] != versus:
                continue
            d_z = "n/a" if pair["d_z"] is None else f"{pair['d_z']:+.2f}"
            welch = "n/a" if pair["seed_level_welch"] is None else f"{pair['seed_level_welch']['p']:.2g}"
            lines.append(f"| {pair['a']} | {pair['b']} | {metric} | {pair['mean_diff']:+.3f} | {pair['test']} | "
                         f"{pair['p']:.2g} | {pair['p_holm']:.2g} | {d_z} | {pair['n']} | {pair['verdict']} | "
                         f"{welch} |")
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
    F1, information gain, reward, calls made and invalid calls; the mean of each reward component (unweighted); the
    mean best E[target | do] against the optimum; where every record is of one SCM (its variables), the mean final
    parent marginals and each variable's share of the interventions."""
    lines = ["| policy | final regret | parent F1 | info gain (nats) | reward | calls made | invalid calls | "
             f"{' / '.join(COMPONENTS)} | best E[target | do] (optimum) | final P(v ∈ Pa(target)) | "
             "share of interventions | episodes |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | ---: |"]
    for name, records in by_family(runs):
        cells = []
        for key in ("regret", "parent_f1", "info_gain", "reward", "calls", "invalid_calls"):
            v = np.array([r[key] for r in records])
            cells.append(f"{v.mean():.3f} ± {v.std():.3f}")
        cells.append(" / ".join(f"{np.mean([r[c] for r in records]):.3f}" for c in COMPONENTS))
        best = np.array([r["best_expected"] for r in records])
        cells.append(f"{best.mean():.3f} ± {best.std():.3f} ({np.mean([r['optimum'] for r in records]):.4f})")
        if len({tuple(r["parent_marginals"]) for r in records}) > 1:  # per variable means nothing across SCMs
            cells += ["(several SCMs)"] * 2
        else:
            marg = {v: np.mean([r["parent_marginals"][v] for r in records]) for v in records[0]["parent_marginals"]}
            cells.append(", ".join(f"{v} {p:.2f}" for v, p in marg.items()))
            cells.append(", ".join(f"{v} {p:.2f}" for v, p in intervention_shares(records).items()) or "none")
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {len(records)} |")
    return "\n".join(lines)


def by_family(runs: list[tuple[str, list[dict]]]) -> list[tuple[str, list[dict]]]:
    """Each policy's records, then, where they span several mechanism families, each family's alone."""
    out = []
    for name, records in runs:
        out.append((name, records))
        families = sorted({str(r.get("mechanism")) for r in records})
        if len(families) > 1:
            out += [(f"{name} ({family})", [r for r in records if str(r.get("mechanism")) == family])
                    for family in families]
    return out


SUMMARY_KEYS = ("regret", "parent_f1", "info_gain", "reward", "calls", "invalid_calls", *COMPONENTS, "best_expected",
                "optimum", "parent_marginals", "interventions_on")


def pooled_records(runs: list[ComparedRun]) -> list[tuple[str, list[dict]]] | None:
    """Per policy, the causal records (`extra`) of all its directories' episodes; None when some episode has none
    of `summary_table`'s fields (not a causal evaluation, or written before they were recorded)."""
    pooled = [(label, [e.extra for r in group for e in r.episodes]) for label, group in group_runs(runs).items()]
    if all(all(rec.get(k) is not None for k in SUMMARY_KEYS) for _, recs in pooled for rec in recs):
        return pooled
    return None


def report(runs: list[ComparedRun], baseline: str | None = None) -> str:
    """The causal tables over `training.compare`'s runs (module docstring), `baseline` the policy every other one is
    tested against (None: every pair)."""
    played = decodings(runs)
    results = compare_policies(runs, baseline)
    lines = [f"Decoding: {played}.", "", *policy_table(results), "", *significance(results, baseline)]
    for family, subset in split_by(runs, "mechanism").items() if len(runs[0].episodes) else ():
        try:
            part = compare_policies(subset, baseline)
        except BadInputError as err:  # too few SCMs of the family to test
            lines += ["", f"Within mechanism {family}: no comparison ({err})."]
            continue
        lines += ["", f"Within mechanism {family}:", "", *policy_table(part), "", *significance(part, baseline)]
    pooled = pooled_records(runs)
    if pooled is not None:
        lines += ["", "Pooled over seeds (episodes, not SCMs):", summary_table(pooled)]
    else:
        lines += ["", "(no best-E[target | do] table: some episodes carry no causal record with its fields)"]
    return "\n".join(lines)
