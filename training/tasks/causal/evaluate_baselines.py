"""The scripted baselines side by side, on a causal split or a user's SCM file: each through `training.evaluate`'s
`evaluate` (the one evaluation entry, called in process with the episodes asked for here), then one table.

    python -m training.tasks.causal.evaluate_baselines --split heldout --episodes_per_row 2 [--out DIR]
    python -m training.tasks.causal.evaluate_baselines --scm FILE --budget B --initial_samples I --surrogate additive

prints per baseline the final regret, parent F1 of the final posterior, cumulative information gain, reward (the
recipe's weights, `--recipe`, default the checkout's recipes/causal_cpu.yaml), the best E[target | do] against the
optimum, the final parent marginals and each variable's share of the interventions
(`training.tasks.causal.compare_tables.summary_table`). The episodes are the causal episode flags every causal command
shares (`training.tasks.causal.episode_source`; the bundled held-out split by default), played with the surrogate
`episode_source.surrogate_for` picks: `--surrogate`, else the one that fits the rows' SCMs (rows `train_scm` or
`scm_rows` made from a nonlinear file play with the additive one, as they were made). `--episodes` and `--limit` were
renamed `--episodes_per_row` and `--max_rows` (the old spellings warn, until the next release). `--out DIR` keeps
each baseline's evaluation directory, `DIR/<baseline>` (`eval.jsonl`, `eval_summary.json`), which
`python -m training.compare` reads.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from training.errors import bad_input_exits
from training.evaluate import EvalRequest, evaluate
from training.evaluation.episode_choice import EpisodeChoice
from training.evaluation.episodes import read_episodes
from training.run_setup.command_flags import add_fields, add_renamed, from_flags
from training.tasks.causal.episode_source import (
    CAUSAL_RECIPE,
    add_episode_flags,
    episode_source,
    rows_to_play,
    surrogate_for,
)
from training.tasks.causal.policies.policy_catalogue import POLICIES
from training.tasks.causal.policy_episodes import supported_policies
from training.tasks.causal.compare_tables import summary_table

FLAGS = ("split", "scm", "budget", "initial_samples", "max_parents", "surrogate")
DEFAULTS = {"episodes_per_row": 2}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Baseline policies on a causal split or a user's SCM file.",
                                     allow_abbrev=False)
    episodes = parser.add_argument_group("the episodes (training.tasks.causal.episode_source)")
    add_episode_flags(episodes, FLAGS)
    add_fields(episodes, EpisodeChoice, defaults=DEFAULTS)
    add_renamed(episodes, "--episodes", "--episodes_per_row", type=int)
    add_renamed(episodes, "--limit", "--max_rows", type=int)
    parser.add_argument("--policies", default=None, help=f"comma-separated, of {list(POLICIES)} (default: all the "
                                                          "surrogate supports)")
    parser.add_argument("--recipe", default=str(CAUSAL_RECIPE), help="the reward weights and sampling limits")
    parser.add_argument("--out", default=None, help="directory: one evaluation directory per baseline under it")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    choice = from_flags(args, EpisodeChoice, DEFAULTS)
    runs, seconds = [], {}
    with bad_input_exits(), tempfile.TemporaryDirectory() as scratch:
        source = episode_source(args)
        if source.split is None and source.scm is None:
            source = replace(source, split="heldout")
        rows, where = rows_to_play(source)
        surrogate = surrogate_for(rows[:choice.max_rows], source.surrogate, where)  # what `evaluate` will pick
        root = Path(args.out) if args.out else Path(scratch)
        largest = max(int(r["n_vars"]) for r in rows)
        for name in supported_policies(args.policies, surrogate, largest):
            started = time.perf_counter()
            summary = evaluate(EvalRequest(out=str(root / name), recipe=args.recipe, baseline=name, overwrite=True,
                                           choice=choice, task_flags={"causal": source}))
            runs.append((name, [e.extra for e in read_episodes(root / name)]))
            seconds[name] = (time.perf_counter() - started) / summary["n_total"]
    played = runs[0][1]
    print(f"{summary['split']}: {len({r['row'] for r in played})} rows x {choice.episodes_per_row} episodes, budget "
          f"{played[0]['budget']}, {played[0]['surrogate_kind']} surrogate; mean ± std over episodes")
    print(summary_table(runs))
    print("s/episode: " + ", ".join(f"{k} {v:.2f}" for k, v in seconds.items()))
    if args.out:
        print(f"evaluation directories -> {args.out}/<baseline>")


if __name__ == "__main__":
    main()
