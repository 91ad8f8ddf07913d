"""Train a causal policy on a user's SCM file, no rows written by hand:

    python -m training.tasks.causal.train_scm --scm examples/scms/cbo_toy.yaml --output_dir runs/cbo/policy \\
        [--budget 6 --initial_samples 10 --train_rows 64 --heldout_rows 128] [any training.train flag]

makes the SCM's train rows (`--train_rows` of them, with the teacher's traces: what forcing and a `--warm_start_steps`
warm start replay; the recipe's starting policy was built on the bundled rows' traces) and
held-out rows (`training.tasks.causal.splits.make_rows`), keeps them in OUTPUT_DIR/scm_rows/{train,heldout}.jsonl
(the run's data: their sha256 is in its recorded recipe, and a resume or `training.evaluate` reads them there), and
runs `training.train.train` in process on a `Recipe`: the recipe file (`--config`, by default the checkout's
recipes/causal_cpu.yaml) with the other `training.train` flags, the rows and the environment class handed over as
objects. The environment is the `--surrogate`'s, by default the one that fits the file (`fitting_surrogate`): exact
where every mechanism is affine in its parents (up to 16 variables), additive otherwise (up to 10), learned above;
the run records it as `environment_factory: training.tasks.causal.env.CausalEnv` with `environment_settings:
{surrogate_kind: ...}`. `--max_parents` sets the exact surrogate's in-degree bound in the rows. `--train_file` and
`--heldout_file` are refused (the rows come from the SCM). `--episodes` and `--heldout_episodes` were renamed
`--train_rows` and `--heldout_rows` (`--episodes` elsewhere counts episodes per row). GRPO's wall-time guard is
`SCM_WALL_TIME_S` unless `--max_wall_time_s` is given (the recipe's is the main job's).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from training.errors import BadInputError, bad_input_exits
from training.run_setup.prompt_datasets import write_split_files
from training.tasks.causal.env import make_causal_env
from training.tasks.causal.row_schema import EpisodeError
from training.tasks.causal.surrogates.catalogue import SURROGATES as SURROGATE_KINDS
from training.tasks.causal.surrogates.catalogue import check_surrogate_fits
from training.tasks.causal.scm.user_scm import UserSCMError
from training.tasks.causal.scm_rows import CAUSAL_RECIPE, check_counts, load_scm_file, scm_file_rows

ROWS_DIR = "scm_rows"
# GRPO's wall-time guard when the command line sets none: a user's SCM gets its 48 steps (the recipe's 480 s is the
# README's 15 minutes for the main job, install included); with the two held-out evaluations, within 20 minutes.
SCM_WALL_TIME_S = 960
AFFINE_POINTS = 16  # parent values at which a mechanism is checked for being affine


RENAMED = {"--episodes": "--train_rows", "--heldout_episodes": "--heldout_rows"}


class Renamed(argparse.Action):
    """A flag that was renamed: refused, naming the new one."""

    def __call__(self, parser, namespace, values, option_string=None):
        raise BadInputError(f"{option_string}: renamed {RENAMED[option_string]} (rows of the SCM; --episodes counts "
                            "episodes per row in the evaluation commands)")


def split_argv(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """(this command's flags, the flags for training.train: --output_dir and --config among them)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--scm", required=True, help="the SCM file (YAML, training.tasks.causal.scm.user_scm)")
    parser.add_argument("--budget", type=int, default=None, help="calls per episode")
    parser.add_argument("--initial_samples", type=int, default=None, help="observational rows at reset")
    parser.add_argument("--train_rows", type=int, default=64, help="train rows (episodes of the SCM)")
    parser.add_argument("--heldout_rows", type=int, default=128,
                        help="held-out rows (episodes of the SCM: the units of the end-of-run comparison; the recipe "
                             "compares over at most heldout_max_samples of them, 128)")
    for old in RENAMED:
        parser.add_argument(old, action=Renamed, help=f"renamed {RENAMED[old]}")
    parser.add_argument("--surrogate", choices=[s for s in SURROGATE_KINDS if s != "noop"], default=None,
                        help="the environment's surrogate (default: the one that fits the file: exact for affine "
                             "mechanisms, additive otherwise, learned above 10 or 16 variables)")
    parser.add_argument("--max_parents", type=int, default=None,
                        help="the exact surrogate's in-degree bound (default: none up to 10 variables, 3 above)")
    args, rest = parser.parse_known_args(argv)
    given = {flag.split("=", 1)[0] for flag in rest if flag.startswith("--")}
    if "--output_dir" not in given:
        raise BadInputError("--output_dir: required (the run's directory, which also keeps the rows)")
    clash = sorted(given & {"--train_file", "--heldout_file"})
    if clash:
        raise BadInputError(f"{', '.join(clash)}: the rows come from --scm; run training.train for your own rows")
    if given & {"--environment_factory", "--environment_settings"} and args.surrogate is not None:
        raise BadInputError("--surrogate and --environment_factory / --environment_settings: give one of them")
    args.environment = not given & {"--environment_factory", "--environment_settings"}
    return args, rest


def affine(mechanism, rng: np.random.Generator) -> bool:
    """Whether `mechanism` is affine in its parents: an affine fit at `AFFINE_POINTS` parent values leaves no residual
    beyond rounding."""
    if not mechanism.parents:
        return True
    x = rng.uniform(-3.0, 3.0, size=(AFFINE_POINTS, len(mechanism.parents)))
    y = np.broadcast_to(np.asarray(mechanism(dict(zip(mechanism.parents, x.T))), dtype=float), (AFFINE_POINTS,))
    design = np.column_stack([np.ones(AFFINE_POINTS), x])
    residual = y - design @ np.linalg.lstsq(design, y, rcond=None)[0]
    return bool(np.all(np.isfinite(y)) and np.abs(residual).max() <= 1e-8 * max(1.0, np.abs(y).max()))


def fitting_surrogate(scm) -> str:
    """The surrogate that fits an SCM: exact where every mechanism is affine (up to its size limit), additive
    otherwise (up to its limit), learned beyond."""
    rng = np.random.default_rng(0)
    wanted = "exact" if all(affine(m, rng) for m in scm.mechanisms.values()) else "additive"
    limit = SURROGATE_KINDS[wanted].max_vars
    return wanted if limit is None or scm.d <= limit else "learned"


def scm_run_rows(args: argparse.Namespace) -> dict[str, list[dict]]:
    """The SCM's train rows (with the teacher's traces) and held-out rows; picks the surrogate (`args.surrogate`)."""
    budget, initial = check_counts(args.budget, args.initial_samples)
    if args.train_rows < 1 or args.heldout_rows < 1:
        raise BadInputError(f"--train_rows and --heldout_rows: must be >= 1, got {args.train_rows} and "
                            f"{args.heldout_rows}")
    try:
        scm = load_scm_file(args.scm)
    except UserSCMError as err:
        raise BadInputError(f"--scm: {err}") from None
    if args.environment:
        args.surrogate = args.surrogate or fitting_surrogate(scm)
        try:
            check_surrogate_fits(args.surrogate, scm.d, args.max_parents)
        except EpisodeError as err:
            raise BadInputError(f"--scm {args.scm}: {err}") from None
    settings = {"max_parents": args.max_parents} if args.max_parents is not None else {}
    return {"train": scm_file_rows([scm], "train", args.train_rows, budget, initial, teacher=True,
                                   surrogate=args.surrogate or "exact", **settings),
            "heldout": scm_file_rows([scm], "heldout", args.heldout_rows, budget, initial, **settings)}


def scm_recipe(argv: list[str]):
    """The `Recipe` of a `train_scm` command line: the recipe and flags for `training.train`, the rows (kept under
    OUTPUT_DIR/scm_rows/, which `train_file` and `heldout_file` name) and the environment class."""
    from training.run_setup.recipe import read_recipe

    args, rest = split_argv(argv)
    recipe = read_recipe(rest, default_config=CAUSAL_RECIPE)
    recipe.argv = list(argv)
    if not any(arg.split("=")[0] == "--max_wall_time_s" for arg in rest):
        recipe.training_args.max_wall_time_s = SCM_WALL_TIME_S
    rows = scm_run_rows(args)
    out = Path(recipe.training_args.output_dir).expanduser().resolve() / ROWS_DIR
    write_split_files(out, rows)
    recipe.rows = rows
    recipe.script_args.train_file = str(out / "train.jsonl")
    recipe.script_args.heldout_file = str(out / "heldout.jsonl")
    if args.environment:
        recipe.environment = make_causal_env(args.surrogate)
    return recipe


def main(argv: list[str] | None = None) -> dict:
    from training.train import train

    with bad_input_exits():
        recipe = scm_recipe(sys.argv[1:] if argv is None else argv)
        return train(recipe)


if __name__ == "__main__":
    main()
