"""One real GRPO step on the causal environment (TRL's sampler, multi-turn tools, the four reward functions): the
causal metrics and the per-component rewards reach `metrics.jsonl`; causal rows can be forced (FORCE_RATE) from
their expert trace; the held-out evaluation returns the causal held-out
metrics and writes the episodes' records."""

import math

from datasets import Dataset
from peft import LoraConfig

from tests.causal.trainer_support import causal_rows
from training.causal.env import CausalEnv
from training.causal.heldout import causal_heldout, is_causal
from training.causal.reward_funcs import REWARD_FUNCS
from training.config import StrictGRPOConfig
from training.flags import StrictFlags
from training.metrics import CONTRACT
from training.report import read_metrics
from training.trainer import StrictGRPOTrainer

CAUSAL_METRICS = [name for name, when in CONTRACT.items() if when == "causal environment"]


def test_a_causal_training_step_logs_every_causal_metric(causal_model_dir, tmp_path):
    flags = StrictFlags(force_rate=0.5, assist_warmup=1, rl_disable_forced=True, ppo_record_at_sample=True,
                        strict_traj_keys=True)
    args = StrictGRPOConfig(
        output_dir=str(tmp_path), use_cpu=True, bf16=False, seed=0, max_steps=1, learning_rate=1e-3,
        per_device_train_batch_size=8, num_generations=4, max_completion_length=64, max_tool_calling_iterations=2,
        max_tool_calls_per_episode=3, logging_steps=1, save_strategy="no", report_to="none", beta=0.0,
        reward_weights=[1.0, 0.5, 0.3, 0.1], chat_template_kwargs={"enable_thinking": False}, strict_health=False,
        heldout_samples_per_prompt=1,
    )
    trainer = StrictGRPOTrainer(
        model=causal_model_dir, reward_funcs=REWARD_FUNCS, args=args, train_dataset=Dataset.from_list(causal_rows()),
        peft_config=LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"),
        flags=flags, environment_factory=CausalEnv, heldout_rows=causal_rows(2),
    )
    assert is_causal(trainer)
    trainer.train()
    (log,) = [row for row in read_metrics(tmp_path) if "loss" in row]
    missing = [name for name in CAUSAL_METRICS if name not in log]
    assert not missing, missing
    assert all(math.isfinite(log[name]) for name in CAUSAL_METRICS)
    assert log["forced/assist_fraction"] > 0 and log["forced/rl_fraction"] == 0.0
    assert log["surrogate/updates"] > 1.0  # the initial rows, then at least the forced calls' rows
    held, records = causal_heldout(trainer)
    assert len(records) == 2 * (1 + 1)  # 2 rows: 1 sampled + 1 greedy episode each
    assert {"heldout/reward", "heldout/regret", "heldout/parent_f1", "heldout/info_gain",
            "heldout/greedy_reward"} <= set(held)
    assert all(math.isfinite(v) for v in held.values())
    through_trainer = trainer.evaluate_heldout()  # training/heldout.py hands a causal environment to causal_heldout
    assert through_trainer["heldout/regret"] == held["heldout/regret"]  # same paired episodes, same seed
    written = (tmp_path / "heldout" / "step-000001" / "causal_eval.jsonl").read_text().splitlines()
    assert len(written) == len(records)
