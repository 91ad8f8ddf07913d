"""A run owns its recipe: the resolved configuration of every attempt is kept in `run_record.json` (`recipe`), and a
resume compares the new one with it before any work.

- Fields that cannot change (`FIXED`: the model, the LoRA shape, the reward functions, the data and its content):
  refused, naming each field; such a change is another run (another `--output_dir`).
- Fields that may change (`FREE`: `max_steps`, `max_wall_time_s`, logging, saving, tracking, pushing, the output
  directory, the log-prob check's cadence): applied, and listed in the attempt's `recipe_changes`.
- Every other field (learning rate, schedule, seeds, batch shape, sampling, loss, ...): refused unless named in
  `--accept_recipe_changes`; then applied for the remaining steps and listed in the attempt's `recipe_changes`.
  transformers restores the optimizer's and the scheduler's state from the checkpoint, which holds the old learning
  rate, optimizer hyperparameters and logging/saving intervals: `ApplyRecipeOnResume` puts the new ones in place.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

from torch.optim.lr_scheduler import LambdaLR
from transformers import TrainerCallback

from training.outputs.checkpoints import file_sha256
from training.outputs.run_record import RECORD_FILE
from training.errors import BadInputError

logger = logging.getLogger(__name__)

DATA_FILES = ("train_file", "heldout_file", "system_prompt_file")  # their content is part of the recipe
FIXED = frozenset({
    "model_name_or_path", "model_revision", "dtype", "use_peft", "lora_r", "lora_alpha", "lora_dropout",
    "lora_target_modules", "lora_target_parameters", "lora_modules_to_save", "lora_task_type", "use_rslora",
    "use_dora", "load_in_4bit", "load_in_8bit", "bnb_4bit_quant_type", "bnb_4bit_quant_storage",
    "use_bnb_nested_quant", "model_seed", "warm_start_steps", "warm_start_lr", "warm_start_batch_size",
    "warm_start_tool_call_rate", "trainer", "reward_funcs", "environment_factory", "environment_settings",
    "tool_names", "advantage_estimator",
    *DATA_FILES, *(f"{name}:sha256" for name in DATA_FILES),
})  # fmt: skip
FREE = frozenset({
    "max_steps", "max_wall_time_s", "num_train_epochs", "output_dir", "logging_steps", "logging_first_step",
    "logging_strategy", "logging_nan_inf_filter", "log_level", "log_level_replica", "log_on_each_node",
    "log_completions", "log_completions_hub_repo", "log_multimodal", "log_unique_prompts", "num_completions_to_print",
    "disable_tqdm", "report_to", "run_name", "project", "tracking_group", "trackio_bucket_id", "trackio_space_id",
    "trackio_static_space_id", "save_steps", "save_strategy", "save_total_limit", "save_on_each_node",
    "push_to_hub", "hub_model_id", "hub_strategy", "hub_token", "hub_private_repo", "hub_always_push",
    "hub_revision", "push_dry_run", "push_merged_weights", "dataloader_num_workers", "dataloader_pin_memory",
    "dataloader_persistent_workers", "dataloader_prefetch_factor", "skip_memory_metrics", "ddp_timeout",
    "vllm_server_base_url", "vllm_server_host", "vllm_server_port", "vllm_server_timeout", "vllm_group_port",
    "logp_check_steps", "logp_diff_warn_threshold",  # a diagnostic's cadence and threshold (training/step/sampler_gap.py)
    "turn_cut_rise",  # a health detector's threshold (training/step/health.py)
    # recomputing activations in the backward changes memory, not what is trained; newer transformers (5.23, not
    # 5.17) name it activation_checkpointing, so a run recorded under one may resume under the other
    "gradient_checkpointing", "gradient_checkpointing_kwargs", "activation_checkpointing",
    "activation_checkpointing_kwargs",
})  # fmt: skip
# How this attempt was asked for, not what it trains: never compared.
NOT_COMPARED = frozenset({"resume_from_checkpoint", "accept_recipe_changes", "overwrite_output_dir", "local_rank"})
# Fields restored from the checkpoint's optimizer or scheduler state, which `ApplyRecipeOnResume` overrides.
SCHEDULE = frozenset({"learning_rate", "lr_scheduler_type", "lr_scheduler_kwargs", "warmup_steps", "max_steps"})
OPTIMIZER = {"adam_beta1": "betas", "adam_beta2": "betas", "adam_epsilon": "eps", "weight_decay": "weight_decay"}


class RecipeChangeError(BadInputError):
    """A resume whose recipe differs from the run's in a field that cannot change, or was not accepted."""


def resolved_recipe(script_args, training_args, model_args) -> dict:
    """Every field of the three argument dataclasses (as JSON values), plus the sha256 of each data file."""
    recipe = {**vars(model_args), **vars(script_args), **training_args.to_dict()}
    for name in DATA_FILES:
        if recipe.get(name):
            recipe[f"{name}:sha256"] = file_sha256(recipe[name])
    return json.loads(json.dumps(recipe, default=str))


def recorded_recipe(output_dir: str | Path) -> dict | None:
    """The recipe of the run's last attempt, or None (no record, or one written before recipes were kept)."""
    path = Path(output_dir) / RECORD_FILE
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text()).get("recipe")
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise RecipeChangeError(f"{path} is unreadable ({err}): the run's recipe cannot be compared") from None


def recipe_changes(old: dict, new: dict, defaults: dict | None = None) -> dict[str, dict]:
    """Each field whose value differs (bookkeeping of the attempt itself left out), with its old and new value. A
    field the run's record lacks (added to the code since) is no change where the new value is its `defaults` entry:
    the code the run was recorded with behaved as that default does."""
    defaults = defaults or {}
    fields = sorted((old.keys() | new.keys()) - NOT_COMPARED)
    added_at_default = {k for k in fields if k not in old and k in defaults and new.get(k) == defaults[k]}
    return {k: {"from": old.get(k), "to": new.get(k)} for k in fields
            if old.get(k) != new.get(k) and k not in added_at_default}


def recipe_defaults(*arg_dataclasses) -> dict:
    """Each field's default in the argument dataclasses (as JSON values), where it has one."""
    defaults = {}
    for args in arg_dataclasses:
        for f in dataclasses.fields(args):
            if f.default is not dataclasses.MISSING:
                defaults[f.name] = f.default
            elif f.default_factory is not dataclasses.MISSING:
                defaults[f.name] = f.default_factory()
    return json.loads(json.dumps(defaults, default=str))


def _listed(changes: dict[str, dict]) -> str:
    return ", ".join(f"{k} ({c['from']!r} -> {c['to']!r})" for k, c in changes.items())


def attempt_recipe(script_args, training_args, model_args, resume) -> tuple[dict, dict[str, dict]]:
    """This attempt's resolved recipe and, on resume, its changes from the run's (`check_resume_recipe`)."""
    recipe = resolved_recipe(script_args, training_args, model_args)
    if not resume:
        return recipe, {}
    return recipe, check_resume_recipe(training_args.output_dir, recipe, training_args.accept_recipe_changes,
                                       recipe_defaults(script_args, training_args, model_args))


def check_resume_recipe(output_dir: str | Path, new: dict, accepted: list[str] | None,
                        defaults: dict | None = None) -> dict[str, dict]:
    """The changes of `new` from the run's recorded recipe that a resume applies (`recipe_changes`; `defaults`: the
    fields' defaults); raises `RecipeChangeError` naming every field that cannot change or was not accepted."""
    accepted = list(accepted or [])
    fixed_named = sorted(set(accepted) & FIXED)
    if fixed_named:
        raise RecipeChangeError(f"accept_recipe_changes: {', '.join(fixed_named)} cannot change on resume")
    unknown = sorted(set(accepted) - new.keys())
    if unknown:
        raise RecipeChangeError(f"accept_recipe_changes: unknown field(s) {', '.join(unknown)}")
    old = recorded_recipe(output_dir)
    if old is None:
        logger.warning("%s records no recipe (a run from an older version?): the resume's is not compared", output_dir)
        return {}
    changes = recipe_changes(old, new, defaults)
    fixed = {k: c for k, c in changes.items() if k in FIXED}
    if fixed:
        raise RecipeChangeError(
            f"resuming {str(output_dir)!r} with another recipe: {_listed(fixed)}; the model, the LoRA shape, the "
            "reward functions and the data cannot change between attempts: start another run (another --output_dir)"
        )
    refused = {k: c for k, c in changes.items() if k not in FREE and k not in accepted}
    if refused:
        raise RecipeChangeError(
            f"resuming {str(output_dir)!r} with another recipe: {_listed(refused)}; pass --accept_recipe_changes "
            f"{' '.join(refused)} to train the remaining steps with it, or resume with the run's values"
        )
    if changes:
        logger.warning("Resuming with recipe changes, applied from here on: %s", _listed(changes))
    return changes


class ApplyRecipeOnResume(TrainerCallback):
    """On a resumed run's start, put the attempt's recipe where transformers restored the checkpoint's: the
    logging, evaluation and saving intervals (`TrainerState`), the learning rate and its schedule (the scheduler's
    `base_lrs` and each group's current rate) and the optimizer's hyperparameters (Adam's betas and epsilon, weight
    decay of the groups that decay). `changes`: the attempt's `recipe_changes`."""

    def __init__(self, changes: dict[str, dict]):
        self.changes = changes

    def on_train_begin(self, args, state, control, optimizer=None, lr_scheduler=None, **kwargs):
        if state.global_step == 0:
            return
        state.compute_steps(args, state.max_steps)
        changed = set(self.changes)
        if changed & SCHEDULE:
            if not isinstance(lr_scheduler, LambdaLR):
                raise RecipeChangeError(
                    f"{', '.join(sorted(changed & SCHEDULE))} changed on resume, but the scheduler "
                    f"{type(lr_scheduler).__name__} cannot take a new learning rate"
                )
            lr_scheduler.base_lrs = [args.learning_rate] * len(optimizer.param_groups)
            groups = zip(optimizer.param_groups, lr_scheduler.base_lrs, lr_scheduler.lr_lambdas, strict=True)
            for group, base, fn in groups:
                group["initial_lr"] = base
                group["lr"] = base * fn(lr_scheduler.last_epoch)
            lr_scheduler._last_lr = [group["lr"] for group in optimizer.param_groups]
        for field in sorted(changed & OPTIMIZER.keys()):
            key = OPTIMIZER[field]
            for group in optimizer.param_groups:
                if key == "betas":
                    group["betas"] = (args.adam_beta1, args.adam_beta2)
                elif key == "eps":
                    group["eps"] = args.adam_epsilon
                elif group["weight_decay"] == self.changes[field]["from"]:  # the no-decay group stays at 0
                    group["weight_decay"] = args.weight_decay
        if changed - FREE:
            logger.info("Applied on resume at step %d: %s", state.global_step, _listed(self.changes))
