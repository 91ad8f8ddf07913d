"""What `training.compare` reads from a run or evaluation directory.

A directory needs `eval.jsonl` (training's final held-out evaluation, or `python -m training.evaluate`). Optional:
`run_summary.json` (its `heldout_history` gives the held-out curve and the convergence time), `metrics.jsonl` (the
train-reward curve), `workflow_run.json` (written by `training.workflow`: the run's `group` and `seed`).

Grouping: runs of one configuration with different seeds form a group. The group is `workflow_run.json`'s `group`
when present, else the directory name without a trailing `-seed<N>` (`grpo-seed2` -> `grpo`); a caller that knows
the model names it: `load_run(..., group=LABEL)`, or a `LABEL=GLOB` argument (`load_runs`: every directory the
pattern matches is one run of the model LABEL, a policy's training seeds).
"""

from __future__ import annotations

import glob
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from training.evaluation.episodes import Episode, read_episodes
from training.outputs import run_files
from training.errors import BadInputError

WORKFLOW_RUN_FILE = run_files.WORKFLOW_RUN
_SEED_SUFFIX = re.compile(r"-seed(\d+)$")
GLOB_CHARS = "*?["


class RunDirError(BadInputError):
    """A directory `training.compare` cannot use; the message names it and what is missing."""


@dataclass
class ComparedRun:
    name: str
    path: Path
    group: str
    seed: int | None
    episodes: list[Episode]
    heldout_history: list[tuple[int, float]] = field(default_factory=list)
    train_curve: list[tuple[int, float]] = field(default_factory=list)
    metric_directions: dict[str, str] = field(default_factory=dict)  # from eval_summary.json (which way is better)
    task: str | None = None  # the evaluation task that wrote the episodes (eval_summary.json's `task`)


NOT_A_DIRECTORY = ("not a directory; pass evaluation directories (with eval.jsonl and eval_summary.json, from "
                   "`python -m training.evaluate ... --out DIR`), not JSONL record files")


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise RunDirError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from None


def heldout_history(run_dir: Path) -> list[tuple[int, float]]:
    """[(step, heldout/reward)]: the periodic evaluations logged in `metrics.jsonl`, joined by `run_summary.json`'s
    `heldout_history` (the evaluations before and after training; a resumed run's summary holds only those since
    the resume, while metrics.jsonl keeps the earlier ones)."""
    points = dict(_metric_curve(run_dir, "heldout/reward"))
    summary_path = run_dir / run_files.RUN_SUMMARY
    if summary_path.exists():
        history = _read_json(summary_path).get("heldout_history") or []
        points.update({int(h["step"]): float(h["heldout/reward"]) for h in history
                       if h.get("heldout/reward") is not None})
    return sorted(points.items())


def _metric_curve(run_dir: Path, name: str) -> list[tuple[int, float]]:
    path = run_dir / run_files.METRICS
    if not path.exists():
        return []
    points = {}
    for line_no, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise RunDirError(f"{path}: line {line_no} is not valid JSON ({err.msg})") from None
        if row.get(name) is not None and "step" in row:
            points[int(row["step"])] = float(row[name])
    return sorted(points.items())


def _eval_summary(run_dir: Path) -> dict:
    path = run_dir / run_files.EVAL_SUMMARY
    return _read_json(path) if path.exists() else {}


def _metric_directions(run_dir: Path) -> dict[str, str]:
    """`eval_summary.json`'s `metric_directions` (an evaluation written before they were recorded: score only)."""
    return dict(_eval_summary(run_dir).get("metric_directions") or {"score": "higher"})


def load_run(spec: str, group: str | None = None) -> ComparedRun:
    """A run from `DIR` or `NAME=DIR` (the name shown in reports; default: the directory name); `group`, when given,
    is the model it belongs to, instead of the one read from the directory (module docstring)."""
    name, _, path = spec.rpartition("=") if "=" in spec else ("", "", spec)
    run_dir = Path(path)
    if run_dir.exists() and not run_dir.is_dir():
        raise RunDirError(f"{run_dir}: {NOT_A_DIRECTORY}")
    if not run_dir.is_dir():
        raise RunDirError(f"{run_dir}: no such directory")
    name = name or run_dir.name
    meta = _read_json(run_dir / WORKFLOW_RUN_FILE) if (run_dir / WORKFLOW_RUN_FILE).exists() else {}
    match = _SEED_SUFFIX.search(run_dir.name)
    group = group or meta.get("group") or (_SEED_SUFFIX.sub("", run_dir.name) if match else name)
    seed = meta.get("seed", int(match.group(1)) if match else None)
    return ComparedRun(
        name=name,
        path=run_dir,
        group=group,
        seed=seed,
        episodes=read_episodes(run_dir),
        heldout_history=heldout_history(run_dir),
        train_curve=_metric_curve(run_dir, "reward"),
        metric_directions=_metric_directions(run_dir),
        task=_eval_summary(run_dir).get("task"),
    )


def load_runs(specs: list[str], grouped: bool = False) -> list[ComparedRun]:
    """The runs of `training.compare`'s arguments: `DIR`, `NAME=DIR` (`load_run`), or `LABEL=GLOB` (a pattern with
    `*`, `?` or `[`; with `grouped`, any `LABEL=PATH`): every directory it matches is a run of the model LABEL, named
    by its path."""
    runs: list[ComparedRun] = []
    labels: list[str] = []
    for spec in specs:
        label, sep, pattern = spec.partition("=")
        if not sep or not (grouped or any(c in pattern for c in GLOB_CHARS)):
            runs.append(load_run(spec))
            continue
        if not label or not pattern:
            raise RunDirError(f"{spec!r}: expected LABEL=GLOB")
        if label in labels:
            raise RunDirError(f"model {label!r} given twice")
        labels.append(label)
        paths = sorted(glob.glob(pattern))
        if not paths:
            raise RunDirError(f"{spec!r} matches nothing")
        for path in paths:
            if not Path(path).is_dir():
                raise RunDirError(f"{path}: {NOT_A_DIRECTORY}")
            runs.append(replace(load_run(path, group=label), name=path))
    return runs
