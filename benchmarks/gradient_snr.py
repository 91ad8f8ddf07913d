"""Gradient signal to noise per advantage estimator: the cosine between the LoRA gradients of two independent halves
of a step's rollouts.

    python -m benchmarks.gradient_snr --batches 16 --out runs/snr/main
    python -m benchmarks.gradient_snr --train_file CBO_ROWS/train.jsonl --surrogate additive --out runs/snr/cbo
    python -m benchmarks.gradient_snr ... --adapter RUN_DIR/checkpoint-40     # later in a run

Each batch is one generation batch of the recipe (`per_device_train_batch_size` rollouts, `num_generations` a
group), sampled by the recipe's trainer through TRL's tool loop from the policy (the starting policy, or it with
`--adapter`), on the next rows of the train file. For every estimator of `benchmarks.credit_estimators` the batch's
advantages are set to that estimator's, and for `choice` they and the choice keys are `choice_credit`'s own (the
trainer runs with `call_credit` and `choice_credit`); the policy loss (the recipe's `loss_type`, with the choice term
for `choice`) is backpropagated over the first half of the groups and over the second half: two independent
estimates of the step's gradient. Their cosine
is high where the estimator's gradient is mostly signal, near 0 where it is mostly noise. The +branch estimators
pool each step group with `--branches` continuations sampled from its state (turns after the first). Per
estimator: the mean cosine over the batches with its 95% t interval, and the mean paired difference from `episode`.
Writes `OUT/snr.json` and prints the table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
import yaml
from scipy import stats

from benchmarks.causal_step_speed import build
from benchmarks.credit_estimators import ESTIMATORS, estimates, table_steps
from training.algorithms.turn_advantages import token_advantages
from training.evaluation.episode_settings import EpisodeSettings
from training.evaluation.pairing_seeds import seed_word
from training.evaluation.tool_loop import Branch, continue_branches
from training.features.step_credit import StepCredit
from training.run_setup.models import resolve_model_path
from training.run_setup.prompt_datasets import load_rows

BRANCH_SEED_KEY = 0x5B2


class Spy:
    """Stands in for the trainer's `step_credit` for one batch: keeps what it was handed, returns the outer term."""

    enabled = True

    def __init__(self, real):
        self.real, self.seen = real, None

    def state_readers(self, environments):
        return self.real.state_readers(environments)

    def value_samples(self, *args, **kwargs):
        return {}

    def advantages(self, outer, table, episode_tools, *rest):
        self.seen = (table, episode_tools)
        return outer


def batch_table(table, episode_tools, group_size: int) -> dict:
    keys = [[tools.turn_states.get(t) for t in range(table.rewards.size(1))] for tools in episode_tools]
    return {"rewards": table.rewards.double(), "exists": table.exists.double(), "refused": table.refused.double(),
            "group_ids": torch.arange(table.rewards.size(0)) // group_size, "keys": keys, "turns": table.turns}


def model_turns(completion: torch.Tensor, turns: torch.Tensor) -> list[list[int]]:
    """Each model turn's tokens of one rollout (its tool_mask runs)."""
    return [completion[turns == k].tolist() for k in range(int(turns.max().item()) + 1)]


def branch_values(trainer, rows, batch, t, args, index: int) -> dict[int, list[float]]:
    steps = table_steps(t)
    first = {}
    for i in range(steps.size(0)):
        for turn in range(1, steps.size(1)):
            if int(steps[i, turn]) >= 0:
                first.setdefault(int(steps[i, turn]), (i, turn))
    settings = EpisodeSettings.from_trainer(trainer, seed=args.seed)
    branches, owners = [], []
    for s, (i, turn) in first.items():
        prefix = model_turns(batch["completion_ids"][i], t["turns"][i])[:turn]
        for b in range(args.branches):
            branches.append(Branch(i, rows[i], 0, tuple(map(tuple, prefix)), seed_word(args.seed, BRANCH_SEED_KEY,
                                                                                       index, s, b)))
            owners.append((s, turn))
    model = trainer.accelerator.unwrap_model(trainer.model)
    played = continue_branches(model, trainer.processing_class, branches, trainer.environment_factories[None],
                               settings)
    names = trainer.reward_func_names
    weights = dict(zip(names, trainer.reward_weights.tolist(), strict=True))
    out: dict[int, list[float]] = {}
    for (s, turn), ep in zip(owners, played, strict=True):
        tools = ep.episode_tools
        total = sum(sum(w * terms[n] for n, w in weights.items())
                    for u, terms in zip(tools.forwarded_turns, ep.env.call_rewards, strict=True) if u >= turn)
        out.setdefault(s, []).append(float(total))
    return out


def half_gradient(trainer, batch: dict, rows: slice) -> torch.Tensor:
    half = {k: (v[rows] if isinstance(v, torch.Tensor) and v.dim() > 0 and v.size(0) == batch["completion_ids"].size(0)
                else v) for k, v in batch.items()}
    trainer.model.zero_grad()
    trainer._compute_loss(trainer.model, half).backward()
    return torch.cat([p.grad.flatten() for p in trainer.model.parameters() if p.requires_grad and p.grad is not None])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", default="recipes/causal_cpu.yaml")
    parser.add_argument("--train_file", default=None, help="rows to sample from (default: the recipe's)")
    parser.add_argument("--surrogate", default="exact")
    parser.add_argument("--adapter", default=None, help="a LoRA adapter directory (a run's checkpoint)")
    parser.add_argument("--batches", type=int, default=16)
    parser.add_argument("--branches", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    started = time.time()
    recipe = yaml.safe_load(Path(args.recipe).read_text())
    recipe["train_file"] = args.train_file or recipe["train_file"]
    model = resolve_model_path(recipe["model_name_or_path"], seed=recipe.get("model_seed", 0))
    trainer = build({**recipe, "seed": args.seed}, model, args.surrogate, str(Path(args.out) / "trainer"),
                    call_credit=True, choice_credit=True,
                    **{k: recipe[k] for k in ("loss_type", "max_turn_tokens") if k in recipe})
    if args.adapter:
        trainer.model.load_adapter(args.adapter, adapter_name="default", is_trainable=True)
    spy = trainer.step_credit = Spy(StepCredit(True, 1.0))  # the state keys, and the table the estimators read
    rows = load_rows(recipe["train_file"])
    per_batch = trainer.args.per_device_train_batch_size // trainer.num_generations
    cosines = {e: [] for e in (*ESTIMATORS, "choice")}
    for b in range(args.batches):
        chosen = [rows[(b * per_batch + g) % len(rows)] for g in range(per_batch)]
        inputs = [dict(r) for r in chosen for _ in range(trainer.num_generations)]
        trainer.model.train()
        torch.manual_seed(seed_word(args.seed, b))
        batch = trainer._generate_and_score_completions(inputs)  # the choice estimator's: call credit, choice keys
        t = batch_table(*spy.seen, trainer.num_generations)
        adv = estimates(t, branch_values(trainer, inputs, batch, t, args, b))
        half = len(inputs) // 2
        plain = {**batch, "choice_tokens": torch.full_like(batch["choice_tokens"], -1)}
        for e in cosines:
            step = batch if e == "choice" else {**plain, "advantages": token_advantages(adv[e].float(), t["turns"])}
            first, second = half_gradient(trainer, step, slice(0, half)), half_gradient(trainer, step,
                                                                                       slice(half, None))
            cosines[e].append(float(torch.nn.functional.cosine_similarity(first, second, dim=0)))
        print(f"batch {b}: " + ", ".join(f"{e} {cosines[e][-1]:+.3f}" for e in cosines), flush=True)
    result = {"command": "python -m benchmarks.gradient_snr " + " ".join(argv or sys.argv[1:]),
              "seconds": round(time.time() - started, 1), "cosines": cosines, "estimators": summary(cosines)}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "snr.json").write_text(json.dumps(result, indent=2))
    print(f"{'estimator':<20} {'mean cosine [95% CI]':>26} {'minus episode [95% CI]':>28}")
    for e, r in result["estimators"].items():
        print(f"{e:<20} {r['mean']:+.3f} [{r['ci'][0]:+.3f}, {r['ci'][1]:+.3f}]   "
              f"{r['vs_episode']:+.3f} [{r['vs_episode_ci'][0]:+.3f}, {r['vs_episode_ci'][1]:+.3f}]")
    return 0


def summary(cosines: dict[str, list[float]]) -> dict:
    out = {}
    base = np.array(cosines["episode"])
    for e, values in cosines.items():
        v = np.array(values)
        diff = v - base
        out[e] = {"mean": float(v.mean()), "ci": _interval(v), "vs_episode": float(diff.mean()),
                  "vs_episode_ci": _interval(diff)}
    return out


def _interval(v: np.ndarray) -> list[float]:
    if len(v) < 2 or np.std(v) == 0:
        return [float(v.mean()), float(v.mean())]
    half = stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v))
    return [float(v.mean() - half), float(v.mean() + half)]


if __name__ == "__main__":
    sys.exit(main())
