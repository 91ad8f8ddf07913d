"""Score a policy on a task's held-out episodes: a finished run, a checkpoint, an adapter, a base model, or one of the
task's scripted baselines.

    python -m training.evaluate RUN_DIR --out DIR                       # a run's final adapter, its own settings
    python -m training.evaluate RUN_DIR --adapter RUN_DIR/checkpoint-20 --out DIR
    python -m training.evaluate --recipe recipes/tiny_cpu.yaml --out DIR  # the recipe's base (warm start) model
    python -m training.evaluate --recipe R --model PATH [--adapter DIR] --out DIR   # PATH: a model, or a LoRA run
    python -m training.evaluate --recipe recipes/causal_cpu.yaml --baseline greedy_eig --out DIR
    python -m training.evaluate RUN_DIR --scm my_scm.yaml --surrogate additive --out DIR  # a task's own options

Writes `DIR/eval.jsonl` (one episode per line: episode id = (row, sample), its seed, score, reward components,
success) and `DIR/eval_summary.json` (n, mean, std, t-based 95% CI, success rate, unscorable count, and what was
evaluated how). Episodes are paired: under the same `--heldout_seed` (default: the run's `heldout_seed`, 0 unless
set; a run recorded before that default, its `seed`) every model sees the same prompts and the same random numbers,
so `python -m training.compare` can match them. The task comes from the recipe (training/evaluation/eval_tasks.py)
or `--task`; it plays the episodes exactly as the held-out evaluation during training does, and may declare options
of its own (listed under its name in `--help`).
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from dataclasses import replace
from pathlib import Path

from training.errors import bad_input_exits
from training.evaluation.episodes import summarize, write_episodes
from training.evaluation.eval_inputs import inputs_from_spec, spec_environment
from training.evaluation.spec import (
    EvalSpecError,
    load_policy,
    spec_from_recipe,
    spec_from_run,
)
from training.evaluation.eval_tasks import evaluation_tasks, resolve_task
from training.outputs import run_files

logger = logging.getLogger("training.evaluate")


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, dict[str, list[str]]]:
    """The parsed arguments, and the options each task declared (task name -> option names)."""
    known = evaluation_tasks()
    parser = argparse.ArgumentParser(prog="python -m training.evaluate", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", nargs="?", help="a finished run (its run_summary.json names recipe settings, "
                        "base model and adapter)")
    parser.add_argument("--recipe", help="a recipe YAML: its data, rewards, environment and held-out settings")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a recipe override, as train.py's --KEY VALUE (repeatable), e.g. --set heldout_seed=7; "
                        "with a RUN_DIR alone, a change to how the run's own model is evaluated (e.g. "
                        "environment_settings)")
    parser.add_argument("--model", help="base model (directory, hub id, or tiny-qwen3), or a LoRA run's directory "
                        "(its adapter on the base it names), instead of the run's/recipe's")
    parser.add_argument("--adapter", help="a LoRA adapter directory (a run or checkpoint-N); 'none' for the base "
                        "model alone")
    parser.add_argument("--baseline", help="a non-model baseline policy of the task instead of a model")
    parser.add_argument("--task", help=f"evaluation task (default: from the recipe); one of {sorted(known)}")
    parser.add_argument("--out", help="output directory for eval.jsonl and eval_summary.json")
    parser.add_argument("--heldout_seed", type=int, help="episode seed base (default: the run's heldout_seed)")
    parser.add_argument("--samples-per-prompt", type=int, help="sampled episodes per held-out row (with --greedy: "
                        "greedy episodes per row, default 1)")
    parser.add_argument("--max-rows", type=int, help="held-out rows to use (the first N)")
    parser.add_argument("--greedy", action="store_true", help="greedy episodes instead of sampled ones")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing eval.jsonl in --out")
    parser.add_argument("--build-only", action="store_true", help="build the recipe's base model (tiny model, warm "
                        "start) into the cache and stop: what a workflow does once before runs start in parallel")
    task_options = {}
    for task in sorted(known.values(), key=lambda t: t.name):
        if task.options is not None:
            group = parser.add_argument_group(f"options of the {task.name} task")
            task.options(group)
            task_options[task.name] = [action.dest for action in group._group_actions]
    args = parser.parse_args(argv)
    if args.run_dir is None and args.recipe is None:
        parser.error("give a RUN_DIR or --recipe")
    if args.out is None and not args.build_only:
        parser.error("--out is required")
    return args, task_options


def parse_sets(pairs: list[str]) -> dict[str, str]:
    """`["k=v", ...]` -> `{k: v}`, naming a malformed pair."""
    sets = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise EvalSpecError(f"--set {pair!r}: expected KEY=VALUE")
        sets[key.lstrip("-")] = value
    return sets


def model_and_adapter(model: str, adapter: str | None) -> tuple[str, str | None]:
    """(base model path, adapter) for `--model` / `--adapter`: a LoRA run's directory names its own base."""
    from training.run_setup.models import resolve_model_path

    config = Path(model) / "adapter_config.json"
    if adapter is None and config.exists():
        return json.loads(config.read_text())["base_model_name_or_path"], str(Path(model))
    return resolve_model_path(model), adapter


def build_spec(args: argparse.Namespace):
    sets = parse_sets(args.set)
    argv = [arg for key, value in sets.items() for arg in (f"--{key}", value)]  # as train.py's --KEY VALUE
    build_model = args.baseline is None and args.model is None  # a baseline or a named model needs no warm start
    if args.recipe is not None and args.run_dir is None:
        spec = spec_from_recipe(args.recipe, argv, build_model=build_model or args.build_only)
    elif args.recipe is None:  # the run's own model; --set changes how it is evaluated
        spec = spec_from_run(args.run_dir, sets)
    else:
        spec = replace(spec_from_recipe(args.recipe, argv), adapter=str(args.run_dir), source=str(args.run_dir))
    if args.model is not None:
        model_path, adapter = model_and_adapter(args.model, args.adapter)
        spec = replace(spec, base_model=args.model, model_path=model_path, adapter=adapter)
    if args.adapter is not None:
        spec = replace(spec, adapter=None if args.adapter == "none" else args.adapter)
    samples = args.samples_per_prompt if args.samples_per_prompt is not None or not args.greedy else 1
    overrides = {"heldout_seed": args.heldout_seed, "samples_per_prompt": samples, "max_rows": args.max_rows}
    spec = replace(spec, **{k: v for k, v in overrides.items() if v is not None}, greedy=args.greedy)
    if spec.samples_per_prompt < 1 or spec.max_rows < 1:
        raise EvalSpecError(f"samples_per_prompt={spec.samples_per_prompt} and max_rows={spec.max_rows} must be >= 1")
    return spec


def task_inputs(args: argparse.Namespace, task_options: dict[str, list[str]], spec):
    """The task (told by the spec's environment) and the inputs it plays, built once: the spec's own, or as the
    task's options (when given) ask."""
    task = resolve_task(spec_environment(spec), str(spec.source), args.task)
    for name, dests in task_options.items():
        given = [d for d in dests if getattr(args, d) is not None]
        if given and name != task.name:
            flags = ", ".join(f"--{d}" for d in given)
            raise EvalSpecError(f"{flags}: options of the {name} task; this evaluation's task is {task.name!r}")
    chosen = task.with_options(args, spec) if task.with_options is not None else None
    return task, chosen or inputs_from_spec(spec)


def main(argv: list[str] | None = None) -> dict:
    args, task_options = parse_args(argv)
    started = time.time()
    if args.build_only:
        spec = build_spec(args)
        logger.info("Base model ready: %s", spec.model_path)
        return {"model_path": spec.model_path}
    out = Path(args.out)
    if (out / run_files.EVAL).exists() and not args.overwrite:
        raise EvalSpecError(f"--out: {out} already holds an eval.jsonl; pass --overwrite or another --out")
    if args.task is not None and args.task not in (known := evaluation_tasks()):  # before any model is built
        raise EvalSpecError(f"--task {args.task!r} is not a known task; known: {sorted(known)}")
    spec = build_spec(args)
    task, inputs = task_inputs(args, task_options, spec)
    if args.baseline is not None:
        if args.baseline not in task.baselines:
            raise EvalSpecError(f"task {task.name!r} has no baseline {args.baseline!r}; "
                                f"baselines: {sorted(task.baselines) or 'none'}")
        policy, evaluated = task.baselines[args.baseline](inputs), {"baseline": args.baseline}
    else:
        policy, evaluated = load_policy(spec), {"model_path": spec.model_path, "adapter": spec.adapter}
    logger.info("Evaluating %s on task %s (%s)", evaluated, task.name, inputs.split)
    episodes, counts = task.evaluate(inputs, policy)
    meta = {"source": "training.evaluate", "task": task.name, **evaluated, "split": inputs.split,
            "counts": counts, "metric_directions": task.metric_directions, "spec": spec.as_json(),
            "wall_time_s": time.time() - started}
    write_episodes(out, episodes, meta)
    summary = {**summarize(episodes).as_json(), **meta}
    logger.info("n=%d mean=%s 95%% CI=%s success=%s unscorable=%d -> %s", summary["n"], summary["mean"],
                summary["ci95"], summary["success_rate"], summary["nan_count"], out / run_files.EVAL)
    return summary


def cli(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    with bad_input_exits():
        main(argv)


if __name__ == "__main__":
    cli()
