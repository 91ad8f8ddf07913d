"""Infinite or overflowing rewards are counted per function and masked or stopped on; advantages are never silently
all-zero because of an overflow."""

from __future__ import annotations

import math

import pytest

from tests.support.tiny_trainer import length_reward
from training.features.reward_checks import NonFiniteRewardError
from training.outputs.run_summary import read_metrics


def inf_on_first_row(completions, **kwargs) -> list[float]:
    return [math.inf] + [1.0] * (len(completions) - 1)


def huge(completions, **kwargs) -> list[float]:
    """1e30 plus a spread: float32 group statistics overflow (std = inf), every advantage would be 0."""
    return [1e30 * (1 + i % 2) for i in range(len(completions))]


def logs(trainer) -> list[dict]:
    return [row for row in read_metrics(trainer.args.output_dir) if "loss" in row]


def test_an_infinite_reward_is_counted_and_masked_without_strict_health(make_trainer):
    trainer = make_trainer(reward_funcs=[inf_on_first_row, length_reward], max_steps=1, strict_health=False)
    trainer.train()
    (log,) = logs(trainer)
    assert log["rewards/nonfinite_count"] == 1.0  # one generation batch, one infinite reward in it
    assert log["rewards/inf_on_first_row/nonfinite_count"] == 1.0
    assert log["rewards/length_reward/nonfinite_count"] == 0.0
    assert math.isfinite(log["loss"]) and log["grad_norm"] > 0


def test_overflowing_rewards_stop_a_strict_run_naming_the_function(make_trainer):
    trainer = make_trainer(reward_funcs=[huge], max_steps=1)
    with pytest.raises(NonFiniteRewardError, match=r"reward function 'huge' returned 1e\+30"):
        trainer.train()


def test_overflowing_rewards_are_masked_not_zeroed_without_strict_health(make_trainer, caplog):
    trainer = make_trainer(reward_funcs=[huge, length_reward], max_steps=1, strict_health=False)
    with caplog.at_level("WARNING"):
        trainer.train()
    (log,) = logs(trainer)
    assert log["rewards/huge/nonfinite_count"] == 8.0
    assert "reward function 'huge' returned" in caplog.text and "masked as unscorable" in caplog.text
    # the overflowing component is left out, the others still drive the advantages: the step trains
    assert log["grad_norm"] > 0 and log["loss"] != 0.0
    assert log["reward_std"] > 0
