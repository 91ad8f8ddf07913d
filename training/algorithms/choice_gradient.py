"""The expected gradient over a turn's enumerable choices (Mean Actor-Critic, Allen et al. 2017). Pure functions.

Where the model's turn made one of the calls its environment offered (training/tool_use/choices.py) and those calls
are written alike but for one token (the causal environment's `choose(option=k)`: one number token after a fixed
prefix), the policy's choice at that token is a distribution pi over the few offered tokens, and each choice o's
own reward r_o (what its call earns now, by the environment's reward terms) is known for every o, not only the one
sampled. The policy gradient of the call's own reward then needs no sample at all:

    grad E_{o ~ pi}[r_o] = sum_o pi(o) (r_o - rbar) grad log pi(o),       rbar = sum_o pi(o) r_o,

which is the gradient of L = -sum_o pi(o) v_o with v = r / s held fixed (s the group's scale of the advantages the
call's other tokens carry). Every offered option gets a gradient in proportion to pi(o) and to how much better its
reward is than the policy's expected one, whether sampled or not. The rest of the call's return (what the later
calls earned, G_t - r_t) stays a sampled estimate, credited to the choice token with a baseline of its own
(`turn_advantages(..., own_excluded=...)`); the sum is an unbiased estimate of the gradient of the whole return.

`choice_loss` computes L from the final hidden states at the choice tokens' positions and the LM head's rows of the
offered tokens (the logits of the other tokens do not enter pi: pi is the policy's choice given that it makes one of
the offered calls). `token_weights` gives each completion token the weight TRL's loss gives it, by `loss_type`, so
that L adds to TRL's policy loss as one more term of the same per-token sum.
"""

from __future__ import annotations

import torch

LOSS_TYPES = ("dr_grpo", "dapo", "bnpo", "grpo")  # whose per-token weights `token_weights` states


def choice_loss(hidden: torch.Tensor, head: torch.Tensor, candidates: torch.Tensor, values: torch.Tensor,
                weights: torch.Tensor, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(L, pi): `hidden` (N, H) the final hidden states that predict the N choice tokens, `head` (V, H) the LM
    head's weight, `candidates` (N, J) the offered tokens (-1: none), `values` (N, J) v, `weights` (N,) each choice
    token's weight in the loss; pi (N, J) the policy's probabilities over the offered tokens (0 where none)."""
    offered = candidates >= 0
    rows = head[candidates.clamp(min=0)]  # (N, J, H)
    logits = torch.einsum("nh,njh->nj", hidden, rows.to(hidden.dtype)).float() / temperature
    logits = logits.masked_fill(~offered, float("-inf"))
    pi = torch.softmax(logits, dim=-1)
    expected = (pi * values.masked_fill(~offered, 0.0)).sum(dim=-1)
    return -(weights * expected).sum(), pi


def token_weights(loss_type: str, mask: torch.Tensor, max_completion_length: int, accumulation: int,
                  num_items: torch.Tensor | None = None, num_processes: int = 1,
                  steps_per_generation: int = 1) -> torch.Tensor:
    """(B, C) the weight TRL's training loss gives each completion token under `loss_type` (its normalisation in
    `GRPOTrainer._compute_loss`: `loss = sum(per_token_loss * mask * weight)`), for a micro-batch with loss mask
    `mask` under `accumulation` gradient-accumulation steps."""
    mask = mask.float()
    if loss_type == "dr_grpo":
        return mask / (mask.size(0) * max_completion_length * accumulation)
    if loss_type == "bnpo":
        return mask / (mask.sum().clamp(min=1.0) * accumulation)
    if loss_type == "grpo":
        return mask / (mask.sum(dim=-1, keepdim=True).clamp(min=1.0) * mask.size(0) * accumulation)
    if loss_type == "dapo":
        if num_items is None:
            raise ValueError("token_weights: loss_type 'dapo' needs the batch's num_items_in_batch")
        normalizer = num_items.clamp(min=1.0) / num_processes * accumulation / steps_per_generation
        return mask / normalizer
    raise ValueError(f"token_weights: loss_type {loss_type!r} is not one of {LOSS_TYPES}")
