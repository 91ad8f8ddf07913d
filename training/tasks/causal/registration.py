"""The causal task's entries in the generic registries: its tiny model and its shipped starting policy, its held-out
evaluation during training (`training.run_setup.task_plugins`), and its evaluation task with the scripted baselines
(`training.evaluation.task_registry`). Listed in pyproject.toml's `strict_grpo.tasks` entry points."""

from __future__ import annotations

from pathlib import Path

from training.run_setup.task_plugins import TrainingEvaluator, register_tiny_model, register_training_evaluator


def _resolve_tiny_model(cache: Path, seed: int) -> str:
    from training.tasks.causal.tiny_model import resolve_causal_model

    return resolve_causal_model(cache, seed)


def _resolve_starting_policy(cache: Path, seed: int) -> str:
    from training.tasks.causal.starting_policy import resolve_starting_policy

    return resolve_starting_policy(cache, seed)


def _applies(trainer) -> bool:
    from training.tasks.causal.heldout_metrics import is_causal

    return is_causal(trainer)


def _evaluate(trainer, rows: list[dict], seed: int):
    from training.tasks.causal.evaluation_task import as_episode
    from training.tasks.causal.heldout_metrics import causal_heldout

    values, records = causal_heldout(trainer, rows, seed)
    sampled = [as_episode(r, seed, sampled=True) for r in records if r["decoding"] == "sampled"]
    greedy = [as_episode(r, seed, sampled=False) for r in records if r["decoding"] == "greedy"]
    return values, sampled, greedy


def _register_evaluation() -> None:
    from training.evaluation.task_registry import EvalTask, register
    from training.tasks.causal import evaluation_task
    from training.tasks.causal.policies.policy_catalogue import POLICIES

    register(EvalTask(
        name="causal",
        description="episodes on held-out SCMs: weighted reward, final regret, parent F1, information gain",
        applies=evaluation_task.applies,
        evaluate=evaluation_task.evaluate,
        priority=10,  # before the generic environment task, which would score goal success
        baselines={name: (lambda spec, name=name: name) for name in POLICIES},
        metric_directions=dict(evaluation_task.METRIC_DIRECTIONS),
    ))


def _task_metric_directions() -> dict[str, str]:
    """The causal metrics and their directions, as the evaluation task records them, without the score (the
    training-time change reports it as the reward)."""
    from training.evaluation.episodes import SCORE
    from training.tasks.causal.evaluation_task import METRIC_DIRECTIONS

    return {name: better for name, better in METRIC_DIRECTIONS.items() if name != SCORE}


def _register_metrics() -> None:
    """The causal metrics of every training-step log: the episodes' means and each reward component's."""
    from training.step.metric_names import register_task_metrics
    from training.tasks.causal.env import EPISODE_METRICS
    from training.tasks.causal.reward_components import COMPONENTS

    names = [*EPISODE_METRICS, *(f"rewards/{c}/{stat}" for c in COMPONENTS for stat in ("mean", "std"))]
    register_task_metrics(dict.fromkeys(names, "causal environment"))


register_tiny_model("tiny-qwen3-causal", _resolve_tiny_model)
register_tiny_model("causal-starting-policy", _resolve_starting_policy)  # starting_policy.STARTING_POLICY_NAME
register_training_evaluator(TrainingEvaluator(
    name="causal", applies=_applies, evaluate=_evaluate,
    metric_directions=_task_metric_directions(),
))
_register_evaluation()
_register_metrics()
