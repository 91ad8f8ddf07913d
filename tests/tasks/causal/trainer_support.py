"""A tiny StrictGRPOTrainer on the causal environment whose rollouts are scripted (TRL's `rollout_func`): each
rollout plays seeded random calls in its own `CausalEnv` (the instance TRL reset for it), so the rewards and
advantages come from TRL's own scoring code, fast and repeatable, without an LM that knows the task."""

from __future__ import annotations

import numpy as np
from datasets import Dataset
from peft import LoraConfig

from training.run_setup.config import StrictGRPOConfig
from training.run_setup.flags import StrictFlags
from training.run_setup.prompt_datasets import load_rows
from training.tasks.causal.env import CausalEnv
from training.tasks.causal.policies.scripted import random_call
from training.tasks.causal.splits import DATA_DIR
from training.trainer import StrictGRPOTrainer

FLAGS = StrictFlags(force_rate=0.0, assist_warmup=0, rl_disable_forced=True, ppo_record_at_sample=True,
                    strict_traj_keys=True)


def scripted_rollout(prompts, trainer):
    """Every rollout i plays its row's budget of random calls from generator i (the same calls in every trainer
    given the same batch), then answers "Done."; returns what TRL's rollout_func contract asks for."""
    tok = trainer.processing_class
    done = tok("Done." + tok.eos_token, add_special_tokens=False)["input_ids"]
    prompt = tok("prompt", add_special_tokens=False)["input_ids"]
    for i, env in enumerate(trainer.environments):
        rng = np.random.default_rng(i)
        for _ in range(env._trace.budget):
            tool, args = random_call(env, rng)
            getattr(env, tool)(**args)
    n = len(prompts)
    return {"prompt_ids": [prompt] * n, "completion_ids": [done] * n, "logprobs": [[0.0] * len(done)] * n}


def causal_rows(n: int = 2) -> list[dict]:
    return load_rows(DATA_DIR / "train.jsonl")[:n]


def build_causal_trainer(output_dir: str, model: str, reward_funcs: list, reward_weights: list[float],
                         rollout_func=scripted_rollout, **overrides) -> StrictGRPOTrainer:
    """Full fine-tuning (no LoRA: the scripted rollouts never read the weights), fp32 on CPU, one step."""
    settings = dict(output_dir=output_dir, use_cpu=True, bf16=False, seed=0, max_steps=1, learning_rate=1e-3,
                    per_device_train_batch_size=8, num_generations=4, max_completion_length=16, logging_steps=1,
                    save_strategy="no", report_to="none", beta=0.0, reward_weights=reward_weights,
                    chat_template_kwargs={"enable_thinking": False})
    settings.update(overrides)
    return StrictGRPOTrainer(model=model, reward_funcs=reward_funcs, args=StrictGRPOConfig(**settings),
                             train_dataset=Dataset.from_list(causal_rows()), flags=FLAGS,
                             environment_factory=CausalEnv, rollout_func=rollout_func)


def build_sampled_causal_trainer(output_dir: str, model: str, flags: StrictFlags, heldout_rows=None,
                                 environment_factory=CausalEnv, **overrides) -> StrictGRPOTrainer:
    """TRL's own sampler on the causal environment (LoRA, the four reward functions at the recipe's weights), one
    step of 8 short episodes of at most 3 calls; keyword arguments override StrictGRPOConfig fields."""
    from training.tasks.causal.reward_funcs import REWARD_FUNCS

    settings = dict(output_dir=output_dir, use_cpu=True, bf16=False, seed=0, max_steps=1, learning_rate=1e-3,
                    per_device_train_batch_size=8, num_generations=4, max_completion_length=64,
                    max_tool_calling_iterations=2, max_tool_calls_per_episode=3, logging_steps=1, save_strategy="no",
                    report_to="none", beta=0.0, reward_weights=[1.0, 0.5, 0.3, 0.1],
                    chat_template_kwargs={"enable_thinking": False}, strict_health=False)
    settings.update(overrides)
    return StrictGRPOTrainer(
        model=model, reward_funcs=REWARD_FUNCS, args=StrictGRPOConfig(**settings),
        train_dataset=Dataset.from_list(causal_rows()), environment_factory=environment_factory, flags=flags,
        peft_config=LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"),
        heldout_rows=heldout_rows,
    )


def score(trainer) -> dict:
    """One generation batch of the trainer's first rows (each repeated num_generations times), scored by TRL."""
    rows = [dict(r) for r in causal_rows() for _ in range(trainer.num_generations)]
    trainer.model.train()
    return trainer._generate_and_score_completions(rows)
