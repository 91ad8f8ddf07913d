"""A causal row, what `CausalEnv.reset` starts an episode from, and the episode it sets (`RowEpisode`): its SCM, seed,
budget, initial observational samples and in-degree bound.

Rows (`training.tasks.causal.splits`): `scm_json` (the SCM as JSON text: a rows file keeps its SCMs), `seed` (seeds the
episode's sampling: the same row gives the same samples and the same posterior trajectory for the same calls; a GRPO
group shares a row and so shares its noise, common random numbers across the group), optional `budget` (calls,
default `DEFAULT_BUDGET`), `initial_samples` (observational rows the surrogate sees at reset, default
`DEFAULT_INITIAL_SAMPLES`), `target` (checked against the SCM's) and `max_parents` (the exact surrogate's in-degree
bound).

In a process a row names its SCM (`scm_id`, the digest of its JSON text) and the SCM is held as one object by that
name: parsed from the text once, when the rows reach an environment (`named_rows`; `CausalEnv.prepare_rows`, which
training and every evaluation apply) or when a command writes a row (its prompt, `splits.causal_prompt`), so an
episode reads its SCM by name, never by parsing text; a row without a name (one handed to `reset` directly) is parsed
and held on first use. The object held is the SCM the text describes (what a row's episodes have always played: a generator's own mechanism
may compute in another floating-point order than its written expression). Its optimum and reward normaliser
(nonlinear SCMs: a numerical search of about a second) are cached on it and shared by every episode: treat it as
read-only.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import numpy as np

from training.tasks.causal.scm.scm import SCM, SCMError
from training.tasks.causal.scm.scm_checks import check_scm

# The one default of every row, command and baseline (training.tasks.causal.splits, training.tasks.causal.scm_rows): 6 calls
# after 10 observational rows. A 6-call episode of the tiny Qwen3 is ~600 tokens; 20 would not fit its 1024-token
# context, and shorter episodes give each call's credit a clearer signal.
DEFAULT_BUDGET = 6
DEFAULT_INITIAL_SAMPLES = 10
FIELDS = ("scm_json", "scm_id", "seed", "budget", "initial_samples", "target", "max_parents")  # what an episode reads
HELD: dict[str, SCM] = {}  # the SCMs rows name, by `scm_id`


class EpisodeError(ValueError):
    """A row the environment cannot start an episode from; the message names the field."""


@dataclass(frozen=True)
class RowEpisode:
    """The episode a row sets."""

    scm: SCM
    scm_id: str
    seed: int
    budget: int
    initial_samples: int
    max_parents: int | None


def scm_id(scm_json: str) -> str:
    """The name of the SCM of this JSON text."""
    return hashlib.sha256(scm_json.encode()).hexdigest()[:16]


def scm_from_json(text: str) -> SCM:
    """The SCM of a row's JSON text: the one held under its name, else parsed once and held."""
    name = scm_id(text)
    if name not in HELD:
        HELD[name] = SCM.from_json(text)
    return HELD[name]


def named_rows(rows: list[dict]) -> list[dict]:
    """The rows, each naming its SCM (`scm_id`), every SCM held (each text parsed once a process)."""
    names = {}
    for text in dict.fromkeys(r["scm_json"] for r in rows if isinstance(r.get("scm_json"), str)):
        try:
            _checked_scm(text)
        except EpisodeError:
            continue  # left unnamed: the environment's row check names the file and row
        names[text] = scm_id(text)
    return [{**r, "scm_id": names[r["scm_json"]]} if r.get("scm_json") in names else r for r in rows]


def row_episode(row: dict) -> RowEpisode:
    """The episode of a row's fields (`FIELDS`; others are ignored), or `EpisodeError` naming the field."""
    scm_json, seed, target = row.get("scm_json"), row.get("seed"), row.get("target")
    if scm_json is None:
        raise EpisodeError(f"causal row needs 'scm_json' (columns: {sorted({'seed', *_other_columns(row)})})")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise EpisodeError(f"causal row needs an int 'seed' for the episode's sampling, got {seed!r}")
    budget = DEFAULT_BUDGET if row.get("budget") is None else row["budget"]
    initial = DEFAULT_INITIAL_SAMPLES if row.get("initial_samples") is None else row["initial_samples"]
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise EpisodeError(f"row 'budget' must be an int >= 1, got {budget!r}")
    if isinstance(initial, bool) or not isinstance(initial, int) or initial < 0:
        raise EpisodeError(f"row 'initial_samples' must be an int >= 0, got {initial!r}")
    if not isinstance(scm_json, str):
        raise EpisodeError(f"row 'scm_json' must be the SCM as JSON text, got a {type(scm_json).__name__}")
    name = row.get("scm_id")
    scm = HELD[name] if name in HELD else _checked_scm(scm_json)
    if target is not None and target != scm.target:
        raise EpisodeError(f"row 'target' {target!r} differs from the SCM's target {scm.target!r}")
    return RowEpisode(scm, name if name in HELD else scm_id(scm_json), int(seed), budget, initial,
                      row.get("max_parents"))


def check_row(row: dict) -> SCM:
    """Everything `CausalEnv.reset` would refuse about `row`'s fields and SCM, before any work: its fields, and its SCM
    built, sampled once at the ends of every range and its optimum computed (`scm_checks`; cached, so the episodes
    reuse it). Returns the SCM; raises `EpisodeError`."""
    scm = row_episode(row).scm
    try:
        check_scm(scm)
    except SCMError as err:
        raise EpisodeError(f"scm_json: {err}") from None
    return scm


def _other_columns(row: dict) -> list[str]:
    return [k for k in row if k not in FIELDS]


def _checked_scm(scm_json: str) -> SCM:
    """`scm_from_json`, its failures as `EpisodeError`s naming the field."""
    try:
        return scm_from_json(scm_json)
    except json.JSONDecodeError as err:
        raise EpisodeError(f"row 'scm_json' is not valid JSON ({err.msg} at character {err.pos})") from None
    except (ValueError, KeyError, TypeError, AttributeError) as err:  # SCMError, ExpressionError, a malformed spec
        raise EpisodeError(f"row 'scm_json' is not an SCM we can build: {type(err).__name__}: {err}") from None
