"""How far 20 calls on the CBO toy graph can take a parent posterior: P(Z ∈ Pa(Y)) and P(X ∈ Pa(Y)) under the linear
surrogate, the additive one, and two scores that are told the mechanism's shape (not available to a real surrogate).

Each episode is played in the environment with the additive surrogate (`--policy` random or oracle, `--budget` calls
after `--initial_samples` observational rows, the baselines' paired seeds); its rows are then scored by:

* exact: the linear g-prior surrogate;
* additive: the additive surrogate (dictionary x, sin x, cos x, tanh x, x^2 / (1 + |x|));
* told the shapes: the same closed-form score with the basis {cos x, exp(-x / 20)} (Y's mechanism is
  cos(Z) - exp(-Z / 20): its two terms, weights free);
* told the mechanism: the basis {cos x - exp(-x / 20)} (one weight): the most any additive score could see.

The last two bound what a surrogate that must learn the shape from these rows can reach.

    python benchmarks/cbo_parents.py --policy random --budget 20 --episodes 20
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from training.evaluation.pairing_seeds import environment_seed, row_seed
from training.tasks.causal.env import make_causal_env
from training.tasks.causal.row_schema import DEFAULT_INITIAL_SAMPLES
from training.tasks.causal.policies.policy_catalogue import POLICIES
from training.tasks.causal.episode_source import load_scm_file
from training.tasks.causal.splits import scm_row
from training.tasks.causal.surrogates.additive_scores import (
    Basis,
    log_local_scores_rows,
)
from training.tasks.causal.surrogates.exact_surrogate import ExactSurrogate
from training.tasks.causal.surrogates.structure_posterior import parent_log_posterior

CBO = Path(__file__).resolve().parents[1] / "examples" / "scms" / "cbo_toy.yaml"


def _shapes(x):
    x = np.asarray(x, dtype=float)
    return np.stack([np.cos(x), np.exp(-x / 20.0)], axis=-1)


def _mechanism(x):
    x = np.asarray(x, dtype=float)
    return (np.cos(x) - np.exp(-x / 20.0))[..., None]


TOLD = {"told the shapes": Basis(_shapes, np.array([1.0, 1.0])), "told the mechanism": Basis(_mechanism, np.ones(1))}


def episode_data(policy_name: str, row: dict, k: int):
    env = make_causal_env("additive")()
    env.reset(**{**row, "seed": environment_seed(row, k)})
    policy, rng = POLICIES[policy_name](), np.random.default_rng(k)
    while env.trace.used < env.trace.budget:
        tool, args = policy(env, rng)
        getattr(env, tool)(**args)
    return env.scm, env.surrogate


def marginals(log_post: np.ndarray, index: dict[str, int]) -> dict[str, float]:
    p = np.exp(log_post)
    return {v: float(p[(np.arange(len(p)) >> i) & 1 == 1].sum()) for v, i in index.items()}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default="random", choices=sorted(POLICIES))
    parser.add_argument("--budget", type=int, default=20)
    parser.add_argument("--initial_samples", type=int, default=DEFAULT_INITIAL_SAMPLES)
    parser.add_argument("--episodes", type=int, default=20)
    args = parser.parse_args(argv)
    row = scm_row(load_scm_file(CBO), seed=row_seed("heldout", 0), budget=args.budget, initial_samples=args.initial_samples)
    results: dict[str, list[dict[str, float]]] = {k: [] for k in ("exact", "additive", *TOLD)}
    for k in range(args.episodes):
        scm, additive = episode_data(args.policy, row, k)
        index = {v: scm.index[v] for v in ("X", "Z")}
        results["additive"].append(additive.posterior().marginals)
        linear = ExactSurrogate(scm.variables, scm.target)
        linear.update(additive.samples, additive.intervened)
        results["exact"].append(linear.posterior().marginals)
        for name, basis in TOLD.items():
            log_beta = log_local_scores_rows(additive.samples, additive.intervened, basis)
            results[name].append(marginals(parent_log_posterior(log_beta[None], scm.index["Y"])[0][0], index))
    print(f"CBO toy graph, {args.policy} play, {args.budget} calls after {args.initial_samples} observational rows, "
          f"{args.episodes} episodes")
    print("| score | mean P(Z ∈ Pa(Y)) | mean P(X ∈ Pa(Y)) | episodes with P(Z) > 0.5 |")
    print("| --- | ---: | ---: | ---: |")
    for name, recs in results.items():
        pz, px = np.array([r["Z"] for r in recs]), np.array([r["X"] for r in recs])
        print(f"| {name} | {pz.mean():.2f} | {px.mean():.2f} | {(pz > 0.5).sum()} / {len(pz)} |")
    return results


if __name__ == "__main__":
    main()
