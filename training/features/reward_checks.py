"""Rewards never fail silently.

- At init every `JudgeReward` in `reward_funcs` gets its `JudgeSettings` (retries, timeout, failure-rate limit,
  strict = `STRICT_TRAJ_KEYS`) and its `judge_kwargs` entry; a `judge_kwargs` key naming no judge is refused.
- After each scoring: NaN rewards (a function returned None or NaN: unscorable) are counted in `rewards/nan_count`,
  `rewards/<name>/nan_count` and `rewards/unscorable_count` (rows NaN in every function: TRL gives them advantage 0).
  An infinite reward, or one whose magnitude exceeds `reward_magnitude_limit` (past it float32 group statistics
  overflow: the std becomes inf and every advantage of the group silently 0), is counted in
  `rewards/nonfinite_count` and `rewards/<name>/nonfinite_count`; under `strict_health` the run stops with a message
  naming the function and the value, otherwise the reward is masked to NaN like an unscorable one and a warning names
  them. The `judge/*` count metrics are summed over the judges of the step (TRL would average them).
- Each completion's weighted reward and its group go into the batch (`sequence_rewards`, `group_ids`).
"""

from __future__ import annotations

import logging

import torch

from judges.adapter import COUNT_METRICS, JudgeReward, JudgeSettings
from training.run_setup.models import resolve_model_path
from training.step.health import RunHealthError

logger = logging.getLogger(__name__)


class NonFiniteRewardError(RunHealthError):
    """A reward function returned an infinite reward or one too large for the advantage computation."""


# judge_kwargs keys that name a model to load; resolved here (e.g. `tiny-qwen3`), since judges/ imports nothing from
# training/
JUDGE_MODEL_KEYS = ("model", "model_path")


def configure_judge_rewards(reward_funcs: list, judge_kwargs: dict | None, settings: JudgeSettings) -> None:
    """Configure each `JudgeReward` in `reward_funcs`; a `judge_kwargs` key naming no judge reward is an error.
    Model names in a judge's kwargs are resolved to loadable paths (training.run_setup.models.resolve_model_path)."""
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
        kwargs = {k: resolve_model_path(v) if k in JUDGE_MODEL_KEYS and isinstance(v, str) else v
                  for k, v in kwargs.items()}
        reward.configure(settings, kwargs)


def sum_count_metrics(pending: dict[str, list[float]]) -> None:
    """Collapse each count metric's per-reward-function values into their sum (in place)."""
    for name in COUNT_METRICS:
        if len(pending.get(name, [])) > 1:
            pending[name] = [sum(pending[name])]


def out_of_range(rewards_per_func: torch.Tensor, limit: float) -> torch.Tensor:
    """(N, F) bool: rewards that are infinite or whose magnitude exceeds `limit` (NaN is not out of range: it is
    unscorable, counted on its own)."""
    return torch.isinf(rewards_per_func) | (rewards_per_func.abs() > limit)


def weighted_rewards(rewards_per_func: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """TRL's summed reward per row: NaN components left out, rows NaN in every component stay NaN."""
    rewards = (rewards_per_func * weights.to(rewards_per_func.device).unsqueeze(0)).nansum(dim=1)
    rewards[torch.isnan(rewards_per_func).all(dim=1)] = torch.nan
    return rewards


def local_rewards_and_groups(
    rewards_per_func: torch.Tensor, weights: torch.Tensor, num_local: int, process_index: int, group_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """This process's rows of the (gathered) rewards, weighted, and their global group ids."""
    start = process_index * num_local
    rewards = weighted_rewards(rewards_per_func, weights)[start : start + num_local].float()
    group_ids = torch.arange(start, start + num_local, device=rewards.device) // group_size
    return rewards, group_ids


class RewardChecks:
    """See the module docstring."""

    def __init__(self, reward_funcs: list, judge_kwargs, judge_settings: JudgeSettings, magnitude_limit: float,
                 strict: bool):
        configure_judge_rewards(reward_funcs, judge_kwargs, judge_settings)
        self.magnitude_limit = magnitude_limit
        self.strict = strict
        self._warned: set[str] = set()

    def check(self, rewards_per_func: torch.Tensor, names: list[str], metrics: dict, pending: dict) -> torch.Tensor:
        """Count (and mask, or stop on) what is wrong with one batch's gathered rewards; returns them masked."""
        nan = torch.isnan(rewards_per_func)
        bad = out_of_range(rewards_per_func, self.magnitude_limit)
        metrics["rewards/nan_count"].append(float(nan.sum().item()))
        metrics["rewards/nonfinite_count"].append(float(bad.sum().item()))
        for i, name in enumerate(names):
            metrics[f"rewards/{name}/nan_count"].append(float(nan[:, i].sum().item()))
            metrics[f"rewards/{name}/nonfinite_count"].append(float(bad[:, i].sum().item()))
        if bad.any():
            rewards_per_func = self._refuse(rewards_per_func, bad, names)
        unscorable = torch.isnan(rewards_per_func).all(dim=1)
        metrics["rewards/unscorable_count"].append(float(unscorable.sum().item()))
        sum_count_metrics(pending)
        return rewards_per_func

    def _refuse(self, rewards_per_func: torch.Tensor, bad: torch.Tensor, names: list[str]) -> torch.Tensor:
        row, column = (int(i) for i in bad.nonzero()[0])
        name, value = names[column], rewards_per_func[row, column].item()
        message = (
            f"reward function {name!r} returned {value:.6g} for completion {row} ({int(bad[:, column].sum())} such "
            f"rewards this batch): infinite, or beyond reward_magnitude_limit={self.magnitude_limit:g}, where float32 "
            "group statistics overflow and every advantage of the group would silently be 0"
        )
        if self.strict:
            raise NonFiniteRewardError(message + ". Fix the reward function, or set strict_health=false to mask such "
                                       "rewards as unscorable (NaN) and go on.")
        if name not in self._warned:
            self._warned.add(name)
            logger.warning("%s; masked as unscorable (NaN), counted in rewards/%s/nonfinite_count", message, name)
        return rewards_per_func.masked_fill(bad, float("nan"))
