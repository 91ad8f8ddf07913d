"""The value function's pure pieces against hand-computed numbers (gamma, lambda != 1)."""

import math

import pytest
import torch

from training.algorithms.value import (
    clipped_value_loss,
    explained_variance,
    gae,
    group_normalised,
    masked_whiten,
    sequence_reward_to_tokens,
)

MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
VALUES = torch.tensor([[0.5, 0.2, 0.1], [0.3, 0.4, 9.0]])  # 9.0 sits off the mask and must be ignored


def test_sequence_reward_lands_on_the_last_real_token():
    tokens = sequence_reward_to_tokens(torch.tensor([1.0, 2.0]), MASK)
    assert tokens.tolist() == [[0.0, 0.0, 1.0], [0.0, 2.0, 0.0]]


def test_sequence_reward_refuses_an_empty_completion():
    with pytest.raises(ValueError, match=r"rows \[1\]"):
        sequence_reward_to_tokens(torch.tensor([1.0, 2.0]), torch.tensor([[1.0, 0.0], [0.0, 0.0]]))


def test_gae_matches_hand_computed_example():
    rewards = sequence_reward_to_tokens(torch.tensor([1.0, 2.0]), MASK)
    advantages, returns = gae(rewards, VALUES, MASK, gamma=0.9, lam=0.8)
    # Row 0: deltas 0.9, -0.11, -0.32; A2 = 0.9, A1 = -0.11 + 0.72 * 0.9, A0 = -0.32 + 0.72 * A1.
    # Row 1 (two tokens): deltas 1.6, 0.06; A1 = 1.6, A0 = 0.06 + 0.72 * 1.6; the padded token gets 0.
    expected = torch.tensor([[0.06736, 0.538, 0.9], [1.212, 1.6, 0.0]])
    assert torch.allclose(advantages, expected, atol=1e-6)
    assert torch.allclose(returns, torch.tensor([[0.56736, 0.738, 1.0], [1.512, 2.0, 0.0]]), atol=1e-6)


def test_gae_subtracts_the_per_token_kl_penalty():
    rewards = sequence_reward_to_tokens(torch.tensor([1.0, 2.0]), MASK)
    kl = torch.tensor([[0.1, 0.2, 0.3], [0.0, 0.0, 0.0]])
    advantages, _ = gae(rewards, VALUES, MASK, gamma=0.9, lam=0.8, kl=kl, kl_coef=0.5)
    # Row 0 rewards become -0.05, -0.1, 0.85: deltas -0.37, -0.21, 0.75.
    assert torch.allclose(advantages[0], torch.tensor([-0.37 + 0.72 * 0.33, -0.21 + 0.72 * 0.75, 0.75]), atol=1e-6)
    with pytest.raises(ValueError, match="kl"):
        gae(rewards, VALUES, MASK, gamma=0.9, lam=0.8, kl_coef=0.5)


def test_clipped_value_loss_takes_the_worse_of_clipped_and_unclipped():
    values, old = torch.tensor([[1.0, 0.1]]), torch.tensor([[0.0, 0.0]])
    returns, mask = torch.tensor([[2.0, -1.0]]), torch.ones(1, 2)
    # Token 0: clipped value 0.2 -> (0.2 - 2)^2 = 3.24 beats (1 - 2)^2 = 1. Token 1: inside the clip, 1.1^2 = 1.21.
    assert clipped_value_loss(values, old, returns, mask, clip=0.2).item() == pytest.approx(0.5 * (3.24 + 1.21) / 2)


def test_explained_variance_matches_its_formula():
    torch.manual_seed(0)
    returns, values = torch.randn(4, 5), torch.randn(4, 5)
    mask = (torch.rand(4, 5) > 0.3).float()
    r, v = returns[mask.bool()], values[mask.bool()]
    expected = 1.0 - torch.var(r - v, unbiased=False) / torch.var(r, unbiased=False)
    assert explained_variance(values, returns, mask) == pytest.approx(expected.item(), rel=1e-5)
    assert explained_variance(returns, returns, mask) == pytest.approx(1.0)
    assert explained_variance(torch.full_like(returns, 3.0), returns, mask) == pytest.approx(0.0, abs=1e-6)
    assert math.isnan(explained_variance(values, torch.ones_like(returns), mask))


def test_masked_whiten_and_group_normalise_use_only_masked_tokens():
    x = torch.tensor([[1.0, 3.0, 100.0], [5.0, 7.0, 100.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    white = masked_whiten(x, mask)
    assert torch.allclose(white[mask.bool()], torch.tensor([-1.3416408, -0.4472136, 0.4472136, 1.3416408]))
    assert white[:, 2].tolist() == [0.0, 0.0]
    grouped = group_normalised(x, mask, torch.tensor([0, 1]), eps=0.0)
    assert torch.allclose(grouped, torch.tensor([[-1.0, 1.0, 0.0], [-1.0, 1.0, 0.0]]))
