"""The scripted baselines on a causal split or a user's SCM file, from the command line.

`python -m training.tasks.causal.evaluate_baselines --split heldout --episodes N` (or `--scm FILE --budget B
--initial_samples I`, `--surrogate additive`, `--out DIR`) prints per baseline the final regret, parent F1
of the final posterior, cumulative information gain, reward, the best E[target | do] against the optimum, the final
parent marginals and each variable's share of the interventions (`training.tasks.causal.results.summary_table`).
`--out DIR` writes each baseline's evaluation directory, `DIR/<baseline>` (`eval.jsonl`, `eval_summary.json`), which
`python -m training.tasks.causal.results` and `python -m training.compare` read.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from training.errors import bad_input_exits
from training.tasks.causal.evaluation_task import write_evaluation
from training.tasks.causal.policies.policy_catalogue import POLICIES
from training.tasks.causal.policy_episodes import baseline_episodes, supported_policies
from training.tasks.causal.results import summary_table
from training.tasks.causal.scm_rows import add_episode_source_arguments, episode_source


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Baseline policies on a causal split or a user's SCM file.")
    add_episode_source_arguments(parser, episodes=2)
    parser.add_argument("--policies", default=None, help=f"comma-separated, of {list(POLICIES)} (default: all the "
                                                          "surrogate supports)")
    parser.add_argument("--out", default=None, help="directory: one evaluation directory per baseline under it")
    args = parser.parse_args(argv)
    with bad_input_exits():
        policies = supported_policies(args.policies, args.surrogate)
        rows, source = episode_source(args)
    print(f"{source}: {len(rows)} rows x {args.episodes} episodes, budget {rows[0].get('budget')}, {args.surrogate} "
          f"surrogate; mean ± std over episodes")
    runs, seconds = [], {}
    for name in policies:
        t0 = time.perf_counter()
        recs = baseline_episodes(name, rows, args.episodes, args.surrogate)
        seconds[name] = (time.perf_counter() - t0) / len(recs)
        for r in recs:
            r.update(decoding="policy", surrogate="active", surrogate_kind=args.surrogate, split=source)
        runs.append((name, recs))
    print(summary_table(runs))
    print("s/episode: " + ", ".join(f"{k} {v:.2f}" for k, v in seconds.items()))
    if args.out:
        for name, recs in runs:
            write_evaluation(Path(args.out) / name, recs, 0, {"source": "training.tasks.causal.evaluate_baselines",
                                                              "baseline": name, "split": source})
        print(f"evaluation directories -> {args.out}/<baseline>")


if __name__ == "__main__":
    main()
