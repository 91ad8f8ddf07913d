"""The comparison library behind `python -m training.compare` (training/compare.py), also read by the causal results
tables and the workflow report.

Each directory holds an `eval.jsonl` (training/evaluation/episodes.py); `NAME=DIR` names it in the report,
`LABEL=GLOB` makes every matching directory a run (seed) of the model LABEL (compared_runs.py). Runs that share a
configuration and differ by seed are one model (a group, training/analysis/compared_runs.py): its score on an episode is the mean of
its runs' scores on that episode, so the tests below treat the trained runs as given and the episodes as the sample;
the seed-to-seed spread is reported beside them (per-run means, Welch's t on them), the honest measure of training
noise.

Episodes are matched by id (row, sample) and must carry the same seed in every run; an id missing from a run, or a
seed that differs, is an error naming them. Episodes unscorable in any run are left out of every test and counted.
The unit of replication is the row (a prompt, an SCM): the samples of one row share it and are not independent, so
every mean, interval and test is over per-row means of the scorable episodes (n = rows, not episodes).
Metrics: the episode `score` (the weighted reward, or the goal checker's), and any per-episode metric the task
records (`Episode.metrics`; the causal task's final regret, parent F1 and information gain), each in the direction
the task's evaluation wrote into `eval_summary.json` (`metric_directions`: regret lower is better). By default every
metric with a direction in all the runs is compared, `score` first; `--metric NAME` (repeatable) picks. Each metric
gets its own tests, Holm-corrected within the metric.
Tests (training/analysis/stats.py): the omnibus test across all models (repeated-measures ANOVA, or Friedman),
pairwise sign-flip permutation tests of the mean difference (with its paired t interval) and Holm's correction,
Cohen's d_z with its CI, a ranking by mean, and the convergence step of each run (training/analysis/convergence.py).
With `--baseline`, each seed of a model with several is also tested alone against the baseline (`per_seed`, Holm over
those tests). `--by FIELD` repeats the comparison within each value of a field of the episodes' records (the causal
task's `mechanism`). Writes `comparison.json`, `comparison.md`, `score_distributions.png` and `reward_curves.png` into
`--out`.
"""

from __future__ import annotations

import itertools
import logging
from collections import defaultdict
from dataclasses import replace

import numpy as np

from training.analysis.compared_runs import ComparedRun
from training.analysis.convergence import DEFAULT_BAND, DEFAULT_WINDOW, convergence_step
from training.analysis.stats import NORMALITY_ALPHA, compare_paired, holm, omnibus, unit_means, welch_t
from training.evaluation.episodes import SCORE, t_interval
from training.errors import BadInputError

logger = logging.getLogger("training.compare")


class ComparisonError(BadInputError):
    """Runs that cannot be compared (unmatched episodes, different seeds, too few models); the message names them."""


def check_matched(runs: list[ComparedRun]) -> list[str]:
    """The episode ids common to all runs, in the first run's order; raise naming every mismatch."""
    if not runs:
        raise ComparisonError("no run to compare: none finished with its evaluation (eval.jsonl)")
    reference = runs[0]
    ref_ids = {e.id: e.seed for e in reference.episodes}
    problems = []
    for run in runs[1:]:
        ids = {e.id: e.seed for e in run.episodes}
        missing, extra = sorted(set(ref_ids) - set(ids)), sorted(set(ids) - set(ref_ids))
        for label, which in ((f"missing from {run.name}", missing), (f"only in {run.name}", extra)):
            if which:
                problems.append(f"{len(which)} episode id(s) {label} (vs {reference.name}): {', '.join(which[:5])}"
                                + (" ..." if len(which) > 5 else ""))
        seeds = sorted(i for i in set(ids) & set(ref_ids) if ids[i] != ref_ids[i])
        if seeds:
            problems.append(f"{len(seeds)} episode(s) with different seeds in {run.name} and {reference.name} "
                            f"(not paired: evaluate both with the same eval seed): {', '.join(seeds[:5])}")
    if problems:
        raise ComparisonError("episodes do not match across runs:\n  " + "\n  ".join(problems))
    return [e.id for e in reference.episodes]


def decodings(runs: list[ComparedRun]) -> str:
    """The decodings the runs' episodes were played with (their records' `decoding`; a baseline's: "policy"), in
    words; refuses a directory that mixes two, and greedy episodes beside sampled or baseline ones (greedy episodes
    have no seed: they pair only with greedy ones)."""
    per_run = {}
    for run in runs:
        found = {e.extra.get("decoding") for e in run.episodes} - {None}
        if len(found) > 1:
            raise ComparisonError(f"{run.path}: episodes of several decodings {sorted(found)}; one a directory")
        per_run[run.name] = found.pop() if found else None
    kinds = set(per_run.values()) - {None}
    if "greedy" in kinds and kinds - {"greedy"}:
        greedy = [n for n, d in per_run.items() if d == "greedy"]
        raise ComparisonError(f"greedy episodes ({', '.join(greedy)}) pair only with greedy ones, not with "
                              f"{sorted(kinds - {'greedy'})}: compare one decoding at a time")
    shown = {"policy": "baselines: their own policy"}
    return "; ".join(shown.get(k, k) for k in sorted(kinds, key=lambda k: k == "policy")) or "not recorded"


def group_runs(runs: list[ComparedRun]) -> dict[str, list[ComparedRun]]:
    groups: dict[str, list[ComparedRun]] = defaultdict(list)
    for run in runs:
        groups[run.group].append(run)
    return dict(groups)


def group_scores(runs: list[ComparedRun], ids: list[str], metric: str = SCORE) -> np.ndarray:
    """Per-episode value of `metric` for a group: the mean over its runs; NaN where any run has none."""
    matrix = np.array([[_value(e, metric) for e in sorted_by(run, ids)] for run in runs])
    return matrix.mean(axis=0)  # NaN propagates: an episode unscorable in one run is unscorable for the group


def _value(episode, metric: str) -> float:
    value = episode.value(metric)
    return np.nan if value is None else value


def metric_directions(runs: list[ComparedRun]) -> dict[str, str]:
    """The metrics every run's evaluation gives a direction to (`score` first), with the direction; refuses two
    runs that disagree on one."""
    common: dict[str, str] | None = None
    for run in runs:
        directions = run.metric_directions
        if common is None:
            common = dict(directions)
            continue
        clash = sorted(m for m in set(common) & set(directions) if common[m] != directions[m])
        if clash:
            raise ComparisonError(f"{run.name} and {runs[0].name} disagree on which way is better for {clash}")
        common = {m: d for m, d in common.items() if m in directions}
    common = common or {}
    return {SCORE: common.get(SCORE, "higher"), **{m: d for m, d in common.items() if m != SCORE}}


def sorted_by(run: ComparedRun, ids: list[str]):
    by_id = {e.id: e for e in run.episodes}
    return [by_id[i] for i in ids]


def curve_with_ci(curves: list[list[tuple[int, float]]]) -> list[dict]:
    """Mean and t-based 95% CI across runs at every step that all runs evaluated."""
    common = sorted(set.intersection(*(set(s for s, _ in c) for c in curves))) if curves else []
    out = []
    for step in common:
        values = np.array([dict(c)[step] for c in curves])
        interval = t_interval(values)
        out.append({"step": step, "mean": float(values.mean()), "n": len(values),
                    "ci95": None if interval is None else interval[3]})
    return out


def compare(
    runs: list[ComparedRun],
    alpha: float = 0.05,
    normality_alpha: float = NORMALITY_ALPHA,
    window: int = DEFAULT_WINDOW,
    band: float = DEFAULT_BAND,
    baseline: str | None = None,
    metric: str = SCORE,
    better: str = "higher",
) -> dict:
    """The comparison of one metric as one JSON-ready dict (module docstring); `better` is "higher" or "lower"."""
    if better not in ("higher", "lower"):
        raise ComparisonError(f"metric {metric!r}: better must be 'higher' or 'lower', got {better!r}")
    ids = check_matched(runs)
    groups = group_runs(runs)
    if len(groups) < 2:
        raise ComparisonError(f"need at least 2 models to compare, got one group {list(groups)} "
                              f"(runs {[r.name for r in runs]})")
    if baseline is not None and baseline not in groups:
        raise ComparisonError(f"--baseline {baseline!r} is not one of the models {sorted(groups)}")
    names = list(groups)
    raw = np.stack([group_scores(groups[g], ids, metric) for g in names], axis=1)  # episodes x models
    scorable = ~np.isnan(raw).any(axis=1)
    episode_scores = raw[scorable]
    rows = [e.row for e, ok in zip(sorted_by(runs[0], ids), scorable, strict=True) if ok]
    units, scores = unit_means(episode_scores, rows)  # rows x models: the tests' unit of replication
    if len(scores) < 3:
        raise ComparisonError(f"{metric}: only {len(scores)} rows have a value in every run; need at least 3")

    edges = np.histogram_bin_edges(episode_scores, bins=20)
    models = [model_summary(name, groups[name], scores[:, j], raw[:, j], episode_scores[:, j], edges, metric,
                            window, band) for j, name in enumerate(names)]
    per_seed = seed_tests(groups, names, ids, scorable, rows, scores, baseline, metric, alpha, better)
    pairwise = pairwise_tests(names, models, scores, baseline, alpha, better)
    sign = -1.0 if better == "higher" else 1.0
    ranking = sorted(names, key=lambda n: sign * models[names.index(n)]["mean"])
    return {
        "metric": metric,
        "better": better,
        "episodes": {"total": len(ids), "scorable_in_all": int(scorable.sum()),
                     "left_out": int((~scorable).sum()), "units": len(units)},
        "models": models,
        "omnibus": omnibus(scores, normality_alpha).as_json(),
        "pairwise": pairwise,
        "per_seed": per_seed,
        "ranking": ranking,
        "baseline": baseline,
        "settings": {"alpha": alpha, "normality_alpha": normality_alpha, "correction": "holm",
                     "convergence": {"window": window, "band": band}},
    }


def model_summary(name: str, runs: list[ComparedRun], unit_scores: np.ndarray, raw: np.ndarray,
                  episode_scores: np.ndarray, edges: np.ndarray, metric: str, window: int, band: float) -> dict:
    """One model's part of the comparison: its runs (seeds) with their means and convergence, its mean over the
    units with its interval, success rate, score histogram and curves."""
    interval = t_interval(unit_scores)
    conv = [convergence_step(r.heldout_history, window, band) for r in runs]
    run_means = [float(np.nanmean([_value(e, metric) for e in r.episodes])) for r in runs]
    successes = [e.success for r in runs for e in r.episodes if e.success is not None]
    return {
        "name": name,
        "runs": [{"name": r.name, "path": str(r.path), "seed": r.seed, "mean": m, "convergence": c.as_json()}
                 for r, m, c in zip(runs, run_means, conv, strict=True)],
        "n": len(unit_scores),
        "unscorable_episodes": int(np.isnan(raw).sum()),
        "mean": float(unit_scores.mean()),
        "std": None if interval is None else interval[1],
        "ci95": None if interval is None else interval[3],
        "success_rate": (sum(successes) / len(successes)) if successes else None,
        "seed_means_std": float(np.std(run_means, ddof=1)) if len(run_means) > 1 else None,
        "convergence_step_mean": (float(np.mean([c.step for c in conv if c.step is not None]))
                                  if any(c.step is not None for c in conv) else None),
        "score_histogram": {"edges": edges.tolist(), "counts": np.histogram(episode_scores, bins=edges)[0].tolist()},
        "heldout_curve": curve_with_ci([r.heldout_history for r in runs if r.heldout_history]),
        "train_curve": curve_with_ci([r.train_curve for r in runs if r.train_curve]),
    }


def pairwise_tests(names: list[str], models: list[dict], scores: np.ndarray, baseline: str | None, alpha: float,
                   better: str) -> list[dict]:
    """The paired test of every pair of models over the units (the baseline second: mean_diff is "A minus the
    baseline"), Holm-corrected, each with the seed-level Welch test beside it."""
    pairs = list(itertools.combinations(range(len(names)), 2))
    if baseline is not None:
        b = names.index(baseline)
        pairs = [(i, j) if j == b else (j, i) if i == b else (i, j) for i, j in pairs]
    results = [compare_paired(scores[:, i], scores[:, j]) for i, j in pairs]
    reject, adjusted = holm([r.p for r in results], alpha)
    pairwise = []
    for (i, j), result, rej, p_adj in zip(pairs, results, reject, adjusted, strict=True):
        seed_level = welch_t([r["mean"] for r in models[i]["runs"]], [r["mean"] for r in models[j]["runs"]])
        pairwise.append({
            "a": names[i], "b": names[j], **result.as_json(), "p_holm": p_adj, "significant": rej,
            "verdict": verdict(names[i], names[j], result.mean_diff, rej, better),
            "seed_level_welch": None if seed_level is None else {"t": seed_level[0], "p": seed_level[1]},
        })
    return pairwise


def seed_tests(groups, names, ids, scorable, rows, scores, baseline, metric, alpha, better) -> list[dict]:
    """With a baseline: each run of a model with several seeds against the baseline model on its own, paired over
    the same rows (is the change there on every seed, not only on their mean?), Holm over all these tests."""
    if baseline is None:
        return []
    b = names.index(baseline)
    tests = []
    for name in names:
        if name == baseline or len(groups[name]) < 2:
            continue
        for run in groups[name]:
            values = np.array([_value(e, metric) for e in sorted_by(run, ids)])[scorable]
            _, per_row = unit_means(values[:, None], rows)
            tests.append((name, run, compare_paired(per_row[:, 0], scores[:, b])))
    reject, adjusted = holm([t.p for _, _, t in tests], alpha)
    return [{"model": name, "a": run.name, "seed": run.seed, "b": baseline, **result.as_json(), "p_holm": p_adj,
             "significant": rej, "verdict": verdict(run.name, baseline, result.mean_diff, rej, better)}
            for (name, run, result), rej, p_adj in zip(tests, reject, adjusted, strict=True)]


def compare_metrics(runs: list[ComparedRun], metrics: list[str] | None = None, by: str | None = None,
                    **settings) -> dict:
    """`compare` for each metric (default: every metric the runs give a direction, score first): the first metric's
    result, with the others under `by_metric`. `by`: also the same comparison within each value of the episodes'
    `extra[by]` (the causal task's `mechanism`: linear, nonlinear), under `subsets`."""
    directions = metric_directions(runs)
    chosen = metrics or list(directions)
    unknown = [m for m in chosen if m not in directions]
    if unknown:
        raise ComparisonError(f"--metric {unknown}: not a metric of every run; known: {sorted(directions)}")
    results = [compare(runs, **settings, metric=m, better=directions[m]) for m in chosen]
    out = {**results[0], "by_metric": {r["metric"]: r for r in results[1:]}}
    if by is not None:
        out["subsets"] = {f"{by}={value}": _subset(subset, metrics, settings)
                          for value, subset in split_by(runs, by).items()}
    return out


def _subset(runs: list[ComparedRun], metrics: list[str] | None, settings: dict) -> dict:
    """One subset's comparison, or why there is none (too few rows), without failing the whole comparison."""
    try:
        return compare_metrics(runs, metrics, **settings)
    except ComparisonError as err:
        return {"error": str(err)}


def split_by(runs: list[ComparedRun], field_name: str) -> dict[str, list[ComparedRun]]:
    """The runs restricted to the episodes of each value of `extra[field_name]` (read from the first run; every run
    must agree on each episode's value)."""
    values = {e.id: e.extra.get(field_name) for e in runs[0].episodes}
    if all(v is None for v in values.values()):
        raise ComparisonError(f"--by {field_name}: no episode of {runs[0].name} records it")
    for run in runs[1:]:
        clash = sorted(e.id for e in run.episodes if e.id in values and e.extra.get(field_name) != values[e.id])
        if clash:
            raise ComparisonError(f"--by {field_name}: {run.name} and {runs[0].name} disagree on episodes "
                                  f"{', '.join(clash[:5])}")
    out = {}
    for value in sorted({str(v) for v in values.values()}):
        keep = {i for i, v in values.items() if str(v) == value}
        out[value] = [replace(run, episodes=[e for e in run.episodes if e.id in keep]) for run in runs]
    return out


def verdict(a: str, b: str, mean_diff: float, significant: bool, better: str = "higher") -> str:
    if not significant:
        return f"no significant difference between {a} and {b}"
    if better == "higher":
        return f"{a} {'>' if mean_diff > 0 else '<'} {b}"
    return f"{a} {'better' if mean_diff < 0 else 'worse'} than {b} (lower is better)"
