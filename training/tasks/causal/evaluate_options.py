"""The causal task's own options of `python -m training.evaluate`: where the episodes come from (a split, a rows file
or a user's SCM file, with its budget and initial samples) and the environment's surrogate (its kind, frozen or
live). Carried by the task's `Task` (task.py), so the generic command declares them without knowing them:

    python -m training.evaluate RUN_DIR --scm my_scm.yaml --budget 6 --surrogate additive --out eval/my_scm
    python -m training.evaluate --recipe recipes/causal_cpu.yaml --baseline greedy_eig --split train --out eval/g
    python -m training.evaluate RUN_DIR --frozen --out eval/frozen

`--surrogate` and `--frozen` change the recipe's `environment_settings` (`surrogate_kind`, `active`); `--split` /
`--scm` replace the recipe's held-out rows by every row of the split or SCM file (`--max-rows N`: the first N);
`--budget`, `--initial_samples` and `--max_parents` replace each row's.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from training.evaluation.eval_inputs import EvalInputs, inputs_from_spec
from training.evaluation.spec import EvalSpec

ROW_OPTIONS = ("split", "scm", "budget", "initial_samples", "max_parents")
ENVIRONMENT_OPTIONS = ("surrogate", "frozen")


def add_options(group: argparse._ArgumentGroup) -> None:
    from training.tasks.causal.surrogates.catalogue import SURROGATES as SURROGATE_KINDS

    group.add_argument("--split", help="train, heldout, a JSONL file of causal rows, or an SCM file (.yaml): its "
                                       "episodes instead of the recipe's held-out rows")
    group.add_argument("--scm", help="a user's SCM file (YAML, training.tasks.causal.scm.user_scm): its episodes "
                                     "(episode k of it is the k-th paired episode)")
    group.add_argument("--budget", type=int, help="calls per episode (default: the rows')")
    group.add_argument("--initial_samples", type=int, help="observational rows at reset (default: the rows')")
    group.add_argument("--max_parents", type=int, help="the exact surrogate's in-degree bound (default: none up to "
                                                       "10 variables, 3 above)")
    sampled = [name for name, kind in SURROGATE_KINDS.items() if kind.sampled]
    group.add_argument("--surrogate", choices=sampled, help="the environment's surrogate (default: the recipe's; "
                       "additive: nonlinear mechanisms; learned: SCMs larger than the exact one handles)")
    group.add_argument("--frozen", action="store_true", default=None,
                       help="freeze the surrogate after the initial samples: no call updates the posterior")


def with_options(args: argparse.Namespace, spec: EvalSpec) -> EvalInputs | None:
    """The inputs the options ask for, or None when none is given (the spec's own)."""
    if all(getattr(args, name) is None for name in (*ROW_OPTIONS, *ENVIRONMENT_OPTIONS)):
        return None
    settings = dict(spec.environment_settings or {})
    if args.surrogate is not None:
        settings["surrogate_kind"] = args.surrogate
    if args.frozen:
        settings["active"] = False
    spec = replace(spec, environment_settings=settings or None)
    if all(getattr(args, name) is None for name in ROW_OPTIONS):
        return inputs_from_spec(spec)
    from training.tasks.causal.scm_rows import chosen_rows

    rows, source = chosen_rows(args.split, args.scm, args.budget, args.initial_samples, args.max_parents,
                               settings.get("surrogate_kind", "exact"), limit=args.max_rows)
    return inputs_from_spec(spec, rows=rows, split=source)
