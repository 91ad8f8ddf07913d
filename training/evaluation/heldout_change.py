"""How far the final held-out evaluation moved from the step-0 one, paired per held-out row, with 95% intervals:
what the console, `run_summary.json` (`heldout_change`) and `reward_curve.png` report at the end of a run.

A held-out row (a prompt, an SCM) is the independent unit: its sampled episodes share it, so each row's metric is
first averaged over its episodes. The change is the mean over rows of (final - start), with its Student-t 95%
interval over the rows both evaluations scored. An interval that includes 0 is said in words: no detectable change.
The greedy-decoded reward (`greedy_reward`, from the evaluations' greedy episodes) follows the sampled metrics: GRPO
optimises the sampled policy, a user deploys it greedily, and the two can move by different amounts.

`python -m training.compare RUN_DIR --since_start [--step N]` (`run_changes`) rebuilds a finished run's comparison
from its `heldout/step-*/` files (the last step by default), with the metrics' directions its step-0 evaluation
recorded.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from training.analysis.stats import unit_means
from training.errors import BadInputError
from training.evaluation.episodes import EVAL_FILE, SCORE, SUMMARY_FILE, read_episodes, t_interval
from training.outputs.run_files import EVAL_GREEDY, HELDOUT, heldout_step_dir

DIRECTIONS = ("higher", "lower")


@dataclass(frozen=True)
class MetricChange:
    metric: str
    better: str  # "higher" or "lower"
    start: float
    final: float
    diff: float
    ci95: tuple[float, float] | None
    rows: int
    verdict: str

    def as_json(self) -> dict:
        return asdict(self)

    def short(self) -> str:
        """One line for a figure: metric, start -> final, the change with its interval, the verdict's first words."""
        interval = "n/a" if self.ci95 is None else f"[{self.ci95[0]:+.3f}, {self.ci95[1]:+.3f}]"
        return (f"{self.metric}: {self.start:.3f} -> {self.final:.3f} ({self.diff:+.3f}, 95% CI {interval}, "
                f"{self.rows} rows): {self.verdict.split(' (')[0]}")

    def sentence(self) -> str:
        interval = "n/a" if self.ci95 is None else f"[{self.ci95[0]:+.3f}, {self.ci95[1]:+.3f}]"
        return (f"{self.metric} ({self.better} is better): {self.start:.3f} -> {self.final:.3f}, change "
                f"{self.diff:+.3f}, 95% CI {interval} over {self.rows} held-out rows: {self.verdict}")


def row_means(records: Iterable[tuple[int, float | None]]) -> dict[int, float]:
    """Per row, the mean of its values; None (an unscorable episode) is left out, and a row with none left is
    absent."""
    kept = [(row, value) for row, value in records if value is not None]
    if not kept:
        return {}
    rows, means = unit_means([v for _, v in kept], [r for r, _ in kept])
    return dict(zip(rows, means.tolist(), strict=True))


def paired_change(metric: str, better: str, start: dict[int, float], final: dict[int, float]) -> MetricChange:
    """The change of `metric` over the rows present in both evaluations."""
    if better not in DIRECTIONS:
        raise ValueError(f"{metric}: better must be one of {DIRECTIONS}, got {better!r}")
    rows = sorted(set(start) & set(final))
    if not rows:
        raise ValueError(f"{metric}: the two held-out evaluations share no scored row")
    before, after = np.array([start[r] for r in rows]), np.array([final[r] for r in rows])
    d = after - before
    interval = t_interval(d)
    ci = None if interval is None else (float(interval[3][0]), float(interval[3][1]))
    if ci is None:
        verdict = "too few rows to tell"
    elif ci[0] <= 0 <= ci[1]:
        verdict = "no detectable change (the 95% interval includes 0)"
    else:
        up = ci[0] > 0
        verdict = "improved" if up == (better == "higher") else "got worse"
    return MetricChange(metric, better, float(before.mean()), float(after.mean()), float(d.mean()), ci, len(rows),
                        verdict)


def changes(start: dict[str, dict[int, float]], final: dict[str, dict[int, float]],
            directions: dict[str, str]) -> list[MetricChange]:
    """`paired_change` of every metric in `directions`, in its order."""
    return [paired_change(m, better, start[m], final[m]) for m, better in directions.items()]


def step_metrics(directory: Path, directions: dict[str, str]) -> tuple[dict[str, dict[int, float]], dict[str, str]]:
    """Per held-out row, the evaluation in `directory`: each metric in `directions` and the reward averaged over the
    row's sampled episodes, then `greedy_reward` over its greedy ones (when that evaluation played any), with which
    way each is better."""
    episodes = read_episodes(directory / EVAL_FILE)
    directions = {**directions, "reward": "higher"}  # the task's own first, as the docs show them
    metrics = {name: row_means((e.row, e.score if name == "reward" else e.value(name)) for e in episodes)
               for name in directions}
    greedy_file = directory / EVAL_GREEDY
    greedy = row_means((e.row, e.score) for e in read_episodes(greedy_file)) if greedy_file.exists() else {}
    if greedy:
        metrics["greedy_reward"], directions["greedy_reward"] = greedy, "higher"
    return metrics, directions


def changes_between(start_dir: Path, final_dir: Path, directions: dict[str, str]) -> list[MetricChange]:
    """The paired change of every metric both evaluations have, from the one in `start_dir` to the one in
    `final_dir`; empty when either left no episodes."""
    if not (start_dir / EVAL_FILE).exists() or not (final_dir / EVAL_FILE).exists():
        return []
    start, final = step_metrics(start_dir, directions), step_metrics(final_dir, directions)
    return changes(start[0], final[0], {m: better for m, better in final[1].items() if m in start[0]})


def run_changes(run_dir: str | Path, step: int | None = None) -> list[MetricChange]:
    """A finished run's end-of-run comparison, rebuilt from its held-out files: step 0 against `step` (default: the
    last evaluation), the metrics' directions read from step 0's `eval_summary.json`."""
    steps = sorted(int(p.name.removeprefix("step-")) for p in (Path(run_dir) / HELDOUT).glob("step-*") if p.is_dir())
    if not steps or steps[0] != 0:
        raise BadInputError(f"{run_dir}: no held-out evaluation at step 0 under {HELDOUT}/ (found steps {steps})")
    step = steps[-1] if step is None else step
    if step not in steps or step == 0:
        raise BadInputError(f"{run_dir}: --step {step}: the held-out evaluations are at steps {steps}")
    start = heldout_step_dir(run_dir, 0)
    recorded = json.loads((start / SUMMARY_FILE).read_text()).get("metric_directions", {})
    directions = {m: better for m, better in recorded.items() if m != SCORE}
    return changes_between(start, heldout_step_dir(run_dir, step), directions)

