"""A recipe read and checked: TRL's `TrlParser` over our three dataclasses, with every flag, key and value checked
before any work; the output directory probed; the reward functions, the environment and the model a run starts from
resolved. `training.train` runs what this module sets up; `training.evaluate` and `training.workflow` read recipes
through it too.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import logging
import os
import sys
import types
import typing
from collections.abc import Callable
from pathlib import Path

import yaml
from transformers import AutoConfig, AutoTokenizer
from trl import ModelConfig, TrlParser

from training.outputs import run_files
from training.outputs.atomic import DISK_FULL_ERRNOS
from training.outputs.checkpoints import LOW_SPACE_BYTES, DiskFullError, free_bytes
from training.run_setup.config import StrictGRPOConfig, StrictScriptArguments
from training.errors import BadInputError
from training.run_setup.environment_settings import configured_environment
from training.run_setup.input_checks import import_object
from training.run_setup.model_context import check_vllm_context, config_overrides
from training.run_setup.prompt_datasets import check_prompt_lengths
from training.run_setup.reward_names import reward_object
from training.run_setup.warm_start import supervised_warm_start
from training.run_setup.warm_start_tools import trace_warm_start
from training.run_setup.yaml_errors import yaml_problem
from training.tool_use.system_prompt import render_system_prompt, with_system_prompt
from training.tool_use.tool_names import check_tool_names, environment_tool_names

logger = logging.getLogger(__name__)


class RecipeError(BadInputError):
    """The recipe or the command line asks for something we cannot run; the message names the key or path."""


class ArgumentParser(TrlParser):
    """TRL's parser without argparse's prefix matching (`--learning_rat` is not `--learning_rate`), whose errors (a
    flag value of the wrong type) are `RecipeError`s rather than a usage message and exit. `command_defaults`: a
    command's own defaults, over the recipe file's (the command line's flags over both)."""

    def __init__(self, *args, command_defaults: dict | None = None, **kwargs):
        super().__init__(*args, allow_abbrev=False, **kwargs)
        self.command_defaults = dict(command_defaults or {})

    def set_defaults_with_config(self, **kwargs) -> list[str]:
        remaining = super().set_defaults_with_config(**kwargs)
        self.set_defaults(**self.command_defaults)
        return remaining

    def error(self, message):
        raise RecipeError(message)


def make_parser(command_flags: Callable[[TrlParser], None] | None = None,
                command_defaults: dict | None = None) -> TrlParser:
    """The recipe's parser; `command_flags` adds a command's own flags (read back as one more namespace)."""
    parser = ArgumentParser((StrictScriptArguments, StrictGRPOConfig, ModelConfig), command_defaults=command_defaults)
    if command_defaults:
        parser.set_defaults(**command_defaults)
    if command_flags is not None:
        command_flags(parser)
    return parser


def given_flags(parser: TrlParser, argv: list[str]) -> frozenset[str]:
    """The destinations the command line sets (argparse leaves a destination it was given no flag for as it found it
    in the namespace handed in: here, a marker)."""
    marker = object()
    dests = {action.dest for action in parser._actions if action.option_strings}
    found, _ = parser.parse_known_args([a for a in argv if a != "--config"], argparse.Namespace(**dict.fromkeys(
        dests, marker)))
    return frozenset(d for d in dests if getattr(found, d, marker) is not marker)


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


@dataclasses.dataclass
class Recipe:
    """What `training.train.train` runs: TRL's three argument dataclasses, the recipe file they were read from and
    the command line as typed (for the model card). A command that composes `train` in process (the causal task's
    `train_scm`) sets the fields as Python values and hands over what it built: `rows` ({"train": [...], "heldout":
    [...]}, used instead of reading `train_file` / `heldout_file`, which still name the files that keep them, their
    sha256 recorded) and `environment` (the environment factory: a class, or a class with its settings,
    `environment_settings.ConfiguredEnvironment`; the recorded `environment_factory` and
    `environment_settings` are read off it, `environment_settings.recipe_fields`). `given`: the flags the command
    line set (their destinations); `command_flags`: the values of a command's own flags, when it has some."""

    script_args: StrictScriptArguments
    training_args: StrictGRPOConfig
    model_args: ModelConfig
    config: str | None = None
    argv: list[str] = dataclasses.field(default_factory=list)
    rows: dict[str, list[dict]] | None = None
    environment: object | None = None
    given: frozenset[str] = frozenset()
    command_flags: argparse.Namespace | None = None


def read_recipe(argv: list[str] | None = None, default_config: str | Path | None = None,
                command_flags: Callable[[TrlParser], None] | None = None,
                command_defaults: dict | None = None) -> Recipe:
    """The `Recipe` of a command line (`parse_args`); `default_config`: the recipe file read when no `--config` is
    given; `command_flags` and `command_defaults`: a command's own flags and defaults (`make_parser`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    given = argv if "--config" in argv or default_config is None else ["--config", str(default_config), *argv]
    config = given[given.index("--config") + 1] if "--config" in given[:-1] else None
    parser = make_parser(command_flags, command_defaults)
    *parsed, extra = _parse(parser, given)
    return Recipe(*parsed, config=config, argv=argv, given=given_flags(parser, argv), command_flags=extra)


def parse_args(argv: list[str] | None = None):
    """The three argument dataclasses, or a `BadInputError` naming the key, flag or value."""
    script_args, training_args, model_args, _ = _parse(make_parser(), list(sys.argv[1:] if argv is None else argv))
    return script_args, training_args, model_args


def _parse(parser: TrlParser, argv: list[str]):
    """(script, training and model arguments, the command's own flags or None), every flag and key checked."""
    check_flags(parser, argv)
    check_recipe_keys(parser, argv)
    try:
        script_args, training_args, model_args, *extra = parser.parse_args_and_config(argv)
    except BadInputError as err:
        raise RecipeError(str(err)) from None
    except ValueError as err:  # raised by a dataclass's own checks while parsing: bad configuration too
        raise RecipeError(f"invalid configuration: {err}") from None
    if not isinstance(model_args.lora_r, int) or model_args.lora_r < 1:
        raise RecipeError(f"lora_r={model_args.lora_r!r} is invalid: expected an integer >= 1")
    return script_args, training_args, model_args, (extra[0] if extra else None)


def check_output_dir(args: StrictGRPOConfig) -> None:
    """An earlier run's outputs are never overwritten unless asked for (or resumed from); the directory must be one
    we can write into, on a disk with space left."""
    out = Path(args.output_dir)
    if out.exists() and not out.is_dir():
        raise RecipeError(f"output_dir {str(out)!r} is a file, not a directory")
    check_writable(out)
    if args.resume_from_checkpoint or args.overwrite_output_dir or not out.exists():
        return
    taken = [name for name in run_files.TRAINING_OUTPUTS if (out / name).exists()] + [p.name for p in out.glob("checkpoint-*")]
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
    """The reward function a `reward_funcs` entry names: a registered short name (training/run_setup/reward_names.py) or a
    dotted path."""
    func = reward_object(entry)
    if not callable(func):
        raise RecipeError(f"reward_funcs entry {entry!r} is a {type(func).__name__}, not a callable")
    return func


def check_context(script_args, training_args, model_path: str, rows_by_source: dict[str, list[dict]]) -> None:
    """Every prompt, with `max_completion_length` completion tokens, fits the model's context
    (`max_position_embeddings`, as `model_init_kwargs` sets it, or `vllm_max_model_length` when smaller); names the
    file and row otherwise."""
    overrides = config_overrides(training_args.model_init_kwargs)
    try:
        config = AutoConfig.from_pretrained(model_path)
        tokenizer = AutoTokenizer.from_pretrained(model_path)
    except OSError as err:  # a hub id with no hub in reach: from_pretrained will say so when it loads the model
        logger.warning("Prompt lengths not checked: cannot load %s's config or tokenizer (%s)", model_path, err)
        return
    check_vllm_context(overrides, getattr(config, "max_position_embeddings", None), training_args.use_vllm)
    context = overrides.get("max_position_embeddings", getattr(config, "max_position_embeddings", None))
    if context is None:
        return
    if training_args.vllm_max_model_length:
        context = min(context, training_args.vllm_max_model_length)
    for source, rows in rows_by_source.items():
        check_prompt_lengths(
            rows, source, tokenizer, dict(training_args.chat_template_kwargs or {}), context,
            training_args.max_completion_length,
        )  # fmt: skip


def environment_class(path: str, settings: dict | None) -> type:
    """The recipe's `environment_factory`, imported, configured by its `environment_settings`."""
    factory = import_object(path, "environment_factory")
    if not callable(factory):
        raise RecipeError(f"environment_factory {path!r} is not an importable callable")
    return configured_environment(factory, settings) if settings else factory


def setup_environment(script_args: StrictScriptArguments, train_rows: list[dict], heldout_rows: list[dict],
                      factory: type | None = None):
    """The recipe's environment (`factory`, or the one its `environment_factory` names, imported), the rows as the
    environment prepares them (its `prepare_rows` class method, where it has one), the rendered system prompt put in
    front of every row, and every tool name the prompt, the recipe and the tasks mention checked against it. Returns
    (factory, train rows, held-out rows)."""
    if factory is None:
        factory = environment_class(script_args.environment_factory, getattr(script_args, "environment_settings", None))
    env_cls = type(factory())
    prepare_rows = getattr(env_cls, "prepare_rows", None)  # an environment's own setup of its rows (the causal one:
    if prepare_rows is not None:                           # each row names its SCM, held once)
        train_rows, heldout_rows = prepare_rows(train_rows), prepare_rows(heldout_rows) if heldout_rows else heldout_rows
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
