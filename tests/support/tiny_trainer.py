"""A small StrictGRPOTrainer on the offline tiny Qwen3 with LoRA, for tests and the critical-fixes check."""

from __future__ import annotations

import random

from datasets import Dataset
from peft import LoraConfig

from training.run_setup.config import StrictGRPOConfig
from training.run_setup.flags import StrictFlags
from training.run_setup.models import resolve_model_path
from training.run_setup.prompt_datasets import load_rows
from training.tasks.larger_number.rewards import completion_text
from training.trainer import StrictGRPOTrainer

TASK_TRAIN = "data/larger_number/train.jsonl"


def length_reward(completions, **kwargs) -> list[float]:
    """A reward with spread even for an untrained model (shorter is better), so gradients are non-zero."""
    return [-float(len(completion_text(c))) for c in completions]


def type_rows(n: int = 256) -> list[dict]:
    """A synthetic task whose return is predictable from the prompt alone: `label` 1 for "Type A", 0 for "Type B"."""
    rng = random.Random(0)
    return [
        {
            "prompt": [{"role": "user", "content": f"Type {'AB'[i % 2]}. Larger: {rng.randint(10, 99)} or {rng.randint(10, 99)}?"}],
            "label": 1.0 if i % 2 == 0 else 0.0,
        }
        for i in range(n)
    ]


def label_reward(completions, label, **kwargs) -> list[float]:
    """The reward of `type_rows`: the row's label, whatever the completion."""
    return [float(x) for x in label]


def value_task_settings() -> dict:
    """Trainer settings on `type_rows` where a value head with GAE should learn the return within 25 steps."""
    return dict(
        rows=type_rows(),
        reward_funcs=[label_reward],
        advantage_estimator="gae",
        gamma=1.0,
        lam=1.0,
        vf_coef=1.0,
        max_steps=25,
        learning_rate=5e-3,
        lr_scheduler_type="constant",
        per_device_train_batch_size=32,
        max_completion_length=4,
        strict_health=False,  # the reward is constant within each group by design: no policy signal
    )


def build_tiny_trainer(
    output_dir: str,
    rows: list[dict] | None = None,
    reward_funcs: list | None = None,
    peft: bool = True,
    flags: StrictFlags | None = None,
    model: str | None = None,
    environment_factory=None,
    **overrides,
) -> StrictGRPOTrainer:
    """Keyword arguments override the `StrictGRPOConfig` fields below (fp32, CPU, 2 steps, logging every step)."""
    settings = dict(
        output_dir=output_dir,
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        seed=0,
        max_steps=2,
        learning_rate=1e-3,
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=6,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        beta=0.0,
        chat_template_kwargs={"enable_thinking": False},
    )
    settings.update(overrides)
    peft_config = (
        LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj", "up_proj"], task_type="CAUSAL_LM")
        if peft
        else None
    )
    return StrictGRPOTrainer(
        model=model or resolve_model_path("tiny-qwen3", seed=0),
        reward_funcs=reward_funcs or [length_reward],
        args=StrictGRPOConfig(**settings),
        train_dataset=Dataset.from_list(rows or load_rows(TASK_TRAIN)[:64]),
        peft_config=peft_config,
        flags=flags,
        environment_factory=environment_factory,
    )


WORKSPACE_TRAIN = "data/workspace/train.jsonl"
AGENT_PROMPT = "prompts/workspace_agent.jinja"


def workspace_post_rows() -> list[dict]:
    """Workspace `post_message` train rows with the agent's system prompt (the shortest forced calls)."""
    from training.tasks.workspace.env import WorkspaceEnv
    from training.tool_use.system_prompt import render_system_prompt, with_system_prompt

    rows = [r for r in load_rows(WORKSPACE_TRAIN) if r["task"] == "post_message"]
    return with_system_prompt(rows, render_system_prompt(AGENT_PROMPT, WorkspaceEnv))


def env_settings() -> dict:
    """Trainer settings for the workspace environment: its goal checker joins the reward, tool-sized completions."""
    from training.tasks.workspace.env import WorkspaceEnv

    return dict(
        environment_factory=WorkspaceEnv,
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=72,
        max_tool_calling_iterations=2,
        # the untrained tiny model writes no call and rarely an EOS: its turns are void, and under the default
        # `exclude` no token of a step would be in the loss (training/features/turn_limits.py)
        void_turn_rule="credit",
    )


def build_tiny_env_trainer(output_dir: str, rows: list[dict] | None = None, **overrides) -> StrictGRPOTrainer:
    """`build_tiny_trainer` on the workspace environment, tool-sized."""
    return build_tiny_trainer(output_dir, rows=rows or workspace_post_rows()[:16], **{**env_settings(), **overrides})
