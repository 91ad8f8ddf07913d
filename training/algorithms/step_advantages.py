"""Step-level credit: each call compared with the calls made from the same state. Pure functions, tested alone.

Within a prompt's group (its rollouts share the row, so they start in one state), the calls made from the same
state, as the environment names it (training/tool_use/state_keys.py), form a step group: GiGPO's anchor states
(arXiv 2505.10978). With G_{i,t} the return of rollout i from its turn t on (the reward-to-go of its calls' terms,
training/algorithms/turn_advantages.py, or the episode's reward where the environment reports no per-call terms),

    m_S          = mean of G over the step group S, its value samples included (returns of continuations sampled by
                   the policy from that state: `value_samples`, branching)
    A^step_{i,t} = (G_{i,t} - m_S) / (s_g + 1e-4)   where S has at least 2 returns, else 0
    A_{i,t}      = A^outer_{i,t} + w * A^step_{i,t}

s_g is the Bessel std of the step residuals G - m_S over the group's calls whose step group has at least 2 returns
(the scale `turn_advantages` uses for its residuals: one scale per prompt group, so a step group of two equal-return
calls gets 0 and a tiny difference in a tiny group is not blown up to unit size, as a std within each step group
would: the `scale="step_group"` variant, GiGPO's own, kept for the credit diagnostics). A^outer is the episode's
advantage (GRPO's, every turn alike) or the turn's (`call_credit`). m_S depends on the state only (never on the
call made from it), so A^step adds no bias to the policy gradient; a singleton step group adds nothing (its call
keeps A^outer), which is why the episode's term stays (Tree-GRPO's ablation: the in-tree advantage alone collapses).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch

SCALES = ("group", "step_group")


def step_ids(group_ids: Sequence[int], keys: Sequence[Sequence[Hashable | None]]) -> torch.Tensor:
    """(B, K) long: one id per (prompt group, state key), the same for every turn whose call was made in that state
    within that group; -1 where a turn has no key (it made no call, or the environment names no state). `keys[i][t]`
    is rollout i's key at turn t."""
    width = max((len(k) for k in keys), default=0)
    ids = torch.full((len(keys), max(width, 1)), -1, dtype=torch.long)
    index: dict[tuple, int] = {}
    for i, (group, row) in enumerate(zip(group_ids, keys, strict=True)):
        for t, key in enumerate(row):
            if key is not None:
                ids[i, t] = index.setdefault((int(group), key), len(index))
    return ids


def step_advantages(returns: torch.Tensor, steps: torch.Tensor, group_ids: torch.Tensor,
                    value_samples: dict[int, list[float]] | None = None, scale: str = "group") -> torch.Tensor:
    """(B, K) A^step (module docstring): `returns` (B, K) G, `steps` (B, K) step ids (-1: none), `group_ids` (B,),
    `value_samples` {step id: returns of continuations from that state}."""
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
    value_samples = value_samples or {}
    residual = torch.zeros_like(returns)
    counted = torch.zeros_like(returns, dtype=torch.bool)
    spread: dict[int, torch.Tensor] = {}
    for s in torch.unique(steps[steps >= 0]).tolist():
        members = steps == s
        extra = torch.tensor(value_samples.get(s, []), dtype=returns.dtype, device=returns.device)
        pooled = torch.cat([returns[members], extra])
        if pooled.numel() < 2:
            continue
        residual[members] = returns[members] - pooled.mean()
        counted |= members
        spread[s] = (pooled - pooled.mean()).std(unbiased=True)
    advantages = torch.zeros_like(returns)
    if scale == "step_group":
        for s, sd in spread.items():
            members = steps == s
            advantages[members] = residual[members] / (sd + 1e-4)
        return advantages
    for group in torch.unique(group_ids).tolist():
        rows = (group_ids == group).unsqueeze(1).expand_as(steps) & counted
        values = residual[rows]
        sd = values.std(unbiased=True) if values.numel() > 1 else torch.zeros((), dtype=returns.dtype)
        advantages[rows] = values / (sd + 1e-4)
    return advantages


def episode_advantages(episode_rewards: torch.Tensor, group_ids: torch.Tensor) -> torch.Tensor:
    """(B,) GRPO's advantage of each episode: its reward minus its group's mean, over the group's std (+ 1e-4), as
    TRL computes it with `scale_rewards="group"`."""
    advantages = torch.zeros_like(episode_rewards)
    for group in torch.unique(group_ids).tolist():
        rows = group_ids == group
        values = episode_rewards[rows]
        sd = values.std(unbiased=True) if values.numel() > 1 else torch.zeros((), dtype=values.dtype)
        advantages[rows] = (values - values.mean()) / (sd + 1e-4)
    return advantages


def step_group_sizes(steps: torch.Tensor, value_samples: dict[int, list[float]] | None = None) -> list[int]:
    """Per call (a turn with a step id): the number of returns its step group pools (members and value samples)."""
    value_samples = value_samples or {}
    ids, counts = torch.unique(steps[steps >= 0], return_counts=True)
    size = {s: c + len(value_samples.get(s, [])) for s, c in zip(ids.tolist(), counts.tolist(), strict=True)}
    return [size[s] for s in steps[steps >= 0].tolist()]
