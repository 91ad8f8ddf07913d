"""The scripted baselines side by side, on a causal split or a user's SCM file: each through `python -m
training.evaluate --baseline NAME` (the one evaluation entry), then one table.

    python -m training.tasks.causal.evaluate_baselines --split heldout --episodes 2 [--out DIR]
    python -m training.tasks.causal.evaluate_baselines --scm FILE --budget B --initial_samples I --surrogate additive

prints per baseline the final regret, parent F1 of the final posterior, cumulative information gain, reward (the
recipe's weights, `--recipe`, default the checkout's recipes/causal_cpu.yaml), the best E[target | do] against the
optimum, the final parent marginals and each variable's share of the interventions
(`training.tasks.causal.results.summary_table`). `--out DIR` keeps each baseline's evaluation directory,
`DIR/<baseline>` (`eval.jsonl`, `eval_summary.json`), which `python -m training.tasks.causal.results` and
`python -m training.compare` read.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from training.errors import bad_input_exits
from training.evaluate import main as evaluate
from training.evaluation.episodes import read_episodes
from training.run_setup.environment_settings import environment_setting
from training.tasks.causal.env import CausalEnv
from training.tasks.causal.evaluate_options import add_options
from training.tasks.causal.policies.policy_catalogue import POLICIES
from training.tasks.causal.policy_episodes import supported_policies
from training.tasks.causal.results import summary_table
from training.tasks.causal.scm_rows import CAUSAL_RECIPE, split_rows


def evaluate_argv(args: argparse.Namespace, options: list[argparse.Action], baseline: str, out: Path) -> list[str]:
    """`python -m training.evaluate`'s command line for one baseline: the causal options given here passed on as
    they are, the episodes from the bundled held-out split unless a split or SCM file is named."""
    passed = []
    for action in options:
        value = getattr(args, action.dest)
        if value is not None:
            passed += [action.option_strings[0]] if value is True else [action.option_strings[0], str(value)]
    return ["--recipe", args.recipe, "--baseline", baseline, "--out", str(out), "--overwrite", "--samples-per-prompt",
            str(args.episodes), *(["--max-rows", str(args.limit)] if args.limit is not None else []),
            *(["--split", "heldout"] if args.split is None and args.scm is None else []), *passed]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Baseline policies on a causal split or a user's SCM file.")
    episodes = parser.add_argument_group("the episodes (as `python -m training.evaluate` takes them)")
    add_options(episodes)
    parser.add_argument("--episodes", type=int, default=2, help="episodes per row (environment seeds 0..N-1)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N rows")
    parser.add_argument("--policies", default=None, help=f"comma-separated, of {list(POLICIES)} (default: all the "
                                                          "surrogate supports)")
    parser.add_argument("--recipe", default=str(CAUSAL_RECIPE), help="the reward weights and sampling limits")
    parser.add_argument("--out", default=None, help="directory: one evaluation directory per baseline under it")
    args = parser.parse_args(argv)
    runs, seconds = [], {}
    with bad_input_exits(), tempfile.TemporaryDirectory() as scratch:
        root = Path(args.out) if args.out else Path(scratch)
        largest = max(int(r["n_vars"]) for r in split_rows(args.split, args.scm)[0])
        for name in supported_policies(args.policies, args.surrogate or environment_setting(CausalEnv, "surrogate_kind"), largest):
            started = time.perf_counter()
            summary = evaluate(evaluate_argv(args, episodes._group_actions, name, root / name))
            runs.append((name, [e.extra for e in read_episodes(root / name)]))
            seconds[name] = (time.perf_counter() - started) / summary["n_total"]
    rows = runs[0][1]
    print(f"{summary['split']}: {len({r['row'] for r in rows})} rows x {args.episodes} episodes, budget "
          f"{rows[0]['budget']}, {rows[0]['surrogate_kind']} surrogate; mean ± std over episodes")
    print(summary_table(runs))
    print("s/episode: " + ", ".join(f"{k} {v:.2f}" for k, v in seconds.items()))
    if args.out:
        print(f"evaluation directories -> {args.out}/<baseline>")


if __name__ == "__main__":
    main()
