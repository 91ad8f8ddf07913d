"""Score a policy on a task's held-out episodes: a finished run, a checkpoint, an adapter, a base model, or one of the
task's scripted baselines.

    python -m training.evaluate RUN_DIR --out DIR                       # a run's final adapter, its own settings
    python -m training.evaluate RUN_DIR --adapter RUN_DIR/checkpoint-20 --out DIR   # also a run that did not finish
    python -m training.evaluate --recipe recipes/tiny_cpu.yaml --out DIR  # the recipe's base (warm start) model
    python -m training.evaluate --recipe R --model PATH [--adapter DIR] --out DIR   # PATH: a model, or a LoRA run
    python -m training.evaluate --recipe recipes/causal_cpu.yaml --baseline greedy_eig --out DIR
    python -m training.evaluate RUN_DIR --scm my_scm.yaml --surrogate additive --out DIR  # a task's own flags

Writes `DIR/eval.jsonl` (one episode per line: episode id = (row, sample), its seed, score, reward components,
success) and `DIR/eval_summary.json` (n, mean, std, t-based 95% CI, success rate, unscorable count, and what was
evaluated how). Episodes are paired: under the same `--heldout_seed` (default: the run's `heldout_seed`, 0 unless
set; a run recorded before that default, its `seed`) every model sees the same prompts and the same random numbers,
so `python -m training.compare` can match them. A run that did not finish (a health stop) has no final adapter and
no run_summary.json: it is read from its run_record.json, at the checkpoint `--adapter` names. The task comes from
the recipe (training/evaluation/eval_tasks.py) or `--task`; it plays the episodes exactly as the held-out evaluation
during training does, and may declare flags of its own (listed under its name in `--help`). Which episodes
(`--heldout_seed`, `--episodes_per_row`, `--max_rows`; training/evaluation/episode_choice.py) are the same flags in
every evaluation command; `--samples-per-prompt`, `--max-rows` and `--build-only` were renamed `--episodes_per_row`,
`--max_rows` and `--build_only` (the old spellings warn, until the next release).
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from training.errors import bad_input_exits
from training.evaluation.episode_choice import EpisodeChoice
from training.evaluation.episodes import AT_LIMIT, summarize, write_episodes
from training.evaluation.eval_inputs import inputs_from_spec, spec_environment
from training.evaluation.spec import (
    EvalSpecError,
    load_policy,
    spec_from_recipe,
    spec_from_run,
)
from training.evaluation.eval_tasks import evaluation_tasks, resolve_task
from training.outputs import run_files
from training.run_setup.command_flags import add_fields, add_renamed, from_flags

logger = logging.getLogger("training.evaluate")


@dataclass(frozen=True)
class EvalRequest:
    """What one evaluation is asked for: the command line's flags as one value, which a command that evaluates in
    process (the causal task's `evaluate_baselines`) builds itself."""

    out: str | None
    run_dir: str | None = None
    recipe: str | None = None
    sets: tuple[str, ...] = ()
    model: str | None = None
    adapter: str | None = None
    baseline: str | None = None
    task: str | None = None
    greedy: bool = False
    overwrite: bool = False
    build_only: bool = False
    choice: EpisodeChoice = field(default_factory=EpisodeChoice)  # which episodes: seed, episodes per row, rows
    task_flags: dict = field(default_factory=dict)  # task name -> the value of its own flags (`EvalTask.read_flags`)


def parse_args(argv: list[str] | None = None) -> EvalRequest:
    """The request of a command line; each task's own flags read into its value."""
    known = evaluation_tasks()
    parser = argparse.ArgumentParser(prog="python -m training.evaluate", description=__doc__.split("\n\n")[0],
                                     allow_abbrev=False)
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
    add_fields(parser, EpisodeChoice)
    parser.add_argument("--greedy", action="store_true", help="greedy episodes instead of sampled ones")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing eval.jsonl in --out")
    parser.add_argument("--build_only", action="store_true", help="build the recipe's base model (tiny model, warm "
                        "start) into the cache and stop: what a workflow does once before runs start in parallel")
    add_renamed(parser, "--samples-per-prompt", "--episodes_per_row", type=int)
    add_renamed(parser, "--max-rows", "--max_rows", type=int)
    add_renamed(parser, "--build-only", "--build_only", takes_value=False)
    readers = {}
    for task in sorted(known.values(), key=lambda t: t.name):
        if task.flags is not None:
            task.flags(parser.add_argument_group(f"flags of the {task.name} task"))
            readers[task.name] = task.read_flags
    args = parser.parse_args(argv)
    if args.run_dir is None and args.recipe is None:
        parser.error("give a RUN_DIR or --recipe")
    if args.out is None and not args.build_only:
        parser.error("--out is required")
    return EvalRequest(
        out=args.out, run_dir=args.run_dir, recipe=args.recipe, sets=tuple(args.set), model=args.model,
        adapter=args.adapter, baseline=args.baseline, task=args.task, greedy=args.greedy, overwrite=args.overwrite,
        build_only=args.build_only, choice=from_flags(args, EpisodeChoice),
        task_flags={name: read(args) for name, read in readers.items()},
    )


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


def build_spec(request: EvalRequest):
    sets = parse_sets(request.sets)
    argv = [arg for key, value in sets.items() for arg in (f"--{key}", value)]  # as train.py's --KEY VALUE
    build_model = request.baseline is None and request.model is None  # a baseline or a named model needs no warm start
    if request.recipe is not None and request.run_dir is None:
        spec = spec_from_recipe(request.recipe, argv, build_model=build_model or request.build_only)
    elif request.recipe is None:  # the run's own model; --set changes how it is evaluated
        spec = spec_from_run(request.run_dir, sets, request.adapter)
    else:
        spec = replace(spec_from_recipe(request.recipe, argv), adapter=str(request.run_dir), source=str(request.run_dir))
    if request.model is not None:
        model_path, adapter = model_and_adapter(request.model, request.adapter)
        spec = replace(spec, base_model=request.model, model_path=model_path, adapter=adapter)
    if request.adapter is not None:
        spec = replace(spec, adapter=None if request.adapter == "none" else request.adapter)
    choice = request.choice
    samples = choice.episodes_per_row if choice.episodes_per_row is not None or not request.greedy else 1
    overrides = {"heldout_seed": choice.heldout_seed, "samples_per_prompt": samples, "max_rows": choice.max_rows}
    spec = replace(spec, **{k: v for k, v in overrides.items() if v is not None}, greedy=request.greedy)
    if spec.samples_per_prompt < 1 or spec.max_rows < 1:
        raise EvalSpecError(f"samples_per_prompt={spec.samples_per_prompt} and max_rows={spec.max_rows} must be >= 1")
    return spec


def task_inputs(request: EvalRequest, spec):
    """The task (told by the spec's environment) and the inputs it plays, built once: the spec's own, or as the
    task's own flags (when given) ask."""
    task = resolve_task(spec_environment(spec), str(spec.source), request.task)
    for name, value in request.task_flags.items():
        given = [f.name for f in fields(value) if getattr(value, f.name) is not None]
        if given and name != task.name:
            flags = ", ".join(f"--{d}" for d in given)
            raise EvalSpecError(f"{flags}: flags of the {name} task; this evaluation's task is {task.name!r}")
    own = request.task_flags.get(task.name)
    chosen = task.with_flags(own, request.choice, spec) if task.with_flags is not None and own is not None else None
    return task, chosen or inputs_from_spec(spec)


def main(argv: list[str] | None = None) -> dict:
    return evaluate(parse_args(argv))


def evaluate(request: EvalRequest) -> dict:
    """Evaluate as `request` asks: write `out/eval.jsonl` and `out/eval_summary.json`; returns the summary."""
    started = time.time()
    if request.build_only:
        spec = build_spec(request)
        logger.info("Base model ready: %s", spec.model_path)
        return {"model_path": spec.model_path}
    out = Path(request.out)
    if (out / run_files.EVAL).exists() and not request.overwrite:
        raise EvalSpecError(f"--out: {out} already holds an eval.jsonl; pass --overwrite or another --out")
    if request.task is not None and request.task not in (known := evaluation_tasks()):  # before any model is built
        raise EvalSpecError(f"--task {request.task!r} is not a known task; known: {sorted(known)}")
    spec = build_spec(request)
    task, inputs = task_inputs(request, spec)
    inputs = replace(inputs, progress=f"{request.baseline or 'model'} episodes")
    if request.baseline is not None:
        if request.baseline not in task.baselines:
            raise EvalSpecError(f"task {task.name!r} has no baseline {request.baseline!r}; "
                                f"baselines: {sorted(task.baselines) or 'none'}")
        policy, evaluated = task.baselines[request.baseline](inputs), {"baseline": request.baseline}
    else:
        policy, evaluated = load_policy(spec), {"model_path": spec.model_path, "adapter": spec.adapter}
    logger.info("Evaluating %s on task %s (%s)", evaluated, task.name, inputs.split)
    episodes, counts = task.evaluate(inputs, policy)
    if counts.get(AT_LIMIT):
        logger.warning("%d of %d episodes ended at the completion limit (max_completion_length %d) or the model's "
                       "context, before the model or the task ended them: their scores are those of cut episodes "
                       "(--set max_completion_length=N, and --set model_init_kwargs='{\"max_position_embeddings\": "
                       "N}' for a longer context; a run directory plays its run's own)", counts[AT_LIMIT],
                       len(episodes), spec.max_new_tokens)
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
