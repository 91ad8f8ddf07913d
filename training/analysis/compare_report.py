"""The comparison as a reader sees it: `comparison.md` and two plots (matplotlib, Agg backend)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

from training.outputs import run_files

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def _num(x, digits: int = 3) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float) and (abs(x) < 1e-3 and x != 0):
        return f"{x:.2e}"
    return f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def _ci(ci) -> str:
    return "n/a" if ci is None else f"[{_num(ci[0])}, {_num(ci[1])}]"


def markdown(result: dict) -> str:
    models = {m["name"]: m for m in result["models"]}
    settings = result["settings"]
    lines = ["# Comparison", ""]
    if result.get("decoding"):
        lines += [f"Decoding: {result['decoding']}.", ""]
    eps = result["episodes"]
    lines += [f"{eps['scorable_in_all']} paired episodes ({eps['left_out']} of {eps['total']} left out: unscorable in "
              f"some run) over {eps['units']} held-out rows; a row's episodes are averaged first, so n below counts "
              f"rows, the independent unit. Family-wise alpha {settings['alpha']} (Holm). A model is a group of "
              "runs (seeds); its score on an episode is the mean over its runs.", ""]
    better = result.get("better", "higher")
    lines += [f"Metric: **{result.get('metric', 'score')}** ({better} is better).", ""]
    lines += ["## Ranking", "",
              "| rank | model | runs | mean [95% CI] | std | success rate | per-seed means | convergence step |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for rank, name in enumerate(result["ranking"], start=1):
        m = models[name]
        seeds = ", ".join(_num(r["mean"]) for r in m["runs"])
        conv = ", ".join(_num(r["convergence"]["step"]) for r in m["runs"])
        lines.append(f"| {rank} | {name} | {len(m['runs'])} | {_num(m['mean'])} {_ci(m['ci95'])} | {_num(m['std'])} "
                     f"| {_num(m['success_rate'])} | {seeds} | {conv} |")
    om = result["omnibus"]
    lines += ["", "## All models at once", "",
              f"Primary test: **{om['test']}** ({om['reason']}), p = {_num(om['p'])}. "
              f"Repeated-measures ANOVA: F({_num(om['anova_df'][0], 0)}, {_num(om['anova_df'][1], 0)}) = "
              f"{_num(om['anova_f'])}, p = {_num(om['anova_p'])}; "
              + (f"Friedman: chi2 = {_num(om['friedman_chi2'])}, p = {_num(om['friedman_p'])}."
                 if om["friedman_chi2"] is not None
                 else f"non-parametric (Friedman needs 3 models; Wilcoxon signed-rank): p = {_num(om['friedman_p'])}."),
              ""]
    lines += ["## Pairwise", "",
              "| A vs B | mean(A - B) [95% CI] | test (why) | p | p (Holm) | d_z [95% CI] | seed-level Welch p | verdict |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for p in result["pairwise"]:
        welch = p["seed_level_welch"]
        lines.append(
            f"| {p['a']} vs {p['b']} | {_num(p['mean_diff'])} {_ci(p['mean_diff_ci95'])} | {p['test']} ({p['reason']}) "
            f"| {_num(p['p'])} | {_num(p['p_holm'])} | {_num(p['d_z'])} {_ci(p['d_z_ci95'])} "
            f"| {_num(welch['p']) if welch else 'n/a'} | {'**' + p['verdict'] + '**' if p['significant'] else p['verdict']} |"
        )
    lines += _seed_lines(result)
    conv = settings["convergence"]
    lines += ["", f"Convergence step: the first held-out evaluation step after which the trailing moving average "
              f"(window {conv['window']} evaluations) of the held-out reward stays within {conv['band']} of its final "
              "value (training/analysis/convergence.py). Seed-level Welch p: Welch's t-test on the per-seed means (training "
              "noise); n/a with fewer than 2 seeds per model.", ""]
    for metric, other in (result.get("by_metric") or {}).items():
        lines += _metric_section(metric, other)
    for subset, other in (result.get("subsets") or {}).items():
        lines += _subset_section(subset, other)
    return "\n".join(lines)


def _seed_lines(result: dict) -> list[str]:
    """Each seed alone against the baseline (`per_seed`), when the comparison has them."""
    tests = result.get("per_seed") or []
    if not tests:
        return []
    lines = ["", f"Each seed alone against {tests[0]['b']} (paired over the same rows, Holm over these tests):", "",
             "| run | mean(run - baseline) [95% CI] | test | p (Holm) | verdict |", "| --- | --- | --- | --- | --- |"]
    for t in tests:
        verdict = "**" + t["verdict"] + "**" if t["significant"] else t["verdict"]
        lines.append(f"| {t['a']} | {_num(t['mean_diff'])} {_ci(t['mean_diff_ci95'])} | {t['test']} "
                     f"| {_num(t['p_holm'])} | {verdict} |")
    return lines


def _subset_section(subset: str, result: dict) -> list[str]:
    """The whole comparison again within one subset of the rows (`--by`)."""
    if "error" in result:
        return [f"## Within {subset}", "", f"No comparison: {result['error']}", ""]
    lines = [f"## Within {subset} ({result['episodes']['units']} rows)", ""]
    for metric, one in ((result["metric"], result), *(result.get("by_metric") or {}).items()):
        lines += [line.replace("## ", "### ", 1) if line.startswith("## ") else line
                  for line in _metric_section(metric, one)]
    return lines


def _metric_section(metric: str, result: dict) -> list[str]:
    """Another metric's ranking and pairwise tests (the same episodes, rows and corrections)."""
    models = {m["name"]: m for m in result["models"]}
    lines = [f"## {metric} ({result['better']} is better)", "",
             "| rank | model | mean [95% CI] | per-seed means |", "| --- | --- | --- | --- |"]
    for rank, name in enumerate(result["ranking"], start=1):
        m = models[name]
        lines.append(f"| {rank} | {name} | {_num(m['mean'])} {_ci(m['ci95'])} | "
                     f"{', '.join(_num(r['mean']) for r in m['runs'])} |")
    lines += ["", "| A vs B | mean(A - B) [95% CI] | test | p (Holm) | d_z | verdict |",
              "| --- | --- | --- | --- | --- | --- |"]
    for p in result["pairwise"]:
        verdict = "**" + p["verdict"] + "**" if p["significant"] else p["verdict"]
        lines.append(f"| {p['a']} vs {p['b']} | {_num(p['mean_diff'])} {_ci(p['mean_diff_ci95'])} | {p['test']} "
                     f"| {_num(p['p_holm'])} | {_num(p['d_z'])} | {verdict} |")
    return [*lines, *_seed_lines(result), ""]


def plot_distributions(result: dict, path: Path) -> Path:
    """Left: each model's distribution of per-episode scores (mean over its seeds). Right: per-seed mean scores and
    the model's mean with its 95% CI over held-out rows (per-row means)."""
    fig, (hist_ax, ax) = plt.subplots(1, 2, figsize=(11, 4), dpi=120)
    for m in result["models"]:
        hist = m["score_histogram"]
        hist_ax.stairs(hist["counts"], hist["edges"], label=m["name"], linewidth=1.5)
    hist_ax.set_xlabel("episode score (mean over the model's seeds)")
    hist_ax.set_ylabel("episodes")
    hist_ax.set_title("per-episode score distribution")
    hist_ax.legend(fontsize=8)
    for x, m in enumerate(result["models"]):
        run_means = [r["mean"] for r in m["runs"]]
        ax.scatter([x] * len(run_means), run_means, alpha=0.6, label="per-seed mean" if x == 0 else None)
        if m["ci95"] is not None:
            ax.errorbar([x + 0.15], [m["mean"]], yerr=[[m["mean"] - m["ci95"][0]], [m["ci95"][1] - m["mean"]]],
                        fmt="o", color="black", capsize=4, label="mean, 95% CI over rows" if x == 0 else None)
    ax.set_xticks(range(len(result["models"])), [m["name"] for m in result["models"]], rotation=20)
    ax.set_ylabel("held-out score")
    ax.set_title("model means")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_curves(result: dict, path: Path) -> Path:
    """Held-out and train reward against the optimizer step: mean across seeds with a 95% CI band."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), dpi=120)
    for ax, key, title in ((axes[0], "heldout_curve", "held-out reward"), (axes[1], "train_curve", "train reward")):
        for m in result["models"]:
            curve = m[key]
            if not curve:
                continue
            steps = [c["step"] for c in curve]
            ax.plot(steps, [c["mean"] for c in curve], "o-" if key == "heldout_curve" else "-", label=m["name"])
            lo = [c["ci95"][0] if c["ci95"] else c["mean"] for c in curve]
            hi = [c["ci95"][1] if c["ci95"] else c["mean"] for c in curve]
            ax.fill_between(steps, lo, hi, alpha=0.2)
        ax.set_title(f"{title} (mean over seeds, 95% CI)")
        ax.set_xlabel("optimizer step")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "no curve recorded", ha="center", transform=ax.transAxes)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def write_report(result: dict, out: Path) -> None:
    (out / run_files.COMPARISON).write_text(markdown(result))
    plot_distributions(result, out / "score_distributions.png")
    plot_curves(result, out / "reward_curves.png")
