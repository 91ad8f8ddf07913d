"""Train a causal policy on a user's SCM file, no rows written by hand:

    python -m training.tasks.causal.train_scm --scm examples/scms/cbo_toy.yaml --output_dir runs/cbo/policy \\
        [--budget 6 --initial_samples 10 --train_rows 64 --heldout_rows 128] [any training.train flag]

makes the SCM's train rows (`--train_rows` of them, with the teacher's traces: what forcing and a `--warm_start_steps`
warm start replay; the recipe's starting policy was built on the bundled rows' traces) and held-out rows
(`training.tasks.causal.splits.make_rows`), keeps them in OUTPUT_DIR/scm_rows/{train,heldout}.jsonl (the run's data:
their sha256 is in its recorded recipe, and `training.evaluate` reads them there), and runs `training.train.train` in
process on a `Recipe`: the recipe file (`--config`, by default the checkout's recipes/causal_cpu.yaml) with the other
`training.train` flags, read by one parser with this command's own (the causal episode flags,
`training.tasks.causal.episode_source`), the rows and the environment handed over as objects. The environment's
surrogate is `--surrogate`, by default the one that fits the file (`catalogue.fitting_surrogate`): exact where every
mechanism is affine in its parents (up to 16 variables), additive otherwise (up to 12), learned above; the run records
it as `environment_factory: training.tasks.causal.env.CausalEnv` with `environment_settings: {surrogate_kind: ...}`.
`--max_parents` sets the surrogate's in-degree bound in the rows. `--train_file` and `--heldout_file` are
refused (the rows come from the SCM). `--episodes` and `--heldout_episodes` were renamed `--train_rows` and
`--heldout_rows` (`--episodes_per_row` counts episodes per row in the evaluation commands). GRPO's wall-time guard is
`SCM_WALL_TIME_S` unless `--max_wall_time_s` is given (the recipe's is the main job's). Unless
`--max_completion_length` is given, the completion limit and the model's context grow to hold the teacher's episodes
on the file (`fit_limits`).
"""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import replace
from pathlib import Path

from training.errors import BadInputError, bad_input_exits
from training.run_setup.prompt_datasets import write_split_files
from training.tasks.causal.env import make_causal_env
from training.tasks.causal.episode_source import (
    CAUSAL_RECIPE,
    EpisodeSource,
    add_episode_flags,
    check_counts,
    check_scms_fit,
    episode_source,
    scm_file_rows,
    scm_files,
    scms_surrogate,
)

logger = logging.getLogger(__name__)

ROWS_DIR = "scm_rows"
# GRPO's wall-time guard when the command line sets none: a user's SCM gets its 48 steps (the recipe's 480 s is the
# README's 15 minutes for the main job, install included); with the two held-out evaluations, within 20 minutes.
SCM_WALL_TIME_S = 960
FLAGS = ("scm", "budget", "initial_samples", "train_rows", "heldout_rows", "surrogate", "max_parents")
DEFAULTS = {"train_rows": 64, "heldout_rows": 128}
RENAMED = {"--episodes": "--train_rows", "--heldout_episodes": "--heldout_rows"}
ENVIRONMENT_FIELDS = {"environment_factory", "environment_settings"}


class Renamed(argparse.Action):
    """A flag that was renamed: refused, naming the new one."""

    def __call__(self, parser, namespace, values, option_string=None):
        raise BadInputError(f"{option_string}: renamed {RENAMED[option_string]} (rows of the SCM; --episodes_per_row "
                            "counts episodes per row in the evaluation commands)")


def add_flags(parser) -> None:
    """This command's own flags, beside training.train's: the causal episode flags `FLAGS`."""
    group = parser.add_argument_group("the SCM's rows (training.tasks.causal.episode_source)")
    add_episode_flags(group, FLAGS, DEFAULTS)
    for old in RENAMED:
        group.add_argument(old, action=Renamed, help=argparse.SUPPRESS)


def check_given(given: frozenset[str], source: EpisodeSource) -> None:
    """What the command line must and must not set."""
    if source.scm is None:
        raise BadInputError("--scm: required (the SCM file whose rows the run trains and evaluates on)")
    if "output_dir" not in given:
        raise BadInputError("--output_dir: required (the run's directory, which also keeps the rows)")
    clash = sorted(given & {"train_file", "heldout_file"})
    if clash:
        raise BadInputError(f"{', '.join('--' + c for c in clash)}: the rows come from --scm; run training.train for "
                            "your own rows")
    if given & ENVIRONMENT_FIELDS and source.surrogate is not None:
        raise BadInputError("--surrogate and --environment_factory / --environment_settings: give one of them")


def scm_run_rows(source: EpisodeSource, own_environment: bool) -> tuple[dict[str, list[dict]], str | None]:
    """The SCM's train rows (with the teacher's traces) and held-out rows, and the surrogate the run plays when it
    makes its environment (`--surrogate`, else the one that fits the SCM files; checked to fit them). The teacher
    plays that surrogate (exact under a recipe's own environment)."""
    budget, initial = check_counts(source.budget, source.initial_samples)
    if source.train_rows < 1 or source.heldout_rows < 1:
        raise BadInputError(f"--train_rows and --heldout_rows: must be >= 1, got {source.train_rows} and "
                            f"{source.heldout_rows}")
    scms = scm_files(source.scm)
    surrogate = None
    if own_environment:
        surrogate = source.surrogate or scms_surrogate(scms)
        check_scms_fit(scms, surrogate, source.max_parents)
    settings = {"max_parents": source.max_parents} if source.max_parents is not None else {}
    rows = {"train": scm_file_rows(scms, "train", source.train_rows, budget, initial, teacher=True,
                                   surrogate=surrogate or "exact", **settings),
            "heldout": scm_file_rows(scms, "heldout", source.heldout_rows, budget, initial, **settings)}
    return rows, surrogate


def fit_limits(recipe, train_rows: list[dict], environment, scm: str) -> None:
    """Unless the command line sets `--max_completion_length`, the recipe's completion limit (and the model's
    context, by `model_init_kwargs.max_position_embeddings`, unless that is set) grow to hold the teacher's episodes
    on the file (`trace_lengths.fitted_limits`), so that no episode is cut before its budget is spent: the recipe's
    720 tokens were sized on the bundled SCMs, whose replies list fewer options than a nonlinear file's. A resume
    keeps the limits its run recorded."""
    from transformers import AutoConfig, AutoTokenizer

    from training.run_setup.model_context import config_overrides
    from training.run_setup.models import resolve_model_path
    from training.run_setup.run_recipe import recorded_recipe
    from training.run_setup.trace_lengths import SIZED_ROWS, fitted_limits, reference_lengths

    args = recipe.training_args
    if "max_completion_length" in recipe.given or environment is None:
        return
    recorded = recorded_recipe(args.output_dir) if args.resume_from_checkpoint else None
    if recorded is not None:  # a resume trains on under the limits its run started with
        args.max_completion_length = recorded.get("max_completion_length", args.max_completion_length)
        if "model_init_kwargs" not in recipe.given:
            args.model_init_kwargs = recorded.get("model_init_kwargs", args.model_init_kwargs)
        return
    model_path = resolve_model_path(recipe.model_args.model_name_or_path, seed=recipe.script_args.model_seed)
    overrides = config_overrides(args.model_init_kwargs)
    context = overrides.get("max_position_embeddings") or AutoConfig.from_pretrained(model_path).max_position_embeddings
    lengths = reference_lengths(AutoTokenizer.from_pretrained(model_path), train_rows[:SIZED_ROWS], environment,
                                dict(args.chat_template_kwargs or {}))
    fit = fitted_limits(lengths, args.max_completion_length, context)
    if not fit.grew(args.max_completion_length, context):
        return
    if fit.context > context and (overrides or args.use_vllm):
        raise BadInputError(
            f"{scm}: the teacher's episodes reach {fit.longest_completion} completion tokens; with room to spare they "
            f"need a context of {fit.context}, above the model's {context}"
            + (" (model_init_kwargs sets it)" if overrides else ", which vLLM samples under (its config.json's)")
            + "; give --max_completion_length to cut them, or a longer context")
    logger.info("%s: the teacher's episodes reach %d completion tokens: max_completion_length %d -> %d, the model's "
                "context %d -> %d (--max_completion_length to set it yourself)", scm, fit.longest_completion,
                args.max_completion_length, fit.max_completion_length, context, fit.context)
    args.max_completion_length = fit.max_completion_length
    if fit.context > context:
        args.model_init_kwargs = {**(args.model_init_kwargs or {}), "max_position_embeddings": fit.context}


def scm_recipe(argv: list[str]):
    """The `Recipe` of a `train_scm` command line: the recipe and flags for `training.train`, the rows (kept under
    OUTPUT_DIR/scm_rows/, which `train_file` and `heldout_file` name) and the environment."""
    from training.run_setup.recipe import read_recipe

    recipe = read_recipe(argv, default_config=CAUSAL_RECIPE, command_flags=add_flags,
                         command_defaults={"max_wall_time_s": SCM_WALL_TIME_S})
    source = episode_source(recipe.command_flags, DEFAULTS)
    check_given(recipe.given, source)
    own_environment = not recipe.given & ENVIRONMENT_FIELDS
    rows, surrogate = scm_run_rows(source, own_environment)
    environment = make_causal_env(surrogate) if own_environment else None
    fit_limits(recipe, rows["train"], environment, ", ".join(source.scm))
    out = Path(recipe.training_args.output_dir).expanduser().resolve() / ROWS_DIR
    write_split_files(out, rows)
    files = {"train_file": str(out / "train.jsonl"), "heldout_file": str(out / "heldout.jsonl")}
    return replace(recipe, script_args=replace(recipe.script_args, **files), rows=rows,
                   environment=environment)


def main(argv: list[str] | None = None) -> dict:
    from training.train import LOG_FORMAT, train

    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)  # the limits fit_limits sets are logged before train's
    with bad_input_exits():
        recipe = scm_recipe(sys.argv[1:] if argv is None else argv)
        return train(recipe)


if __name__ == "__main__":
    main()
