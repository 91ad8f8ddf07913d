"""`JudgeReward`: NaN and a count for a failing judge (never 0), retries, timeouts, the strict failure-rate stop,
`judge/calls` once per group (times K), and the same answers on 1 or several (simulated) processes."""

import math
import random
import threading
import time
from collections import defaultdict

import pytest

import judges.adapter as adapter
from judges.adapter import JudgeFailureRateError, JudgeReward, JudgeSettings
from judges.protocol import GroupScores, JudgeConfigError, JudgeError


class LengthJudge:
    """Scores by completion length; counts the groups it was asked about."""

    calls_per_group = 1

    def __init__(self):
        self.groups = []

    def score_group(self, group):
        self.groups.append(group)
        return GroupScores([float(len(c)) for c in group.completions])


class FlakyJudge:
    """Fails (with a raw output) for prompts in `bad`, `fail_times` times per group, then succeeds."""

    calls_per_group = 3

    def __init__(self, bad, fail_times=math.inf):
        self.bad, self.fail_times, self.attempts = set(bad), fail_times, defaultdict(int)

    def score_group(self, group):
        self.attempts[group.prompt] += 1
        if group.prompt in self.bad and self.attempts[group.prompt] <= self.fail_times:
            raise JudgeError("could not parse", raw_output=f"garbage for {group.prompt}")
        return GroupScores([1.0] * len(group.completions), calls=3)


def _batch(prompts, g=2):
    flat_prompts = [p for p in prompts for _ in range(g)]
    completions = [[{"role": "assistant", "content": f"{p} answer {'x' * j}"}] for p in prompts for j in range(g)]
    return flat_prompts, completions


def _call(reward, prompts, completions, **columns):
    logged = defaultdict(list)
    scores = reward(prompts=prompts, completions=completions, log_metric=lambda n, v: logged[n].append(v), **columns)
    return scores, logged


def test_failing_group_gets_nan_and_a_count_never_zero():
    reward = JudgeReward(FlakyJudge(bad={"p1"}), name="flaky", settings=JudgeSettings(retries=2, strict=False))
    prompts, completions = _batch(["p0", "p1", "p2"])
    scores, logged = _call(reward, prompts, completions)
    assert [math.isnan(s) for s in scores] == [False, False, True, True, False, False]
    assert 0.0 not in scores
    assert logged["judge/failures"] == [1]
    assert logged["judge/retries"] == [2]  # the failing group was tried 3 times
    assert logged["judge/calls"] == [2 * 3 + 3 * 3]  # 2 good groups x K=3, plus 3 failed attempts x K=3
    assert logged["judge/groups"] == [3]


def test_retry_recovers_a_flaky_group():
    reward = JudgeReward(FlakyJudge(bad={"p0"}, fail_times=1), name="flaky", settings=JudgeSettings(retries=1))
    scores, logged = _call(reward, *_batch(["p0", "p1"]))
    assert scores == [1.0] * 4
    assert logged["judge/failures"] == [0] and logged["judge/retries"] == [1]


def test_strict_run_stops_above_failure_rate_with_raw_output():
    reward = JudgeReward(
        FlakyJudge(bad={"p0", "p1"}), name="flaky", settings=JudgeSettings(retries=0, max_failure_rate=0.5)
    )
    with pytest.raises(JudgeFailureRateError, match="garbage for p0"):
        _call(reward, *_batch(["p0", "p1", "p2"]))
    # at the threshold (1 of 2 = 50%) it is not fatal
    ok = JudgeReward(FlakyJudge(bad={"p0"}), name="flaky", settings=JudgeSettings(retries=0, max_failure_rate=0.5))
    scores, logged = _call(ok, *_batch(["p0", "p1"]))
    assert logged["judge/failures"] == [1] and math.isnan(scores[0])


def test_non_strict_run_warns_with_raw_output(caplog):
    reward = JudgeReward(FlakyJudge(bad={"p0"}), name="flaky", settings=JudgeSettings(retries=0, strict=False,
                                                                                      max_failure_rate=0.0))
    with caplog.at_level("WARNING"):
        scores, _ = _call(reward, *_batch(["p0"]))
    assert all(math.isnan(s) for s in scores)
    assert "garbage for p0" in caplog.text and "not stopping" in caplog.text


def test_timeout_counts_as_failure():
    class SlowJudge:
        def score_group(self, group):
            time.sleep(2)
            return [1.0] * len(group.completions)

    reward = JudgeReward(SlowJudge(), name="slow", settings=JudgeSettings(retries=0, timeout_s=0.2, strict=False))
    started = time.monotonic()
    scores, logged = _call(reward, *_batch(["p0"]))
    assert time.monotonic() - started < 1.5
    assert all(math.isnan(s) for s in scores) and logged["judge/failures"] == [1]


@pytest.mark.parametrize("bad", [[1.0], [1.0, float("nan")], [1.0, True], [1.0, "0.5"]])
def test_malformed_scores_are_failures(bad):
    class BadJudge:
        def score_group(self, group):
            return bad

    reward = JudgeReward(BadJudge(), name="bad", settings=JudgeSettings(retries=0, strict=False))
    scores, logged = _call(reward, *_batch(["p0"]))
    assert all(math.isnan(s) for s in scores) and logged["judge/failures"] == [1]


def test_config_error_is_raised_not_retried():
    class MissingColumnJudge:
        def score_group(self, group):
            raise JudgeConfigError("no 'answer' column")

    reward = JudgeReward(MissingColumnJudge(), name="cfg", settings=JudgeSettings(retries=3))
    with pytest.raises(JudgeConfigError, match="answer"):
        _call(reward, *_batch(["p0"]))


def test_one_call_per_group_not_per_completion_and_columns_reach_the_judge():
    judge = LengthJudge()
    reward = JudgeReward(judge, name="length")
    prompts, completions = _batch(["p0", "p1"], g=4)
    scores, logged = _call(reward, prompts, completions, answer=["a0"] * 4 + ["a1"] * 4)
    assert logged["judge/calls"] == [2] and len(judge.groups) == 2
    assert [g.columns for g in judge.groups] == [{"answer": "a0"}, {"answer": "a1"}]
    assert scores == [float(len(c[0]["content"])) for c in completions]
    assert reward.__name__ == "length"


class _ThreadCollective:
    """gather_object / PartialState for N threads standing in for N processes."""

    def __init__(self, world):
        self.world, self.barrier, self.slots, self.local = world, threading.Barrier(world), [None] * world, threading.local()

    def gather_object(self, obj):
        rank = self.local.rank
        self.barrier.wait()
        self.slots[rank] = list(obj)
        self.barrier.wait()
        out = [x for slot in self.slots for x in slot]
        self.barrier.wait()
        return out

    def partial_state(self):
        collective = self

        class State:
            num_processes = collective.world
            process_index = collective.local.rank

        return State()


@pytest.mark.parametrize("world", [2, 3])
def test_multi_process_slices_match_single_process_and_each_group_scored_once(monkeypatch, world):
    rng = random.Random(world)
    prompts, completions = _batch([f"p{i}" for i in range(4)], g=3)  # 12 rows: groups span processes
    order = list(range(len(prompts)))
    rng.shuffle(order)
    prompts, completions = [prompts[i] for i in order], [completions[i] for i in order]
    expected, _ = _call(JudgeReward(LengthJudge(), name="length"), prompts, completions)

    collective = _ThreadCollective(world)
    monkeypatch.setattr(adapter, "gather_object", collective.gather_object)
    monkeypatch.setattr(adapter, "PartialState", collective.partial_state)
    sizes = [len(prompts) // world + (r < len(prompts) % world) for r in range(world)]
    bounds = [sum(sizes[:r]) for r in range(world + 1)]
    judges = [LengthJudge() for _ in range(world)]
    results, logs = [None] * world, [None] * world

    def run(rank):
        collective.local.rank = rank
        reward = JudgeReward(judges[rank], name="length")
        results[rank], logs[rank] = _call(reward, prompts[bounds[rank] : bounds[rank + 1]],
                                          completions[bounds[rank] : bounds[rank + 1]])

    threads = [threading.Thread(target=run, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert [s for r in results for s in r] == expected
    assert sum(len(j.groups) for j in judges) == 4  # every group scored exactly once, across all processes
    assert all(log["judge/calls"] == [4] for log in logs)  # each process logs the global total
