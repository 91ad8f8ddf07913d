"""Credit per tool call: the advantage of each model turn of a multi-turn rollout from the reward that turn's calls
and the later ones earned, normalised within the prompt's group. Pure functions, tested alone.

A rollout of TRL's tool loop is a sequence of model turns (the runs of `tool_mask == 1` in its completion) separated
by tool results. Turn t's reward r_t is the weighted sum of the per-call reward terms of the calls it made (an
environment reports them, training/features/call_credit.py). Then, with G the reward-to-go,

    G_{i,t} = sum_{u >= t} r_{i,u}                      (0 for a turn rollout i never reached)
    b_{g,t} = mean_{i in g} G_{i,t}                     (group g's baseline at turn t)
    A_{i,t} = (G_{i,t} - b_{g,t}) / (s_g + 1e-4),       s_g the Bessel std of G - b over g's turns that exist

and every token of turn t carries A_{i,t}. A call is credited with what it and the later calls earned, not with the
calls before it, so GRPO's one advantage per episode (every token of an episode credited with its total) is split
where the reward came from. b depends on the turn index only (never on the turn's own tokens), so it adds no bias to
the policy gradient. Summed over the turns the rewards are the episode's: sum_t r_{i,t} = R_i.

A turn that made a call the tools refused (malformed, over budget) is the exception: G_{i,t} = r_{i,t}, its own
reward only. The refused call reached no environment, so what the later calls earned is not its doing (it only cost
them a call of the budget), and crediting it with their reward pushed malformed calls up whenever the later calls
were lucky: on the CBO file a malformed turn with advantage +0.94 came one step before 0.44 of all calls turned
malformed (docs/causal.md, "Your own SCM").
"""

from __future__ import annotations

import torch


def token_turns(tool_mask: torch.Tensor, completion_mask: torch.Tensor) -> torch.Tensor:
    """(B, T) long: the model-turn index of each completion token (the k-th run of `tool_mask == 1` within
    `completion_mask`), -1 for tool-result tokens and padding."""
    model = (tool_mask * completion_mask).bool()
    starts = model & ~torch.nn.functional.pad(model[:, :-1], (1, 0), value=False)
    turns = torch.cumsum(starts.long(), dim=1) - 1
    return torch.where(model, turns, torch.full_like(turns, -1))


def rewards_to_go(turn_rewards: torch.Tensor) -> torch.Tensor:
    """(B, K): G_{i,t} = sum_{u >= t} r_{i,u}."""
    return torch.flip(torch.cumsum(torch.flip(turn_rewards, dims=[1]), dim=1), dims=[1])


def turn_advantages(turn_rewards: torch.Tensor, turn_exists: torch.Tensor, group_ids: torch.Tensor,
                    turn_refused: torch.Tensor | None = None, own_excluded: torch.Tensor | None = None) -> torch.Tensor:
    """(B, K) advantages per turn (module docstring); 0 where a turn does not exist. `turn_refused` (B, K): 1 where
    the turn made a call the tools refused; such a turn's return is its own reward. `own_excluded` (B, K): 1 where a
    turn's return leaves out its own reward (what the later calls earned: the choice token's sampled part,
    training/algorithms/choice_gradient.py)."""
    return turn_advantages_and_scales(turn_rewards, turn_exists, group_ids, turn_refused, own_excluded)[0]


def turn_advantages_and_scales(turn_rewards: torch.Tensor, turn_exists: torch.Tensor, group_ids: torch.Tensor,
                               turn_refused: torch.Tensor | None = None,
                               own_excluded: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """`turn_advantages`, and the batch's scale: the Bessel std of every group's residuals G - b over the turns that
    exist, pooled (+ 1e-4). A scale that one group's alike returns cannot shrink (what the choice values are divided
    by: training/features/choice_credit.py)."""
    residual = turn_residuals(turn_rewards, turn_exists, group_ids, turn_refused, own_excluded)
    advantages = torch.zeros_like(residual)
    for group in torch.unique(group_ids):
        rows = group_ids == group
        present = turn_exists[rows].bool()
        values = residual[rows][present]
        scale = values.std(unbiased=True) if values.numel() > 1 else torch.zeros((), dtype=values.dtype)
        advantages[rows] = torch.where(present, residual[rows] / (scale + 1e-4), torch.zeros_like(residual[rows]))
    pooled = residual[turn_exists.bool()]
    batch_scale = (pooled.std(unbiased=True) if pooled.numel() > 1 else torch.zeros((), dtype=pooled.dtype)) + 1e-4
    return advantages, batch_scale


def turn_residuals(turn_rewards: torch.Tensor, turn_exists: torch.Tensor, group_ids: torch.Tensor,
                   turn_refused: torch.Tensor | None = None, own_excluded: torch.Tensor | None = None) -> torch.Tensor:
    """(B, K) G_{i,t} - b_{g,t} (module docstring), with `turn_refused` and `own_excluded` as `turn_advantages`."""
    returns = rewards_to_go(turn_rewards * turn_exists)
    if turn_refused is not None:
        returns = torch.where(turn_refused.bool(), turn_rewards * turn_exists, returns)
    if own_excluded is not None:
        returns = returns - turn_rewards * turn_exists * own_excluded
    residual = torch.zeros_like(returns)
    for group in torch.unique(group_ids):
        rows = group_ids == group
        residual[rows] = returns[rows] - returns[rows].mean(dim=0, keepdim=True)
    return residual


def token_advantages(turn_adv: torch.Tensor, turns: torch.Tensor) -> torch.Tensor:
    """(B, T): each token's turn advantage (0 off the model's turns)."""
    index = turns.clamp(min=0)
    return torch.where(turns >= 0, torch.gather(turn_adv, 1, index), torch.zeros_like(index, dtype=turn_adv.dtype))
