"""Run by tests/test_multiprocess_ref_value.py under `torchrun --nproc_per_node 2` with DS_ACCELERATOR=cpu.

Puts the tiny Qwen3 with a LoRA policy adapter and the "ref" adapter under a real DeepSpeed ZeRO-3 engine (gloo,
CPU), moves the policy adapter, then runs `training.features.reference`'s gathered sync and difference count on the
partitioned tensors. Writes OUT/rank{N}.json with what each rank saw.
"""

import json
import os
import sys

import torch

torch.set_num_threads(1)


def main(out_dir: str) -> None:
    import deepspeed
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from training.features.reference import (
        adapter_param_pairs,
        add_reference_adapter,
        count_differing,
        gathered,
        is_partitioned,
        sync_reference,
    )
    from training.run_setup.models import resolve_model_path

    deepspeed.init_distributed(dist_backend="gloo")
    rank = int(os.environ["RANK"])
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(resolve_model_path("tiny-qwen3"), dtype=torch.float32)
    model = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))
    add_reference_adapter(model, "default")
    config = {
        "train_batch_size": 2,
        "train_micro_batch_size_per_gpu": 1,
        "zero_optimization": {"stage": 3},
        "optimizer": {"type": "Adam", "params": {"lr": 1e-2, "torch_adam": True}},
    }
    trainable = [p for p in model.parameters() if p.requires_grad]
    engine, *_ = deepspeed.initialize(model=model, model_parameters=trainable, config=config)
    pairs = adapter_param_pairs(model, "default")
    tensors = [t for _, p, r in pairs for t in (p, r)]
    record = {"partitioned": all(is_partitioned(t) for t in tensors), "pairs": len(pairs)}

    with gathered(tensors, modifier_rank=None):
        record["diffs_at_start"] = count_differing(pairs)
    with gathered(tensors) as may_write, torch.no_grad():  # move the policy (rank 0 writes, DeepSpeed broadcasts)
        if may_write:
            for _, policy, _ in pairs:
                policy.add_(0.01 * torch.arange(policy.numel(), dtype=policy.dtype).reshape(policy.shape).sin())
    with gathered(tensors, modifier_rank=None):
        record["diffs_after_policy_moved"] = count_differing(pairs)
    # Why the gather matters: the partitioned placeholders compare equal even though the tensors differ.
    record["diffs_after_policy_moved_ungathered"] = count_differing(pairs)
    with gathered(tensors) as may_write:
        if may_write:
            sync_reference(pairs, 1.0)
    with gathered(tensors, modifier_rank=None):
        record["diffs_after_hard_sync"] = count_differing(pairs)
        record["ref_checksum"] = sum(r.double().sum().item() for _, _, r in pairs)
    record["local_numel_after"] = sum(r.numel() for _, _, r in pairs)  # partitioned again: placeholders
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(record, f)
    del engine


if __name__ == "__main__":
    main(sys.argv[1])
