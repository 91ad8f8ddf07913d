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
    from datasets import Dataset
    from peft import LoraConfig

    from training.config import StrictGRPOConfig
    from training.data import load_rows
    from training.models import resolve_model_path
    from training.trainer import StrictGRPOTrainer

    def length_reward(completions, **kwargs):
        return [-float(len(str(c))) for c in completions]

    args = StrictGRPOConfig(
        output_dir=os.path.join(out_dir, "run"),
        use_cpu=True,
        seed=0,
        max_steps=3,
        learning_rate=5e-3,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=4,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        beta=0.04,
        sync_ref_model=True,
        ref_model_sync_steps=1,
        ref_model_mixup_alpha=0.5,
        advantage_estimator="gae",
        chat_template_kwargs={"enable_thinking": False},
    )
    trainer = StrictGRPOTrainer(
        model=resolve_model_path("tiny-qwen3"),
        reward_funcs=[length_reward],
        args=args,
        train_dataset=Dataset.from_list(load_rows("data/larger_number/train.jsonl")[:64]),
        peft_config=LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"),
    )
    trainer.train()
    rank = trainer.accelerator.process_index
    record = {
        "world_size": trainer.accelerator.num_processes,
        "ref": {name: ref.double().sum().item() for name, _, ref in trainer.reference_pairs()},
        "policy": {name: policy.double().sum().item() for name, policy, _ in trainer.reference_pairs()},
        "value_head": {name: p.double().sum().item() for name, p in trainer.value_head.named_parameters()},
        "ref_sync/count": [h["ref_sync/count"] for h in trainer.state.log_history if "ref_sync/count" in h],
    }
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(record, f)


if __name__ == "__main__":
    main(sys.argv[1])
