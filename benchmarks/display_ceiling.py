"""What the reply's numbers allow: a perfect reader of the options as the policy reads them (gain and info as whole
percentages, new or seen), weighing them as the one-step rule does (`acquisition.call_scores`: gain + 0.5 info +
0.1 new / N, N the exploration unit's), against the rule itself (which weighs the unrounded terms), on held-out
episodes the rule plays. Per state with two options or more: how often the reader's choice is the rule's, and the
one-step score it loses when it is not. Also at a tenth of a percent and at multiples of 5, for scale.

    python -m benchmarks.display_ceiling --split data/causal/heldout.jsonl --rows 64
    python -m benchmarks.display_ceiling --split CBO_ROWS/heldout.jsonl --surrogate additive --rows 64
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from training.evaluation.pairing_seeds import environment_seed
from training.run_setup.prompt_datasets import load_rows
from training.tasks.causal.env import make_causal_env
from training.tasks.causal.reward_components import DEFAULT_WEIGHTS, exploration_unit

ROUNDINGS = {"whole percent (as shown)": 1.0, "tenth of a percent": 0.1, "multiples of 5": 5.0}


def read_choice(options, unit: float, step: float) -> int:
    """The option a reader of the numbers rounded to `step` percent picks by the rule's weights."""
    def shown(x: float) -> float:
        return float(np.round(100 * x / step) * step)

    scores = [DEFAULT_WEIGHTS["optimization"] * shown(o.gain) + DEFAULT_WEIGHTS["structure"] * shown(o.info)
              + 100 * DEFAULT_WEIGHTS["exploration"] * unit * o.new for o in options]
    return int(np.argmax(scores))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", default="data/causal/heldout.jsonl")
    parser.add_argument("--surrogate", default="exact")
    parser.add_argument("--rows", type=int, default=64)
    args = parser.parse_args(argv)
    agree = {name: [] for name in ROUNDINGS}
    lost = {name: [] for name in ROUNDINGS}
    for row in load_rows(args.split)[: args.rows]:
        env = make_causal_env(args.surrogate)()
        env.reset(**{**row, "seed": environment_seed(row, 0)})
        while env.trace.used < env.trace.budget:
            belief = env.belief
            if not belief.known:
                env.observe()
                continue
            best = belief.number(belief.best) - 1
            if len(belief.options) > 1:
                unit = exploration_unit(env.scm, env.trace.budget)
                for name, step in ROUNDINGS.items():
                    k = read_choice(belief.options, unit, step)
                    agree[name].append(k == best)
                    lost[name].append(belief.best.score - belief.options[k].score)
            env.choose(option=best + 1)
    print(f"{args.split}: {len(agree[next(iter(ROUNDINGS))])} states with two options or more")
    for name in ROUNDINGS:
        print(f"  {name}: the rule's choice {np.mean(agree[name]):.3f}, one-step score lost a decision "
              f"{np.mean(lost[name]):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
