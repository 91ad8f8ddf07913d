"""Held-out task success: multi-turn episodes in the environment, scored by its goal checker, one record each.

The episodes are played by the one tool loop (training/evaluation/tool_loop.py: as TRL's trainer samples them),
greedy or sampled as in training (`EpisodeSettings`): the policy's expected success, what GRPO optimises. A tool
that raises answers the model with the error, as in training, and is counted (`tool_error`); a goal checker that
returns None or NaN leaves its episode unscorable: counted and out of the mean, never scored 0.
"""

from __future__ import annotations

from collections import Counter

from training.evaluation.episode_settings import EpisodeSettings
from training.evaluation.episodes import AT_LIMIT, Episode, finite_or_none, summarize
from training.evaluation.tool_loop import play_episodes

# A tool that raised something other than a schema refusal (`ToolCallError`) is counted under this kind.
TOOL_ERROR = "tool_error"


def environment_episodes(model, tokenizer, rows: list[dict], env_factory, settings: EpisodeSettings,
                         success_threshold: float = 1.0, progress: str | None = None) -> tuple[list[Episode], Counter]:
    """One `Episode` per (row, sample) with the goal checker's reward as score (success: score >=
    `success_threshold`), and the malformed-call, tool-error and ended-at-limit counts seen on the way; `progress`:
    the bar's label."""
    episodes, counts = [], Counter()
    for played in play_episodes(model, tokenizer, rows, env_factory, settings, progress=progress):
        counts.update(played.malformed)
        counts[TOOL_ERROR] += played.tool_errors
        counts[AT_LIMIT] += played.at_limit
        reward = played.env.get_reward()
        score = finite_or_none(reward)
        episodes.append(Episode(
            played.row, played.sample, played.seed, score,
            success=None if score is None else score >= success_threshold,
            unscorable_reason=f"goal checker returned {reward!r}" if score is None else None,
        ))
    return episodes, +counts


def environment_success(*args, episodes: list | None = None, **kwargs) -> tuple[float, Counter]:
    """Mean goal-checker reward over the scorable episodes of `environment_episodes(...)` (NaN when none is
    scorable), and the malformed-call counts. The episodes are appended to `episodes` when it is given."""
    played, counts = environment_episodes(*args, **kwargs)
    if episodes is not None:
        episodes.extend(played)
    mean = summarize(played).mean
    return (float("nan") if mean is None else mean), counts
