"""Value function for GRPO: GAE, returns, clipped value loss, explained variance (pure functions), the value head.

Shapes: (B, T) over completion tokens; `mask` is 1 on the completion's real tokens (contiguous from position 0).
Value `values[:, t]` estimates the return from the state before completion token t is sampled.
"""

from __future__ import annotations

import torch
from torch import nn

from training.algorithms.trajectory import masked_mean


def sequence_reward_to_tokens(rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Place each sequence's scalar reward on its last real token: (B,) -> (B, T). Raises on an empty completion."""
    lengths = mask.sum(dim=1).long()
    if torch.any(lengths == 0):
        rows = torch.nonzero(lengths == 0).flatten().tolist()
        raise ValueError(f"completion rows {rows} have no tokens in the mask: no last token to carry the reward")
    token_rewards = torch.zeros_like(mask, dtype=rewards.dtype)
    token_rewards[torch.arange(mask.size(0), device=mask.device), lengths - 1] = rewards
    return token_rewards


def gae(
    token_rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    gamma: float,
    lam: float,
    kl: torch.Tensor | None = None,
    kl_coef: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over completion tokens; returns (advantages, returns), zero off the mask.

    r_t = token_rewards_t - kl_coef * kl_t;  delta_t = r_t + gamma * V_{t+1} - V_t (V after the last token = 0);
    A_t = delta_t + gamma * lam * A_{t+1};  returns_t = A_t + V_t.
    """
    mask = mask.to(values.dtype)
    rewards = token_rewards.to(values.dtype)
    if kl_coef:
        if kl is None:
            raise ValueError("gae: kl_coef is set but no per-token kl was given")
        rewards = rewards - kl_coef * kl
    values = values * mask
    rewards = rewards * mask
    advantages = torch.zeros_like(values)
    next_advantage = torch.zeros_like(values[:, 0])
    next_value = torch.zeros_like(values[:, 0])
    for t in reversed(range(values.size(1))):
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        next_advantage = (delta + gamma * lam * next_advantage) * mask[:, t]
        advantages[:, t] = next_advantage
        next_value = values[:, t]
    return advantages, (advantages + values) * mask


def masked_whiten(x: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """(x - mean) / std over the masked positions (population std); zero off the mask."""
    mean = masked_mean(x, mask)
    var = masked_mean((x - mean) ** 2, mask)
    return (x - mean) * torch.rsqrt(var + eps) * mask


def clipped_value_loss(
    values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor, clip: float
) -> torch.Tensor:
    """PPO's clipped value loss: 0.5 * mean over tokens of max((V - R)^2, (V_clip - R)^2),
    V_clip = old_V + clamp(V - old_V, -clip, clip). An empty mask gives 0 (trajectory.masked_mean), never NaN."""
    clipped = old_values + torch.clamp(values - old_values, -clip, clip)
    loss = torch.max((values - returns) ** 2, (clipped - returns) ** 2)
    return 0.5 * masked_mean(loss, mask)


def explained_variance(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> float:
    """1 - Var[returns - values] / Var[returns] over masked tokens; NaN when the returns do not vary."""
    returns_var = masked_mean((returns - masked_mean(returns, mask)) ** 2, mask)
    residual = returns - values
    residual_var = masked_mean((residual - masked_mean(residual, mask)) ** 2, mask)
    if returns_var.item() == 0.0:
        return float("nan")
    return (1.0 - residual_var / returns_var).item()


def group_normalised(x: torch.Tensor, mask: torch.Tensor, group_ids: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    """(x - group mean) / (group std + eps), each group's statistics over its rows' masked tokens."""
    out = torch.zeros_like(x)
    for group in torch.unique(group_ids):
        rows = group_ids == group
        gx, gm = x[rows], mask[rows].to(x.dtype)
        mean = masked_mean(gx, gm)
        std = masked_mean((gx - mean) ** 2, gm).sqrt()
        out[rows] = (gx - mean) / (std + eps) * gm
    return out


class ValueHead(nn.Module):
    """V(s_t) from the policy's final hidden state at the position that predicts completion token t."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.proj = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.proj.weight)
        nn.init.zeros_(self.proj.bias)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.proj(hidden_states.to(self.proj.weight.dtype)).squeeze(-1)
