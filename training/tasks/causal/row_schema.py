"""A causal row, what `CausalEnv.reset` starts an episode from, and the episode it sets: its SCM, budget and initial
observational samples.

Rows (`training.tasks.causal.splits`): `scm_json`, `seed` (seeds the episode's sampling: the same row gives the same
samples and the same posterior trajectory for the same calls; a GRPO group shares a row and so shares its noise,
common random numbers across the group), optional `budget` (calls, default `DEFAULT_BUDGET`), `initial_samples`
(observational rows the surrogate sees at reset, default `DEFAULT_INITIAL_SAMPLES`), `target` (checked against the
SCM's) and `max_parents` (the exact surrogate's in-degree bound).
"""

from __future__ import annotations

import json
from functools import lru_cache

import numpy as np

from training.tasks.causal.scm.scm import SCM

# The one default of every row, command and baseline (training.tasks.causal.splits, training.tasks.causal.scm_rows): 6 calls
# after 10 observational rows. A 6-call episode of the tiny Qwen3 is ~600 tokens; 20 would not fit its 1024-token
# context, and shorter episodes give each call's credit a clearer signal.
DEFAULT_BUDGET = 6
DEFAULT_INITIAL_SAMPLES = 10


class EpisodeError(ValueError):
    """A row the environment cannot start an episode from; the message names the field."""


def episode_settings(scm_json, seed, budget, initial_samples, target, row: dict) -> tuple[SCM, int, int]:
    """(SCM, budget, initial samples) of a row's fields, or `EpisodeError` naming the field."""
    if scm_json is None:
        raise EpisodeError(f"causal row needs 'scm_json' (columns: {sorted(['seed', *row])})")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise EpisodeError(f"causal row needs an int 'seed' for the episode's sampling, got {seed!r}")
    budget = DEFAULT_BUDGET if budget is None else budget
    initial = DEFAULT_INITIAL_SAMPLES if initial_samples is None else initial_samples
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise EpisodeError(f"row 'budget' must be an int >= 1, got {budget!r}")
    if isinstance(initial, bool) or not isinstance(initial, int) or initial < 0:
        raise EpisodeError(f"row 'initial_samples' must be an int >= 0, got {initial!r}")
    if not isinstance(scm_json, str):
        raise EpisodeError(f"row 'scm_json' must be the SCM as JSON text, got a {type(scm_json).__name__}")
    try:
        scm = scm_from_json(scm_json)
    except json.JSONDecodeError as err:
        raise EpisodeError(f"row 'scm_json' is not valid JSON ({err.msg} at character {err.pos})") from None
    except (ValueError, KeyError, TypeError, AttributeError) as err:  # SCMError, ExpressionError, a malformed spec
        raise EpisodeError(f"row 'scm_json' is not an SCM we can build: {type(err).__name__}: {err}") from None
    if target is not None and target != scm.target:
        raise EpisodeError(f"row 'target' {target!r} differs from the SCM's target {scm.target!r}")
    return scm, budget, initial


@lru_cache(maxsize=1024)
def scm_from_json(text: str) -> SCM:
    """The SCM of a row, parsed once per process: its optimum and reward normaliser (nonlinear SCMs: a numerical
    search of about a second) are cached on the object and shared by every episode on that row. Treat as read-only."""
    return SCM.from_json(text)


