"""Episode rows from users' own SCMs, and the rows every causal command plays (a split or an SCM file).

A row is what `CausalEnv.reset` starts an episode from (`training.tasks.causal.splits.scm_row`: the SCM as JSON, its
prompt, the row seed, the budget and the initial observational samples; the row maker is `splits.make_rows`). This module turns SCM files (the
YAML format of `training.tasks.causal.scm.user_scm`) or a user's SCM generator into train and held-out rows:

    python -m training.tasks.causal.scm_rows --scm examples/scms/cbo_toy.yaml --out DIR [--train 64 --heldout 8]
    python -m training.tasks.causal.scm_rows --scm a.yaml b.yaml c.yaml --heldout_scm d.yaml --out DIR
    python -m training.tasks.causal.scm_rows --generator my_pkg.my_module:make_scm --out DIR   # make_scm(seed) -> SCM

writes DIR/train.jsonl and DIR/heldout.jsonl. Row i of a split plays SCM i mod (number of SCMs) with the row seed
`row_seed(split, i)` (i for train rows, `HELDOUT_SEED_OFFSET` + i for held-out rows, disjoint; the seed rule:
`training.evaluation.pairing_seeds`). With one SCM file, train and held-out rows are episodes of the same SCM with
different noise; `--heldout_scm` holds other SCMs out; a generator is called with each row's seed.
`--teacher` adds the train rows' `reference_calls_json` (the bundled task's teacher, what the tool-trace warm
start imitates). Budget and initial samples default to `training.tasks.causal.row_schema.DEFAULT_BUDGET` and
`DEFAULT_INITIAL_SAMPLES`, as everywhere. Relative paths are read from the working directory.

`split_rows` is what the evaluation and baseline commands call for `--split` / `--scm`: "train" or "heldout" (the
bundled splits), a JSONL file of rows, or an SCM file (`.yaml` / `.yml`, one row: episode k of it is the k-th
paired episode, `training.evaluation.pairing_seeds.environment_seed`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from training.errors import BadInputError, bad_input_exits
from training.evaluation.pairing_seeds import row_seed
from training.run_setup.prompt_datasets import load_rows, write_split_files
from training.tasks.causal.row_schema import DEFAULT_BUDGET, DEFAULT_INITIAL_SAMPLES
from training.tasks.causal.scm.scm import SCM
from training.tasks.causal.scm.user_scm import UserSCMError, load_user_scm

CAUSAL_RECIPE = Path(__file__).resolve().parents[3] / "recipes" / "causal_cpu.yaml"  # whatever the working directory
SCM_SUFFIXES = (".yaml", ".yml")
ROW_COLUMNS = ("scm_json", "seed")  # what an episode needs; the prompt only an LM policy reads


def load_scm_file(path: str | Path) -> SCM:
    """The SCM of a user's file, the path read from the working directory."""
    return load_user_scm(Path(path).expanduser().resolve())


def scm_generator(spec: str):
    """The callable of `module:function` (a user's SCM family: function(seed) -> SCM)."""
    module, sep, name = spec.partition(":")
    if not sep or not module or not name:
        raise BadInputError(f"--generator: expected module:function, got {spec!r}")
    from training.run_setup.input_checks import (
        import_object,  # heavy (PEFT, transformers): only when a generator is named
    )

    return import_object(f"{module}.{name}", "--generator")


def generated_scm(fn, seed: int, spec: str) -> SCM:
    scm = fn(seed)
    if not isinstance(scm, SCM):
        raise BadInputError(f"--generator: {spec}({seed}) returned a {type(scm).__name__}, not a "
                            "training.tasks.causal.scm.scm.SCM")
    return scm


def scm_file_rows(scms: list[SCM], split: str, n: int, budget: int, initial_samples: int, **settings) -> list[dict]:
    """n rows of `split` cycling through `scms` (`splits.make_rows`: `teacher`, `surrogate`, `max_parents`)."""
    from training.tasks.causal.splits import cycling, make_rows  # the teacher's import is heavy

    return make_rows(split, n, cycling(scms), budget=budget, initial_samples=initial_samples, **settings)


def check_counts(budget: int | None, initial_samples: int | None) -> tuple[int, int]:
    """The budget and initial samples of a command (`None`: the defaults), refused unless budget >= 1, initial >= 0."""
    budget = DEFAULT_BUDGET if budget is None else budget
    initial = DEFAULT_INITIAL_SAMPLES if initial_samples is None else initial_samples
    if budget < 1:
        raise BadInputError(f"--budget: must be >= 1, got {budget}")
    if initial < 0:
        raise BadInputError(f"--initial_samples: must be >= 0, got {initial}")
    return budget, initial


def chosen_rows(split: str | None, scm: str | None, budget: int | None, initial_samples: int | None,
                max_parents: int | None, surrogate: str, limit: int | None = None) -> tuple[list[dict], str]:
    """(rows, description) of a split or SCM file (`split_rows`), the first `limit`, with `max_parents` where given,
    each row checked to fit the `surrogate` (`surrogates.catalogue.check_surrogate_fits`: its size, its in-degree bound)."""
    from training.tasks.causal.row_schema import EpisodeError
    from training.tasks.causal.surrogates.catalogue import check_surrogate_fits

    rows, source = split_rows(split, scm, budget, initial_samples)
    rows = rows[:limit]
    if max_parents is not None:
        rows = [{**r, "max_parents": max_parents} for r in rows]
    for i, r in enumerate(rows):
        try:
            check_surrogate_fits(surrogate, int(r["n_vars"]), r.get("max_parents"))
        except EpisodeError as err:
            raise BadInputError(f"{source}: row {i}: {err}") from None
    return rows, source


def check_scms_fit(scms: list[SCM], surrogate: str, max_parents: int | None) -> None:
    """Every SCM fits the surrogate (`surrogates.catalogue.check_surrogate_fits`), or `BadInputError` naming the first that does not."""
    from training.tasks.causal.row_schema import EpisodeError
    from training.tasks.causal.surrogates.catalogue import check_surrogate_fits

    for scm in scms:
        try:
            check_surrogate_fits(surrogate, scm.d, max_parents)
        except EpisodeError as err:
            raise BadInputError(f"--surrogate {surrogate}: SCM {scm.meta.get('name', scm.target)!r}: {err}") from None


def split_rows(split: str | None, scm: str | None, budget: int | None = None,
               initial_samples: int | None = None) -> tuple[list[dict], str]:
    """(rows, description) for a command's `--split` / `--scm`; `budget` / `initial_samples`, where given, replace
    every row's. An SCM file gives one row (held-out row 0), its episodes the paired environment seeds."""
    from training.tasks.causal.splits import DATA_DIR

    if scm is not None and split is not None:
        raise BadInputError("--scm and --split: give one of them")
    if scm is None and split is not None and Path(split).suffix in SCM_SUFFIXES:
        scm, split = split, None
    if scm is not None:
        b, i = check_counts(budget, initial_samples)
        try:
            model = load_scm_file(scm)
        except UserSCMError as err:
            raise BadInputError(f"--scm: {err}") from None
        return scm_file_rows([model], "heldout", 1, b, i), str(Path(scm).expanduser().resolve())
    split = split or "heldout"
    path = DATA_DIR / f"{split}.jsonl" if split in ("train", "heldout") else Path(split).expanduser().resolve()
    rows = load_rows(path, required=ROW_COLUMNS)
    if budget is not None or initial_samples is not None:
        b, i = check_counts(budget, initial_samples)
        rows = [{**r, **({"budget": b} if budget is not None else {}),
                 **({"initial_samples": i} if initial_samples is not None else {})} for r in rows]
    return rows, str(path)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description="Write train and held-out causal rows from SCM files or a "
                                                 "generator of SCMs.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--scm", nargs="+", help="SCM file(s) (YAML, training.tasks.causal.scm.user_scm)")
    source.add_argument("--generator", help="module:function, function(seed) -> training.tasks.causal.scm.scm.SCM")
    parser.add_argument("--heldout_scm", nargs="+", default=None, help="held-out SCM file(s) (default: --scm's)")
    parser.add_argument("--out", required=True, help="directory for train.jsonl and heldout.jsonl")
    parser.add_argument("--train", type=int, default=64, help="train rows")
    parser.add_argument("--heldout", type=int, default=8, help="held-out rows")
    parser.add_argument("--budget", type=int, default=None, help=f"calls per episode (default {DEFAULT_BUDGET})")
    parser.add_argument("--initial_samples", type=int, default=None,
                        help=f"observational rows at reset (default {DEFAULT_INITIAL_SAMPLES})")
    parser.add_argument("--teacher", action="store_true", help="add the teacher's traces to the train rows")
    parser.add_argument("--surrogate", default="exact", help="the surrogate the teacher's traces are played with "
                                                              "(exact, additive, learned)")
    parser.add_argument("--max_parents", type=int, default=None,
                        help="the exact surrogate's in-degree bound, written into every row")
    args = parser.parse_args(argv)
    with bad_input_exits():
        budget, initial = check_counts(args.budget, args.initial_samples)
        if args.train < 1 or args.heldout < 1:
            raise BadInputError(f"--train and --heldout: must be >= 1, got {args.train} and {args.heldout}")
        if args.generator:
            if args.heldout_scm:
                raise BadInputError("--heldout_scm: not with --generator (held-out SCMs come from its seeds)")
            fn = scm_generator(args.generator)
            train_scms = [generated_scm(fn, row_seed("train", i), args.generator) for i in range(args.train)]
            heldout_scms = [generated_scm(fn, row_seed("heldout", i), args.generator) for i in range(args.heldout)]
        else:
            try:
                train_scms = [load_scm_file(p) for p in args.scm]
                heldout_scms = [load_scm_file(p) for p in args.heldout_scm] if args.heldout_scm else train_scms
            except UserSCMError as err:
                raise BadInputError(str(err)) from None
        check_scms_fit([*train_scms, *heldout_scms], args.surrogate, args.max_parents)
        train = scm_file_rows(train_scms, "train", args.train, budget, initial, teacher=args.teacher,
                              surrogate=args.surrogate, max_parents=args.max_parents)
        heldout = scm_file_rows(heldout_scms, "heldout", args.heldout, budget, initial, max_parents=args.max_parents)
    out = Path(args.out).expanduser().resolve()
    write_split_files(out, {"train": train, "heldout": heldout})
    summary = {"train": len(train), "heldout": len(heldout), "dir": str(out), "budget": budget,
               "initial_samples": initial, "teacher": args.teacher}
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
