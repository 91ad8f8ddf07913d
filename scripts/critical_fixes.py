"""Prove on this machine that every critical fix works: behavioural checks on the tiny Qwen3, on CPU.

    python -m scripts.critical_fixes [--only NAME ...] [--list]

Prints a table (check, PASS/FAIL, detail), then a last line `N passed, M failed`; exits 1 on any failure. Each
check runs the real trainer briefly and asserts behaviour, so reverting any one fix makes its check fail.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch


class CheckFailed(AssertionError):
    """A check's behaviour was not what the fix guarantees; the message says what was seen."""


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


def _workdir(name: str) -> str:
    return tempfile.mkdtemp(prefix=f"critical_fixes_{name}_")


def _trainer(name: str, **kwargs):
    from tests.support.tiny_trainer import build_tiny_trainer

    return build_tiny_trainer(output_dir=_workdir(name), **kwargs)


def _train_logs(trainer) -> list[dict]:
    """The per-step logs as metrics.jsonl has them (with the values callbacks add)."""
    path = Path(trainer.args.output_dir) / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if '"loss"' in line]


def _generation_batch(trainer, n_prompts: int = 2) -> dict:
    from tests.support.tiny_trainer import TASK_TRAIN
    from training.run_setup.prompt_datasets import load_rows

    rows = [dict(r) for r in load_rows(TASK_TRAIN)[:n_prompts] for _ in range(trainer.num_generations)]
    return trainer._generate_and_score_completions(rows)


# ---- the checks -----------------------------------------------------------------------------------------------


def check_strict_trajectory_keys() -> str:
    from training.algorithms.trajectory import TrajectoryKeyError

    trainer = _trainer("keys")
    batch = _generation_batch(trainer)
    batch["old_log_probs"] = batch.pop("old_per_token_logps")
    trainer.current_gradient_accumulation_steps = 1
    try:
        trainer.compute_loss(trainer.model, batch)
    except TrajectoryKeyError as err:
        expect("old_log_probs" in str(err) and "old_per_token_logps" in str(err), f"error does not name both: {err}")
        return "misnamed 'old_log_probs' raised, naming 'old_per_token_logps'"
    raise CheckFailed("a batch with 'old_log_probs' instead of 'old_per_token_logps' trained without an error")


def check_no_forced_in_rl() -> str:
    from tests.support.tiny_trainer import build_tiny_env_trainer
    from training.run_setup.flags import read_flags

    default = build_tiny_env_trainer(_workdir("forced_default"), flags=read_flags({}), max_steps=1)
    default.train()
    rl = [row["forced/rl_fraction"] for row in _train_logs(default)]
    expect(rl == [0.0], f"with the launchers' defaults forced/rl_fraction was {rl}, expected exactly [0.0]")

    flags = read_flags({"FORCE_RATE": "1", "ASSIST_WARMUP": "1", "RL_DISABLE_FORCED": "1"})
    assisted = build_tiny_env_trainer(_workdir("forced_assist"), flags=flags, max_steps=2)
    assisted.train()
    logs = _train_logs(assisted)
    assist = [row["forced/assist_fraction"] for row in logs]
    rl = [row["forced/rl_fraction"] for row in logs]
    expect(assist == [1.0, 0.0], f"FORCE_RATE=1 ASSIST_WARMUP=1: forced/assist_fraction {assist}, expected [1, 0]")
    expect(rl == [0.0, 0.0], f"forced samples reached the on-policy loss: forced/rl_fraction {rl}")
    return "defaults: rl_fraction 0.0; FORCE_RATE=1 ASSIST_WARMUP=1: assisted [1, 0], rl_fraction [0, 0]"


def check_tool_names_consistent() -> str:
    from tests.support.tiny_trainer import AGENT_PROMPT
    from training.tasks.workspace.env import WorkspaceEnv
    from training.tool_use.system_prompt import render_system_prompt
    from training.tool_use.tool_names import ToolNameError, check_tool_names, environment_tool_names

    tools = environment_tool_names(WorkspaceEnv)
    prompt = render_system_prompt(AGENT_PROMPT, WorkspaceEnv)
    check_tool_names(tools, prompts={AGENT_PROMPT: prompt})
    misspelled = prompt.replace("send_slack_message", "slack_send_message")
    try:
        check_tool_names(tools, prompts={AGENT_PROMPT: misspelled})
    except ToolNameError as err:
        expect("'slack_send_message'" in str(err) and "'send_slack_message'" in str(err),
               f"the error does not name both spellings: {err}")
        return "bundled prompt consistent; 'slack_send_message' refused, naming 'send_slack_message'"
    raise CheckFailed("a prompt advertising 'slack_send_message' passed the tool-name check")


def check_value_head_trains() -> str:
    from tests.support.tiny_trainer import value_task_settings

    trainer = _trainer("value", **value_task_settings())
    trainer.train()
    logs = _train_logs(trainer)
    losses = [row["value/loss"] for row in logs]
    variance = [row["value/explained_variance"] for row in logs]
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    expect(last < 0.5 * first, f"value loss did not fall: first 5 steps {first:.4f}, last 5 {last:.4f}")
    ev_last = sum(variance[-5:]) / 5
    expect(ev_last > 0.5, f"explained variance stayed at {ev_last:.3f} (last 5 steps), expected > 0.5")
    return f"value loss {first:.3f} -> {last:.3f}, explained variance -> {ev_last:.2f}"


def check_reference_sync() -> str:
    trainer = _trainer("ref", beta=0.04, sync_ref_model=True, ref_model_sync_steps=1, ref_model_mixup_alpha=1.0,
                       learning_rate=5e-3, max_steps=2)
    trainer.train()
    logs = _train_logs(trainer)
    diffs = [row.get("ref_sync/param_diffs") for row in logs]
    counts = [row.get("ref_sync/count") for row in logs]
    expect(diffs == [0.0, 0.0], f"ref_sync/param_diffs after hard syncs: {diffs}, expected [0.0, 0.0]")
    expect(counts == [1.0, 2.0], f"ref_sync/count: {counts}, expected [1.0, 2.0]")
    pairs = trainer.reference.pairs()
    expect(len(pairs) > 0, "no reference adapter tensors found")
    differing = sum(not torch.equal(ref, policy) for _, policy, ref in pairs)
    expect(differing == 0, f"{differing} reference tensors differ from the policy right after a hard sync")
    return f"{len(pairs)} reference tensors, 0 differ after each of 2 syncs"


def constant_reward(completions, **kwargs) -> list[float]:
    return [1.0] * len(completions)


def nan_reward(completions, **kwargs) -> list[float]:
    return [float("nan")] * len(completions)


def check_detectors_fire() -> str:
    from training.step.health import RunHealthError

    trainer = _trainer("equal", reward_funcs=[constant_reward], max_steps=5, health_patience=3)
    try:
        trainer.train()
    except RunHealthError as err:
        stopped = str(err)
    else:
        raise CheckFailed("a run whose rewards are all equal trained to the end without a strict stop")
    logs = _train_logs(trainer)
    expect(all(row["health/zero_loss"] == 1.0 for row in logs), "health/zero_loss did not fire on a loss of 0")
    expect(all(row["health/all_groups_zero_std"] == 1.0 for row in logs), "all-equal rewards were not detected")
    expect("consecutive steps" in stopped, f"unexpected stop message: {stopped}")

    nan_run = _trainer("nan", reward_funcs=[nan_reward, constant_reward], max_steps=1, strict_health=False)
    nan_run.train()
    nan_count = _train_logs(nan_run)[0].get("rewards/nan_count")
    expect(nan_count is not None and nan_count > 0, f"NaN rewards were not counted (rewards/nan_count={nan_count})")
    return f"all-equal rewards and zero loss stopped the run at step {len(logs)}; {nan_count:.0f} NaN rewards counted"


def check_ratio_on_second_pass() -> str:
    trainer = _trainer("ratio", num_iterations=2, max_steps=2, learning_rate=0.3, epsilon=0.05)
    trainer.train()
    first, second = _train_logs(trainer)
    expect(abs(first["ratio/mean"] - 1.0) < 1e-4, f"first-pass ratio mean {first['ratio/mean']}, expected 1")
    expect(first["ratio/std"] < 1e-3, f"first-pass ratio std {first['ratio/std']}, expected ~0")
    expect(second["ratio/std"] > 0.0, "second-pass ratio std is 0: the ratio is pinned at 1.0")
    expect(second["clip_ratio/region_mean"] > 0.0, "second pass clipped nothing at a large learning rate")
    return f"first pass mean {first['ratio/mean']:.6f}; second pass std {second['ratio/std']:.3f}"


def check_strict_flags() -> str:
    from training.run_setup.flags import FlagError, read_flags

    defaults = read_flags({})
    expect(defaults.force_rate == 0.0 and defaults.ppo_record_at_sample and defaults.strict_traj_keys,
           f"unexpected defaults {defaults}")
    bad = {"FORCE_RATE": "1.5", "STRICT_TRAJ_KEYS": "yes please", "ASSIST_WARMUP": "-1", "RL_DISABLE_FORCED": "2",
           "PPO_RECORD_AT_SAMPLE": "true"}
    for name, value in bad.items():
        try:
            read_flags({name: value})
        except FlagError as err:
            expect(name in str(err), f"the error for {name}={value!r} does not name the flag: {err}")
        else:
            raise CheckFailed(f"{name}={value!r} was accepted")
    return f"defaults parse; {len(bad)} bad values refused, each naming its flag"


@dataclass(frozen=True)
class Check:
    name: str
    run: Callable[[], str]


CHECKS = [
    Check("strict_trajectory_keys", check_strict_trajectory_keys),
    Check("no_forced_samples_in_rl", check_no_forced_in_rl),
    Check("tool_names_consistent", check_tool_names_consistent),
    Check("value_head_trains", check_value_head_trains),
    Check("reference_sync_zero_diffs", check_reference_sync),
    Check("detectors_fire_on_broken_runs", check_detectors_fire),
    Check("sample_time_ratio_second_pass", check_ratio_on_second_pass),
    Check("strict_flags_validated", check_strict_flags),
]


@dataclass
class Result:
    name: str
    passed: bool
    detail: str
    seconds: float


def run_checks(names: list[str] | None = None) -> list[Result]:
    unknown = set(names or []) - {c.name for c in CHECKS}
    if unknown:
        raise SystemExit(f"error: unknown check(s) {sorted(unknown)}; known: {[c.name for c in CHECKS]}")
    results = []
    for check in CHECKS:
        if names and check.name not in names:
            continue
        start = time.perf_counter()
        try:
            detail, passed = check.run(), True
        except CheckFailed as err:
            detail, passed = str(err), False
        except Exception as err:  # a crash is a failure of that check, reported with where it happened
            frame = traceback.extract_tb(err.__traceback__)[-1]
            detail, passed = f"{type(err).__name__}: {err} ({Path(frame.filename).name}:{frame.lineno})", False
        results.append(Result(check.name, passed, detail, time.perf_counter() - start))
    return results


def print_table(results: list[Result]) -> None:
    width = max(len(r.name) for r in results)
    print(f"{'check'.ljust(width)}  result  seconds  detail")
    for r in results:
        print(f"{r.name.ljust(width)}  {'PASS' if r.passed else 'FAIL'}    {r.seconds:7.1f}  {r.detail}")
    passed = sum(r.passed for r in results)
    print(f"{passed} passed, {len(results) - passed} failed")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these checks")
    parser.add_argument("--list", action="store_true", help="list the checks and exit")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(c.name for c in CHECKS))
        return 0
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    torch.set_num_threads(1)
    results = run_checks(args.only)
    print_table(results)
    return 0 if all(r.passed for r in results) else 1


def cli() -> None:
    sys.exit(main())


if __name__ == "__main__":
    cli()
