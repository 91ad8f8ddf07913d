"""What `training.evaluate` evaluates and how: an `EvalSpec` read from a finished run's `run_summary.json`, or from a
recipe (with the run's warm start rebuilt from the cache, as `training.train` does), and the policy model loaded
from it (base model, plus a LoRA adapter from a run or checkpoint directory).

The held-out settings default to the ones training's own held-out evaluation used (the same episodes, seeds,
sampling and completion length), so that re-evaluating a run reproduces its `eval.jsonl`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from training.outputs import run_files
from training.errors import BadInputError
from training.evaluation.episode_settings import sampling_of
from training.run_setup.model_context import config_overrides

ADAPTER_FILES = ("adapter_config.json",)


class EvalSpecError(BadInputError):
    """A run, recipe, model or adapter `training.evaluate` cannot use; the message names the path or field."""


@dataclass
class EvalSpec:
    """Everything one held-out evaluation needs (see `training.evaluate --help` for the overrides)."""

    source: str                       # the run directory or recipe it was read from
    base_model: str                   # model_name_or_path as given (`tiny-qwen3`, a directory, a hub id)
    model_path: str | None            # what from_pretrained loads (the warm-started model when the recipe has one)
    adapter: str | None
    heldout_file: str
    reward_funcs: list[str]
    reward_weights: list[float] | None
    environment_factory: str | None
    environment_settings: dict | None
    system_prompt_file: str | None
    tool_names: list[str] | None
    template_kwargs: dict
    sampling: dict
    max_new_tokens: int
    samples_per_prompt: int
    max_rows: int
    heldout_seed: int
    max_tool_calls: int
    max_tool_calling_iterations: int | None
    max_turn_tokens: int | None = None  # None: the default a run gets (training/features/turn_limits.py)
    end_turn_at_call: bool = True
    dtype: str | None = None
    config_overrides: dict = field(default_factory=dict)  # the run's context (training/run_setup/model_context.py)
    greedy: bool = False              # one greedy episode per row instead of samples_per_prompt sampled ones
    extra: dict = field(default_factory=dict)

    def as_json(self) -> dict:
        return {k: v for k, v in self.__dict__.items()}


def _spec_from_args(source: str, script: dict, train: dict, model: dict, model_path: str) -> EvalSpec:
    heldout_seed = train.get("heldout_seed")
    return EvalSpec(
        source=source,
        base_model=model.get("model_name_or_path"),
        model_path=model_path,
        adapter=None,
        heldout_file=script.get("heldout_file"),
        reward_funcs=list(script.get("reward_funcs") or []),
        reward_weights=train.get("reward_weights"),
        environment_factory=script.get("environment_factory"),
        environment_settings=script.get("environment_settings"),
        system_prompt_file=script.get("system_prompt_file"),
        tool_names=script.get("tool_names"),
        template_kwargs=dict(train.get("chat_template_kwargs") or {}),
        sampling=sampling_of(train),
        max_new_tokens=int(train.get("max_completion_length") or 256),
        samples_per_prompt=int(train.get("heldout_samples_per_prompt", 4)),
        max_rows=int(train.get("heldout_max_samples", 200)),
        # None: a run recorded when heldout_seed defaulted to the training seed, evaluated as it evaluated itself
        heldout_seed=int(train.get("seed", 0) if heldout_seed is None else heldout_seed),
        max_tool_calls=int(train.get("max_tool_calls_per_episode", 4)),
        max_tool_calling_iterations=train.get("max_tool_calling_iterations"),
        **_turn_settings(train),
        dtype=model.get("dtype"),
        config_overrides=config_overrides(train.get("model_init_kwargs")),
    )


def _turn_settings(train: dict) -> dict:
    """How the run's turns ended. A run recorded before turns had a limit (no `end_turn_at_call` in its recipe) is
    evaluated as it sampled: a turn ends at its end-of-turn token only, within the episode's budget."""
    if "end_turn_at_call" not in train:
        return {"max_turn_tokens": int(train.get("max_completion_length") or 256), "end_turn_at_call": False}
    return {"max_turn_tokens": train.get("max_turn_tokens"), "end_turn_at_call": bool(train["end_turn_at_call"])}


def spec_from_run(run_dir: str | Path, overrides: dict[str, str] | None = None, adapter: str | None = None) -> EvalSpec:
    """The spec of a finished run: its recipe's data, rewards and held-out settings, its base model and its final
    adapter (the run directory itself). `overrides` (recipe key -> YAML value) change the evaluation's settings, e.g.
    `environment_factory`; the model stays the run's own (its warm-started base and its adapter). A run that did not
    finish (a health stop, a crash) is read from its `run_record.json` (`spec_from_unfinished_run`)."""
    run_dir = Path(run_dir)
    summary_path = run_dir / run_files.RUN_SUMMARY
    if not summary_path.exists():
        return spec_from_unfinished_run(run_dir, overrides, adapter)
    summary = json.loads(summary_path.read_text())
    for key in ("script_args", "training_args", "model_args", "resolved_model_path"):
        if key not in summary:
            raise EvalSpecError(f"{summary_path}: no {key!r} field")
    model_path = summary["resolved_model_path"]
    if not Path(model_path).exists() and not _looks_like_hub_id(model_path):
        raise EvalSpecError(
            f"{summary_path}: the run's base model {model_path!r} is gone (a cleared cache?); rebuild it with "
            f"--recipe RECIPE --adapter {run_dir}"
        )
    args = [dict(summary["script_args"]), dict(summary["training_args"]), dict(summary["model_args"])]
    for key, value in (overrides or {}).items():
        holders = [a for a in args if key in a]
        if not holders:
            raise EvalSpecError(f"--set {key}: not a setting of the run in {summary_path}")
        for holder in holders:
            holder[key] = yaml.safe_load(value)
    spec = _spec_from_args(str(run_dir), *args, model_path)
    adapter = run_dir if (run_dir / "adapter_config.json").exists() else None
    return replace(spec, adapter=None if adapter is None else str(adapter))


def spec_from_unfinished_run(run_dir: Path, overrides: dict[str, str] | None, adapter: str | None) -> EvalSpec:
    """The spec of a run that stopped before its end: the recipe its last attempt recorded (`run_record.json`) and
    the base model its checkpoints name; it has no final adapter, so one of its checkpoints is asked for
    (`adapter`, or 'none' for the base alone)."""
    from training.outputs.checkpoints import list_checkpoints
    from training.outputs.run_record import RECORD_FILE
    from training.run_setup.run_recipe import recorded_recipe

    recipe = recorded_recipe(run_dir)
    if recipe is None:
        raise EvalSpecError(f"{run_dir}: no run_summary.json and no recorded recipe (not a run directory; pass "
                            "--recipe and --adapter)")
    attempts = json.loads((run_dir / RECORD_FILE).read_text()).get("attempts") or [{}]
    checkpoints = list_checkpoints(run_dir)
    if adapter is None or not checkpoints:
        last = attempts[-1]
        ended = str(last.get("ended"))
        names = ", ".join(p.name for p in checkpoints) or "none"
        raise EvalSpecError(
            f"{run_dir}: the run did not finish (its last attempt ended at step {last.get('last_step')}: "
            f"{ended if len(ended) <= 120 else ended[:120] + '...'}), so it has no final adapter; evaluate a "
            f"checkpoint with --adapter {run_dir}/checkpoint-N (its checkpoints: {names})")
    for key, value in (overrides or {}).items():
        if key not in recipe:
            raise EvalSpecError(f"--set {key}: not a setting of the run in {run_dir / RECORD_FILE}")
        recipe[key] = yaml.safe_load(value)
    config = Path(adapter if adapter != "none" else checkpoints[-1]) / "adapter_config.json"
    if not config.exists():
        raise EvalSpecError(f"--adapter {adapter}: no adapter_config.json (a checkpoint of {run_dir}, or 'none')")
    model_path = json.loads(config.read_text())["base_model_name_or_path"]
    return _spec_from_args(str(run_dir), recipe, recipe, recipe, model_path)


def _looks_like_hub_id(path: str) -> bool:
    return path.count("/") == 1 and not path.startswith((".", "/"))


def spec_from_recipe(recipe: str, overrides: list[str] | None = None, build_model: bool = True) -> EvalSpec:
    """The spec of a recipe (plus command-line style `overrides`), its base model built as training builds it:
    the offline tiny Qwen3 and the supervised or tool-trace warm start, both cached. With `build_model=False`, the
    recipe's evaluation settings alone (`model_path` None: the caller names the model)."""
    from training.run_setup.recipe import RecipeError, parse_args

    try:
        script_args, training_args, model_args = parse_args(["--config", recipe, *(overrides or [])])
    except RecipeError as err:
        raise EvalSpecError(str(err)) from None
    model_path = warm_started_model_path(script_args, training_args, model_args) if build_model else None
    return _spec_from_args(recipe, vars(script_args), training_args.to_dict(), vars(model_args), model_path)


def warm_started_model_path(script_args, training_args, model_args) -> str:
    """The model a recipe's GRPO starts from, by the same cached warm start `training.train` runs."""
    from datasets import Dataset

    from training.run_setup.models import resolve_model_path
    from training.run_setup.prompt_datasets import load_prompt_dataset, load_rows
    from training.run_setup.recipe import setup_environment, warm_started

    train_dataset = load_prompt_dataset(script_args.train_file)
    heldout_rows = load_rows(script_args.heldout_file) if script_args.heldout_file else []
    env_factory = None
    if script_args.environment_factory:
        env_factory, train_rows, _ = setup_environment(script_args, train_dataset.to_list(), heldout_rows)
        train_dataset = Dataset.from_list(train_rows)
    model_path = resolve_model_path(model_args.model_name_or_path, seed=script_args.model_seed)
    return warm_started(script_args, training_args, model_path, train_dataset.to_list(), env_factory)


def load_policy(spec: EvalSpec):
    """(model, tokenizer): the base model in the spec's dtype, with the LoRA adapter on top when there is one."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs = {}
    if spec.dtype and spec.dtype != "auto":
        kwargs["dtype"] = getattr(torch, spec.dtype)
    model = AutoModelForCausalLM.from_pretrained(spec.model_path, **kwargs, **spec.config_overrides)
    tokenizer_dir = spec.model_path
    if spec.adapter is not None:
        from peft import PeftModel

        adapter = Path(spec.adapter)
        if not all((adapter / name).exists() for name in ADAPTER_FILES):
            raise EvalSpecError(f"--adapter {adapter}: no adapter_config.json (a run or checkpoint directory?)")
        model = PeftModel.from_pretrained(model, str(adapter))
        if (adapter / "tokenizer_config.json").exists():
            tokenizer_dir = str(adapter)
    model.eval()
    return model, AutoTokenizer.from_pretrained(tokenizer_dir)
