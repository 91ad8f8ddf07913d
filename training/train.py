"""Entry point: one YAML recipe (read by TRL's `TrlParser`) = one reproducible GRPO run.

    python -m training.train --config recipes/tiny_cpu.yaml [--max_steps 3 --output_dir DIR ...]
"""

from __future__ import annotations

import difflib
import importlib
import logging
import sys
import time
from pathlib import Path

import yaml
from datasets import Dataset
from trl import ModelConfig, TrlParser, get_peft_config, get_quantization_config

from training.config import StrictGRPOConfig, StrictScriptArguments
from training.data import load_prompt_dataset, load_rows
from training.envs.prompting import render_system_prompt, with_system_prompt
from training.envs.tool_names import check_tool_names, environment_tool_names
from training.errors import BadInputError
from training.flags import read_flags
from training.hub import RunInfo, dump_push_result, publish, take_push_request
from training.models import resolve_model_path
from training.plain_trl import PlainTRLGRPOTrainer
from training.report import library_versions, plot_reward_curve, write_run_summary
from training.tracking import attach_tracking, finish_tracking
from training.trainer import StrictGRPOTrainer
from training.warm_start import supervised_warm_start
from training.warm_start_tools import trace_warm_start

logger = logging.getLogger("training.train")

# Files an earlier run leaves in its output_dir; their presence means the directory is taken.
RUN_OUTPUTS = ("metrics.jsonl", "run_summary.json", "reward_curve.png", "adapter_model.safetensors")


class RecipeError(BadInputError):
    """The recipe or the command line asks for something we cannot run; the message names the key or path."""


def make_parser() -> TrlParser:
    return TrlParser((StrictScriptArguments, StrictGRPOConfig, ModelConfig))


def check_recipe_keys(parser: TrlParser, argv: list[str]) -> None:
    """Refuse a recipe key that no dataclass knows, naming it and the nearest known keys."""
    if "--config" not in argv:
        return
    config_path = argv[argv.index("--config") + 1]
    if not Path(config_path).exists():
        raise RecipeError(f"recipe {config_path!r} does not exist")
    recipe = yaml.safe_load(Path(config_path).read_text()) or {}
    known = {action.dest for action in parser._actions} | {"env"}
    for key in recipe:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise RecipeError(f"recipe {config_path!r}: unknown key {key!r}{hint}")


def parse_args(argv: list[str] | None = None):
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = make_parser()
    check_recipe_keys(parser, argv)
    script_args, training_args, model_args = parser.parse_args_and_config(argv)
    if not 0.0 < script_args.warm_start_tool_call_rate <= 1.0:
        raise RecipeError(f"warm_start_tool_call_rate={script_args.warm_start_tool_call_rate} must be in (0, 1]")
    return script_args, training_args, model_args


def check_output_dir(args: StrictGRPOConfig) -> None:
    """An earlier run's outputs are never overwritten unless asked for (or resumed from)."""
    out = Path(args.output_dir)
    if args.resume_from_checkpoint or args.overwrite_output_dir or not out.exists():
        return
    taken = [name for name in RUN_OUTPUTS if (out / name).exists()] + [p.name for p in out.glob("checkpoint-*")]
    if taken:
        raise RecipeError(
            f"output_dir {str(out)!r} already holds an earlier run ({', '.join(sorted(taken)[:4])}); "
            "pass --overwrite_output_dir, --resume_from_checkpoint, or another --output_dir"
        )


def import_reward(dotted: str):
    module_name, _, attr = dotted.rpartition(".")
    if not module_name:
        raise RecipeError(f"reward_funcs entry {dotted!r} is not a dotted path 'module.function'")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise RecipeError(f"reward_funcs entry {dotted!r} cannot be imported: {err}") from None


def setup_environment(script_args: StrictScriptArguments, train_rows: list[dict], heldout_rows: list[dict]):
    """Import the recipe's environment, put the rendered system prompt in front of every row, and check every tool
    name the prompt, the recipe and the tasks mention against it. Returns (factory, train rows, held-out rows)."""
    module_name, _, attr = script_args.environment_factory.rpartition(".")
    factory = getattr(importlib.import_module(module_name), attr, None) if module_name else None
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
    """`--resume_from_checkpoint true` means the newest checkpoint in output_dir; a path must exist."""
    resume = args.resume_from_checkpoint
    if resume in (None, "", "false", "False"):
        return None
    if resume in ("true", "True", True):
        return True
    if not Path(resume).exists():
        raise RecipeError(f"resume_from_checkpoint={resume!r} does not exist")
    return resume


def main(argv: list[str] | None = None) -> dict:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    started = time.time()
    argv = list(sys.argv[1:] if argv is None else argv)
    script_args, training_args, model_args = parse_args(argv)
    flags = read_flags()
    push = take_push_request(training_args)  # before the Trainer exists: it must neither push nor store the token
    check_output_dir(training_args)
    resume = resolve_resume(training_args)

    train_dataset = load_prompt_dataset(script_args.train_file)
    heldout_rows = load_rows(script_args.heldout_file) if script_args.heldout_file else []
    env_factory = None
    if script_args.environment_factory:
        env_factory, train_rows, heldout_rows = setup_environment(script_args, train_dataset.to_list(), heldout_rows)
        train_dataset = Dataset.from_list(train_rows)
    reward_funcs = [import_reward(name) for name in script_args.reward_funcs]
    template_kwargs = dict(training_args.chat_template_kwargs or {})

    # Under `accelerate launch` every rank runs this; the local main process builds the cached model and warm start
    # first and the other ranks then load them, instead of racing to write the same files.
    with training_args.main_process_first(desc="building the cached model and warm start"):
        model_path = resolve_model_path(model_args.model_name_or_path, seed=script_args.model_seed)
        if script_args.warm_start_steps > 0 and env_factory is not None:
            logger.info("Tool-trace warm start: %d steps on %s", script_args.warm_start_steps, script_args.train_file)
            model_path = trace_warm_start(
                model_path,
                train_dataset.to_list(),
                env_factory,
                steps=script_args.warm_start_steps,
                lr=script_args.warm_start_lr,
                seed=script_args.model_seed,
                template_kwargs=template_kwargs,
                tool_call_rate=script_args.warm_start_tool_call_rate,
            )
        elif script_args.warm_start_steps > 0:
            logger.info("Supervised warm start: %d steps on %s", script_args.warm_start_steps, script_args.train_file)
            model_path = supervised_warm_start(
                model_path,
                train_dataset.to_list(),
                steps=script_args.warm_start_steps,
                lr=script_args.warm_start_lr,
                seed=script_args.model_seed,
                template_kwargs=template_kwargs,
            )
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
        reward_funcs=reward_funcs,
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

    before = trainer.evaluate_heldout() if heldout_rows and not resume else {}
    if before:
        trainer.heldout_history.append({"step": 0, **before})
    trainer.train(resume_from_checkpoint=resume)
    after = trainer.evaluate_heldout() if heldout_rows else {}
    if after:
        trainer.heldout_history.append({"step": trainer.state.global_step, **after})
        trainer.heldout.write_final(training_args.output_dir)  # eval.jsonl: per-episode scores for training.compare
    trainer.save_model(training_args.output_dir)

    summary = {
        "model_name_or_path": model_args.model_name_or_path,
        "resolved_model_path": model_path,
        "script_args": vars(script_args),
        "training_args": training_args.to_dict(),
        "model_args": vars(model_args),
        "strict_flags": flags.as_env(),
        "library_versions": library_versions(),
        "wall_time_s": time.time() - started,
        "global_step": trainer.state.global_step,
        "stopped_reason": trainer.wall_time_guard.stopped_reason or "completed",
        "heldout_reward_before": before.get("heldout/reward"),
        "heldout_reward_after": after.get("heldout/reward"),
        "heldout_greedy_reward_before": before.get("heldout/greedy_reward"),
        "heldout_greedy_reward_after": after.get("heldout/greedy_reward"),
        "heldout_history": trainer.heldout_history,
        "hub_push": None if push is None else {"repo_id": push.repo_id, "dry_run_dir": push.dry_run_dir},
    }
    if trainer.accelerator.is_main_process:
        write_run_summary(training_args.output_dir, summary)
        plot_reward_curve(training_args.output_dir, trainer.heldout_history)
        finish_tracking(tracking, training_args.output_dir, {  # final held-out metrics and the adapter artifact
            k: summary[k] for k in ("heldout_reward_before", "heldout_reward_after") if summary[k] is not None
        })
        logger.info(
            "Done in %.0fs at step %d (%s). Held-out reward: before %s, after %s",
            summary["wall_time_s"],
            summary["global_step"],
            summary["stopped_reason"],
            summary["heldout_reward_before"],
            summary["heldout_reward_after"],
        )
        if push is not None:
            run = RunInfo(
                base_model=model_args.model_name_or_path,
                resolved_model_path=model_path,
                recipe_path=argv[argv.index("--config") + 1] if "--config" in argv else None,
                argv=argv,
                strict_flags=flags.as_env(),
                summary=summary,
            )
            dump_push_result(training_args.output_dir, publish(push, run, training_args.output_dir, model_args.dtype))
    return summary


def cli() -> None:
    try:
        main()
    except BadInputError as err:
        # Bad input: one clear line naming the key, column, row, flag or path.
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    cli()
