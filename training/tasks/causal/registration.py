"""The causal task's entries in the generic registries: its tiny model and its shipped starting policy
(`training.run_setup.task_plugins`), its evaluation task with the scripted baselines, used offline and during training
(`training.evaluation.task_registry`), and its metric names. Listed in pyproject.toml's `strict_grpo.tasks` entry
points."""

from __future__ import annotations

from pathlib import Path

from training.run_setup.task_plugins import register_tiny_model


def _resolve_tiny_model(cache: Path, seed: int) -> str:
    from training.tasks.causal.tiny_model import resolve_causal_model

    return resolve_causal_model(cache, seed)


def _resolve_starting_policy(cache: Path, seed: int) -> str:
    from training.tasks.causal.starting_policy import resolve_starting_policy

    return resolve_starting_policy(cache, seed)


def _register_evaluation() -> None:
    from training.evaluation.task_registry import EvalTask, register
    from training.tasks.causal import evaluate_options, evaluation_task
    from training.tasks.causal.policies.policy_catalogue import POLICIES

    register(EvalTask(
        name="causal",
        description="episodes on held-out SCMs: weighted reward, final regret, parent F1, information gain",
        applies=evaluation_task.applies,
        evaluate=evaluation_task.evaluate,
        priority=10,  # before the generic environment task, which would score goal success
        baselines={name: (lambda inputs, name=name: name) for name in POLICIES},
        metric_directions=dict(evaluation_task.METRIC_DIRECTIONS),
        heldout_values=evaluation_task.heldout_values,
        options=evaluate_options.add_options,
        with_options=evaluate_options.with_options,
    ))


def _register_metrics() -> None:
    """The causal metrics of every training-step log: the episodes' means and each reward component's."""
    from training.step.metric_names import register_task_metrics
    from training.tasks.causal.env import LOGGED_METRICS
    from training.tasks.causal.reward_components import COMPONENTS

    names = [*LOGGED_METRICS, *(f"rewards/{c}/{stat}" for c in COMPONENTS for stat in ("mean", "std"))]
    register_task_metrics(dict.fromkeys(names, "causal environment"))


register_tiny_model("tiny-qwen3-causal", _resolve_tiny_model)
register_tiny_model("causal-starting-policy", _resolve_starting_policy)  # starting_policy.STARTING_POLICY_NAME
_register_evaluation()
_register_metrics()
