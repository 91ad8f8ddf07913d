"""The advantage-estimator registry: pure functions, validated by name, `grpo` equal to TRL's own advantages."""

from __future__ import annotations

import pytest
import torch

from training.algorithms.advantages import ESTIMATORS, AdvantageSettings, get_estimator, register
from training.run_setup.config import StrictGRPOConfig


def test_grpo_estimator_equals_trls_advantages_on_a_scored_batch(make_trainer, task_rows):
    trainer = make_trainer()
    trainer.model.train()
    rows = [dict(r) for r in task_rows[:2] for _ in range(trainer.num_generations)]
    batch = trainer._generate_and_score_completions(rows)
    mask = batch["completion_mask"]
    ours, returns = ESTIMATORS["grpo"].fn(batch["sequence_rewards"], None, mask, batch["group_ids"],
                                          AdvantageSettings(group_size=trainer.num_generations))
    trl = batch["advantages"].unsqueeze(1) * mask  # TRL's (B,) advantages on every completion token
    assert batch["sequence_rewards"].std() > 0  # a batch with signal, so the comparison means something
    assert torch.allclose(ours, trl, atol=1e-5)
    assert torch.equal(returns[:, 0], batch["sequence_rewards"] * mask[:, 0])


def test_gae_with_lambda_one_and_zero_values_is_the_whitened_reward():
    rewards, mask = torch.tensor([1.0, 3.0]), torch.ones(2, 3)
    advantages, returns = ESTIMATORS["gae"].fn(rewards, torch.zeros(2, 3), mask, torch.tensor([0, 0]),
                                               AdvantageSettings(gamma=1.0, lam=1.0))
    assert torch.allclose(returns, torch.tensor([[1.0] * 3, [3.0] * 3]))  # Monte Carlo return on every token
    assert torch.allclose(advantages, torch.tensor([[-1.0] * 3, [1.0] * 3]), atol=1e-4)  # whitened


def test_hybrid_refuses_split_groups():
    with pytest.raises(ValueError, match="needs every group of 2 completions whole"):
        ESTIMATORS["hybrid"].fn(torch.ones(3), torch.zeros(3, 2), torch.ones(3, 2), torch.tensor([0, 0, 1]),
                                AdvantageSettings(group_size=2))


def test_config_accepts_registered_names_only(tmp_path):
    with pytest.raises(ValueError, match=r"advantage_estimator='ppo' is not one of \['gae', 'grpo', 'hybrid'\]"):
        StrictGRPOConfig(output_dir=str(tmp_path), advantage_estimator="ppo", use_cpu=True)


def test_adding_an_estimator_is_one_registered_function(make_trainer):
    seen = []

    @register("reward_to_go", needs_values=True)
    def reward_to_go(rewards, values, mask, group_ids, settings):
        seen.append(rewards.numel())
        return (rewards.unsqueeze(1) - values) * mask, rewards.unsqueeze(1) * mask

    try:
        assert get_estimator("reward_to_go").needs_values
        trainer = make_trainer(advantage_estimator="reward_to_go", max_steps=1)
        assert trainer.value.enabled  # needs_values: the trainer gives it a value head
        trainer.train()
        assert seen == [8]  # called once, on the generation batch's first visit
        assert [h for h in trainer.state.log_history if "value/loss" in h]
    finally:
        del ESTIMATORS["reward_to_go"]
