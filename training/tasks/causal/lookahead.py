"""A call's expected information gain, what the structure reward pays: the posterior's `LOOKAHEAD_DRAWS` models
answering the call, their draws keyed by the environment's seed and valid-call index, the result kept per state and
call (`shared_work`). So a GRPO group's rollouts making the same call at the same point are credited alike, and the
call an episode makes reuses what the options' what-ifs there (`choice_terms`) already worked out."""

from __future__ import annotations

import numpy as np

from training.evaluation.pairing_seeds import LOOKAHEAD_SEED_KEY, generator
from training.tasks.causal.episode_traces import CallTrace
from training.tasks.causal.scm.scm import SCM
from training.tasks.causal.shared_work import SHARED

LOOKAHEAD_DRAWS = 16  # posterior models behind a call's expected information gain


def lookahead_key(state: tuple, call_index: int, call) -> tuple:
    return "lookahead", state, call_index, call


def lookahead_rng(seed: int, call_index: int) -> np.random.Generator:
    return generator(seed, call_index, LOOKAHEAD_SEED_KEY)


def look_ahead(surrogate, scm: SCM, state: tuple, seed: int, step: CallTrace) -> None:
    """Record the call's expected information gain against the posterior before its rows (the surrogate's
    `expected_gain`): what the structure reward pays, not the realised drop (the policy chooses the call, not its
    row's noise). None where the surrogate cannot say (2 observational rows per variable are needed); the structure
    reward then refuses the episode."""
    expected_gain = getattr(surrogate, "expected_gain", None)
    if expected_gain is None:
        return
    do = None if step.intervention is None else (scm.index[step.intervention[0]], step.intervention[1])
    step.expected_info_gain = SHARED.get(
        lookahead_key(state, step.call_index, step.intervention or step.tool),
        lambda: expected_gain(do, step.mask, LOOKAHEAD_DRAWS, lookahead_rng(seed, step.call_index)))


def look_ahead_together(surrogate, scm: SCM, state: tuple, seed: int, call_index: int,
                        calls: list[tuple[str, float]]) -> None:
    """Keep the expected gains of the interventions `calls`, made at `call_index`, worked out together where the
    surrogate can (`expected_gains`: the posterior draws made once, the values `expected_gain` gives one at a time)."""
    gains = getattr(surrogate, "expected_gains", None)
    keys = [lookahead_key(state, call_index, call) for call in calls]
    if gains is None or all(key in SHARED for key in keys):
        return
    asked = [((scm.index[var], val), intervention_mask(scm, var)) for var, val in calls]
    for key, gain in zip(keys, gains(asked, LOOKAHEAD_DRAWS, lookahead_rng(seed, call_index)), strict=True):
        SHARED.put(key, gain)


def intervention_mask(scm: SCM, var: str) -> np.ndarray:
    """Which entries of a one-row sample do(var = ...) set."""
    mask = np.zeros((1, scm.d), dtype=bool)
    mask[:, scm.index[var]] = True
    return mask
