"""The causal task, as one `Task` (training/run_setup/tasks.py): its four reward components by short name, its tiny
model and its shipped starting policy, its evaluation with the scripted baselines (offline and during training), and
its metric names. Listed in pyproject.toml's `strict_grpo.tasks` entry points."""

from __future__ import annotations

from pathlib import Path

from training.evaluation.eval_tasks import EvalTask
from training.run_setup.tasks import Task, register
from training.tasks.causal import compare_tables, evaluation_task
from training.tasks.causal.episode_traces import LOGGED_METRICS
from training.tasks.causal.episode_source import episode_source
from training.tasks.causal.policies.policy_catalogue import POLICIES
from training.tasks.causal.reward_components import COMPONENTS
from training.tasks.causal.reward_funcs import REWARD_FUNCS


def _resolve_tiny_model(cache: Path, seed: int) -> str:
    from training.tasks.causal.tiny_model import resolve_causal_model

    return resolve_causal_model(cache, seed)


def _resolve_starting_policy(cache: Path, seed: int) -> str:
    from training.tasks.causal.starting_policy import resolve_starting_policy

    return resolve_starting_policy(cache, seed)


register(Task(
    name="causal",
    description="find and reach the best intervention in a structural causal model, one tool call at a time",
    rewards={f.__name__: f for f in REWARD_FUNCS},  # optimization, structure, parent, exploration
    # starting_policy.STARTING_POLICY_NAME, not imported here: the tiny models' modules load when one is built
    tiny_models={"tiny-qwen3-causal": _resolve_tiny_model, "causal-starting-policy": _resolve_starting_policy},
    evaluation=EvalTask(
        name="causal",
        description="episodes on held-out SCMs: weighted reward, final regret, parent F1, information gain",
        applies=evaluation_task.applies,
        evaluate=evaluation_task.evaluate,
        priority=10,  # before the generic environment task, which would score goal success
        baselines={name: (lambda inputs, name=name: name) for name in POLICIES},
        metric_directions=dict(evaluation_task.METRIC_DIRECTIONS),
        heldout_values=evaluation_task.heldout_values,
        flags=evaluation_task.add_flags,
        read_flags=episode_source,
        with_flags=evaluation_task.with_flags,
        report=compare_tables.report,
    ),
    # the episodes' means and each reward component's, in every training-step log
    metrics=dict.fromkeys([*LOGGED_METRICS, *(f"rewards/{c}/{stat}" for c in COMPONENTS for stat in ("mean", "std"))],
                          "causal environment"),
))
