"""Entry point: one YAML recipe (read by TRL's `TrlParser`) = one reproducible GRPO run.

    python -m training.train --config recipes/tiny_cpu.yaml [--max_steps 3 --output_dir DIR ...]

`main` reads the command line into a `Recipe` (`training.run_setup.recipe.read_recipe`) and runs it with `train`;
a command that composes a run in process (the causal task's `train_scm`) builds the `Recipe` itself and calls
`train`, with no command line in between.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
import time
from pathlib import Path

from datasets import Dataset
from transformers.trainer_callback import TrainerState
from trl import ModelConfig, get_peft_config, get_quantization_config

from training.outputs import run_files
from training.outputs.atomic import DISK_FULL_ERRNOS
from training.outputs.checkpoints import (
    TRAINER_STATE,
    check_resume_path,
    disk_full_named,
    last_complete_text,
    prepare_resume,
    train_saving_on_stop,
)
from training.outputs.fault_injection import fault_point
from training.outputs.hub import RunInfo, dump_push_result, publish, take_push_request, write_local_model_card
from training.outputs.run_lock import holding_output_dir
from training.outputs.run_record import RunRecord
from training.outputs.run_measures import gpu_memory, precision_in_force, sampler_gap
from training.outputs.run_summary import library_versions, plot_reward_curve, read_metrics, write_run_summary
from training.outputs.tracking import attach_tracking, finish_tracking
from training.run_setup.config import StrictGRPOConfig, StrictScriptArguments
from training.errors import bad_input_exits
from training.run_setup.flags import read_flags
from training.run_setup.input_checks import check_environment_rows, check_lora_targets, check_recipe_fields
from training.run_setup.models import resolve_model_path
from training.run_setup.environment_settings import recipe_fields
from training.run_setup.prompt_datasets import load_prompt_dataset, load_rows, prompt_dataset
from training.run_setup.recipe import (
    Recipe,
    RecipeError,
    check_context,
    check_output_dir,
    import_reward,
    parse_args,
    read_recipe,
    setup_environment,
    warm_started,
)
from training.run_setup.run_recipe import ApplyRecipeOnResume, attempt_recipe
from training.step.callbacks import RunRecordCallback, keep_metrics_up_to
from training.step.health import RunHealthError
from training.step.plain_trl import PlainTRLGRPOTrainer
from training.step.reward_retry import with_retries
from training.trainer import StrictGRPOTrainer

logger = logging.getLogger("training.train")
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


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

    recipe: Recipe  # the three argument dataclasses, the recipe file and the command line as typed
    flags: object
    push: object
    resume: str | bool | None
    train_dataset: Dataset
    heldout_rows: list[dict]
    env_factory: object
    reward_funcs: list
    model_path: str

    @property
    def script_args(self) -> StrictScriptArguments:
        return self.recipe.script_args

    @property
    def training_args(self) -> StrictGRPOConfig:
        return self.recipe.training_args

    @property
    def model_args(self) -> ModelConfig:
        return self.recipe.model_args


def prepare(recipe: Recipe) -> RunInputs:
    """Every check of the input, before any work: arguments, flags, output_dir, data, rewards, model, prompt
    lengths. Raises a `BadInputError` naming the key, flag, file, row or path."""
    script_args, training_args, model_args = recipe.script_args, recipe.training_args, recipe.model_args
    if recipe.environment is not None:  # recorded as the recipe fields that name it
        script_args.environment_factory, script_args.environment_settings = recipe_fields(recipe.environment)
    check_recipe_fields(script_args, training_args, model_args)
    flags = read_flags()
    push = take_push_request(training_args)  # before the Trainer exists: it must neither push nor store the token
    check_output_dir(training_args)
    resume = resolve_resume(training_args)

    if recipe.rows is None:
        train_dataset = load_prompt_dataset(script_args.train_file)
        heldout_rows = load_rows(script_args.heldout_file) if script_args.heldout_file else []
    else:  # handed over in process; the files named keep them (their sha256 is in the recorded recipe)
        train_dataset = prompt_dataset(recipe.rows["train"], script_args.train_file)
        heldout_rows = list(recipe.rows.get("heldout", []))
    # a resume that changes the recipe: refused now (after the data files are known to read: their digests are in it)
    attempt_recipe(script_args, training_args, model_args, resume)
    env_factory = None
    if script_args.environment_factory:
        env_factory, train_rows, heldout_rows = setup_environment(script_args, train_dataset.to_list(), heldout_rows,
                                                                  recipe.environment)
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
    return RunInputs(recipe, flags, push, resume, train_dataset, heldout_rows, env_factory, reward_funcs, model_path)


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
        keep_metrics_up_to(Path(args.output_dir) / run_files.METRICS, resume_step)
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
    """The run of a command line (`python -m training.train ...`)."""
    return train(read_recipe(list(sys.argv[1:] if argv is None else argv)))


def train(recipe: Recipe) -> dict:
    """One GRPO run of `recipe`, checked (`prepare`), then trained, evaluated and reported (`train_and_report`)
    under the output directory's lock; returns the run summary."""
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    started = time.monotonic()
    run = prepare(recipe)
    # One writer at a time, from choosing the checkpoint to the last file written (training/outputs/run_lock.py).
    with holding_output_dir(run.training_args.output_dir, enabled=run.training_args.process_index == 0):
        checkpoint, record = begin_attempt(run, started)
        try:
            return train_and_report(run, checkpoint, record)
        except BaseException as err:
            try:
                record.end(f"error: {type(err).__name__}: {err}"[:500],
                           health_stop=str(err)[:500] if isinstance(err, RunHealthError) else None)
            except OSError as record_err:  # e.g. the disk is full: the error being raised is the one to report
                logger.error("Could not record how the attempt ended: %s", record_err)
            raise


def train_and_report(run: RunInputs, checkpoint: Path | None, record: RunRecord) -> dict:
    """The run's phases, in order: the warm start, the trainer, the held-out evaluation at step 0, GRPO (or, for a
    checkpoint that already reached max_steps, only loading it), the final held-out evaluation, the adapter, the run
    summary; then, on the main process, its files, the model card, the tracking's end and the push."""
    model_path = warm_start(run, record)
    trainer = build_trainer(run, model_path)
    tracking = attach_run(trainer, run, record)
    before = evaluate_before(trainer, run, record)
    train_or_load(trainer, checkpoint, run.training_args)
    after = evaluate_after(trainer, run, record)
    save_adapter(trainer, run.training_args)
    changes = trainer.heldout.change_since_start() if run.heldout_rows and trainer.accelerator.is_main_process else []
    summary = end_attempt(trainer, run, record, model_path, before, after, changes)
    if trainer.accelerator.is_main_process:
        write_outputs(trainer, run, summary, changes, tracking)
    return summary


def warm_start(run: RunInputs, record: RunRecord) -> str:
    """The model GRPO starts from: the recipe's warm start of `run.model_path` (cached; the local main process
    builds it first)."""
    args = run.training_args
    with args.main_process_first(desc="building the warm start"):
        model_path = warm_started(run.script_args, args, run.model_path, run.train_dataset.to_list(), run.env_factory,
                                  show_progress=not args.disable_tqdm)
    record.heartbeat()
    return model_path


def build_trainer(run: RunInputs, model_path: str):
    """The trainer (`trainer: trl` gives plain TRL's, training/step/plain_trl.py), its model loaded as the recipe asks
    (dtype, quantization)."""
    script_args, training_args, model_args = run.script_args, run.training_args, run.model_args
    training_args.model_init_kwargs = {
        **(training_args.model_init_kwargs or {}),
        **({"dtype": model_args.dtype} if model_args.dtype else {}),
    }
    quantization_config = get_quantization_config(model_args)
    if quantization_config is not None:
        training_args.model_init_kwargs["quantization_config"] = quantization_config
    trainer_class = PlainTRLGRPOTrainer if script_args.trainer == "trl" else StrictGRPOTrainer
    trainer = trainer_class(
        model=model_path,
        reward_funcs=run.reward_funcs,
        args=training_args,
        train_dataset=run.train_dataset,
        peft_config=get_peft_config(model_args),
        flags=run.flags,
        heldout_rows=run.heldout_rows,
        environment_factory=run.env_factory,
    )
    trainer.heldout.split = script_args.heldout_file  # stamped into the records that keep it (the causal task's)
    if trainer.accelerator.is_main_process:
        logger.info("Strict flags: %s", run.flags.as_env())
    return trainer


def attach_run(trainer, run: RunInputs, record: RunRecord):
    """The run's trackers (the resolved configuration beyond training_args), the held-out evaluations of earlier
    attempts (up to the checkpoint) and the callbacks that keep the run record and apply a resume's recipe changes.
    Returns the tracking handle."""
    tracking = attach_tracking(trainer, {
        "script_args": vars(run.script_args), "model_args": vars(run.model_args), "strict_flags": run.flags.as_env(),
        "recipe": run.recipe.config,
    })
    trainer.heldout_history.extend(record.heldout_history)
    trainer.add_callback(RunRecordCallback(record, trainer.heldout_history))
    trainer.add_callback(ApplyRecipeOnResume(record.current["recipe_changes"]))  # what the checkpoint's state restores
    return tracking


def evaluate_before(trainer, run: RunInputs, record: RunRecord) -> dict | None:
    """The held-out evaluation at step 0, once per run (an attempt that resumes keeps the first one's)."""
    before = record.data["heldout_before"]
    if run.heldout_rows and before is None:
        before = {"step": 0, **trainer.evaluate_heldout()}
        trainer.heldout_history.insert(0, dict(before))
        record.set_heldout("before", 0, before, trainer.heldout_history)
    return before


def train_or_load(trainer, checkpoint: Path | None, args: StrictGRPOConfig) -> None:
    """GRPO from `checkpoint` (None: from scratch), saving a checkpoint on a stop; a checkpoint that already reached
    max_steps is only loaded."""
    if finished_at(checkpoint, args):
        logger.info(
            "%s already reached max_steps=%d: nothing to train; the final adapter, evaluation and summary are "
            "written from it", checkpoint, args.max_steps,
        )  # fmt: skip
        load_finished_checkpoint(trainer, checkpoint)
    else:
        train_saving_on_stop(trainer, str(checkpoint) if checkpoint is not None else None)


def evaluate_after(trainer, run: RunInputs, record: RunRecord) -> dict | None:
    """The held-out evaluation at the last step (unless an earlier attempt recorded it), its episodes written to
    output_dir/eval.jsonl for training.compare."""
    after = record.data["heldout_after"]
    step = trainer.state.global_step
    if run.heldout_rows and (after is None or after["step"] != step):
        after = {"step": step, **trainer.evaluate_heldout()}
        fault_point("final_evaluation")
        out = Path(run.training_args.output_dir)
        with disk_full_named(out, run_files.EVAL):
            trainer.heldout.write_final(out)
        trainer.heldout_history.append(dict(after))
        record.set_heldout("after", step, after, trainer.heldout_history)
        fault_point("final_evaluation_recorded")
    return after


def save_adapter(trainer, args: StrictGRPOConfig) -> None:
    out = Path(args.output_dir)
    with disk_full_named(out, "adapter_model.safetensors"):
        trainer.save_model(args.output_dir)
        fault_point("final_save", torn=out / "adapter_model.safetensors")


def end_attempt(trainer, run: RunInputs, record: RunRecord, model_path: str, before: dict | None, after: dict | None,
                changes: list) -> dict:
    """The attempt's end in the run record (its wall time up to here), and the run summary."""
    stopped_reason = trainer.wall_time_guard.stopped_reason or "completed"
    record.end(stopped_reason, trainer.state.global_step, trainer.heldout_history)
    before, after = before or {}, after or {}
    return {
        "model_name_or_path": run.model_args.model_name_or_path,
        "resolved_model_path": model_path,
        "script_args": vars(run.script_args),
        "training_args": run.training_args.to_dict(),
        "model_args": vars(run.model_args),
        "strict_flags": run.flags.as_env(),
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
        "hub_push": None if run.push is None else {"repo_id": run.push.repo_id, "dry_run_dir": run.push.dry_run_dir},
    }


def write_outputs(trainer, run: RunInputs, summary: dict, changes: list, tracking) -> None:
    """Main process: the run's numerics over the whole run (precision, sampler gap, peak GPU memory) into the summary,
    run_summary.json, the reward curve, the model card, the tracking's end, the closing log lines and the push."""
    args, out = run.training_args, Path(run.training_args.output_dir)
    step_rows = [row for row in read_metrics(out) if "loss" in row]
    gap_plan = trainer.record.gap.as_json() if isinstance(trainer, StrictGRPOTrainer) else None
    summary.update(precision=precision_in_force(trainer, args, run.model_args),
                   sampler_gap=sampler_gap(step_rows, gap_plan), gpu_memory=gpu_memory(step_rows))
    with disk_full_named(out, run_files.RUN_SUMMARY):
        write_run_summary(args.output_dir, summary)
    with disk_full_named(out, run_files.REWARD_CURVE):
        plot_reward_curve(args.output_dir, trainer.heldout_history, changes)
    info = RunInfo(base_model=run.model_args.model_name_or_path, resolved_model_path=summary["resolved_model_path"],
                   recipe_path=run.recipe.config, argv=run.recipe.argv, strict_flags=run.flags.as_env(),
                   summary=summary)
    with disk_full_named(out, "README.md"):
        write_local_model_card(info, args.output_dir)
    finish_tracking(tracking, args.output_dir, {  # final held-out metrics and the adapter artifact
        k: summary[k] for k in ("heldout_reward_before", "heldout_reward_after") if summary[k] is not None
    })
    logger.info(
        "Done in %.0fs (%d attempt(s), %.0fs in this one) at step %d (%s). Held-out reward: before %s, after %s",
        summary["wall_time_s"], len(summary["attempts"]), summary["wall_time_this_attempt_s"], summary["global_step"],
        summary["stopped_reason"], summary["heldout_reward_before"], summary["heldout_reward_after"],
    )  # fmt: skip
    if changes:
        logger.info("Held-out change from step 0, paired per held-out row:\n  %s",
                    "\n  ".join(c.sentence() for c in changes))
    if run.push is not None:
        dump_push_result(args.output_dir, publish(run.push, info, args.output_dir, run.model_args.dtype))


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
