"""Plain reward functions that raise or hang: retried, then NaN and counted, or a strict stop that saves a checkpoint
first.

Judges (`judges.adapter.JudgeReward`) retry and count on their own; `with_retries` wraps every other synchronous
callable of `reward_funcs`. Per batch, a call that raises, or takes longer than `reward_timeout_s` (it runs in a
daemon thread, abandoned when it times out: `judges.adapter.call_with_timeout`, as for judges), is tried again up to
`reward_retries` more times. When every attempt failed:
- `strict=False`: the function's rewards for that batch are NaN (TRL leaves NaN components out of the weighted sum;
  never turned into zeros) and a warning names the function and the exception;
- `strict=True` (the project's strict switch for data and reward problems, `STRICT_TRAJ_KEYS=1`): the run stops with
  `RewardFunctionError`, naming the function and the exception, after `train_saving_on_stop` saved a checkpoint of
  the last completed step (the failing batch is not trained on).
Every batch logs `rewards/<name>/errors`: the attempts that raised or timed out (0 when the first one succeeded).
"""

from __future__ import annotations

import logging

from torch import nn
from trl.trainer.utils import get_callable_name, is_async_callable

from judges.adapter import JudgeReward, call_with_timeout
from training.outputs.checkpoints import SaveBeforeStopping

logger = logging.getLogger(__name__)


class RewardFunctionError(SaveBeforeStopping, RuntimeError):
    """A reward function raised on every attempt under the strict flag."""


class RewardTimeoutError(TimeoutError):
    """One call of a reward function took longer than `reward_timeout_s`."""


class RetryingReward:
    """`fn` in TRL's reward-function signature, with retries and an error count (see the module docstring)."""

    def __init__(self, fn, retries: int, strict: bool, timeout_s: float | None = None):
        if retries < 0:
            raise ValueError(f"reward_retries must be >= 0, got {retries}")
        if timeout_s is not None and not timeout_s > 0:
            raise ValueError(f"reward_timeout_s must be > 0 or None, got {timeout_s}")
        self.fn = fn
        self.retries = retries
        self.strict = strict
        self.timeout_s = timeout_s
        self.__name__ = get_callable_name(fn)  # TRL names the reward's metrics after it
        self.__doc__ = fn.__doc__

    def __repr__(self) -> str:
        return (f"RetryingReward({self.__name__!r}, retries={self.retries}, strict={self.strict}, "
                f"timeout_s={self.timeout_s})")

    def __call__(self, *args, **kwargs):
        log_metric = kwargs.get("log_metric")
        attempts = self.retries + 1
        for attempt in range(1, attempts + 1):
            try:
                rewards = call_with_timeout(lambda: self.fn(*args, **kwargs), self.timeout_s, RewardTimeoutError)
            except Exception as err:  # any failure of the user's function is retried, then counted or fatal
                logger.warning(
                    "reward function %r raised on attempt %d of %d: %s: %s",
                    self.__name__, attempt, attempts, type(err).__name__, err,
                )  # fmt: skip
                last = err
                continue
            if log_metric is not None:
                log_metric(f"rewards/{self.__name__}/errors", float(attempt - 1))
            return rewards
        if log_metric is not None:
            log_metric(f"rewards/{self.__name__}/errors", float(attempts))
        state = kwargs.get("trainer_state")
        where = f" at step {state.global_step + 1}" if state is not None else ""
        message = (
            f"reward function {self.__name__!r} raised {type(last).__name__}: {last} on all {attempts} attempts"
            f"{where} (reward_retries={self.retries}, reward_timeout_s={self.timeout_s})"
        )
        if self.strict:
            raise RewardFunctionError(
                f"{message}; stopping (STRICT_TRAJ_KEYS=1; with 0 its rewards would be NaN for the batch)"
            ) from last
        logger.warning("%s; its rewards for this batch are NaN (rewards/%s/errors)", message, self.__name__)
        completions = kwargs.get("completions", args[1] if len(args) > 1 else None)
        return [float("nan")] * len(completions)


def with_retries(reward_funcs: list, retries: int, strict: bool, timeout_s: float | None = None) -> list:
    """`reward_funcs` with every plain synchronous callable wrapped in `RetryingReward`; judges, reward models
    (`nn.Module`), model ids and async functions are left as they are."""
    return [
        f
        if isinstance(f, (JudgeReward, RetryingReward, nn.Module, str)) or is_async_callable(f) or not callable(f)
        else RetryingReward(f, retries, strict, timeout_s)
        for f in reward_funcs
    ]

