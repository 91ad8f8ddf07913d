"""Which tokens carry a step's gradient: 2 |A| (1 - p) per model token, its share pushed up and the largest share of
one rollout; tool results and padding carry none."""

from __future__ import annotations

import math
from collections import defaultdict

import pytest
import torch

from training.step.gradient_weight import log_gradient_weight


class _OneProcess:
    def gather(self, tensor):
        return tensor


def test_a_rare_token_pushed_up_carries_the_step_and_tool_results_carry_nothing():
    # rollout 0: a near-certain token (p 0.99) and a rare one (p 0.01), advantage +1; rollout 1: two tokens of p 0.5
    # at advantage -0.5, then a tool-result token (tool_mask 0) that would carry 0.5 if it counted
    logps = torch.log(torch.tensor([[0.99, 0.01, 1.0], [0.5, 0.5, 0.5]]))
    batch = {"sampling_per_token_logps": logps, "advantages": torch.tensor([[1.0, 1.0, 0.0], [-0.5, -0.5, -0.5]]),
             "completion_mask": torch.tensor([[1, 1, 0], [1, 1, 1]]), "tool_mask": torch.tensor([[1, 1, 1], [1, 1, 0]])}
    metrics = defaultdict(list)
    log_gradient_weight(batch, _OneProcess(), metrics)
    first, second = 2 * (0.01 + 0.99), 2 * 0.5 * (0.5 + 0.5)
    assert metrics["advantages/gradient_weight_positive"] == [pytest.approx(first / (first + second))]
    assert metrics["advantages/gradient_weight_top_rollout"] == [pytest.approx(first / (first + second))]
    assert math.isclose(first / (first + second), 2 / 3)


def test_one_advantage_per_rollout_is_spread_over_its_tokens_and_no_spread_logs_nothing():
    logps = torch.log(torch.full((2, 2), 0.5))
    batch = {"sampling_per_token_logps": logps, "advantages": torch.tensor([1.0, -1.0]),
             "completion_mask": torch.ones(2, 2)}
    metrics = defaultdict(list)
    log_gradient_weight(batch, _OneProcess(), metrics)
    assert metrics["advantages/gradient_weight_positive"] == [pytest.approx(0.5)]
    assert metrics["advantages/gradient_weight_top_rollout"] == [pytest.approx(0.5)]
    quiet = defaultdict(list)
    log_gradient_weight({**batch, "advantages": torch.zeros(2)}, _OneProcess(), quiet)
    assert not quiet  # nothing to share out: no made-up value


def test_a_near_certain_token_carries_almost_none_of_the_step():
    batch = {"sampling_per_token_logps": torch.log(torch.tensor([[0.99], [0.01]])),
             "advantages": torch.tensor([1.0, -1.0]), "completion_mask": torch.ones(2, 1)}
    metrics = defaultdict(list)
    log_gradient_weight(batch, _OneProcess(), metrics)
    assert metrics["advantages/gradient_weight_positive"] == [pytest.approx(0.01)]  # 0.01 / (0.01 + 0.99)
    assert metrics["advantages/gradient_weight_top_rollout"] == [pytest.approx(0.99)]
