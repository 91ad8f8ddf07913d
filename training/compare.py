"""Compare models evaluated on the same held-out episodes: is one better, is the difference real, which is best.

    python -m training.compare RUN_OR_EVAL_DIR... [--out DIR] [--baseline GROUP] [--alpha 0.05] [--metric NAME]

The comparison itself (matching, the tests, `--by`, the files written): training/analysis/comparison.py.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from training.analysis.compared_runs import load_run
from training.analysis.comparison import ComparisonError, compare_metrics
from training.analysis.convergence import DEFAULT_BAND, DEFAULT_WINDOW
from training.analysis.stats import NORMALITY_ALPHA
from training.outputs import run_files
from training.outputs.jsonsafe import dumps_strict
from training.errors import bad_input_exits


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m training.compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="+", help="run or evaluation directories (each with eval.jsonl); NAME=DIR "
                        "names one")
    parser.add_argument("--out", default="comparison", help="where the report goes (default: ./comparison)")
    parser.add_argument("--baseline", help="the model (group) every other one is compared against first")
    parser.add_argument("--alpha", type=float, default=0.05, help="family-wise error rate (Holm)")
    parser.add_argument("--normality-alpha", type=float, default=NORMALITY_ALPHA,
                        help="Shapiro-Wilk level of the ANOVA residuals below which the omnibus test is Friedman's")
    parser.add_argument("--window", type=int, default=DEFAULT_WINDOW, help="convergence moving-average window")
    parser.add_argument("--band", type=float, default=DEFAULT_BAND, help="convergence band (reward units)")
    parser.add_argument("--metric", action="append", default=None, help="a per-episode metric to compare "
                        "(repeatable; default: every metric the runs' evaluations give a direction, score first)")
    parser.add_argument("--by", default=None, help="also compare within each value of this field of the episodes' "
                        "records (the causal task's `mechanism`: linear, nonlinear)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    from training.analysis.compare_report import write_report

    args = parse_args(argv)
    runs = [load_run(spec) for spec in args.dirs]
    names = [r.name for r in runs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ComparisonError(f"two runs are named {duplicates}: name them with NAME=DIR")
    result = compare_metrics(runs, args.metric, by=args.by, alpha=args.alpha, normality_alpha=args.normality_alpha,
                             window=args.window, band=args.band, baseline=args.baseline)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "comparison.json").write_text(dumps_strict(result, indent=2))
    write_report(result, out)
    print((out / run_files.COMPARISON).read_text())
    return result


def cli() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    with bad_input_exits():
        main()


if __name__ == "__main__":
    cli()
