"""Run by tests/test_multiprocess_ref_value.py under `torchrun --nproc_per_node 2` (gloo, CPU).

Trains 3 steps with the reference adapter synced every step (EMA) and the value head on, then writes each rank's
reference-adapter and value-head fingerprints to OUT/rank{N}.json for the test to compare.
"""

import json
import os
import sys

import torch

torch.set_num_threads(1)


def main(out_dir: str) -> None:
    from tests.support.tiny_trainer import build_tiny_trainer

    trainer = build_tiny_trainer(
        os.path.join(out_dir, "run"),
        max_steps=3,
        learning_rate=5e-3,
        per_device_train_batch_size=4,
        max_completion_length=4,
        beta=0.04,
        sync_ref_model=True,
        ref_model_sync_steps=1,
        ref_model_mixup_alpha=0.5,
        advantage_estimator="gae",
    )
    trainer.train()
    rank = trainer.accelerator.process_index
    record = {
        "world_size": trainer.accelerator.num_processes,
        "ref": {name: ref.double().sum().item() for name, _, ref in trainer.reference.pairs()},
        "policy": {name: policy.double().sum().item() for name, policy, _ in trainer.reference.pairs()},
        "value_head": {name: p.double().sum().item() for name, p in trainer.value.head.named_parameters()},
        "ref_sync/count": [h["ref_sync/count"] for h in trainer.state.log_history if "ref_sync/count" in h],
    }
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(record, f)


if __name__ == "__main__":
    main(sys.argv[1])
