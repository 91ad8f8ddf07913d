"""`JudgeReward`: any `GroupJudge` as a TRL reward function, `fn(prompts, completions, completion_ids, **kwargs)`.

Per call: gather the flat batch from every process, regroup by prompt, score each group exactly once (group i on
process i mod world size) with retries and a timeout, gather the scores and return this process's slice. A group
whose judge keeps failing gets NaN for every completion (TRL's reward aggregation is NaN-aware: a NaN component is
left out of the weighted sum, a row NaN in every component is unscorable and gets advantage 0); it never gets 0.
Above `max_failure_rate` in one batch, a strict run stops with the judge's raw output in the message.

Metrics go through TRL's `log_metric` kwarg, as global totals for the batch: `judge/calls` (one per group times
the judge's calls per group, e.g. K shuffles), `judge/failures`, `judge/retries`, `judge/groups`, plus the
judge's own per-group metrics averaged (`judge/position_consistency`).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from accelerate import PartialState
from accelerate.utils import gather_object

from judges.grouping import group_indices, local_slice, owner_of, prompt_key, scatter_group_scores, shared_columns
from judges.protocol import Group, GroupJudge, GroupScores, JudgeConfigError, JudgeError, completion_text

logger = logging.getLogger(__name__)

# kwargs TRL passes to reward functions that are not dataset columns
_TRAINER_KWARGS = ("trainer_state", "log_extra", "log_metric", "environments", "completion_ids")
# metrics that are counts: the trainer sums (not averages) them over the reward functions of one step
COUNT_METRICS = ("judge/calls", "judge/failures", "judge/retries", "judge/groups")


class JudgeFailureRateError(RuntimeError):
    """Too many groups of one batch could not be judged; the run stops (strict)."""


@dataclass
class JudgeSettings:
    """How the adapter treats a judge's failures. The trainer fills these from `StrictGRPOConfig` and the flags.

    Attributes:
        retries: extra attempts per group after a failed one.
        timeout_s: seconds one attempt may take (None: no limit). A timed-out attempt's thread cannot be killed; it
            is abandoned and the attempt counts as failed.
        max_failure_rate: fraction of a batch's groups allowed to fail before the strict run stops.
        strict: stop above `max_failure_rate` (True) or only log a warning with the raw output (False).
    """

    retries: int = 1
    timeout_s: float | None = None
    max_failure_rate: float = 0.5
    strict: bool = True

    def __post_init__(self):
        if self.retries < 0:
            raise ValueError(f"judge retries must be >= 0, got {self.retries}")
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise ValueError(f"judge timeout_s must be > 0 or None, got {self.timeout_s}")
        if not 0.0 <= self.max_failure_rate <= 1.0:
            raise ValueError(f"judge max_failure_rate must be in [0, 1], got {self.max_failure_rate}")


@dataclass
class GroupOutcome:
    """What scoring one group came to, after retries. `scores` is None when every attempt failed."""

    scores: list[float] | None
    calls: int = 0
    attempts: int = 0
    metrics: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    raw_output: str | None = None


def validate_scores(result: GroupScores | list[float], size: int) -> GroupScores:
    """A judge's answer as `GroupScores`, or `JudgeError` when it is not one finite score per completion."""
    scores = result if isinstance(result, GroupScores) else GroupScores(scores=list(result))
    if len(scores.scores) != size:
        raise JudgeError(f"judge returned {len(scores.scores)} scores for {size} completions", scores.raw_output)
    for i, value in enumerate(scores.scores):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise JudgeError(f"judge score {i} is {value!r}, not a finite number", scores.raw_output)
    return scores


def call_with_timeout(fn: Callable[[], Any], timeout_s: float | None, timeout_error: Callable[[str], Exception]
                      ) -> Any:
    """`fn()`, or `timeout_error(message)` raised after `timeout_s` seconds (None: no limit). `fn` runs in a daemon
    thread, which cannot be killed: a timed-out call is abandoned, and does not keep the process from exiting."""
    if timeout_s is None:
        return fn()
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as err:  # handed to the caller's thread
            outcome["error"] = err

    thread = threading.Thread(target=run, name="call-with-timeout", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise timeout_error(f"timed out after {timeout_s}s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def score_with_retries(judge: GroupJudge, group: Group, settings: JudgeSettings) -> GroupOutcome:
    """Score one group, retrying `JudgeError`s and other exceptions; `JudgeConfigError` is raised at once."""
    outcome = GroupOutcome(scores=None)
    for _ in range(settings.retries + 1):
        outcome.attempts += 1
        try:
            result = validate_scores(
                call_with_timeout(lambda: judge.score_group(group), settings.timeout_s,
                                  lambda message: JudgeError(f"judge {message}")), len(group.completions)
            )
        except JudgeConfigError:
            raise
        except JudgeError as err:
            outcome.calls += getattr(judge, "calls_per_group", 1)
            outcome.error, outcome.raw_output = f"{type(err).__name__}: {err}", err.raw_output
            continue
        except Exception as err:  # any other judge crash is a failed attempt, retried, then counted
            outcome.calls += getattr(judge, "calls_per_group", 1)
            outcome.error, outcome.raw_output = f"{type(err).__name__}: {err}", None
            logger.debug("judge attempt raised", exc_info=True)
            continue
        outcome.calls += result.calls
        outcome.scores, outcome.metrics, outcome.raw_output = list(result.scores), result.metrics, result.raw_output
        outcome.error = None
        return outcome
    return outcome


class JudgeReward:
    """A `GroupJudge` as a TRL reward function (a callable with a `__name__`, which names its reward metric).

    Args:
        judge: the judge, or None when `build` makes it on first use (so a recipe can name it before its settings
            are known; `configure` passes the recipe's `judge_kwargs[name]` to `build`).
        name: the reward function's name (TRL logs `rewards/<name>/mean`).
        build: `build(**kwargs) -> GroupJudge`, used when `judge` is None.
        settings: failure handling; the trainer replaces it through `configure`.
    """

    def __init__(
        self,
        judge: GroupJudge | None = None,
        *,
        name: str,
        build: Callable[..., GroupJudge] | None = None,
        settings: JudgeSettings | None = None,
    ):
        if judge is None and build is None:
            raise ValueError(f"JudgeReward {name!r} needs a judge or a build function")
        self.__name__ = name
        self.judge = judge
        self.build = build
        self.build_kwargs: dict[str, Any] = {}
        self.settings = settings or JudgeSettings()

    def __repr__(self) -> str:
        return f"JudgeReward({self.__name__!r}, judge={type(self.judge).__name__ if self.judge else 'unbuilt'})"

    def configure(self, settings: JudgeSettings, build_kwargs: dict[str, Any] | None = None) -> None:
        """Set failure handling and (re)build the judge from `build_kwargs` when they changed."""
        self.settings = settings
        build_kwargs = dict(build_kwargs or {})
        if self.build is not None and (self.judge is None or build_kwargs != self.build_kwargs):
            self.judge = self.build(**build_kwargs)
            self.build_kwargs = build_kwargs
        elif self.build is None and build_kwargs:
            raise JudgeConfigError(f"judge {self.__name__!r} was given kwargs {sorted(build_kwargs)} but has no build")

    def _judge(self) -> GroupJudge:
        if self.judge is None:
            self.configure(self.settings, self.build_kwargs)
        return self.judge

    def __call__(self, prompts: list, completions: list, completion_ids: list | None = None, **kwargs) -> list[float]:
        log_metric = kwargs.get("log_metric")
        columns = {k: v for k, v in kwargs.items() if k not in _TRAINER_KWARGS}
        local_rows = [
            {"key": prompt_key(p), "prompt": p, "text": completion_text(c), "columns": {k: v[i] for k, v in columns.items()}}
            for i, (p, c) in enumerate(zip(prompts, completions, strict=True))
        ]
        state = PartialState()
        rows = gather_object(local_rows)
        lengths = gather_object([len(local_rows)])
        groups = group_indices([row["key"] for row in rows])

        judge = self._judge()
        mine = []
        for g, indices in enumerate(groups):
            if owner_of(g, state.num_processes) != state.process_index:
                continue
            group = Group(
                prompt=rows[indices[0]]["prompt"],
                completions=[rows[i]["text"] for i in indices],
                columns=shared_columns([row["columns"] for row in rows], indices),
            )
            mine.append((g, score_with_retries(judge, group, self.settings)))
        outcomes = dict(gather_object(mine))
        if sorted(outcomes) != list(range(len(groups))):
            raise RuntimeError(f"judge {self.__name__!r}: groups scored {sorted(outcomes)}, expected {len(groups)}")
        ordered = [outcomes[g] for g in range(len(groups))]

        self._log(ordered, log_metric)
        self._check_failure_rate(ordered, groups, rows)
        scores = scatter_group_scores(groups, [o.scores for o in ordered], len(rows))
        return scores[local_slice(lengths, state.process_index)]

    def _log(self, outcomes: list[GroupOutcome], log_metric: Callable[[str, float], None] | None) -> None:
        counts = {
            "judge/calls": sum(o.calls for o in outcomes),
            "judge/failures": sum(o.scores is None for o in outcomes),
            "judge/retries": sum(o.attempts - 1 for o in outcomes),
            "judge/groups": len(outcomes),
        }
        averaged: dict[str, list[float]] = {}
        for outcome in outcomes:
            for name, value in outcome.metrics.items():
                averaged.setdefault(f"judge/{name}", []).append(value)
        values = {**counts, **{name: sum(v) / len(v) for name, v in averaged.items()}}
        values[f"judge/{self.__name__}/failures"] = counts["judge/failures"]
        if counts["judge/failures"]:
            first = next(o for o in outcomes if o.scores is None)
            logger.warning(
                "judge %r: %d of %d groups failed after retries (rewards NaN); first: %s; raw output: %r",
                self.__name__, counts["judge/failures"], len(outcomes), first.error, first.raw_output,
            )
        if log_metric is not None:
            for name, value in values.items():
                log_metric(name, float(value))

    def _check_failure_rate(self, outcomes: list[GroupOutcome], groups: list[list[int]], rows: list[dict]) -> None:
        failed = [(g, o) for g, o in enumerate(outcomes) if o.scores is None]
        rate = len(failed) / len(outcomes) if outcomes else 0.0
        if rate <= self.settings.max_failure_rate:
            return
        g, first = failed[0]
        message = (
            f"judge {self.__name__!r}: {len(failed)} of {len(outcomes)} groups failed ({rate:.0%} > "
            f"max_failure_rate {self.settings.max_failure_rate:.0%}). First failed group's prompt: "
            f"{rows[groups[g][0]]['prompt']!r}; error: {first.error}; judge raw output: {first.raw_output!r}"
        )
        if self.settings.strict:
            raise JudgeFailureRateError(message)
        logger.warning("%s (not stopping: strict is off)", message)
