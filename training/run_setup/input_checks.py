"""Checks of the input that TRL, PEFT and transformers make only once the model is loaded (or never), run by
`training.train.prepare` before any work, each failing with a `BadInputError` that names the key, path, file or row.

* `check_recipe_fields`: LoRA settings (PEFT refuses a dropout of 1.5 only when it wraps the model), one reward weight
  per reward function, trackers transformers knows and can import (`report_to`), and TRL's and transformers' fields
  that they accept unchecked or refuse with a ZeroDivisionError (`num_iterations: 0`, `epsilon: -1`, `top_p: 2`);
* `check_lora_targets`: every `lora_target_modules` name matches a module of the model, read from its config on
  the meta device (no weights);
* `import_object`: an `import:` path (reward function, environment) whose module is missing, lacks the name, or
  raises while it is imported;
* `check_environment_rows`: every train and held-out row, by the environment's own row check when it has one (an
  optional classmethod `check_row(row)` raising `ValueError`; a classmethod is not a tool, TRL offers the model only
  an environment's plain public functions). The causal environment builds each row's SCM, samples it once and
  computes its optimum there (training/tasks/causal/env.py).
"""

from __future__ import annotations

import importlib
import math
import re

import torch
from peft import TaskType
from transformers import MODEL_FOR_CAUSAL_LM_MAPPING, AutoConfig
from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK, get_available_reporting_integrations
from trl import get_peft_config

from training.run_setup.config import ConfigError, check_int, check_range
from training.errors import BadInputError
from training.run_setup.environment_settings import ConfiguredEnvironment, environment_type
from training.run_setup.prompt_datasets import DatasetError


class ImportPathError(BadInputError):
    """A dotted path in the recipe that does not import, naming the path and why."""


def import_object(dotted: str, what: str):
    """The object at `dotted` ('module.name'); `what` names the recipe key in the error."""
    module_name, _, attr = str(dotted).rpartition(".")
    if not module_name or not attr:
        raise ImportPathError(f"{what} {dotted!r} is not a dotted path 'module.name'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ImportPathError(f"{what} {dotted!r} cannot be imported: {err}") from None
    except Exception as err:  # the user's module raised while being imported: name it, with the exception
        raise ImportPathError(
            f"{what} {dotted!r}: importing module {module_name!r} raised {type(err).__name__}: {err}"
        ) from None
    if not hasattr(module, attr):
        raise ImportPathError(f"{what} {dotted!r} cannot be imported: module {module_name!r} has no {attr!r}")
    return getattr(module, attr)


def check_model_fields(model_args) -> None:
    """LoRA settings PEFT checks only when it wraps the model."""
    if not model_args.use_peft:
        return
    dropout, alpha = model_args.lora_dropout, model_args.lora_alpha
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
        raise ConfigError(f"lora_dropout={dropout!r} is invalid: expected a number in [0, 1)")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < math.inf:
        raise ConfigError(f"lora_alpha={alpha!r} is invalid: expected a finite number > 0")
    task_types = [t.value for t in TaskType]
    if model_args.lora_task_type not in task_types:
        raise ConfigError(f"lora_task_type={model_args.lora_task_type!r} is not one of {task_types}")
    try:
        get_peft_config(model_args)
    except (ValueError, TypeError) as err:  # LoraConfig's own checks
        raise ConfigError(f"invalid LoRA settings: {err}") from None


def check_reward_weights(training_args, reward_funcs: list[str]) -> None:
    """One finite weight per reward function (TRL refuses a mismatch only when it builds the trainer)."""
    weights = training_args.reward_weights
    if weights is None:
        return
    if len(weights) != len(reward_funcs):
        raise ConfigError(
            f"reward_weights={list(weights)} has {len(weights)} weight(s) for {len(reward_funcs)} reward function(s) "
            f"{list(reward_funcs)}: give one weight per reward function, in the same order"
        )
    for i, w in enumerate(weights):
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w):
            raise ConfigError(f"reward_weights[{i}]={w!r} is invalid: expected a finite number")


def check_report_to(training_args) -> None:
    """Every tracker of `report_to` is one transformers knows and, here, can import."""
    known, available = list(INTEGRATION_TO_CALLBACK), get_available_reporting_integrations()
    for name in training_args.report_to or []:
        if name not in known:
            raise ConfigError(f"report_to={name!r} is not a tracker transformers knows (known: {', '.join(known)})")
        if name not in available:
            raise ConfigError(f"report_to={name!r}: the {name} package is not installed (installed trackers: "
                              f"{', '.join(available) or 'none'})")


# TRL 1.16's values (its GRPOConfig help texts; the trainer compares against them and ignores anything else).
LOSS_TYPES = ("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo")
CHOICES = {
    "loss_type": LOSS_TYPES,
    "importance_sampling_level": ("token", "sequence"),
    "scale_rewards": ("group", "batch", "none"),
    "multi_objective_aggregation": ("sum_then_normalize", "normalize_then_sum"),
}


def _optional_range(args, name: str, expected: str, ok) -> None:
    value = getattr(args, name)
    if value is not None:
        check_range(name, value, expected, ok)


def check_training_fields(args) -> None:
    """TRL's and transformers' fields they accept unchecked (or refuse with a ZeroDivisionError later)."""
    for name, allowed in CHOICES.items():
        if getattr(args, name) not in allowed:
            raise ConfigError(f"{name}={getattr(args, name)!r} is not one of {list(allowed)}")
    check_int("num_iterations", args.num_iterations, 1)
    if args.steps_per_generation is not None:
        check_int("steps_per_generation", args.steps_per_generation, 1)
    finite = lambda low, high: lambda v: low <= v <= high and math.isfinite(v)  # noqa: E731
    check_range("beta", args.beta, "a finite number >= 0", finite(0, math.inf))
    check_range("epsilon", args.epsilon, "a finite number > 0", lambda v: 0 < v < math.inf)
    _optional_range(args, "epsilon_high", "a finite number > 0, or None", lambda v: 0 < v < math.inf)
    check_range("top_p", args.top_p, "a number in (0, 1]", lambda v: 0 < v <= 1)
    _optional_range(args, "top_k", "an integer >= 0, or None", lambda v: v >= 0 and float(v).is_integer())
    _optional_range(args, "min_p", "a number in [0, 1], or None", finite(0, 1))
    check_range("repetition_penalty", args.repetition_penalty, "a finite number > 0", lambda v: 0 < v < math.inf)
    check_range("weight_decay", args.weight_decay, "a finite number >= 0", finite(0, math.inf))
    _optional_range(args, "max_grad_norm", "a finite number >= 0 (0: no clipping), or None", finite(0, math.inf))
    check_range("num_train_epochs", args.num_train_epochs, "a finite number > 0", lambda v: 0 < v < math.inf)
    if args.save_strategy == "steps":
        check_range("save_steps", args.save_steps, "a number > 0 (a fraction of the run, or a step count)",
                    lambda v: 0 < v < math.inf)
    if not isinstance(args.chat_template_kwargs or {}, dict):
        raise ConfigError(f"chat_template_kwargs={args.chat_template_kwargs!r} must be a mapping (JSON on the command "
                          "line: --chat_template_kwargs '{\"enable_thinking\": false}')")


def check_recipe_fields(script_args, training_args, model_args) -> None:
    check_model_fields(model_args)
    check_reward_weights(training_args, script_args.reward_funcs)
    check_report_to(training_args)
    check_training_fields(training_args)


def module_tree(config) -> torch.nn.Module:
    """The causal-LM class of `config`, built on the meta device: its modules' names and types, no weights.

    The class is called directly, not through `AutoModelForCausalLM.from_config`: under DeepSpeed ZeRO-3 (configured
    as soon as the training arguments exist, `is_deepspeed_zero3_enabled()`), `from_config` builds the model inside
    `deepspeed.zero.Init` and then initialises its weights gathered on rank 0, which copies out of the meta tensors
    this check creates ("Cannot copy out of meta tensor"). Nothing here needs weights, partitioned or not."""
    model_class = MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]
    with torch.device("meta"):
        return model_class(config)


def check_lora_targets(model_args, model_path: str) -> None:
    """Every `lora_target_modules` entry names a module of the model (PEFT says so only once it wraps the loaded
    model). The model is built from its config on the meta device: no weights are read or allocated."""
    targets = model_args.lora_target_modules
    if not model_args.use_peft or targets is None or targets == "all-linear" or targets == ["all-linear"]:
        return
    try:
        config = AutoConfig.from_pretrained(model_path)
    except OSError:  # a hub id with no hub in reach: from_pretrained will say so when it loads the model
        return
    model = module_tree(config)
    names = [name for name, _ in model.named_modules()]
    if isinstance(targets, str):  # PEFT matches a single string as a regular expression on the full module name
        missing = [] if any(re.fullmatch(targets, n) for n in names) else [targets]
    else:
        missing = [t for t in targets if not any(n == t or n.endswith(f".{t}") for n in names)]
    if missing:
        leaves = sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)})
        raise ConfigError(f"lora_target_modules: {missing} match no module of {model_args.model_name_or_path!r} (its "
                          f"linear layers: "
                          f"{', '.join(leaves)})")


def check_environment_rows(factory, rows_by_source: dict[str, list[dict]]) -> None:
    """Every row through the `check_row` class method of the environment `factory` builds (when it has one), with the
    factory's settings, naming the file and row."""
    env_cls = environment_type(factory) or type(factory())
    check_row = getattr(env_cls, "check_row", None)
    if check_row is None:
        return
    settings = dict(factory.settings) if isinstance(factory, ConfiguredEnvironment) else {}
    for source, rows in rows_by_source.items():
        for i, row in enumerate(rows):
            try:
                check_row(row, **settings)
            except ValueError as err:
                raise DatasetError(f"{source}: row {i}: {err}") from None
