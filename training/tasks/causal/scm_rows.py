"""Episode rows from users' own SCMs: train and held-out rows of SCM files (the YAML format of
`training.tasks.causal.scm.user_scm`) or of a user's SCM generator.

    python -m training.tasks.causal.scm_rows --scm examples/scms/cbo_toy.yaml --out DIR [--train_rows 64 --heldout_rows 8]
    python -m training.tasks.causal.scm_rows --scm a.yaml b.yaml c.yaml --heldout_scm d.yaml --out DIR
    python -m training.tasks.causal.scm_rows --generator my_pkg.my_module:make_scm --out DIR   # make_scm(seed) -> SCM

writes DIR/train.jsonl and DIR/heldout.jsonl. A row is what `CausalEnv.reset` starts an episode from
(`training.tasks.causal.splits.scm_row`: the SCM as JSON, its prompt, the row seed, the budget and the initial
observational samples; the row maker is `splits.make_rows`). Row i of a split plays SCM i mod (number of SCMs) with the
row seed `row_seed(split, i)` (i for train rows, `HELDOUT_SEED_OFFSET` + i for held-out rows, disjoint; the seed rule:
`training.evaluation.pairing_seeds`). With one SCM file, train and held-out rows are episodes of the same SCM with
different noise; `--heldout_scm` holds other SCMs out; a generator is called with each row's seed. `--teacher` adds
the train rows' `reference_calls_json` (the bundled task's teacher, what the tool-trace warm start imitates), played
with `--surrogate`, by default the one that fits the SCMs (as `train_scm` picks it). The flags are the causal episode
flags every causal command shares (`training.tasks.causal.episode_source`); `--train` and `--heldout` were renamed
`--train_rows` and `--heldout_rows`. Relative paths are read from the working directory.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from training.errors import BadInputError, bad_input_exits
from training.run_setup.command_flags import add_renamed
from training.run_setup.prompt_datasets import write_split_files
from training.tasks.causal.episode_source import (
    EpisodeSource,
    add_episode_flags,
    check_counts,
    check_scms_fit,
    episode_source,
    generated_scms,
    scm_file_rows,
    scm_files,
    scms_surrogate,
)

FLAGS = ("scm", "generator", "heldout_scm", "train_rows", "heldout_rows", "budget", "initial_samples", "surrogate",
         "max_parents")
DEFAULTS = {"train_rows": 64, "heldout_rows": 8}


def parse_args(argv: list[str] | None = None) -> tuple[EpisodeSource, argparse.Namespace]:
    parser = argparse.ArgumentParser(description="Write train and held-out causal rows from SCM files or a "
                                                 "generator of SCMs.", allow_abbrev=False)
    add_episode_flags(parser, FLAGS, DEFAULTS)
    add_renamed(parser, "--train", "--train_rows", type=int)
    add_renamed(parser, "--heldout", "--heldout_rows", type=int)
    parser.add_argument("--out", required=True, help="directory for train.jsonl and heldout.jsonl")
    parser.add_argument("--teacher", action="store_true", help="add the teacher's traces to the train rows")
    args = parser.parse_args(argv)
    if (args.scm is None) == (args.generator is None):
        parser.error("give one of --scm and --generator")
    return episode_source(args, DEFAULTS), args


def source_scms(source: EpisodeSource) -> tuple[list, list]:
    """The train and held-out SCMs: the generator's, one a row, or the files' (held-out: `--heldout_scm`'s, else
    `--scm`'s)."""
    if source.generator:
        if source.heldout_scm:
            raise BadInputError("--heldout_scm: not with --generator (held-out SCMs come from its seeds)")
        return (generated_scms(source.generator, "train", source.train_rows),
                generated_scms(source.generator, "heldout", source.heldout_rows))
    train = scm_files(source.scm)
    return train, scm_files(source.heldout_scm) if source.heldout_scm else train


def main(argv: list[str] | None = None) -> dict:
    source, args = parse_args(argv)
    with bad_input_exits():
        budget, initial = check_counts(source.budget, source.initial_samples)
        if source.train_rows < 1 or source.heldout_rows < 1:
            raise BadInputError(f"--train_rows and --heldout_rows: must be >= 1, got {source.train_rows} and "
                                f"{source.heldout_rows}")
        train_scms, heldout_scms = source_scms(source)
        surrogate = source.surrogate or scms_surrogate([*train_scms, *heldout_scms]) or "exact"
        check_scms_fit([*train_scms, *heldout_scms], surrogate, source.max_parents)
        train = scm_file_rows(train_scms, "train", source.train_rows, budget, initial, teacher=args.teacher,
                              surrogate=surrogate, max_parents=source.max_parents)
        heldout = scm_file_rows(heldout_scms, "heldout", source.heldout_rows, budget, initial,
                                max_parents=source.max_parents)
    out = Path(args.out).expanduser().resolve()
    write_split_files(out, {"train": train, "heldout": heldout})
    summary = {"train": len(train), "heldout": len(heldout), "dir": str(out), "budget": budget,
               "initial_samples": initial, "teacher": args.teacher, "surrogate": surrogate}
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
