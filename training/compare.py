"""Compare models evaluated on the same held-out episodes: is one better, is the difference real, which is best.

    python -m training.compare RUN_OR_EVAL_DIR... [--out DIR] [--baseline GROUP] [--alpha 0.05] [--metric NAME]
    python -m training.compare 'trained=runs/eval/trained_s*' 'starting_policy=runs/eval/start_s*' \\
        random=runs/eval/random --baseline random --by mechanism      # LABEL=GLOB: one model, its seeds' directories
    python -m training.compare RUN_DIR --since_start [--step N]      # one run: its held-out change from step 0

The comparison itself (matching, the tests, `--by`, the files written): training/analysis/comparison.py. The change
of one run since its step-0 evaluation (what the run printed at its end): training/evaluation/heldout_change.py.
When every evaluation is one task's and the task lays out tables of its own (the causal task's policies across seeds,
tested over SCMs, within each mechanism, and pooled: training/tasks/causal/compare_tables.py), they follow the report,
in OUT/<task>_tables.md too. The one compare command: `--normality-alpha` is spelled `--normality_alpha` (the old
spelling warns, until the next release), and the causal task's `python -m training.tasks.causal.results ... --versus
B` is this command with `--baseline B`.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from training.analysis.compared_runs import load_runs
from training.analysis.comparison import ComparisonError, compare_metrics, decodings
from training.analysis.convergence import DEFAULT_BAND, DEFAULT_WINDOW
from training.analysis.stats import NORMALITY_ALPHA
from training.outputs import run_files
from training.outputs.jsonsafe import dumps_strict
from training.run_setup.command_flags import add_renamed
from training.errors import bad_input_exits


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m training.compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="+", help="run or evaluation directories (each with eval.jsonl); NAME=DIR "
                        "names one; LABEL=GLOB makes every matching directory a run (seed) of the model LABEL")
    parser.add_argument("--out", default="comparison", help="where the report goes (default: ./comparison)")
    parser.add_argument("--baseline", help="the model (group) every other one is compared against first")
    parser.add_argument("--alpha", type=float, default=0.05, help="family-wise error rate (Holm)")
    parser.add_argument("--normality_alpha", type=float, default=NORMALITY_ALPHA,
                        help="Shapiro-Wilk level of the ANOVA residuals below which the omnibus test is Friedman's")
    add_renamed(parser, "--normality-alpha", "--normality_alpha", type=float)
    parser.add_argument("--window", type=int, default=DEFAULT_WINDOW, help="convergence moving-average window")
    parser.add_argument("--band", type=float, default=DEFAULT_BAND, help="convergence band (reward units)")
    parser.add_argument("--metric", action="append", default=None, help="a per-episode metric to compare "
                        "(repeatable; default: every metric the runs' evaluations give a direction, score first)")
    parser.add_argument("--by", default=None, help="also compare within each value of this field of the episodes' "
                        "records (the causal task's `mechanism`: linear, nonlinear)")
    parser.add_argument("--since_start", action="store_true", help="one run directory: the paired change of its "
                        "held-out metrics from step 0 to --step (what the run printed at its end)")
    parser.add_argument("--step", type=int, default=None, help="with --since_start: the evaluation compared with "
                        "step 0 (default: the last)")
    return parser.parse_args(argv)


def since_start(args: argparse.Namespace) -> dict:
    """`--since_start`: one run's held-out change from step 0, printed a sentence a metric."""
    from training.evaluation.heldout_change import run_changes

    if len(args.dirs) != 1:
        raise ComparisonError(f"--since_start: one run directory, got {len(args.dirs)}")
    result = run_changes(args.dirs[0], args.step)
    print("\n".join(c.sentence() for c in result))
    return {"heldout_change": [c.as_json() for c in result]}


def main(argv: list[str] | None = None) -> dict:
    from training.analysis.compare_report import write_report

    args = parse_args(argv)
    if args.since_start:
        return since_start(args)
    if args.step is not None:
        raise ComparisonError("--step: only with --since_start")
    runs = load_runs(args.dirs)
    names = [r.name for r in runs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ComparisonError(f"two runs are named {duplicates}: name them with NAME=DIR")
    played = decodings(runs)
    result = compare_metrics(runs, args.metric, by=args.by, alpha=args.alpha, normality_alpha=args.normality_alpha,
                             window=args.window, band=args.band, baseline=args.baseline)
    result["decoding"] = played
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "comparison.json").write_text(dumps_strict(result, indent=2))
    write_report(result, out)
    print((out / run_files.COMPARISON).read_text())
    tables = task_tables(runs, args.baseline)
    if tables is not None:
        name, text = tables
        (out / f"{name}_tables.md").write_text(text + "\n")
        print(text)
        result["task_tables"] = text
    return result


def task_tables(runs, baseline: str | None) -> tuple[str, str] | None:
    """(task name, its tables) when every run is an evaluation of one task that lays out its own (`EvalTask.report`);
    else None."""
    from training.evaluation.eval_tasks import evaluation_tasks

    names = {run.task for run in runs}
    task = evaluation_tasks().get(names.pop()) if len(names) == 1 else None
    if task is None or task.report is None:
        return None
    return task.name, task.report(runs, baseline)


def cli() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    with bad_input_exits():
        main()


if __name__ == "__main__":
    cli()
