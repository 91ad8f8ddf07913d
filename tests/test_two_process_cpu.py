"""Two ranks on CPU (`accelerate launch --num_processes 2`, the CPU config, gloo): one short GRPO run.

The run goes through `training.train` with probes (tests/support/two_process_driver.py) and checks that groups stay
whole and are scored exactly once, that advantages are computed from the rewards gathered over both ranks, that
both ranks end with identical adapter weights, and that metrics.jsonl, run_summary.json and checkpoints are
written once, by the main process.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tests.support.two_rank import (
    MAX_STEPS,
    NUM_GENERATIONS,
    PER_DEVICE_BATCH,
    group_advantages,
    launch_two_ranks,
    of_kind,
)

CPU_CONFIG = "accelerate_configs/cpu.yaml"


@pytest.fixture(scope="module")
def two_rank_run(tmp_path_factory, tiny_model_dir):
    # A KL term with a reference adapter hard-synced every step, so the reference is checked across ranks too.
    ref_sync = ("--beta", "0.04", "--sync_ref_model", "true", "--ref_model_sync_steps", "1")
    ref_sync += ("--ref_model_mixup_alpha", "1.0")
    return launch_two_ranks(tmp_path_factory.mktemp("two_rank"), CPU_CONFIG, train_args=ref_sync)


_of = of_kind


def test_both_ranks_run_and_see_world_size_two(two_rank_run):
    for rank in (0, 1):
        batches = _of(two_rank_run["records"][rank], "batch")
        assert len(batches) == MAX_STEPS
        assert all(b["world_size"] == 2 and len(b["prompts"]) == PER_DEVICE_BATCH for b in batches)


def test_groups_stay_whole_across_ranks(two_rank_run):
    """Rank 0's prompts then rank 1's make the global batch: contiguous blocks of one prompt, num_generations long."""
    recs = two_rank_run["records"]
    for step in range(MAX_STEPS):
        merged = [p for rank in (0, 1) for p in _of(recs[rank], "batch")[step]["prompts"]]
        groups = [merged[i : i + NUM_GENERATIONS] for i in range(0, len(merged), NUM_GENERATIONS)]
        assert all(len(set(g)) == 1 for g in groups), groups
        assert len({g[0] for g in groups}) == len(groups)  # distinct prompts, none split or repeated elsewhere


def test_every_completion_scored_exactly_once(two_rank_run):
    recs = two_rank_run["records"]
    for step in range(MAX_STEPS):
        calls = [c for rank in (0, 1) for c in _of(recs[rank], "scored") if c["step"] == step]
        assert [c["rank"] for c in calls] == [0, 1]  # one reward call per rank per step
        for call in calls:
            batch = _of(recs[call["rank"]], "batch")[step]
            assert call["prompts"] == batch["prompts"]  # each rank scores its own completions, no one else's
        scored_prompts = Counter(p for c in calls for p in c["prompts"])
        assert sum(scored_prompts.values()) == 2 * PER_DEVICE_BATCH
        assert set(scored_prompts.values()) == {NUM_GENERATIONS}


def test_advantages_come_from_rewards_gathered_over_both_ranks(two_rank_run):
    recs = two_rank_run["records"]
    spanning_group_checked = False
    for step in range(MAX_STEPS):
        rewards = [r for rank in (0, 1) for r in _of(recs[rank], "scored")[step]["rewards"]]
        expected = group_advantages(rewards)
        got = [a for rank in (0, 1) for a in _of(recs[rank], "batch")[step]["advantages"]]
        assert got == pytest.approx(expected, abs=1e-4)
        # The group at positions 4..7 has two members on each rank: only a gather gets its advantages right.
        spanning = rewards[4:8]
        if len(set(spanning)) > 1:
            local_only = group_advantages(rewards[4:6] * 2)[:2]
            spanning_group_checked |= got[4:6] != pytest.approx(local_only, abs=1e-3)
    assert spanning_group_checked, "no step had reward spread in the rank-spanning group; pick another reward"


def test_adapter_weights_identical_on_both_ranks(two_rank_run):
    params = {rank: _of(two_rank_run["records"][rank], "params")[-1] for rank in (0, 1)}
    assert params[0]["hashes"], "no LoRA tensors found"
    assert params[0]["hashes"] == params[1]["hashes"]
    assert params[0]["adapters"] == params[1]["adapters"]
    assert params[0]["engine"] == "DistributedDataParallel" and params[0]["deepspeed_zero_stage"] is None



def test_reference_adapter_identical_on_both_ranks_and_synced(two_rank_run):
    params = {rank: _of(two_rank_run["records"][rank], "params")[-1] for rank in (0, 1)}
    assert params[0]["adapters"] == ["default", "ref"]
    ref = {n: h for n, h in params[0]["hashes"].items() if ".ref." in n}
    assert len(ref) > 0
    assert ref == {n: params[1]["hashes"][n] for n in ref}
    # the last step ended with a hard sync: every reference tensor equals its policy tensor
    assert all(h == params[0]["hashes"][n.replace(".ref.", ".default.")] for n, h in ref.items())
    lines = [json.loads(line) for line in (two_rank_run["out"] / "metrics.jsonl").read_text().splitlines()]
    assert [row["ref_sync/param_diffs"] for row in lines if "loss" in row] == [0.0] * MAX_STEPS


def test_metrics_and_checkpoints_written_once(two_rank_run):
    out = two_rank_run["out"]
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    train_steps = [row["step"] for row in lines if "loss" in row]
    assert train_steps == list(range(1, MAX_STEPS + 1))  # one line per step: rank 1 wrote nothing
    assert all("reward" in row and "timing/generate_s" in row for row in lines if "loss" in row)
    checkpoints = sorted(p.name for p in out.glob("checkpoint-*"))
    assert checkpoints == [f"checkpoint-{s}" for s in range(1, MAX_STEPS + 1)]
    for ckpt in checkpoints:
        assert (out / ckpt / "adapter_model.safetensors").exists()
        assert sorted(p.name for p in (out / ckpt).glob("rng_state_*.pth")) == ["rng_state_0.pth", "rng_state_1.pth"]
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["global_step"] == MAX_STEPS
    assert two_rank_run["log"].count("INFO training.train: Done in") == 1
