"""How much of the structure reward is the policy's choice, and how much the noise of the rows: the realised entropy
drop of each call against the expected drop the structure reward pays (training/tasks/causal/reward_components.py).

Scripted policies play the first --rows train SCMs once each, with the same episode seed for every policy (as the
rollouts of one GRPO group share their row's seed): random, a noisy greedy-EIG expert (half its calls random: the
warm start's teacher) and greedy EIG. Per call: the mean and sd of each drop and the share below 0. Per episode:
the paired difference from random of the episode's sum (normalised like the reward), as d_z and the share of
episodes where the policy gets more; a larger d_z is a reward that tells a better policy apart in fewer episodes.

    python -m benchmarks.structure_reward_signal --rows 60
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from training.run_setup.prompt_datasets import load_rows
from training.tasks.causal.policies.greedy_eig import GreedyEIGPolicy
from training.tasks.causal.policies.play import run_policy
from training.tasks.causal.policies.scripted import EpsilonPolicy, RandomPolicy

POLICIES = {"random": RandomPolicy, "noisy expert": lambda: EpsilonPolicy(GreedyEIGPolicy(), 0.5),
            "greedy EIG": GreedyEIGPolicy}
DROPS = {"realised": lambda s: s.info_gain, "expected": lambda s: s.expected_info_gain}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=60)
    parser.add_argument("--train_file", default="data/causal/train.jsonl")
    args = parser.parse_args()
    rows = load_rows(args.train_file)[:args.rows]
    episodes = {name: [run_policy(make(), row, 0) for row in rows] for name, make in POLICIES.items()}

    print("| policy | drop | per call: mean (nats) | sd | share < 0 |")
    print("| --- | --- | ---: | ---: | ---: |")
    for name, records in episodes.items():
        for drop, of in DROPS.items():
            calls = np.array([of(s) for r in records for s in r.steps if s.valid])
            print(f"| {name} | {drop} | {calls.mean():.3f} | {calls.std():.3f} | {(calls < 0).mean():.2f} |")

    def episode_sums(records, of):
        return np.array([sum(of(s) for s in r.steps if s.valid) / ((r.scm.d - 1) * math.log(2)) for r in records])

    print("\n| policy | drop | paired difference from random: d_z | share of episodes above random |")
    print("| --- | --- | ---: | ---: |")
    for name in list(POLICIES)[1:]:
        for drop, of in DROPS.items():
            diff = episode_sums(episodes[name], of) - episode_sums(episodes["random"], of)
            print(f"| {name} | {drop} | {diff.mean() / diff.std(ddof=1):.2f} | {(diff > 0).mean():.2f} |")


if __name__ == "__main__":
    main()
