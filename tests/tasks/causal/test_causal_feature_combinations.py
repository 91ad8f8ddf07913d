"""The causal environment trained together with the features its rewards meet: a value head or per-call credit,
`num_iterations` 2, reference sync, dynamic sampling and forcing (real sampler, LoRA, the four reward functions, the exact surrogate's
expected-gain structure reward). Each cell must pass the generic checks of `tests/test_feature_combinations.py` and
keep every causal reward finite on every step that sampled. Forcing is on in both cells: the untrained tiny model
never makes a valid call by itself, so its forced episodes are what gives a group varied rewards (and its own,
on-policy rows a non-zero loss)."""

from __future__ import annotations

import math

import pytest

from tests.tasks.causal.trainer_support import build_sampled_causal_trainer, causal_rows
from tests.test_feature_combinations import (
    cell_flags,
    cell_id,
    cell_settings,
    check_cell,
    training_logs,
)
from training.evaluation.episodes import read_episodes

# (dynamic sampling, estimator, forcing, reference sync, num_iterations); "call_credit": per-call advantages
CELLS = [
    (True, "gae", True, True, 2),
    (False, "hybrid", True, True, 2),
    (True, "call_credit", True, True, 2),
]
# the untrained tiny model's own turns are void (no call, rarely an EOS): under the default `exclude` its on-policy
# rows would leave the loss (training/features/turn_limits.py); these cells test the features beside them
UNTRAINED = "credit"
CAUSAL_REWARDS = [f"rewards/{name}/mean" for name in ("optimization", "structure", "parent", "exploration")]


def train_cell(output_dir: str, model: str, dynamic, estimator, forcing, sync, iterations) -> list[dict]:
    credit = estimator == "call_credit"
    settings = cell_settings(dynamic, "grpo" if credit else estimator, sync, iterations)
    trainer = build_sampled_causal_trainer(output_dir, model, cell_flags(forcing), max_steps=2, call_credit=credit,
                                           void_turn_rule=UNTRAINED, **settings)
    trainer.train()
    return training_logs(output_dir)


@pytest.mark.parametrize("cell", CELLS, ids=[cell_id(c) for c in CELLS])
def test_causal_rewards_train_with_value_head_reuse_and_reference_sync(causal_model_dir, tmp_path, cell):
    logs = train_cell(str(tmp_path), causal_model_dir, *cell)
    check_cell(logs, *cell[:1], "grpo" if cell[1] == "call_credit" else cell[1], *cell[2:])
    if cell[1] == "call_credit":
        assert all(log["call_credit/turns"] >= 1.0 for log in logs[:: cell[-1]])
    weights = [(log["advantages/gradient_weight_positive"], log["advantages/gradient_weight_top_rollout"])
               for log in logs[:: cell[-1]] if "advantages/gradient_weight_positive" in log]
    assert weights and all(0.0 <= up <= 1.0 and 0.0 < top <= 1.0 for up, top in weights)  # with forcing's rows masked
    generated = logs[:: cell[-1]]
    for log in generated:
        assert all(math.isfinite(log[name]) for name in CAUSAL_REWARDS), log
        assert log["surrogate/updates"] > 0.0
    assert max(log["rewards/structure/mean"] for log in generated) > 0.0  # the lookahead ran: some call gained
    assert all(log["loss"] != 0.0 for log in logs)  # the on-policy rows got advantages, on both passes


def test_a_configured_surrogate_trains_with_every_feature_and_is_evaluated_through_the_causal_task(causal_model_dir,
                                                                                                   tmp_path):
    """`environment_settings` (here the additive surrogate, as a recipe names it) with dynamic sampling, the value
    head, forcing, reference sync and two iterations; then the held-out evaluation through the one task entry plays
    the same configured environment."""
    from training.tasks.causal.env import make_causal_env
    cell = (True, "gae", True, True, 2)
    trainer = build_sampled_causal_trainer(str(tmp_path), causal_model_dir, cell_flags(True), max_steps=2,
                                           heldout_rows=causal_rows(2), heldout_samples_per_prompt=1,
                                           environment_factory=make_causal_env("additive"),
                                           void_turn_rule=UNTRAINED, **cell_settings(True, "gae", True, 2))
    trainer.train()
    logs = training_logs(str(tmp_path))
    check_cell(logs, *cell)
    assert all(math.isfinite(log[name]) for log in logs[::2] for name in CAUSAL_REWARDS)
    held = trainer.evaluate_heldout()
    assert trainer.heldout.task.name == "causal" and math.isfinite(held["heldout/regret"])
    episodes = read_episodes(tmp_path / "heldout" / f"step-{trainer.state.global_step:06d}")
    assert {e.extra["surrogate_kind"] for e in episodes} == {"additive"}
