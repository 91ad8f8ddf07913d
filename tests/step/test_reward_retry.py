"""Plain reward functions that raise: retried, then NaN and counted (`rewards/<name>/errors`), or, under the strict
flag, a stop that names the function and the exception after saving a checkpoint (training/step/reward_retry.py)."""

from __future__ import annotations

import json
import math
import random
import threading
import time

import pytest
import torch
from safetensors.torch import load_file

from judges.adapter import JudgeReward
from tests.support.tiny_trainer import length_reward
from training import train
from training.outputs.checkpoints import incompleteness, train_saving_on_stop
from training.step.reward_retry import RetryingReward, RewardFunctionError, with_retries


class Flaky:
    """Raises on the first `failures` calls, then scores by length."""

    def __init__(self, failures: int):
        self.failures = failures
        self.calls = 0
        self.__name__ = "flaky"

    def __call__(self, completions, **kwargs):
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionError(f"scorer unreachable (call {self.calls})")
        return length_reward(completions)


def call(reward, n: int = 4) -> tuple[list, dict]:
    logged = {}
    out = reward(prompts=["p"] * n, completions=["abc"] * n, log_metric=lambda k, v: logged.__setitem__(k, v))
    return out, logged


def test_a_call_that_raises_is_retried_and_the_attempts_counted():
    flaky = Flaky(failures=2)
    rewards, logged = call(RetryingReward(flaky, retries=2, strict=True))
    assert rewards == [-3.0] * 4 and flaky.calls == 3
    assert logged == {"rewards/flaky/errors": 2.0}
    assert call(RetryingReward(Flaky(0), retries=2, strict=True))[1] == {"rewards/flaky/errors": 0.0}


def test_out_of_retries_gives_nan_for_the_batch_and_a_warning(caplog):
    rewards, logged = call(RetryingReward(Flaky(failures=99), retries=1, strict=False))
    assert len(rewards) == 4 and all(math.isnan(r) for r in rewards)
    assert logged == {"rewards/flaky/errors": 2.0}
    assert "'flaky' raised ConnectionError: scorer unreachable (call 2) on all 2 attempts" in caplog.text


class Hangs:
    """Blocks until `release` is set on its first `hangs` calls, then scores by length."""

    def __init__(self, hangs: int):
        self.hangs, self.calls, self.release = hangs, 0, threading.Event()
        self.__name__ = "hangs"

    def __call__(self, completions, **kwargs):
        self.calls += 1
        if self.calls <= self.hangs:
            self.release.wait(timeout=10)  # a reward without the timeout fails the test rather than hanging it
        return length_reward(completions)


def test_a_call_that_hangs_times_out_and_counts_as_a_failed_attempt():
    hangs = Hangs(hangs=1)
    try:
        started = time.monotonic()
        rewards, logged = call(RetryingReward(hangs, retries=1, strict=True, timeout_s=0.2))
        assert time.monotonic() - started < 5
        assert rewards == [-3.0] * 4 and hangs.calls == 2
        assert logged == {"rewards/hangs/errors": 1.0}
    finally:
        hangs.release.set()


def test_a_call_that_always_hangs_gives_nan_or_a_strict_stop_naming_the_timeout(caplog):
    hangs = Hangs(hangs=99)
    try:
        rewards, logged = call(RetryingReward(hangs, retries=1, strict=False, timeout_s=0.1))
        assert all(math.isnan(r) for r in rewards) and logged == {"rewards/hangs/errors": 2.0}
        assert "'hangs' raised RewardTimeoutError: timed out after 0.1s on all 2 attempts" in caplog.text
        with pytest.raises(RewardFunctionError, match=r"'hangs' raised RewardTimeoutError: timed out after 0.1s"):
            call(RetryingReward(hangs, retries=0, strict=True, timeout_s=0.1))
    finally:
        hangs.release.set()


def test_the_recipe_timeout_reaches_every_plain_reward_function(tmp_path, tiny_model_dir):
    run = train.prepare(train.read_recipe(["--config", "recipes/tiny_cpu.yaml", "--output_dir", str(tmp_path / "o"),
                                           "--reward_timeout_s", "7.5"]))
    assert [(type(f), f.timeout_s) for f in run.reward_funcs] == [(RetryingReward, 7.5)] * 2


def test_out_of_retries_under_the_strict_flag_names_the_function_and_the_exception():
    with pytest.raises(RewardFunctionError, match=r"'flaky' raised ConnectionError: scorer unreachable") as info:
        call(RetryingReward(Flaky(failures=99), retries=0, strict=True))
    assert isinstance(info.value.__cause__, ConnectionError)


def test_only_plain_synchronous_callables_are_wrapped():
    async def async_reward(completions, **kwargs):
        return [0.0] * len(completions)

    judge = JudgeReward(name="j", build=lambda **kw: None)
    wrapped = with_retries([length_reward, judge, async_reward, "org/reward-model"], retries=1, strict=True)
    assert isinstance(wrapped[0], RetryingReward) and wrapped[0].__name__ == "length_reward"
    assert wrapped[1:] == [judge, async_reward, "org/reward-model"]


def test_strict_stop_saves_the_last_completed_step_first(make_trainer, tmp_path):
    """The function fails for good at step 3: checkpoint-2 (saved at the stop, save_steps is 100) holds the weights
    after step 2, and the failing batch was not trained on."""

    def breaks_at_step_3(completions, trainer_state, **kwargs):
        if trainer_state.global_step >= 2:
            raise TimeoutError("judge service timed out")
        return length_reward(completions)

    reward = RetryingReward(breaks_at_step_3, retries=1, strict=True)
    trainer = make_trainer(reward_funcs=[reward], max_steps=5, save_strategy="steps", save_steps=100,
                           strict_health=False)  # fmt: skip
    with pytest.raises(RewardFunctionError, match=r"'breaks_at_step_3' raised TimeoutError: judge service timed out "
                       r"on all 2 attempts at step 3") as info:  # fmt: skip
        train_saving_on_stop(trainer, None)
    out = tmp_path / "out"
    assert incompleteness(out / "checkpoint-2") is None
    assert "Checkpoint saved before stopping" in str(info.value.__notes__)
    state = json.loads((out / "checkpoint-2" / "trainer_state.json").read_text())
    assert state["global_step"] == 2
    saved = load_file(out / "checkpoint-2" / "adapter_model.safetensors")
    live = {n: p for n, p in trainer.model.named_parameters() if "lora_" in n}
    assert len(saved) == len(live) and all(torch.equal(t, live[n.replace(".weight", ".default.weight")])
                                           for n, t in saved.items())  # fmt: skip


def test_flaky_function_without_the_strict_flag_trains_on_and_counts(make_trainer, tmp_path):
    rng = random.Random(0)

    def flaky_30_percent(completions, **kwargs):
        if rng.random() < 0.3:
            raise ValueError("flaky scorer")
        return length_reward(completions)

    reward = RetryingReward(flaky_30_percent, retries=0, strict=False)
    make_trainer(reward_funcs=[reward], max_steps=6, strict_health=False).train()
    lines = [json.loads(x) for x in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines() if '"loss"' in x]
    errors = [line["rewards/flaky_30_percent/errors"] for line in lines]
    nans = [line["rewards/flaky_30_percent/nan_count"] for line in lines]
    assert len(lines) == 6 and 0 < sum(errors) < 6
    assert [e > 0 for e in errors] == [n > 0 for n in nans]  # a failed batch is NaN, never zeros
