"""The loss's normaliser (`trajectory.loss_tokens`): the tokens in the loss plus the void episodes' that
`void_turn_rule: exclude` kept out, as dynamic sampling and forcing recount it after merging rounds."""

from __future__ import annotations

import torch

from training.algorithms.trajectory import loss_mask, loss_tokens


def test_the_void_episodes_tokens_stay_in_the_normaliser():
    completion_mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 0, 0]])
    tool_mask = torch.tensor([[1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 1, 1]])  # row 1: a void episode, kept out
    batch = {"completion_mask": completion_mask, "tool_mask": tool_mask, "void_tokens": torch.tensor([0, 4, 0])}
    assert int(loss_mask(batch).sum()) == 4
    assert int(loss_tokens(batch)) == 8
    del batch["void_tokens"]  # a run without the rule: the loss mask alone
    assert int(loss_tokens(batch)) == 4
