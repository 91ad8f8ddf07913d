"""Per-episode evaluation records: what `eval.jsonl` holds, how episodes are seeded, and the summary of a set of them.

An episode is one scored completion (bundled task) or one played conversation (tool agent) of one held-out row.
Its id is `(row, sample)`: the row's index in the held-out split and the sample's index among that row's
`samples_per_prompt` samples (greedy episodes: sample 0, no seed). A sampled episode draws its randomness from its
own seed, `episode_seed(heldout_seed, row, sample)`, so two models evaluated with the same `heldout_seed` see the same
prompts with the same random numbers (paired episodes, common random numbers), whatever the batch layout.

An episode whose score cannot be computed (a reward function returned None or NaN, the environment raised in
`get_reward`) is kept, with `score: null` and the reason; it is counted (`nan_count`) and left out of every mean,
never turned into 0.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from scipy import stats

from training.outputs import run_files
from training.outputs.jsonsafe import dumps_strict
from training.errors import BadInputError

logger = logging.getLogger(__name__)

EVAL_FILE = run_files.EVAL
SCORE = "score"  # the metric every episode has: the weighted reward, or the goal checker's
SUMMARY_FILE = run_files.EVAL_SUMMARY


class EpisodeFileError(BadInputError):
    """An `eval.jsonl` we cannot read; the message names the file and the line."""


# The count of a language model's episodes that ended at `max_completion_length` or the model's context
# (training/evaluation/tool_loop.py, `PlayedEpisode.at_limit`): cut before the model or the task ended them.
AT_LIMIT = "ended_at_limit"


def episode_id(row: int, sample: int) -> str:
    return f"{row}:{sample}"


@dataclass
class Episode:
    """One line of `eval.jsonl`.

    score: the weighted reward (bundled task) or the goal checker's reward (tool agent); None when unscorable.
    components: each reward function's unweighted value (None where it gave none).
    success: whether the task's success criterion held (None where the task defines none, or unscorable).
    metrics: the task's other per-episode measures (the causal task's regret, parent F1, information gain), each
        compared by `python -m training.compare --metric NAME` in the direction the task gives it.
    """

    row: int
    sample: int
    seed: int | None
    score: float | None
    components: dict[str, float | None] = field(default_factory=dict)
    success: bool | None = None
    unscorable_reason: str | None = None
    extra: dict = field(default_factory=dict)
    metrics: dict[str, float | None] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return episode_id(self.row, self.sample)

    def value(self, metric: str = SCORE) -> float | None:
        """`score` (metric "score") or one of `metrics`; None when the episode has no finite value for it."""
        return self.score if metric == SCORE else finite_or_none(self.metrics.get(metric))

    def as_json(self) -> dict:
        return {"episode_id": self.id, **asdict(self)}


def finite_or_none(value) -> float | None:
    """`value` as a float, or None when it is None, NaN or infinite."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def weighted_episode(
    row: int, sample: int, seed: int | None, values: dict[str, object], weights: dict[str, float]
) -> Episode:
    """An episode scored by reward functions: score = sum_i w_i r_i, unscorable when any r_i is None or non-finite
    (naming which)."""
    components = {name: finite_or_none(v) for name, v in values.items()}
    missing = [name for name, v in components.items() if v is None]
    if missing:
        bad = ", ".join(f"{name}={values[name]!r}" for name in missing)
        return Episode(row, sample, seed, None, components, unscorable_reason=f"reward function gave {bad}")
    score = sum(weights[name] * v for name, v in components.items())
    return Episode(row, sample, seed, score, components)


@dataclass(frozen=True)
class ScoreSummary:
    """n scored episodes, their mean, sample std (ddof=1), standard error, and the t-based 95% CI of the mean:
    mean +- t_{0.975, n-1} * std / sqrt(n). With n = 1 the std and CI are None; with n = 0 so is the mean."""

    n: int
    n_total: int
    nan_count: int
    mean: float | None
    std: float | None
    sem: float | None
    ci95: tuple[float, float] | None
    success_rate: float | None
    success_n: int

    def as_json(self) -> dict:
        return asdict(self)


def t_interval(values: np.ndarray, level: float = 0.95) -> tuple[float, float, float, tuple[float, float]] | None:
    """(mean, std, sem, (lo, hi)) of `values` with a Student-t interval at `level`; None for fewer than 2 values."""
    n = len(values)
    if n < 2:
        return None
    mean, std = float(np.mean(values)), float(np.std(values, ddof=1))
    sem = std / math.sqrt(n)
    half = float(stats.t.ppf(0.5 + level / 2, df=n - 1)) * sem
    return mean, std, sem, (mean - half, mean + half)


def summarize(episodes: Iterable[Episode]) -> ScoreSummary:
    """Summary statistics of the scored episodes; the unscorable ones are only counted."""
    episodes = list(episodes)
    scores = np.array([e.score for e in episodes if e.score is not None], dtype=float)
    successes = [e.success for e in episodes if e.score is not None and e.success is not None]
    interval = t_interval(scores)
    if interval is not None:
        mean, std, sem, ci = interval
    else:
        mean, std, sem, ci = (float(scores[0]) if len(scores) else None), None, None, None
    return ScoreSummary(
        n=len(scores),
        n_total=len(episodes),
        nan_count=len(episodes) - len(scores),
        mean=mean,
        std=std,
        sem=sem,
        ci95=ci,
        success_rate=(sum(successes) / len(successes)) if successes else None,
        success_n=len(successes),
    )


def write_episodes(out_dir: str | Path, episodes: list[Episode], meta: dict | None = None) -> Path:
    """Write `eval.jsonl` (one episode per line) and `eval_summary.json` (the summary plus `meta`: which model,
    task, seed...) into `out_dir`; every value is strict JSON (no NaN)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / EVAL_FILE, "w") as f:
        for episode in episodes:
            f.write(dumps_strict(episode.as_json()) + "\n")
    summary = summarize(episodes)
    if summary.nan_count:
        logger.warning("%s: %d of %d episodes unscorable (left out of the mean)", out_dir, summary.nan_count,
                       summary.n_total)
    (out_dir / SUMMARY_FILE).write_text(dumps_strict({**summary.as_json(), **(meta or {})}, indent=2))
    return out_dir / EVAL_FILE


def read_episodes(path: str | Path) -> list[Episode]:
    """Episodes from an `eval.jsonl` file (or a directory holding one); a malformed line is named."""
    path = Path(path)
    if path.is_dir():
        path = path / EVAL_FILE
    if not path.exists():
        raise EpisodeFileError(f"{path}: no such file (run `python -m training.evaluate` on it first?)")
    episodes = []
    seen: dict[str, int] = {}
    for line_no, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            episode = Episode(
                row=int(data["row"]),
                sample=int(data["sample"]),
                seed=data["seed"],
                score=finite_or_none(data["score"]),
                components=data.get("components") or {},
                success=data.get("success"),
                unscorable_reason=data.get("unscorable_reason"),
                extra=data.get("extra") or {},
                metrics={k: finite_or_none(v) for k, v in (data.get("metrics") or {}).items()},
            )
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
            raise EpisodeFileError(f"{path}: line {line_no} is not an episode record ({err!r})") from None
        if episode.id in seen:
            raise EpisodeFileError(f"{path}: episode {episode.id} appears twice (lines {seen[episode.id]} and {line_no})")
        seen[episode.id] = line_no
        episodes.append(episode)
    if not episodes:
        raise EpisodeFileError(f"{path}: no episodes")
    return episodes
