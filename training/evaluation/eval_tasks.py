"""What a held-out evaluation plays, one `EvalTask` each: `python -m training.evaluate` and the evaluation during
training (training/evaluation/trainer_heldout.py) go through the same entry, so a task plugs in with one.

An `EvalTask` says when it applies to an evaluation's environment (`applies(environment_factory)`: the class the
recipe or the trainer plays, None without one; picked by priority when `--task` is not given), how it plays and
scores a policy's held-out episodes (`evaluate(inputs, policy) -> (episodes, counts)`:
training/evaluation/episodes.py), which values the evaluation
during training logs from its sampled and greedy episodes (`heldout_values`), which non-model baselines it can
play instead of a model, and which flags of its own `python -m training.evaluate` takes (`flags`, `read_flags`,
`with_flags`: the causal task's episode flags, training/tasks/causal/episode_source.py), and the tables of its own
`python -m training.compare` prints over a comparison of its evaluations (`report`). `policy` is `(model, tokenizer)` for a model, or whatever
the task's baseline factory returned.

Two are generic and defined here: `reward_functions` (held-out prompts scored by the reward functions: the bundled
larger-number task) and `environment` (multi-turn episodes in the `environment_factory`, scored by its goal checker:
the tool agent). A task brings its own as its `Task`'s `evaluation` (training/run_setup/tasks.py), named as the task;
`evaluation_tasks()` is the generic ones and every task's.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from training.evaluation.episode_choice import EpisodeChoice
from training.evaluation.episodes import AT_LIMIT, SCORE, Episode, summarize
from training.evaluation.eval_inputs import EvalInputs
from training.evaluation.spec import EvalSpec, EvalSpecError
from training.registries import Registry
from training.run_setup import tasks

Played = tuple[list[Episode], dict]  # the episodes of one evaluate() call and its counts


def reward_values(sampled: Played, greedy: Played) -> dict[str, float]:
    """`heldout/reward` and `heldout/greedy_reward` (each left out when no episode could be scored) and
    `heldout/nan_count`, the sampled episodes that could not be scored; where the task counts them,
    `heldout/ended_at_limit`, the episodes (sampled and greedy) cut at the completion limit or the model's context."""
    values: dict[str, float] = {}
    for name, (episodes, _) in (("heldout/reward", sampled), ("heldout/greedy_reward", greedy)):
        mean = summarize(episodes).mean
        if mean is not None and math.isfinite(mean):
            values[name] = mean
    values["heldout/nan_count"] = float(summarize(sampled[0]).nan_count)
    at_limit = [counts[AT_LIMIT] for _, counts in (sampled, greedy) if AT_LIMIT in counts]
    if at_limit:
        values[f"heldout/{AT_LIMIT}"] = float(sum(at_limit))
    return values


@dataclass(frozen=True)
class EvalTask:
    name: str
    description: str
    applies: Callable[[object | None], bool]  # of the environment factory (None: the recipe has none)
    evaluate: Callable[[EvalInputs, object], Played]
    priority: int = 0  # when several tasks apply to the inputs, the highest priority wins
    baselines: dict[str, Callable[[EvalInputs], object]] = field(default_factory=dict)
    # the per-episode measures `training.compare` compares, and which way is better ("score" is every episode's)
    metric_directions: dict[str, str] = field(default_factory=lambda: {SCORE: "higher"})
    heldout_values: Callable[[Played, Played], dict[str, float]] = reward_values
    # the task's own flags of `python -m training.evaluate` (each defaulting to None), their value read from the parsed
    # flags, and the inputs that value asks for, with the episodes chosen and the spec (None: the spec's own)
    flags: Callable[[argparse._ArgumentGroup], None] | None = None
    read_flags: Callable[[argparse.Namespace], object] | None = None
    with_flags: Callable[[object, EpisodeChoice, EvalSpec], EvalInputs | None] | None = None
    # the task's own tables over `python -m training.compare`'s runs of its evaluations, given the baseline model
    report: Callable[[list, str | None], str] | None = None


def evaluation_tasks() -> Registry:
    """Every evaluation task by name (`training.registries.Registry`): the generic ones (`GENERIC`) and each
    registered task's own."""
    found = Registry("evaluation task", unknown=EvalSpecError)
    for task in [*GENERIC, *(t.evaluation for t in tasks.all() if t.evaluation is not None)]:
        if task.name in found:
            raise ValueError(f"evaluation task {task.name!r} is registered twice")
        found.register(task.name, task)
    return found


def resolve_task(environment_factory, source: str, name: str | None = None) -> EvalTask:
    """The task named `name`, else the highest-priority task that applies to the environment (None: no environment)
    of the evaluation of `source`."""
    known = evaluation_tasks()
    if name is not None:
        if name not in known:
            raise EvalSpecError(f"--task {name!r} is not a known task; known: {sorted(known)}")
        return known[name]
    applicable = sorted((t for t in known.values() if t.applies(environment_factory)), key=lambda t: -t.priority)
    if not applicable:
        raise EvalSpecError(f"no evaluation task applies to {source}; known: {sorted(known)} (pass --task)")
    return applicable[0]


def _evaluate_reward_functions(inputs: EvalInputs, policy) -> Played:
    from training.evaluation.heldout_reward import heldout_episodes

    model, tokenizer = policy
    episodes = heldout_episodes(model, tokenizer, inputs.rows, inputs.reward_funcs, inputs.settings,
                                reward_weights=inputs.reward_weights, progress=inputs.progress)
    return episodes, {}


def _evaluate_environment(inputs: EvalInputs, policy) -> Played:
    from training.evaluation.tool_episodes import TOOL_ERROR, environment_episodes

    model, tokenizer = policy
    episodes, counts = environment_episodes(model, tokenizer, inputs.rows, inputs.environment_factory,
                                            inputs.settings, progress=inputs.progress)
    tool_errors, at_limit = counts.pop(TOOL_ERROR, 0), counts.pop(AT_LIMIT, 0)
    return episodes, {"malformed_calls": dict(counts), "tool_errors": tool_errors, AT_LIMIT: at_limit}


def _environment_values(sampled: Played, greedy: Played) -> dict[str, float]:
    """The reward values, plus the malformed tool calls and the tools that raised, over sampled and greedy
    episodes (counted as in training)."""
    values = reward_values(sampled, greedy)
    values["heldout/malformed_calls"] = float(sum(sum(c["malformed_calls"].values()) for _, c in (sampled, greedy)))
    values["heldout/tool_errors"] = float(sum(c["tool_errors"] for _, c in (sampled, greedy)))
    return values


GENERIC = (
    EvalTask(
        name="reward_functions",
        description="held-out prompts, one completion per episode, scored by the reward functions (weighted)",
        applies=lambda environment_factory: environment_factory is None,
        evaluate=_evaluate_reward_functions,
    ),
    EvalTask(
        name="environment",
        description="multi-turn episodes in the environment, scored by its goal checker (success: reward 1)",
        applies=lambda environment_factory: environment_factory is not None,
        evaluate=_evaluate_environment,
        heldout_values=_environment_values,
    ),
)
