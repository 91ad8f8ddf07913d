"""DeepSpeed ZeRO-2 and ZeRO-3 for real on two CPU ranks (`DS_ACCELERATOR=cpu`, gloo) through `accelerate launch`
and our ZeRO configs: the DeepSpeed engine trains the LoRA, advantages use rewards gathered over both ranks, and
both ranks end with the same full adapter.

Slow: the first run on a machine JIT-compiles DeepSpeed's shared-memory comm op (minutes; cached afterwards in
~/.cache/torch_extensions), then a run takes ~30 s on 2 cores.
"""

from __future__ import annotations

import json

import pytest
from safetensors import safe_open

from tests.support.two_rank import MAX_STEPS, gathered_advantages_match, launch_two_ranks, of_kind

pytest.importorskip("deepspeed", reason="DeepSpeed is in the `gpu` extra")


@pytest.mark.slow
@pytest.mark.parametrize("stage", [2, 3])
def test_zero_two_cpu_ranks_train_the_adapter(tmp_path, tiny_model_dir, stage):
    run = launch_two_ranks(
        tmp_path,
        f"accelerate_configs/deepspeed_zero{stage}.yaml",
        "--mixed_precision", "no",  # the GPU config asks for bf16
        env={"DS_ACCELERATOR": "cpu"},
    )  # fmt: skip
    params = {rank: of_kind(run["records"][rank], "params")[-1] for rank in (0, 1)}
    for rank in (0, 1):
        assert params[rank]["engine"] == "DeepSpeedEngine"
        assert params[rank]["deepspeed_zero_stage"] == stage
    with safe_open(run["out"] / "adapter_model.safetensors", "pt") as saved:
        saved_numel = sum(saved.get_tensor(name).numel() for name in saved.keys())
    # Full tensors on both ranks (gathered under ZeRO-3), the same on both, as many values as the saved adapter.
    assert params[0]["numel"] == params[1]["numel"] == saved_numel > 0
    assert params[0]["hashes"] and params[0]["hashes"] == params[1]["hashes"]
    assert gathered_advantages_match(run)
    steps = [json.loads(line) for line in (run["out"] / "metrics.jsonl").read_text().splitlines()]
    steps = [row for row in steps if "loss" in row]
    assert [row["step"] for row in steps] == list(range(1, MAX_STEPS + 1))
    assert all(row["grad_norm"] > 0 for row in steps)  # gradients reached the adapter through the engine
    assert (run["out"] / "adapter_model.safetensors").exists()
