"""The tasks `training.evaluate` knows: one registry entry per task, so that a new task plugs in with one entry.

An `EvalTask` says when it applies to a spec (picked by priority when `--task` is not given), how it plays and
scores the held-out episodes of a policy, and which non-model baselines it can play instead of a model (e.g. random
or greedy policies). Its `evaluate(spec, policy)` returns the episodes (training/evaluation/episodes.py) and a dict of counts
for the summary. `policy` is `(model, tokenizer)` for a model, or whatever the task's baseline factory returned.

Registered here: `reward_functions` (held-out prompts scored by the recipe's reward functions: the bundled
larger-number task) and `environment` (multi-turn episodes in the recipe's `environment_factory`, scored by its goal
checker: the tool agent). A task registers itself with `register(EvalTask(...))` from its `registration.py`, which
`training.run_setup.task_plugins.load_tasks` imports.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from training.evaluation.episodes import SCORE, Episode
from training.evaluation.spec import EvalSpec, EvalSpecError
from training.run_setup.task_plugins import load_tasks


@dataclass(frozen=True)
class EvalTask:
    name: str
    description: str
    applies: Callable[[EvalSpec], bool]
    evaluate: Callable[[EvalSpec, object], tuple[list[Episode], dict]]
    priority: int = 0  # when several tasks apply to a spec, the highest priority wins
    baselines: dict[str, Callable[[EvalSpec], object]] = field(default_factory=dict)
    # the per-episode measures `training.compare` compares, and which way is better ("score" is every episode's)
    metric_directions: dict[str, str] = field(default_factory=lambda: {SCORE: "higher"})


TASKS: dict[str, EvalTask] = {}


def register(task: EvalTask) -> EvalTask:
    if task.name in TASKS:
        raise ValueError(f"evaluation task {task.name!r} is registered twice")
    TASKS[task.name] = task
    return task


def resolve_task(spec: EvalSpec, name: str | None = None) -> EvalTask:
    """The task named `name`, else the highest-priority task that applies to `spec`."""
    load_tasks()
    if name is not None:
        if name not in TASKS:
            raise EvalSpecError(f"--task {name!r} is not a known task; known: {sorted(TASKS)}")
        return TASKS[name]
    applicable = sorted((t for t in TASKS.values() if t.applies(spec)), key=lambda t: -t.priority)
    if not applicable:
        raise EvalSpecError(f"no evaluation task applies to {spec.source}; known: {sorted(TASKS)} (pass --task)")
    return applicable[0]


def heldout_rows(spec: EvalSpec) -> list[dict]:
    from training.run_setup.prompt_datasets import load_rows

    if not spec.heldout_file:
        raise EvalSpecError(f"{spec.source}: no heldout_file to evaluate on")
    return load_rows(spec.heldout_file)[: spec.max_rows]


def _evaluate_reward_functions(spec: EvalSpec, policy) -> tuple[list[Episode], dict]:
    from training.evaluation.episode_settings import EpisodeSettings
    from training.evaluation.heldout_reward import heldout_episodes
    from training.run_setup.recipe import import_reward

    model, tokenizer = policy
    funcs = [import_reward(name) for name in spec.reward_funcs]
    episodes = heldout_episodes(model, tokenizer, heldout_rows(spec), funcs, EpisodeSettings.from_spec(spec),
                                reward_weights=spec.reward_weights)
    return episodes, {}


def environment_rows(spec: EvalSpec) -> tuple[object, list[dict]]:
    """The recipe's environment factory and the held-out rows, set up as training sets them up (the system prompt in
    front, tool names checked, each row checked by the environment)."""
    from types import SimpleNamespace

    from training.run_setup.input_checks import check_environment_rows
    from training.run_setup.recipe import setup_environment

    script = SimpleNamespace(
        environment_factory=spec.environment_factory, system_prompt_file=spec.system_prompt_file,
        tool_names=spec.tool_names, train_file=spec.heldout_file, heldout_file=None,
    )
    factory, rows, _ = setup_environment(script, heldout_rows(spec), [])
    check_environment_rows(factory, {spec.heldout_file: rows})
    return factory, rows


def _evaluate_environment(spec: EvalSpec, policy) -> tuple[list[Episode], dict]:
    from training.evaluation.episode_settings import EpisodeSettings
    from training.evaluation.tool_episodes import TOOL_ERROR, environment_episodes

    model, tokenizer = policy
    factory, rows = environment_rows(spec)
    episodes, counts = environment_episodes(model, tokenizer, rows, factory, EpisodeSettings.from_spec(spec))
    tool_errors = counts.pop(TOOL_ERROR, 0)
    return episodes, {"malformed_calls": dict(counts), "tool_errors": tool_errors}


register(EvalTask(
    name="reward_functions",
    description="held-out prompts, one completion per episode, scored by the recipe's reward functions (weighted)",
    applies=lambda spec: spec.environment_factory is None,
    evaluate=_evaluate_reward_functions,
))
register(EvalTask(
    name="environment",
    description="multi-turn episodes in the recipe's environment, scored by its goal checker (success: reward 1)",
    applies=lambda spec: spec.environment_factory is not None,
    evaluate=_evaluate_environment,
))
