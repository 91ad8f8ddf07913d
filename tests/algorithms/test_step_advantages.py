"""Step-level credit, the pure maths: step groups by (prompt group, state), each call against its step group's mean,
value samples pooled in, singletons left at 0."""

from __future__ import annotations

import pytest
import torch

from training.algorithms.step_advantages import (
    episode_advantages,
    step_advantages,
    step_group_sizes,
    step_ids,
)


def test_turns_share_a_step_id_exactly_when_group_and_state_are_the_same():
    keys = [["s0", "a", None], ["s0", "b"], ["s0", "a", "c"], ["s0", "a"]]
    ids = step_ids([0, 0, 1, 1], keys)
    assert ids.shape == (4, 3)
    assert ids[0, 0] == ids[1, 0] and ids[2, 0] == ids[3, 0]  # one start state per group
    assert ids[0, 0] != ids[2, 0]  # the same key in another group is another step group
    assert ids[0, 1] != ids[1, 1] and ids[2, 1] == ids[3, 1]
    assert ids[0, 2] == -1 and ids[1, 2] == -1  # no call there (None, or no such turn)


def test_each_call_is_compared_with_the_calls_made_from_its_own_state():
    """Four rollouts of one prompt. Turn 1: rollouts 0, 1 stand in state a, rollouts 2, 3 in state b, where every
    return is 1.0 higher. A baseline per turn index would credit 2 and 3 for being in b; per state, each pair is
    compared within itself."""
    returns = torch.tensor([[1.0, 0.2], [1.0, 0.4], [2.0, 1.2], [2.0, 1.4]])
    steps = torch.tensor([[0, 1], [0, 1], [0, 2], [0, 2]])
    adv = step_advantages(returns, steps, torch.zeros(4, dtype=torch.long))
    residual = torch.tensor([[-0.5, -0.1], [-0.5, 0.1], [0.5, -0.1], [0.5, 0.1]])
    scale = residual.flatten().std(unbiased=True)
    assert torch.allclose(adv, residual / (scale + 1e-4), atol=1e-6)
    assert adv[0, 1] == pytest.approx(adv[2, 1].item(), abs=1e-5)  # the worse call of each state alike, whatever the state


def test_a_call_alone_in_its_state_gets_no_step_advantage_unless_value_samples_join_it():
    returns = torch.tensor([[1.0, 0.5], [0.0, 0.0]])
    steps = torch.tensor([[0, 1], [0, 2]])
    adv = step_advantages(returns, steps, torch.zeros(2, dtype=torch.long))
    assert adv[0, 1] == 0 and adv[1, 1] == 0  # singletons
    branched = step_advantages(returns, steps, torch.zeros(2, dtype=torch.long), {1: [0.1, 0.3]})
    assert branched[0, 1] > 0  # 0.5 against the continuations' 0.1 and 0.3 from the same state
    assert step_group_sizes(steps, {1: [0.1, 0.3]}) == [2, 3, 2, 1]


def test_equal_returns_in_a_state_give_zero_and_never_nan():
    returns = torch.tensor([[0.7, 0.3], [0.7, 0.3]])
    steps = torch.tensor([[0, 1], [0, 1]])
    for scale in ("group", "step_group"):
        adv = step_advantages(returns, steps, torch.zeros(2, dtype=torch.long), scale=scale)
        assert torch.equal(adv, torch.zeros_like(adv))


def test_the_step_group_scale_is_gigpos_std_within_each_step_group():
    returns = torch.tensor([[1.0], [0.0], [1.01], [1.0]])
    steps = torch.tensor([[0], [0], [1], [1]])
    adv = step_advantages(returns, steps, torch.tensor([0, 0, 1, 1]), scale="step_group")
    assert adv[2, 0] == pytest.approx(1 / 2 ** 0.5, rel=0.02)  # 0.01 apart: unit size within its own step group
    pooled = step_advantages(returns, steps, torch.tensor([0, 0, 1, 1]))
    assert pooled[2, 0] == pytest.approx(adv[2, 0].item(), rel=0.02)  # one step group per prompt group: the same
    with pytest.raises(ValueError, match="scale must be one of"):
        step_advantages(returns, steps, torch.tensor([0, 0, 1, 1]), scale="batch")


def test_the_step_term_has_mean_zero_within_each_step_group():
    torch.manual_seed(0)
    returns = torch.rand(8, 3)
    steps = torch.tensor([[0, 1, 3]] * 4 + [[2, 4, 5], [2, 4, 6], [2, 4, 6], [2, 7, 8]])
    adv = step_advantages(returns, steps, torch.tensor([0] * 4 + [1] * 4))
    for s in torch.unique(steps).tolist():
        assert abs(adv[steps == s].sum().item()) < 1e-5


def test_the_episode_term_is_grpos():
    rewards = torch.tensor([1.0, 0.0, 0.5, 0.5])
    adv = episode_advantages(rewards, torch.tensor([0, 0, 1, 1]))
    assert adv[0] == pytest.approx(0.5 / (0.5 ** 0.5 + 1e-4))
    assert adv[2] == adv[3] == 0
