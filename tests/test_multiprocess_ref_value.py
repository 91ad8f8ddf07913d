"""Several processes (torchrun, gloo, CPU): the same reference adapter and value head on every rank; the ZeRO-3
gathered sync path under a real DeepSpeed engine. Slow (each starts two Python processes)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def torchrun_two(script: str, out: Path, extra_env: dict | None = None) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", **(extra_env or {})}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", script, str(out)]
    result = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    return [json.loads((out / f"rank{rank}.json").read_text()) for rank in (0, 1)]


@pytest.mark.slow
def test_two_ranks_hold_the_same_reference_adapter_and_value_head(tmp_path, tiny_model_dir):
    rank0, rank1 = torchrun_two("tests/scripts/two_rank_ref_value.py", tmp_path)
    assert rank0["world_size"] == 2
    assert rank0["ref_sync/count"] == [1.0, 2.0, 3.0]
    assert rank0["ref"] == rank1["ref"]
    assert rank0["policy"] == rank1["policy"]
    assert rank0["value_head"] == rank1["value_head"]  # the head's gradients are averaged like DDP's
    assert rank0["ref"] != rank0["policy"]  # EMA (alpha 0.5): the reference trails the policy


@pytest.mark.slow
def test_zero3_sync_gathers_partitioned_adapter_tensors(tmp_path, tiny_model_dir):
    pytest.importorskip("deepspeed")
    ranks = torchrun_two("tests/scripts/zero3_ref_sync.py", tmp_path, {"DS_ACCELERATOR": "cpu"})
    for record in ranks:
        assert record["partitioned"] and record["pairs"] == 8
        assert record["diffs_at_start"] == 0
        assert record["diffs_after_policy_moved"] == 8
        assert record["diffs_after_policy_moved_ungathered"] == 0  # placeholders: counting needs the gather
        assert record["diffs_after_hard_sync"] == 0
        assert record["local_numel_after"] == 0  # re-partitioned after the block
    assert ranks[0]["ref_checksum"] == ranks[1]["ref_checksum"]
