"""The causal environment trained together with the features its rewards meet: a value head, `num_iterations` 2,
reference sync, dynamic sampling and forcing (real sampler, LoRA, the four reward functions, the exact surrogate's
expected-gain structure reward). Each cell must pass the generic checks of `tests/test_feature_combinations.py` and
keep every causal reward finite on every step that sampled. Forcing is on in both cells: the untrained tiny model
never makes a valid call by itself, so its forced episodes are what gives a group varied rewards (and its own,
on-policy rows a non-zero loss)."""

from __future__ import annotations

import math

import pytest
from datasets import Dataset
from peft import LoraConfig

from tests.causal.trainer_support import causal_rows
from tests.test_feature_combinations import cell_id, check_cell, training_logs
from training.causal.env import CausalEnv
from training.causal.reward_funcs import REWARD_FUNCS
from training.config import StrictGRPOConfig
from training.flags import read_flags
from training.trainer import StrictGRPOTrainer

# (dynamic sampling, estimator, forcing, reference sync, num_iterations)
CELLS = [
    (True, "gae", True, True, 2),
    (False, "hybrid", True, True, 2),
]
CAUSAL_REWARDS = [f"rewards/{name}/mean" for name in ("optimization", "structure", "parent", "exploration")]


def train_cell(output_dir: str, model: str, dynamic, estimator, forcing, sync, iterations) -> list[dict]:
    settings = dict(
        output_dir=output_dir, use_cpu=True, bf16=False, seed=0, max_steps=2, learning_rate=5e-3,
        per_device_train_batch_size=8, num_generations=4, max_completion_length=64, max_tool_calling_iterations=2,
        max_tool_calls_per_episode=3, logging_steps=1, save_strategy="no", report_to="none", beta=0.0,
        reward_weights=[1.0, 0.5, 0.3, 0.1], chat_template_kwargs={"enable_thinking": False}, strict_health=False,
        advantage_estimator=estimator, dynamic_sampling=dynamic, dynamic_sampling_max_rounds=2,
        num_iterations=iterations,
    )
    if sync:
        settings.update(beta=0.04, sync_ref_model=True, ref_model_sync_steps=1, ref_model_mixup_alpha=1.0)
    trainer = StrictGRPOTrainer(
        model=model, reward_funcs=REWARD_FUNCS, args=StrictGRPOConfig(**settings),
        train_dataset=Dataset.from_list(causal_rows()), environment_factory=CausalEnv,
        peft_config=LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"),
        flags=read_flags({"FORCE_RATE": "0.5" if forcing else "0.0", "ASSIST_WARMUP": "10"}),
    )
    trainer.train()
    return training_logs(output_dir)


@pytest.mark.parametrize("cell", CELLS, ids=[cell_id(c) for c in CELLS])
def test_causal_rewards_train_with_value_head_reuse_and_reference_sync(causal_model_dir, tmp_path, cell):
    logs = train_cell(str(tmp_path), causal_model_dir, *cell)
    check_cell(logs, *cell)
    generated = logs[:: cell[-1]]
    for log in generated:
        assert all(math.isfinite(log[name]) for name in CAUSAL_REWARDS), log
        assert log["surrogate/updates"] > 0.0
    assert max(log["rewards/structure/mean"] for log in generated) > 0.0  # the lookahead ran: some call gained
    assert all(log["loss"] != 0.0 for log in logs)  # the on-policy rows got advantages, on both passes
