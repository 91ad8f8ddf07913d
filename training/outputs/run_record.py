"""What a run keeps across its attempts (killed, stopped, resumed): `output_dir/run_record.json`.

- `attempts`: one entry per start of `training.train` in this output_dir: when it started, from which checkpoint, its
  wall time up to its last sign of life (a logged step, a save, a phase boundary), the step it reached, and how it
  ended (`completed`, the error that stopped it, or `interrupted` when it never said: killed, out of memory), and
  `health_stop`: the message of the strict health check that stopped it (a `RunHealthError` or a subclass), if one did.
- `heldout_history`: every held-out evaluation with its optimizer step (step 0: before training). On resume from
  checkpoint-N, evaluations after step N are dropped: the resumed attempt evaluates those steps again.
- `heldout_before`, `heldout_after`: the evaluations before training and after the last step (`after` carries its
  step, so a finished run resumed again reuses it), each written together with the history that holds it.
- `recipe`: the resolved configuration of the latest attempt; each attempt's `recipe_changes` lists the fields it
  changed on resume (training/run_setup/run_recipe.py), with their old and new values.

Rewritten atomically at every change, so a kill never leaves it torn. A fresh start (no `--resume_from_checkpoint`)
begins a new record.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from training.outputs import run_files
from training.outputs.atomic import atomic_write_text

logger = logging.getLogger(__name__)

RECORD_FILE = run_files.RUN_RECORD
INTERRUPTED = "interrupted: no clean exit (killed, or lost its machine) after its last sign of life"
LEGACY_HEALTH_STOP = "error: RunHealthError: "  # how records written before `health_stop` name such an attempt


def _health_stop(attempt: dict) -> str | None:
    """What stopped `attempt` if a strict health check (a `RunHealthError`, its subclasses included) did, else None."""
    if attempt.get("health_stop"):
        return attempt["health_stop"]
    ended = str(attempt.get("ended") or "")
    return ended.removeprefix(LEGACY_HEALTH_STOP) if ended.startswith(LEGACY_HEALTH_STOP) else None


def _attempts(output_dir: str | Path) -> list[dict]:
    path = Path(output_dir) / RECORD_FILE
    return json.loads(path.read_text()).get("attempts", []) if path.exists() else []


def health_stops(output_dir: str | Path) -> list[str]:
    """Every attempt of the run in `output_dir` that a strict health check stopped: 'step N: <message>' each."""
    return [f"step {a.get('last_step')}: {_health_stop(a)}" for a in _attempts(output_dir) if _health_stop(a)]


def ended_on_health_stop(output_dir: str | Path) -> bool:
    """Whether the run's last attempt was stopped by a strict health check (resuming it would go on past the check)."""
    attempts = _attempts(output_dir)
    return bool(attempts) and _health_stop(attempts[-1]) is not None


class RunRecord:
    """See the module docstring. `enabled=False` (processes other than the main one) keeps it in memory only."""

    def __init__(self, output_dir: str | Path, data: dict, enabled: bool = True):
        self.path = Path(output_dir) / RECORD_FILE
        self.data = data
        self.enabled = enabled
        self._start = time.monotonic()

    @classmethod
    def begin(
        cls,
        output_dir: str | Path,
        resume: bool,
        resume_step: int,
        resumed_from: str | None,
        started_monotonic: float,
        enabled: bool = True,
    ) -> RunRecord:
        """Load the record (on resume) or start a new one, close the attempts that never said how they ended, drop
        held-out evaluations after `resume_step`, and open this attempt."""
        path = Path(output_dir) / RECORD_FILE
        data = {"attempts": [], "heldout_history": [], "heldout_before": None, "heldout_after": None}
        if resume and path.exists():
            try:
                data.update(json.loads(path.read_text()))
            except (json.JSONDecodeError, UnicodeDecodeError) as err:  # only an older, non-atomic writer tears it
                logger.warning("%s is unreadable (%s): the history of earlier attempts is lost", path, err)
        for attempt in data["attempts"]:
            if attempt["ended"] is None:
                attempt["ended"] = INTERRUPTED
        dropped = [h["step"] for h in data["heldout_history"] if h["step"] > resume_step]
        if dropped:
            logger.info("Held-out evaluations at steps %s come after step %d: evaluated again", dropped, resume_step)
        data["heldout_history"] = [h for h in data["heldout_history"] if h["step"] <= resume_step]
        after = data.get("heldout_after")
        if after is not None and after["step"] > resume_step:
            data["heldout_after"] = None
        data["attempts"].append(
            {
                "attempt": len(data["attempts"]) + 1,
                "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "resumed_from": resumed_from,
                "start_step": resume_step,
                "last_step": resume_step,
                "wall_time_s": 0.0,
                "ended": None,
            }
        )
        record = cls(output_dir, data, enabled)
        record._start = started_monotonic
        record.heartbeat()
        return record

    @property
    def current(self) -> dict:
        return self.data["attempts"][-1]

    def heartbeat(self, step: int | None = None, heldout_history: list[dict] | None = None) -> None:
        """This attempt is alive: update its wall time (and step, and the held-out history when given)."""
        self.current["wall_time_s"] = round(time.monotonic() - self._start, 3)
        if step is not None:
            self.current["last_step"] = step
        if heldout_history is not None:
            self.data["heldout_history"] = [dict(h) for h in heldout_history]
        self.save()

    def set_heldout(self, which: str, step: int, values: dict, heldout_history: list[dict]) -> None:
        """Record the `before` or `after` evaluation together with the held-out history that holds it, in one write:
        a kill between the two would leave an evaluation a resume reuses but a history without it."""
        self.data[f"heldout_{which}"] = {"step": step, **values}
        self.data["heldout_history"] = [dict(h) for h in heldout_history]
        self.save()

    def set_recipe(self, recipe: dict, changes: dict[str, dict]) -> None:
        """This attempt's resolved recipe (training/run_setup/run_recipe.py) and its changes from the previous attempt's."""
        self.data["recipe"] = recipe
        self.current["recipe_changes"] = changes
        self.save()

    def end(self, how: str, step: int | None = None, heldout_history: list[dict] | None = None,
            health_stop: str | None = None) -> None:
        """Close this attempt: `how` it ended, and, when a strict health check stopped it, the check's message (the
        workflow never resumes such a run: training.workflow)."""
        self.current["ended"] = how
        self.current["health_stop"] = health_stop
        self.heartbeat(step, heldout_history)

    @property
    def heldout_history(self) -> list[dict]:
        return self.data["heldout_history"]

    @property
    def total_wall_time_s(self) -> float:
        return round(sum(a["wall_time_s"] for a in self.data["attempts"]), 3)

    def save(self) -> None:
        if self.enabled:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.path, json.dumps(self.data, indent=1, sort_keys=True, default=str))
