"""Held-out causal metrics of a trainer's current policy: the causal task's training evaluator (registration.py), which
`training/evaluation/trainer_heldout.py` runs when the trainer's environment is a `CausalEnv` (`is_causal`), at the
same points as every held-out evaluation (before and after training, every `heldout_eval_steps`).

`causal_heldout` plays `heldout_samples_per_prompt` sampled episodes per held-out row (the training temperature,
top-p and top-k, each episode from its own stream under `seed`, environment seeds paired across evaluations and policies:
training.tasks.causal.policy_episodes) and one greedy episode per row, with the trainer's chat template, tools and length
limits. It returns the means, `heldout/reward` (the weighted reward with the run's own weights, what GRPO optimises),
`heldout/regret`, `heldout/parent_f1`, `heldout/info_gain`, `heldout/invalid_calls`, `heldout/malformed_calls`, each
component `heldout/<component>`, and the greedy episodes' `heldout/greedy_reward`, `heldout/greedy_regret`,
`heldout/greedy_parent_f1`, `heldout/greedy_info_gain`; and the episodes' records (`decoding` sampled or greedy),
which become the episodes of `eval.jsonl` and `eval_greedy.jsonl` (`evaluation_task.as_episode`).
"""

from __future__ import annotations

from training.evaluation.episode_settings import EpisodeSettings
from training.step.distributed import full_weights_for_generation
from training.tasks.causal.env import CausalEnv
from training.tasks.causal.policy_episodes import lm_episodes, mean_metrics
from training.tasks.causal.reward_components import COMPONENTS

SAMPLED_KEYS = ("reward", "regret", "parent_f1", "info_gain", "invalid_calls", "malformed_calls", *COMPONENTS)
GREEDY_KEYS = ("reward", "regret", "parent_f1", "info_gain")


def is_causal(trainer) -> bool:
    """Whether the trainer's (single) environment is a `CausalEnv`."""
    factories = trainer.environment_factories
    return bool(factories) and None in factories and isinstance(factories[None], type) and issubclass(
        factories[None], CausalEnv)


def run_weights(trainer) -> dict[str, float]:
    """The run's weight of each causal component (0 for a component the run does not use)."""
    weights = dict(zip(trainer.reward_func_names, trainer.reward_weights.tolist(), strict=True))
    return {name: float(weights.get(name, 0.0)) for name in COMPONENTS}


def causal_heldout(trainer, rows: list[dict] | None = None, seed: int | None = None) -> tuple[dict[str, float], list[dict]]:
    """The held-out means and the episodes' records, on `rows` (default: the trainer's held-out rows) from torch
    seed `seed` (default: the evaluation's, `heldout_seed`)."""
    if not is_causal(trainer):
        raise ValueError(f"causal_heldout needs a CausalEnv environment_factory, got {trainer.environment_factories}")
    rows = (trainer.heldout.rows if rows is None else rows)[: trainer.args.heldout_max_samples]
    if not rows:
        raise ValueError("causal_heldout: the trainer has no held-out rows")
    model = trainer.accelerator.unwrap_model(trainer.model)
    settings = EpisodeSettings.from_trainer(trainer, trainer.heldout.seed if seed is None else seed)
    common = dict(env_factory=trainer.environment_factories[None], weights=run_weights(trainer), policy="trained")
    with full_weights_for_generation(model, trainer.accelerator):
        sampled = lm_episodes(model, trainer.processing_class, rows, settings, **common)
        greedy = lm_episodes(model, trainer.processing_class, rows, settings.greedy(), **common)
    values = {f"heldout/{k}": v for k, v in mean_metrics(sampled).items() if k in SAMPLED_KEYS}
    values.update({f"heldout/greedy_{k}": v for k, v in mean_metrics(greedy).items() if k in GREEDY_KEYS})
    records = [{**r, "decoding": "sampled"} for r in sampled] + [{**r, "decoding": "greedy"} for r in greedy]
    return values, records
