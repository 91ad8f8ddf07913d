"""Advantage estimators: a registry of pure functions, in the manner of verl's `core_algos.py`.

Every estimator has one signature,

    estimator(rewards (B,), values (B, T) | None, mask (B, T), group_ids (B,), settings) -> (advantages, returns)

with per-token `advantages` and `returns` of shape (B, T), zero off the mask. `rewards` is each completion's weighted
reward, `mask` its completion tokens, `group_ids` which prompt's group it belongs to. Adding an estimator is one
decorated function here; `StrictGRPOConfig` accepts any registered name.

`grpo` needs no value head: at run time TRL's own group-relative advantages (computed when the batch is scored, with
all of TRL's `scale_rewards` options) stand, and `grpo` here states the same maths for TRL's default
(`scale_rewards="group"`). `gae` and `hybrid` need value estimates, read from the loss's own forward pass
(training/features/value_head.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from training.algorithms.value import gae as gae_returns
from training.registries import Registry
from training.algorithms.value import group_normalised, masked_whiten, sequence_reward_to_tokens


@dataclass(frozen=True)
class AdvantageSettings:
    """What an estimator may need beyond the batch."""

    gamma: float = 1.0
    lam: float = 0.95
    group_size: int = 1  # completions per prompt (num_generations)
    kl: torch.Tensor | None = None  # (B, T) per-token log pi - log pi_ref, when a KL penalty is in the rewards
    kl_coef: float = 0.0


Fn = Callable[
    [torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor, AdvantageSettings],
    tuple[torch.Tensor, torch.Tensor],
]


@dataclass(frozen=True)
class Estimator:
    name: str
    fn: Fn
    needs_values: bool


ESTIMATORS: Registry = Registry("advantage_estimator", unknown=ValueError)  # name -> Estimator (training/registries.py)


def register(name: str, needs_values: bool) -> Callable[[Fn], Fn]:
    def add(fn: Fn) -> Fn:
        ESTIMATORS.register(name, Estimator(name, fn, needs_values))
        return fn

    return add


def get_estimator(name: str) -> Estimator:
    return ESTIMATORS.named(name)


def check_whole_groups(group_ids: torch.Tensor, group_size: int) -> None:
    _, counts = torch.unique(group_ids, return_counts=True)
    if torch.any(counts != group_size):
        raise ValueError(
            f"advantage_estimator='hybrid' needs every group of {group_size} completions whole in one micro-batch, "
            f"got group sizes {counts.tolist()}; make per_device_train_batch_size a multiple of num_generations "
            "and steps_per_generation equal to gradient_accumulation_steps"
        )


@register("grpo", needs_values=False)
def grpo(rewards, values, mask, group_ids, settings):
    """(r - mean of its group) / (std of its group + 1e-4), Bessel-corrected std as TRL's `nanstd`; the same value on
    every token of a completion. Returns are the rewards."""
    advantages = torch.zeros_like(rewards)
    for group in torch.unique(group_ids):
        rows = group_ids == group
        r = rewards[rows]
        std = r.std(unbiased=True) if r.numel() > 1 else torch.zeros((), dtype=r.dtype)
        advantages[rows] = (r - r.mean()) / (std + 1e-4)
    mask = mask.to(rewards.dtype)
    return advantages.unsqueeze(1) * mask, rewards.unsqueeze(1) * mask


@register("gae", needs_values=True)
def gae(rewards, values, mask, group_ids, settings):
    """GAE(gamma, lambda) with the learned value baseline, whitened over the batch's tokens; returns are GAE's."""
    mask = mask.to(values.dtype)
    token_rewards = sequence_reward_to_tokens(rewards, mask)
    advantages, returns = gae_returns(
        token_rewards, values, mask, settings.gamma, settings.lam, kl=settings.kl, kl_coef=settings.kl_coef
    )
    return masked_whiten(advantages, mask), returns


@register("hybrid", needs_values=True)
def hybrid(rewards, values, mask, group_ids, settings):
    """Monte Carlo return-to-go minus the value baseline (GAE with lambda = 1), normalised within each prompt's group;
    the value targets are GAE(lambda)'s returns."""
    check_whole_groups(group_ids, settings.group_size)
    mask = mask.to(values.dtype)
    token_rewards = sequence_reward_to_tokens(rewards, mask)
    kl = dict(kl=settings.kl, kl_coef=settings.kl_coef)
    _, returns = gae_returns(token_rewards, values, mask, settings.gamma, settings.lam, **kl)
    mc_advantages, _ = gae_returns(token_rewards, values, mask, settings.gamma, 1.0, **kl)
    return group_normalised(mc_advantages, mask, group_ids), returns
