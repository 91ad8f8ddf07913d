"""Credit per tool call, the pure maths: turns from the tool mask, rewards-to-go, the group's baseline per turn."""

from __future__ import annotations

import torch

from training.algorithms.turn_advantages import rewards_to_go, token_advantages, token_turns, turn_advantages


def test_turns_are_the_runs_of_model_tokens_within_the_completion():
    # model turn, tool result, model turn, tool result, model turn, padding
    tool_mask = torch.tensor([[1, 1, 0, 0, 1, 1, 1, 0, 1, 1, 1]])
    completion_mask = torch.tensor([[1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0]])
    assert token_turns(tool_mask, completion_mask).tolist() == [[0, 0, -1, -1, 1, 1, 1, -1, 2, -1, -1]]


def test_reward_to_go_leaves_out_the_calls_before():
    assert torch.allclose(rewards_to_go(torch.tensor([[0.5, 0.0, 0.2]])), torch.tensor([[0.7, 0.2, 0.2]]))


def test_a_call_is_credited_against_the_groups_same_turn_not_the_episode_total():
    """Two rollouts of one prompt with the same total: one earns early and wastes its last call, the other wastes
    its first call and earns late. GRPO gives both advantage 0 (equal totals); per call, the wasted call of each is
    below the baseline at its turn and the earning one above."""
    rewards = torch.tensor([[0.6, 0.0], [0.0, 0.6]])
    adv = turn_advantages(rewards, torch.ones_like(rewards), torch.tensor([0, 0]))
    assert adv[0, 0] == adv[1, 0] == 0.0  # both rollouts have 0.6 to go at turn 0
    assert adv[0, 1] < 0 < adv[1, 1]  # at turn 1, only the second has reward left to earn


def test_advantages_are_unit_scale_per_group_and_zero_off_the_turns():
    rewards = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [5.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    exists = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    adv = turn_advantages(rewards, exists, torch.tensor([0, 0, 1, 1]))
    assert adv[1, 2] == 0.0  # the second rollout never reached turn 2
    for rows in ([0, 1], [2, 3]):  # rewards 5x larger in the second group: the same advantages
        present = exists[rows].bool()
        assert abs(adv[rows][present].std().item() - 1.0) < 1e-3
    assert torch.allclose(adv[[0, 1]], adv[[2, 3]], atol=1e-3)


def test_a_group_without_spread_gets_no_advantage():
    rewards = torch.tensor([[0.3, 0.1], [0.3, 0.1]])
    assert torch.equal(turn_advantages(rewards, torch.ones_like(rewards), torch.tensor([0, 0])),
                       torch.zeros_like(rewards))


def test_every_token_of_a_turn_carries_its_advantage():
    turns = torch.tensor([[0, 0, -1, 1, 1, -1]])
    adv = token_advantages(torch.tensor([[0.5, -2.0]]), turns)
    assert adv.tolist() == [[0.5, 0.5, 0.0, -2.0, -2.0, 0.0]]


def test_a_refused_call_is_not_credited_with_what_the_later_calls_earned():
    """Two rollouts of one prompt: the first's turn-0 call was malformed (refused, earns 0) and its later calls were
    lucky; the second earned steadily. By reward-to-go the malformed turn would be pushed up; it is credited with its
    own reward only, so it is pushed down, and the other turns keep their credit."""
    rewards = torch.tensor([[0.0, 0.9, 0.5], [0.3, 0.3, 0.3]])
    exists, groups = torch.ones_like(rewards), torch.tensor([0, 0])
    refused = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    assert turn_advantages(rewards, exists, groups)[0, 0] > 0  # reward-to-go 1.4 against 0.9
    adv = turn_advantages(rewards, exists, groups, refused)
    assert adv[0, 0] < 0 < adv[1, 0]
    assert adv[0, 1] > 0 > adv[1, 1]  # turn 1 on: reward-to-go as before (1.4 against 0.6)
