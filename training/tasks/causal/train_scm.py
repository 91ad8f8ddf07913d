"""Train a causal policy on a user's SCM file, no rows written by hand:

    python -m training.tasks.causal.train_scm --scm examples/scms/cbo_toy.yaml --output_dir runs/cbo/policy \\
        [--budget 6 --initial_samples 10 --episodes 64 --heldout_episodes 32] [any training.train flag]

writes the SCM's train rows (`--episodes` of them, with the teacher's traces the recipe's warm start imitates)
and held-out rows to OUTPUT_DIR/scm_rows/{train,heldout}.jsonl (`training.tasks.causal.scm_rows`), then runs
`training.train` on them. Unless given, `--config` is the checkout's recipes/causal_cpu.yaml and the environment is
the `--surrogate`'s, by default the one that fits the file (`fitting_surrogate`): exact where every mechanism is
affine in its parents (up to 16 variables), additive otherwise (up to 10), learned above: `CausalEnv` with
`environment_settings: {surrogate_kind: ...}`. `--max_parents`
sets the exact surrogate's in-degree bound in the rows. Every other flag goes to `training.train` as is;
`--train_file` and `--heldout_file` are refused (the rows come from the SCM).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from training.errors import BadInputError, bad_input_exits
from training.run_setup.prompt_datasets import write_split_files
from training.tasks.causal.env import SURROGATE_KINDS, SURROGATES, EpisodeError, check_surrogate_fits
from training.tasks.causal.scm.user_scm import UserSCMError
from training.tasks.causal.scm_rows import CAUSAL_RECIPE, check_counts, load_scm_file, scm_file_rows

ROWS_DIR = "scm_rows"
AFFINE_POINTS = 16  # parent values at which a mechanism is checked for being affine


def split_argv(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """(this command's flags, the flags for training.train)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scm", required=True, help="the SCM file (YAML, training.tasks.causal.scm.user_scm)")
    parser.add_argument("--output_dir", required=True, help="the run's directory (also holds the rows)")
    parser.add_argument("--budget", type=int, default=None, help="calls per episode")
    parser.add_argument("--initial_samples", type=int, default=None, help="observational rows at reset")
    parser.add_argument("--episodes", type=int, default=64, help="train rows (episodes of the SCM)")
    parser.add_argument("--heldout_episodes", type=int, default=32,
                        help="held-out rows (episodes of the SCM: the units of the end-of-run comparison)")
    parser.add_argument("--surrogate", choices=[s for s in SURROGATES if s != "noop"], default=None,
                        help="the environment's surrogate (default: the one that fits the file: exact for affine "
                             "mechanisms, additive otherwise, learned above 10 or 16 variables)")
    parser.add_argument("--max_parents", type=int, default=None,
                        help="the exact surrogate's in-degree bound (default: none up to 10 variables, 3 above)")
    args, rest = parser.parse_known_args(argv)
    given = {flag.split("=", 1)[0] for flag in rest if flag.startswith("--")}
    clash = sorted(given & {"--train_file", "--heldout_file"})
    if clash:
        raise BadInputError(f"{', '.join(clash)}: the rows come from --scm; run training.train for your own rows")
    if given & {"--environment_factory", "--environment_settings"} and args.surrogate is not None:
        raise BadInputError("--surrogate and --environment_factory / --environment_settings: give one of them")
    if "--config" not in given:
        rest = ["--config", str(CAUSAL_RECIPE), *rest]
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


def write_rows(args: argparse.Namespace) -> Path:
    """The SCM's train rows (with the teacher's traces) and held-out rows under OUTPUT_DIR/scm_rows/."""
    budget, initial = check_counts(args.budget, args.initial_samples)
    if args.episodes < 1 or args.heldout_episodes < 1:
        raise BadInputError(f"--episodes and --heldout_episodes: must be >= 1, got {args.episodes} and "
                            f"{args.heldout_episodes}")
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
    out = Path(args.output_dir).expanduser().resolve() / ROWS_DIR
    settings = {"max_parents": args.max_parents} if args.max_parents is not None else {}
    write_split_files(out, {
        "train": scm_file_rows([scm], "train", args.episodes, budget, initial, teacher=True,
                               surrogate=args.surrogate or "exact", **settings),
        "heldout": scm_file_rows([scm], "heldout", args.heldout_episodes, budget, initial, **settings)})
    return out


def training_argv(argv: list[str]) -> list[str]:
    """Write the rows; the command line for `training.train.main`."""
    args, rest = split_argv(argv)
    rows = write_rows(args)
    if args.environment:
        rest = [*rest, "--environment_factory", "training.tasks.causal.env.CausalEnv",
                "--environment_settings", f"{{surrogate_kind: {args.surrogate}}}"]
    return [*rest, "--output_dir", args.output_dir, "--train_file", str(rows / "train.jsonl"),
            "--heldout_file", str(rows / "heldout.jsonl")]


def main(argv: list[str] | None = None) -> dict:
    from training.train import main as train

    with bad_input_exits():
        command = training_argv(sys.argv[1:] if argv is None else argv)
        return train(command)


if __name__ == "__main__":
    main()
