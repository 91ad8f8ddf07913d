"""Rewards never fail silently: judges get the run's failure settings, and NaN rewards are counted every step.

`RewardChecksMixin` (a `GRPOTrainer` mixin):
- at init, hands every `JudgeReward` in `reward_funcs` its `JudgeSettings` (retries, timeout, failure-rate limit,
  strict = `STRICT_TRAJ_KEYS`) and its `judge_kwargs` entry, refusing `judge_kwargs` keys no judge answers to;
- after TRL's `_calculate_rewards`, logs `rewards/nan_count` (NaN entries over all reward functions),
  `rewards/<name>/nan_count` per function and `rewards/unscorable_count` (rows NaN in every function: TRL gives them
  advantage 0), and sums the `judge/*` count metrics over the judges of the step (TRL would average them).
"""

from __future__ import annotations

import torch

from judges.adapter import COUNT_METRICS, JudgeReward, JudgeSettings


def configure_judge_rewards(reward_funcs: list, judge_kwargs: dict | None, settings: JudgeSettings) -> None:
    """Configure each `JudgeReward` in `reward_funcs`; a `judge_kwargs` key naming no judge reward is an error."""
    judges = {f.__name__: f for f in reward_funcs if isinstance(f, JudgeReward)}
    judge_kwargs = judge_kwargs or {}
    if not isinstance(judge_kwargs, dict):
        raise ValueError(f"judge_kwargs must be a mapping from judge reward name to kwargs, got {judge_kwargs!r}")
    unknown = sorted(set(judge_kwargs) - set(judges))
    if unknown:
        raise ValueError(
            f"judge_kwargs names {unknown}, which are not judge rewards in reward_funcs (judges: {sorted(judges)})"
        )
    for name, reward in judges.items():
        kwargs = judge_kwargs.get(name) or {}
        if not isinstance(kwargs, dict):
            raise ValueError(f"judge_kwargs[{name!r}] must be a mapping of keyword arguments, got {kwargs!r}")
        reward.configure(settings, kwargs)


def sum_count_metrics(pending: dict[str, list[float]]) -> None:
    """Collapse each count metric's per-reward-function values into their sum (in place)."""
    for name in COUNT_METRICS:
        if len(pending.get(name, [])) > 1:
            pending[name] = [sum(pending[name])]


class RewardChecksMixin:
    """Judge configuration and NaN-reward accounting; see the module docstring."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        settings = JudgeSettings(
            retries=self.args.judge_retries,
            timeout_s=self.args.judge_timeout_s,
            max_failure_rate=self.args.judge_max_failure_rate,
            strict=self.flags.strict_traj_keys,
        )
        configure_judge_rewards(self.reward_funcs, self.args.judge_kwargs, settings)

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        metrics = self._metrics["train" if self.model.training else "eval"]
        nan = torch.isnan(rewards_per_func)  # gathered over processes by TRL: these are global counts
        metrics["rewards/nan_count"].append(float(nan.sum().item()))
        metrics["rewards/unscorable_count"].append(float(nan.all(dim=1).sum().item()))
        for i, name in enumerate(self.reward_func_names):
            metrics[f"rewards/{name}/nan_count"].append(float(nan[:, i].sum().item()))
        sum_count_metrics(self._pending_metrics)
        return rewards_per_func
