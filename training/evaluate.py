"""Score a model on a task's held-out episodes: a finished run, a checkpoint, an adapter, or the base model.

    python -m training.evaluate RUN_DIR --out DIR                       # a run's final adapter, its own settings
    python -m training.evaluate RUN_DIR --adapter RUN_DIR/checkpoint-20 --out DIR
    python -m training.evaluate --recipe recipes/tiny_cpu.yaml --out DIR  # the recipe's base (warm start) model
    python -m training.evaluate --recipe R --model PATH [--adapter DIR] --out DIR

Writes `DIR/eval.jsonl` (one episode per line: episode id = (row, sample), its seed, score, reward components,
success) and `DIR/eval_summary.json` (n, mean, std, t-based 95% CI, success rate, unscorable count, and what was
evaluated how). Episodes are paired: under the same `--eval-seed` (default: the run's `heldout_seed`, 0 unless set;
a run recorded before that default, its `seed`) every model sees the same prompts and the same random numbers, so `python -m training.compare` can match
them. The task comes from the recipe (training/evaluation/task_registry.py) or `--task`.
"""

from __future__ import annotations

import argparse
import logging
import time
from dataclasses import replace
from pathlib import Path

from training.evaluation.episodes import summarize, write_episodes
from training.evaluation.spec import EvalSpecError, load_policy, spec_from_recipe, spec_from_run
from training.evaluation.task_registry import TASKS, resolve_task
from training.outputs import run_files
from training.errors import bad_input_exits
from training.run_setup.task_plugins import load_tasks

logger = logging.getLogger("training.evaluate")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    load_tasks()
    parser = argparse.ArgumentParser(prog="python -m training.evaluate", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", nargs="?", help="a finished run (its run_summary.json names recipe settings, "
                        "base model and adapter)")
    parser.add_argument("--recipe", help="a recipe YAML: its data, rewards, environment and held-out settings")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a recipe override, as train.py's --KEY VALUE (repeatable), e.g. --set heldout_seed=7; "
                        "with a RUN_DIR alone, a change to how the run's own model is evaluated (e.g. "
                        "environment_factory)")
    parser.add_argument("--model", help="base model (directory, hub id, or tiny-qwen3) instead of the run's/recipe's")
    parser.add_argument("--adapter", help="a LoRA adapter directory (a run or checkpoint-N); 'none' for the base "
                        "model alone")
    parser.add_argument("--baseline", help="a non-model baseline policy of the task instead of a model")
    parser.add_argument("--task", help=f"evaluation task (default: from the recipe); one of {sorted(TASKS)}")
    parser.add_argument("--out", help="output directory for eval.jsonl and eval_summary.json")
    parser.add_argument("--eval-seed", type=int, help="episode seed base (default: the run's heldout_seed)")
    parser.add_argument("--samples-per-prompt", type=int, help="sampled episodes per held-out row")
    parser.add_argument("--max-rows", type=int, help="held-out rows to use (the first N)")
    parser.add_argument("--greedy", action="store_true", help="one greedy episode per row instead of sampled ones")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing eval.jsonl in --out")
    parser.add_argument("--build-only", action="store_true", help="build the recipe's base model (tiny model, warm "
                        "start) into the cache and stop: what a workflow does once before runs start in parallel")
    args = parser.parse_args(argv)
    if args.run_dir is None and args.recipe is None:
        parser.error("give a RUN_DIR or --recipe")
    if args.out is None and not args.build_only:
        parser.error("--out is required")
    return args


def parse_sets(pairs: list[str]) -> dict[str, str]:
    """`["k=v", ...]` -> `{k: v}`, naming a malformed pair."""
    sets = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise EvalSpecError(f"--set {pair!r}: expected KEY=VALUE")
        sets[key.lstrip("-")] = value
    return sets


def build_spec(args: argparse.Namespace):
    sets = parse_sets(args.set)
    argv = [arg for key, value in sets.items() for arg in (f"--{key}", value)]  # as train.py's --KEY VALUE
    if args.recipe is not None and args.run_dir is None:
        spec = spec_from_recipe(args.recipe, argv)
    elif args.recipe is None:  # the run's own model; --set changes how it is evaluated
        spec = spec_from_run(args.run_dir, sets)
    else:
        spec = replace(spec_from_recipe(args.recipe, argv), adapter=str(args.run_dir), source=str(args.run_dir))
    if args.model is not None:
        from training.run_setup.models import resolve_model_path

        spec = replace(spec, base_model=args.model, model_path=resolve_model_path(args.model))
    if args.adapter is not None:
        spec = replace(spec, adapter=None if args.adapter == "none" else args.adapter)
    overrides = {"eval_seed": args.eval_seed, "samples_per_prompt": args.samples_per_prompt,
                 "max_rows": args.max_rows}
    spec = replace(spec, **{k: v for k, v in overrides.items() if v is not None}, greedy=args.greedy)
    if spec.samples_per_prompt < 1 or spec.max_rows < 1:
        raise EvalSpecError(f"samples_per_prompt={spec.samples_per_prompt} and max_rows={spec.max_rows} must be >= 1")
    return spec


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    started = time.time()
    if args.build_only:
        spec = build_spec(args)
        logger.info("Base model ready: %s", spec.model_path)
        return {"model_path": spec.model_path}
    out = Path(args.out)
    if (out / run_files.EVAL).exists() and not args.overwrite:
        raise EvalSpecError(f"{out} already holds an eval.jsonl; pass --overwrite or another --out")
    if args.task is not None and args.task not in TASKS:  # before any model is built
        raise EvalSpecError(f"--task {args.task!r} is not a known task; known: {sorted(TASKS)}")
    spec = build_spec(args)
    task = resolve_task(spec, args.task)
    if args.baseline is not None:
        if args.baseline not in task.baselines:
            raise EvalSpecError(f"task {task.name!r} has no baseline {args.baseline!r}; "
                                f"baselines: {sorted(task.baselines) or 'none'}")
        policy, evaluated = task.baselines[args.baseline](spec), {"baseline": args.baseline}
    else:
        policy, evaluated = load_policy(spec), {"model_path": spec.model_path, "adapter": spec.adapter}
    logger.info("Evaluating %s on task %s (%s)", evaluated, task.name, spec.heldout_file)
    episodes, counts = task.evaluate(spec, policy)
    meta = {"source": "training.evaluate", "task": task.name, **evaluated, "counts": counts,
            "metric_directions": task.metric_directions, "spec": spec.as_json(), "wall_time_s": time.time() - started}
    write_episodes(out, episodes, meta)
    summary = {**summarize(episodes).as_json(), **meta}
    logger.info("n=%d mean=%s 95%% CI=%s success=%s unscorable=%d -> %s", summary["n"], summary["mean"],
                summary["ci95"], summary["success_rate"], summary["nan_count"], out / run_files.EVAL)
    return summary


def cli() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    with bad_input_exits():
        main()


if __name__ == "__main__":
    cli()
