"""The workflow's one report: every run (status, wall time, held-out reward, exact command), failures with their log
tails, and the comparison of the finished runs (training/analysis/comparison.py) in `<output_dir>/report.md` and
`<output_dir>/workflow_summary.json`."""

from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path

from training.analysis.compare_report import markdown as comparison_markdown
from training.analysis.compare_report import write_report
from training.analysis.compared_runs import load_run
from training.analysis.comparison import ComparisonError, compare_metrics
from training.outputs import run_files
from training.outputs.jsonsafe import dumps_strict
from training.outputs.run_record import health_stops

RUN_FILE = run_files.WORKFLOW_RUN


def _read(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def run_rows(outcomes) -> list[dict]:
    rows = []
    for o in sorted(outcomes, key=lambda o: o.cell.index):
        cell = o.cell
        meta = _read(cell.run_dir / RUN_FILE)
        summary = _read(cell.run_dir / run_files.RUN_SUMMARY)
        evaluation = _read(cell.run_dir / run_files.EVAL_SUMMARY)
        launches = meta.get("launches", [])
        rows.append({
            "index": cell.index, "name": cell.name, "group": cell.group, "seed": cell.seed, "status": o.status,
            "launches": len(launches), "wall_s": sum(launch.get("wall_s", 0.0) for launch in launches),
            "global_step": summary.get("global_step"), "stopped_reason": summary.get("stopped_reason"),
            "heldout_before": summary.get("heldout_reward_before"), "eval_mean": evaluation.get("mean"),
            "eval_n": evaluation.get("n"), "command": launches[-1]["command"] if launches else None,
            "error": o.error, "run_dir": str(cell.run_dir),
            "health_stops": health_stops(cell.run_dir),  # earlier attempts too: a run resumed by hand past one
        })
    return rows


def write_workflow_report(workflow, args, outcomes, wall_s: float, code: dict | None = None) -> dict:
    """`code`: the git state the workflow started at (`git_state`), named in the report."""
    rows = run_rows(outcomes)
    usable = [r for r in rows if r["status"] in ("finished", "done") and (Path(r["run_dir"]) / run_files.EVAL).exists()]
    failed = [r for r in rows if r["status"] == "failed"]
    comparison, comparison_error = None, None
    out = workflow.output_dir / "comparison"
    try:
        settings = workflow.compare
        comparison = compare_metrics(
            [load_run(r["run_dir"]) for r in usable], settings.get("metrics"), alpha=settings.get("alpha", 0.05),
            normality_alpha=settings.get("normality_alpha", 0.05), window=settings.get("window", 3),
            band=settings.get("band", 0.05), baseline=settings.get("baseline"), by=settings.get("by"),
        )
        out.mkdir(parents=True, exist_ok=True)
        (out / "comparison.json").write_text(dumps_strict(comparison, indent=2))
        write_report(comparison, out)
    except ComparisonError as err:
        comparison_error = str(err)
    summary = {
        "workflow": workflow.name, "config": str(workflow.path), "output_dir": str(workflow.output_dir),
        "command": " ".join([Path(sys.executable).name, "-m", "training.workflow", *sys.argv[1:]]),
        "jobs": args.jobs, "wall_s": wall_s, "finished_at": time.strftime("%Y-%m-%d %H:%M:%S"),
        "git": code or {"commit": None, "dirty": None},
        "machine": {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
                    "python": platform.python_version()},
        "runs": rows, "failed": [r["name"] for r in failed], "comparison_error": comparison_error,
        "comparison": comparison,
    }
    (workflow.output_dir / "workflow_summary.json").write_text(dumps_strict(summary, indent=2, default=str))
    (workflow.output_dir / "report.md").write_text(report_markdown(workflow, summary))
    print((workflow.output_dir / "report.md").read_text())
    return summary


def _fmt(x, digits=3) -> str:
    return "n/a" if x is None else (f"{x:.{digits}f}" if isinstance(x, float) else str(x))


def headline(comparison: dict, baseline: str | None) -> list[str]:
    """One line per model against the baseline: better / worse / no significant difference, with p and d_z."""
    if comparison is None or baseline is None:
        return []
    lines = []
    for p in comparison["pairwise"]:
        if baseline not in (p["a"], p["b"]):
            continue
        other = p["a"] if p["b"] == baseline else p["b"]
        diff = p["mean_diff"] if p["b"] == baseline else -p["mean_diff"]
        wins = diff > 0 if comparison.get("better", "higher") == "higher" else diff < 0
        word = ("beats" if wins else "is worse than") if p["significant"] else "does not differ significantly from"
        lines.append(f"- **{other} {word} {baseline}** on {comparison.get('metric', 'score')}: mean difference "
                     f"{diff:+.3f}, {p['test']} p = {p['p']:.3g} "
                     f"(Holm-adjusted {p['p_holm']:.3g}), d_z = {_fmt(p['d_z'])} "
                     f"[{_fmt((p['d_z_ci95'] or [None])[0])}, {_fmt((p['d_z_ci95'] or [None, None])[1])}]")
    return lines


def _commit_text(git: dict) -> str:
    if not git.get("commit"):
        return "unknown (not a git checkout)"
    return git["commit"][:12] + (" with uncommitted changes to tracked files" if git.get("dirty") else "")


def report_markdown(workflow, summary: dict) -> str:
    lines = [f"# Workflow {workflow.name}", ""]
    if workflow.description:
        lines += [workflow.description, ""]
    lines += [f"`{summary['command']}` ({summary['jobs']} at a time), {summary['wall_s']:.0f} s wall time this "
              f"invocation; machine: {summary['machine']['platform']}, Python {summary['machine']['python']}; "
              f"commit {_commit_text(summary.get('git') or {})}.", ""]
    baseline = workflow.compare.get("baseline")
    comparison = summary["comparison"]
    head = [] if comparison is None else [
        line for result in (comparison, *(comparison.get("by_metric") or {}).values())
        for line in headline(result, baseline)
    ]
    for subset, part in ((comparison or {}).get("subsets") or {}).items():
        if "error" in part:
            head.append(f"- within {subset}: no comparison ({part['error']})")
            continue
        head += [f"- within {subset}: {line[2:]}" for result in (part, *(part.get("by_metric") or {}).values())
                 for line in headline(result, baseline)]
    if head:
        lines += ["## Verdict", "", *head, ""]
    lines += ["## Runs", "", "| # | run | status | launches | wall s | steps | held-out before | held-out (eval.jsonl) |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in summary["runs"]:
        lines.append(f"| {r['index']} | {r['name']} | {r['status']} | {r['launches']} | {r['wall_s']:.0f} | "
                     f"{_fmt(r['global_step'])} | {_fmt(r['heldout_before'])} | {_fmt(r['eval_mean'])} |")
    for r in summary["runs"]:
        if r["health_stops"] and not r["error"]:
            lines += ["", f"{r['name']} was stopped by a strict health check in an earlier attempt, then resumed: "
                      + "; ".join(r["health_stops"])]
        if r["error"]:
            lines += ["", f"### {r['name']} failed", "", "```", r["error"], "```"]
    lines += ["", "Commands (the last launch of each run):", "", "```"]
    lines += [f"{r['index']}: {' '.join(r['command'])}" for r in summary["runs"] if r["command"]]
    lines += ["```", ""]
    if summary["comparison"] is not None:
        lines += [comparison_markdown(summary["comparison"]).replace("# Comparison", "## Comparison", 1)
                  .replace("\n## ", "\n### "),
                  "", "Plots: `comparison/score_distributions.png`, `comparison/reward_curves.png`."]
    else:
        lines += [f"No comparison: {summary['comparison_error']}"]
    return "\n".join(lines) + "\n"
