"""Entry point: one YAML recipe (read by TRL's `TrlParser`) = one reproducible GRPO run.

    python -m training.train --config recipes/tiny_cpu.yaml [--max_steps 3 --output_dir DIR ...]
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import logging
import os
import sys
import time
import types
import typing
from pathlib import Path

import yaml
from datasets import Dataset
from transformers import AutoConfig, AutoTokenizer
from transformers.trainer_callback import TrainerState
from trl import ModelConfig, TrlParser, get_peft_config, get_quantization_config

from training.atomic import DISK_FULL_ERRNOS
from training.callbacks import RunRecordCallback, keep_metrics_up_to
from training.checkpoints import (
    LOW_SPACE_BYTES,
    TRAINER_STATE,
    DiskFullError,
    check_resume_path,
    disk_full_named,
    free_bytes,
    last_complete_text,
    prepare_resume,
    train_saving_on_stop,
)
from training.config import StrictGRPOConfig, StrictScriptArguments
from training.data import check_prompt_lengths, load_prompt_dataset, load_rows
from training.envs.prompting import render_system_prompt, with_system_prompt
from training.envs.tool_names import check_tool_names, environment_tool_names
from training.errors import BadInputError, bad_input_exits
from training.fault_injection import fault_point
from training.flags import read_flags
from training.input_checks import check_environment_rows, check_lora_targets, check_recipe_fields, import_object
from training.hub import RunInfo, dump_push_result, publish, take_push_request, write_local_model_card
from training.models import resolve_model_path
from training.plain_trl import PlainTRLGRPOTrainer
from training.report import library_versions, plot_reward_curve, write_run_summary
from training.reward_names import dotted_path
from training.reward_retry import with_retries
from training.run_lock import holding_output_dir
from training.run_recipe import ApplyRecipeOnResume, attempt_recipe
from training.run_record import RunRecord
from training.tracking import attach_tracking, finish_tracking
from training.trainer import StrictGRPOTrainer
from training.warm_start import supervised_warm_start
from training.warm_start_tools import trace_warm_start
from training.yaml_errors import yaml_problem

logger = logging.getLogger("training.train")

# Files an earlier run leaves in its output_dir; their presence means the directory is taken.
RUN_OUTPUTS = ("metrics.jsonl", "run_summary.json", "reward_curve.png", "adapter_model.safetensors")


class RecipeError(BadInputError):
    """The recipe or the command line asks for something we cannot run; the message names the key or path."""


class ArgumentParser(TrlParser):
    """TRL's parser without argparse's prefix matching (`--learning_rat` is not `--learning_rate`), whose errors (a
    flag value of the wrong type) are `RecipeError`s rather than a usage message and exit."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, allow_abbrev=False, **kwargs)

    def error(self, message):
        raise RecipeError(message)


def make_parser() -> TrlParser:
    return ArgumentParser((StrictScriptArguments, StrictGRPOConfig, ModelConfig))


def _hint(name: str, known, prefix: str = "") -> str:
    close = difflib.get_close_matches(name, known, n=3)
    return f" (did you mean {', '.join(prefix + c for c in close)}?)" if close else ""


def check_flags(parser: TrlParser, argv: list[str]) -> None:
    """Refuse a command-line flag that no dataclass knows, naming it and the nearest known flags."""
    known = {opt for action in parser._actions for opt in action.option_strings} | {"--config"}
    dests = [action.dest for action in parser._actions if action.option_strings]
    for arg in argv:
        name = arg.split("=", 1)[0]
        if name.startswith("--") and name not in known:
            raise RecipeError(f"unknown flag {name}{_hint(name[2:], dests, '--')}")
    if "--config" in argv and argv.index("--config") + 1 >= len(argv):
        raise RecipeError("--config needs a recipe file")


def field_types(parser: TrlParser) -> dict[str, object]:
    """Each dataclass field's type, by field name (fields whose annotations do not resolve are left out)."""
    hints: dict[str, object] = {}
    for dtype in parser.dataclass_types:
        try:
            resolved = typing.get_type_hints(dtype)
        except Exception:  # an annotation this Python cannot evaluate: its fields are only checked by argparse
            continue
        hints.update({f.name: resolved[f.name] for f in dataclasses.fields(dtype) if f.name in resolved})
    return hints


def type_problem(value, hint) -> str | None:
    """Why a recipe value does not fit a field's type, or None. Strings are left to argparse's conversion."""
    origin, members = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in members:
            return None
        problems = [type_problem(value, m) for m in members if m is not type(None)]
        return None if any(p is None for p in problems) else problems[0]
    if origin is list:
        if not isinstance(value, list):
            return f"must be a list (YAML: [{value}])"
        return next((p for p in (type_problem(v, members[0]) for v in value) if p), None) if members else None
    if isinstance(value, str) and hint in (int, float, bool):
        return None
    if hint is bool and not isinstance(value, bool):
        return "must be true or false"
    if hint is int and (isinstance(value, bool) or not isinstance(value, int)):
        return "must be an integer"
    if hint is float and (isinstance(value, bool) or not isinstance(value, (int, float))):
        return "must be a number"
    if hint is str and not isinstance(value, str):
        return "must be a string"
    if hint is dict and not isinstance(value, (dict, str)):
        return "must be a mapping"
    return None


def check_recipe_keys(parser: TrlParser, argv: list[str]) -> None:
    """Refuse a recipe key that no dataclass knows (naming it and the nearest known keys) and a value of the wrong
    type (`lora_r: 1.5`, a single string where a list is expected)."""
    if "--config" not in argv:
        return
    config_path = argv[argv.index("--config") + 1]
    if not Path(config_path).is_file():
        raise RecipeError(f"recipe {config_path!r} does not exist")
    try:
        recipe = yaml.safe_load(Path(config_path).read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise RecipeError(f"recipe {config_path!r} is not valid YAML: {yaml_problem(err)}") from None
    if not isinstance(recipe, dict):
        raise RecipeError(f"recipe {config_path!r} must be a YAML mapping of keys to values")
    known = {action.dest for action in parser._actions} | {"env"}
    hints = field_types(parser)
    for key, value in recipe.items():
        if key not in known:
            raise RecipeError(f"recipe {config_path!r}: unknown key {key!r}{_hint(str(key), known)}")
        problem = type_problem(value, hints[key]) if key in hints else None
        if problem:
            raise RecipeError(f"recipe {config_path!r}: {key}={value!r} {problem}")


def parse_args(argv: list[str] | None = None):
    """The three argument dataclasses, or a `BadInputError` naming the key, flag or value."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = make_parser()
    check_flags(parser, argv)
    check_recipe_keys(parser, argv)
    try:
        script_args, training_args, model_args = parser.parse_args_and_config(argv)
    except BadInputError as err:
        raise RecipeError(str(err)) from None
    except ValueError as err:  # raised by a dataclass's own checks while parsing: bad configuration too
        raise RecipeError(f"invalid configuration: {err}") from None
    if not isinstance(model_args.lora_r, int) or model_args.lora_r < 1:
        raise RecipeError(f"lora_r={model_args.lora_r!r} is invalid: expected an integer >= 1")
    return script_args, training_args, model_args


def check_output_dir(args: StrictGRPOConfig) -> None:
    """An earlier run's outputs are never overwritten unless asked for (or resumed from); the directory must be one
    we can write into, on a disk with space left."""
    out = Path(args.output_dir)
    if out.exists() and not out.is_dir():
        raise RecipeError(f"output_dir {str(out)!r} is a file, not a directory")
    check_writable(out)
    if args.resume_from_checkpoint or args.overwrite_output_dir or not out.exists():
        return
    taken = [name for name in RUN_OUTPUTS if (out / name).exists()] + [p.name for p in out.glob("checkpoint-*")]
    if taken:
        raise RecipeError(
            f"output_dir {str(out)!r} already holds an earlier run ({', '.join(sorted(taken)[:4])}); "
            "pass --overwrite_output_dir, --resume_from_checkpoint true, or another --output_dir"
        )


def check_writable(out: Path) -> None:
    """Create `out` and write (and remove) a small probe file in it. The directory is left in place even when later
    input is refused: removing it could pull it from under another process of the same run probing it too."""
    probe = out / f".strict-grpo-write-probe-{os.getpid()}"
    try:
        out.mkdir(parents=True, exist_ok=True)
        with open(probe, "wb") as f:
            f.write(b"\0" * 65536)
            f.flush()
            os.fsync(f.fileno())
    except OSError as err:
        if err.errno in DISK_FULL_ERRNOS:
            raise DiskFullError(f"disk full (ENOSPC): cannot write into output_dir {str(out)!r}") from None
        raise RecipeError(f"output_dir {str(out)!r} is not writable ({err.strerror})") from None
    finally:
        probe.unlink(missing_ok=True)
    free = free_bytes(out)
    if free < LOW_SPACE_BYTES:
        raise DiskFullError(
            f"disk full: {free / 2**20:.1f} MiB free on the filesystem of output_dir {str(out)!r}, less than the "
            f"{LOW_SPACE_BYTES // 2**20} MiB a run needs for its checkpoints"
        )


def import_reward(entry: str):
    """The reward function a `reward_funcs` entry names: a registered short name (training/reward_names.py) or a
    dotted path."""
    func = import_object(dotted_path(entry), "reward_funcs entry")
    if not callable(func):
        raise RecipeError(f"reward_funcs entry {entry!r} is a {type(func).__name__}, not a callable")
    return func


def check_context(script_args, training_args, model_path: str, rows_by_source: dict[str, list[dict]]) -> None:
    """Every prompt, with `max_completion_length` completion tokens, fits the model's context
    (`max_position_embeddings`, or `vllm_max_model_length` when smaller); names the file and row otherwise."""
    try:
        config = AutoConfig.from_pretrained(model_path)
        tokenizer = AutoTokenizer.from_pretrained(model_path)
    except OSError as err:  # a hub id with no hub in reach: from_pretrained will say so when it loads the model
        logger.warning("Prompt lengths not checked: cannot load %s's config or tokenizer (%s)", model_path, err)
        return
    context = getattr(config, "max_position_embeddings", None)
    if context is None:
        return
    if training_args.vllm_max_model_length:
        context = min(context, training_args.vllm_max_model_length)
    for source, rows in rows_by_source.items():
        check_prompt_lengths(
            rows, source, tokenizer, dict(training_args.chat_template_kwargs or {}), context,
            training_args.max_completion_length,
        )  # fmt: skip


def setup_environment(script_args: StrictScriptArguments, train_rows: list[dict], heldout_rows: list[dict]):
    """Import the recipe's environment, put the rendered system prompt in front of every row, and check every tool
    name the prompt, the recipe and the tasks mention against it. Returns (factory, train rows, held-out rows)."""
    factory = import_object(script_args.environment_factory, "environment_factory")
    if not callable(factory):
        raise RecipeError(f"environment_factory {script_args.environment_factory!r} is not an importable callable")
    env_cls = type(factory())
    prompts = {}
    if script_args.system_prompt_file:
        system_prompt = render_system_prompt(script_args.system_prompt_file, env_cls)
        prompts[script_args.system_prompt_file] = system_prompt
        train_rows = with_system_prompt(train_rows, system_prompt)
        heldout_rows = with_system_prompt(heldout_rows, system_prompt) if heldout_rows else heldout_rows
    check_tool_names(
        environment_tool_names(env_cls),
        prompts=prompts,
        recipe_tools=script_args.tool_names,
        task_rows={script_args.train_file: train_rows, str(script_args.heldout_file): heldout_rows},
    )
    return factory, train_rows, heldout_rows


def resolve_resume(args: StrictGRPOConfig) -> str | bool | None:
    """`--resume_from_checkpoint true` means the newest complete checkpoint in output_dir (`prepare_resume`); a
    path must name a complete checkpoint."""
    resume = args.resume_from_checkpoint
    if resume in (None, "", "false", "False"):
        return None
    if resume in ("true", "True", True):
        return True
    if not Path(resume).is_dir():
        raise RecipeError(f"resume_from_checkpoint={resume!r} does not exist")
    check_resume_path(resume)
    return resume


def warn_if_resume_inexact(args: StrictGRPOConfig) -> None:
    """TRL regenerates its generation batch on the first step after a resume: a checkpoint inside a generation batch
    (`steps_per_generation` or `num_iterations` > 1) resumes correctly but not as the uninterrupted run would."""
    micro_per_save = int(args.save_steps) * args.gradient_accumulation_steps if args.save_steps >= 1 else 0
    generate_every = args.steps_per_generation * args.num_iterations
    if args.save_strategy == "steps" and micro_per_save and micro_per_save % generate_every:
        logger.warning(
            "save_steps=%s x gradient_accumulation_steps=%d is not a multiple of steps_per_generation x num_iterations "
            "= %d: a run resumed from such a checkpoint samples the rest of that generation batch anew (correct, but "
            "not bit-identical to an uninterrupted run)", args.save_steps, args.gradient_accumulation_steps,
            generate_every,
        )  # fmt: skip


def finished_at(checkpoint: Path | None, args: StrictGRPOConfig) -> bool:
    """Whether `checkpoint` already reached the run's last step (resuming it must not train another step)."""
    if checkpoint is None:
        return False
    state = json.loads((checkpoint / TRAINER_STATE).read_text())
    target = args.max_steps if args.max_steps > 0 else state.get("max_steps", 0)
    return state["global_step"] >= target


def load_finished_checkpoint(trainer: StrictGRPOTrainer, checkpoint: Path) -> None:
    """The weights and state of a checkpoint that reached max_steps, without `train()` (which would take one more
    step from it)."""
    trainer._load_from_checkpoint(str(checkpoint))
    trainer.state = TrainerState.load_from_json(str(checkpoint / TRAINER_STATE))


@dataclasses.dataclass
class RunInputs:
    """Everything `prepare` checked before any work, for `train_and_report`."""

    argv: list[str]
    script_args: StrictScriptArguments
    training_args: StrictGRPOConfig
    model_args: ModelConfig
    flags: object
    push: object
    resume: str | bool | None
    train_dataset: Dataset
    heldout_rows: list[dict]
    env_factory: object
    reward_funcs: list
    model_path: str


def prepare(argv: list[str]) -> RunInputs:
    """Every check of the input, before any work: arguments, flags, output_dir, data, rewards, model, prompt
    lengths. Raises a `BadInputError` naming the key, flag, file, row or path."""
    script_args, training_args, model_args = parse_args(argv)
    check_recipe_fields(script_args, training_args, model_args)
    flags = read_flags()
    push = take_push_request(training_args)  # before the Trainer exists: it must neither push nor store the token
    check_output_dir(training_args)
    resume = resolve_resume(training_args)

    train_dataset = load_prompt_dataset(script_args.train_file)
    heldout_rows = load_rows(script_args.heldout_file) if script_args.heldout_file else []
    # a resume that changes the recipe: refused now (after the data files are known to read: their digests are in it)
    attempt_recipe(script_args, training_args, model_args, resume)
    env_factory = None
    if script_args.environment_factory:
        env_factory, train_rows, heldout_rows = setup_environment(script_args, train_dataset.to_list(), heldout_rows)
        train_dataset = Dataset.from_list(train_rows)
        check_environment_rows(
            env_factory, {script_args.train_file: train_rows, script_args.heldout_file: heldout_rows}
        )  # the environment's own check of every row (the causal one: each SCM built, sampled, its optimum found)
    reward_funcs = [import_reward(name) for name in script_args.reward_funcs]
    reward_funcs = with_retries(reward_funcs, training_args.reward_retries, strict=flags.strict_traj_keys,
                                timeout_s=training_args.reward_timeout_s)
    warn_if_resume_inexact(training_args)

    # Under `accelerate launch` every rank runs this; the local main process builds the cached model (and later the
    # warm start) first and the other ranks then load them, instead of racing to write the same files.
    with training_args.main_process_first(desc="building the cached model"):
        model_path = resolve_model_path(model_args.model_name_or_path, seed=script_args.model_seed)
    check_context(
        script_args, training_args, model_path,
        {script_args.train_file: train_dataset.to_list(), str(script_args.heldout_file): heldout_rows},
    )  # fmt: skip
    check_lora_targets(model_args, model_path)
    return RunInputs(
        argv, script_args, training_args, model_args, flags, push, resume, train_dataset, heldout_rows, env_factory,
        reward_funcs, model_path,
    )  # fmt: skip


def begin_attempt(run: RunInputs, started: float) -> tuple[Path | None, RunRecord]:
    """The checkpoint this attempt resumes (`--resume_from_checkpoint true`: the newest complete one, incomplete
    ones set aside; None: from scratch), metrics.jsonl cut back to it, and the run record with this attempt open."""
    args = run.training_args
    is_main = args.process_index == 0
    if is_main and not run.resume:
        check_output_dir(args)  # again, under the lock: a run on this directory may have finished since `prepare`
    # Every rank compares with the recorded recipe before the main process records this attempt's (the block below
    # holds it until the other ranks reach it), so all apply the same changes.
    recipe, changes = attempt_recipe(run.script_args, args, run.model_args, run.resume)
    checkpoint = None
    with args.main_process_first(desc="choosing the checkpoint to resume"):
        if run.resume is True:
            checkpoint = prepare_resume(args.output_dir)
    if run.resume and run.resume is not True:
        checkpoint = Path(run.resume)
    resume_step = json.loads((checkpoint / TRAINER_STATE).read_text())["global_step"] if checkpoint else 0
    if is_main:
        keep_metrics_up_to(Path(args.output_dir) / "metrics.jsonl", resume_step)
    record = RunRecord.begin(
        args.output_dir,
        resume=bool(run.resume),
        resume_step=resume_step,
        resumed_from=checkpoint.name if checkpoint is not None else None,
        started_monotonic=started,
        enabled=is_main,
    )
    record.set_recipe(recipe, changes)
    return checkpoint, record


def main(argv: list[str] | None = None) -> dict:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    started = time.monotonic()
    run = prepare(list(sys.argv[1:] if argv is None else argv))
    # One writer at a time, from choosing the checkpoint to the last file written (training/run_lock.py).
    with holding_output_dir(run.training_args.output_dir, enabled=run.training_args.process_index == 0):
        checkpoint, record = begin_attempt(run, started)
        try:
            return train_and_report(run, checkpoint, record)
        except BaseException as err:
            try:
                record.end(f"error: {type(err).__name__}: {err}"[:500])
            except OSError as record_err:  # e.g. the disk is full: the error being raised is the one to report
                logger.error("Could not record how the attempt ended: %s", record_err)
            raise


def warm_started(script_args, training_args, model_path: str, train_rows: list[dict], env_factory,
                 show_progress: bool = False) -> str:
    """The model GRPO starts from: `model_path` after the recipe's warm start (cached: the same arguments return the
    same directory), a tool-trace warm start when the recipe has an environment. `training.evaluate` calls this too,
    so it finds the very model a run trained from."""
    if script_args.warm_start_steps <= 0:
        return model_path
    common = dict(steps=script_args.warm_start_steps, lr=script_args.warm_start_lr, seed=script_args.model_seed,
                  template_kwargs=dict(training_args.chat_template_kwargs or {}), show_progress=show_progress)
    if script_args.warm_start_batch_size is not None:
        common["batch_size"] = script_args.warm_start_batch_size
    if env_factory is not None:
        logger.info("Tool-trace warm start: %d steps on %s", script_args.warm_start_steps, script_args.train_file)
        return trace_warm_start(model_path, train_rows, env_factory,
                                tool_call_rate=script_args.warm_start_tool_call_rate, **common)
    logger.info("Supervised warm start: %d steps on %s", script_args.warm_start_steps, script_args.train_file)
    return supervised_warm_start(model_path, train_rows, **common)


def train_and_report(run: RunInputs, checkpoint: Path | None, record: RunRecord) -> dict:
    """Warm start, train (or, for a checkpoint that already reached max_steps, only load it), evaluate, save the
    adapter, write run_summary.json, the reward curve and the model card, and push when asked."""
    script_args, training_args, model_args = run.script_args, run.training_args, run.model_args
    train_dataset, heldout_rows, env_factory = run.train_dataset, run.heldout_rows, run.env_factory
    model_path, flags, push, argv = run.model_path, run.flags, run.push, run.argv
    with training_args.main_process_first(desc="building the warm start"):
        model_path = warm_started(script_args, training_args, model_path, train_dataset.to_list(), env_factory,
                                  show_progress=not training_args.disable_tqdm)
    record.heartbeat()
    training_args.model_init_kwargs = {
        **(training_args.model_init_kwargs or {}),
        **({"dtype": model_args.dtype} if model_args.dtype else {}),
    }
    quantization_config = get_quantization_config(model_args)
    if quantization_config is not None:
        training_args.model_init_kwargs["quantization_config"] = quantization_config

    trainer_class = PlainTRLGRPOTrainer if script_args.trainer == "trl" else StrictGRPOTrainer  # training/plain_trl.py
    trainer = trainer_class(
        model=model_path,
        reward_funcs=run.reward_funcs,
        args=training_args,
        train_dataset=train_dataset,
        peft_config=get_peft_config(model_args),
        flags=flags,
        heldout_rows=heldout_rows,
        environment_factory=env_factory,
    )
    if trainer.accelerator.is_main_process:
        logger.info("Strict flags: %s", flags.as_env())
    tracking = attach_tracking(trainer, {  # report_to trackers: the resolved configuration beyond training_args
        "script_args": vars(script_args), "model_args": vars(model_args), "strict_flags": flags.as_env(),
        "recipe": argv[argv.index("--config") + 1] if "--config" in argv else None,
    })
    trainer.heldout_history.extend(record.heldout_history)  # the evaluations of earlier attempts, up to the checkpoint
    trainer.add_callback(RunRecordCallback(record, trainer.heldout_history))
    trainer.add_callback(ApplyRecipeOnResume(record.current["recipe_changes"]))  # what the checkpoint's state restores

    before = record.data["heldout_before"]
    if heldout_rows and before is None:
        before = {"step": 0, **trainer.evaluate_heldout()}
        trainer.heldout_history.insert(0, dict(before))
        record.set_heldout("before", 0, before, trainer.heldout_history)
    if finished_at(checkpoint, training_args):
        logger.info(
            "%s already reached max_steps=%d: nothing to train; the final adapter, evaluation and summary are "
            "written from it", checkpoint, training_args.max_steps,
        )  # fmt: skip
        load_finished_checkpoint(trainer, checkpoint)
    else:
        train_saving_on_stop(trainer, str(checkpoint) if checkpoint is not None else None)
    out = Path(training_args.output_dir)
    after = record.data["heldout_after"]
    if heldout_rows and (after is None or after["step"] != trainer.state.global_step):
        after = {"step": trainer.state.global_step, **trainer.evaluate_heldout()}
        fault_point("final_evaluation")
        with disk_full_named(out, "eval.jsonl"):
            trainer.heldout.write_final(out)  # eval.jsonl: per-episode scores for training.compare
        trainer.heldout_history.append(dict(after))
        record.set_heldout("after", trainer.state.global_step, after, trainer.heldout_history)
        fault_point("final_evaluation_recorded")
    with disk_full_named(out, "adapter_model.safetensors"):
        trainer.save_model(training_args.output_dir)
        fault_point("final_save", torn=out / "adapter_model.safetensors")
    # paired per held-out row, 95% CIs; read from the evaluations' files, which the main process alone writes
    changes = trainer.heldout.change_since_start() if heldout_rows and trainer.accelerator.is_main_process else []
    stopped_reason = trainer.wall_time_guard.stopped_reason or "completed"
    record.end(stopped_reason, trainer.state.global_step, trainer.heldout_history)  # wall time up to here
    before, after = before or {}, after or {}

    summary = {
        "model_name_or_path": model_args.model_name_or_path,
        "resolved_model_path": model_path,
        "script_args": vars(script_args),
        "training_args": training_args.to_dict(),
        "model_args": vars(model_args),
        "strict_flags": flags.as_env(),
        "library_versions": library_versions(),
        "wall_time_s": record.total_wall_time_s,
        "wall_time_this_attempt_s": record.current["wall_time_s"],
        "attempts": record.data["attempts"],
        "global_step": trainer.state.global_step,
        "stopped_reason": stopped_reason,
        "heldout_reward_before": before.get("heldout/reward"),
        "heldout_reward_after": after.get("heldout/reward"),
        "heldout_greedy_reward_before": before.get("heldout/greedy_reward"),
        "heldout_greedy_reward_after": after.get("heldout/greedy_reward"),
        "heldout_history": trainer.heldout_history,
        "heldout_change": [c.as_json() for c in changes],
        "hub_push": None if push is None else {"repo_id": push.repo_id, "dry_run_dir": push.dry_run_dir},
    }
    if trainer.accelerator.is_main_process:
        with disk_full_named(out, "run_summary.json"):
            write_run_summary(training_args.output_dir, summary)
        with disk_full_named(out, "reward_curve.png"):
            plot_reward_curve(training_args.output_dir, trainer.heldout_history, changes)
        info = RunInfo(
            base_model=model_args.model_name_or_path,
            resolved_model_path=model_path,
            recipe_path=argv[argv.index("--config") + 1] if "--config" in argv else None,
            argv=argv,
            strict_flags=flags.as_env(),
            summary=summary,
        )
        with disk_full_named(out, "README.md"):
            write_local_model_card(info, training_args.output_dir)
        finish_tracking(tracking, training_args.output_dir, {  # final held-out metrics and the adapter artifact
            k: summary[k] for k in ("heldout_reward_before", "heldout_reward_after") if summary[k] is not None
        })
        logger.info(
            "Done in %.0fs (%d attempt(s), %.0fs in this one) at step %d (%s). Held-out reward: before %s, after %s",
            summary["wall_time_s"],
            len(summary["attempts"]),
            summary["wall_time_this_attempt_s"],
            summary["global_step"],
            summary["stopped_reason"],
            summary["heldout_reward_before"],
            summary["heldout_reward_after"],
        )
        if changes:
            logger.info("Held-out change from step 0, paired per held-out row:\n  %s",
                        "\n  ".join(c.sentence() for c in changes))
        if push is not None:
            dump_push_result(training_args.output_dir, publish(push, info, training_args.output_dir, model_args.dtype))
    return summary


def cli() -> None:
    try:
        with bad_input_exits():  # one clear line naming the key, column, row, flag or path
            main()
    except OSError as err:
        if err.errno not in DISK_FULL_ERRNOS:
            raise
        out = _output_dir_of(sys.argv[1:])
        where = f"; {last_complete_text(out)}" if out else ""
        print(f"error: disk full (ENOSPC) while writing {err.filename or 'a file'}{where}", file=sys.stderr)
        sys.exit(2)


def _output_dir_of(argv: list[str]) -> str | None:
    """The output_dir of a command line, for the disk-full message (None when it cannot be told)."""
    try:
        return parse_args(argv)[1].output_dir
    except Exception:  # only used to add a hint to an error already being reported
        return None


if __name__ == "__main__":
    cli()
