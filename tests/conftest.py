"""Shared fixtures: the offline tiny Qwen3 (built once per session) and a small StrictGRPOTrainer factory."""

from __future__ import annotations

import os

import pytest
import torch

os.environ.setdefault("STRICT_GRPO_CACHE", os.path.join(os.path.dirname(__file__), "..", ".cache", "test"))


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture(scope="session")
def tiny_model_dir() -> str:
    from training.models import resolve_model_path

    return resolve_model_path("tiny-qwen3", seed=0)


@pytest.fixture(scope="session")
def task_rows() -> list[dict]:
    from training.data import load_rows

    return load_rows("data/larger_number/train.jsonl")


def length_reward(completions, **kwargs) -> list[float]:
    """A reward with spread even for an untrained model (shorter is better), so gradients are non-zero."""
    from training.rewards import completion_text

    return [-float(len(completion_text(c))) for c in completions]


@pytest.fixture
def make_trainer(tiny_model_dir, task_rows, tmp_path):
    """Build a StrictGRPOTrainer on the tiny Qwen3 with LoRA; keyword arguments override StrictGRPOConfig fields."""
    from datasets import Dataset
    from peft import LoraConfig

    from training.config import StrictGRPOConfig
    from training.trainer import StrictGRPOTrainer

    def build(rows=None, reward_funcs=None, peft=True, flags=None, model=None, environment_factory=None, **overrides):
        settings = dict(
            output_dir=str(tmp_path / "out"),
            use_cpu=True,
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
        args = StrictGRPOConfig(**settings)
        peft_config = (
            LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj", "up_proj"], task_type="CAUSAL_LM")
            if peft
            else None
        )
        return StrictGRPOTrainer(
            model=model or tiny_model_dir,
            reward_funcs=reward_funcs or [length_reward],
            args=args,
            train_dataset=Dataset.from_list(rows or task_rows[:64]),
            peft_config=peft_config,
            flags=flags,
            environment_factory=environment_factory,
        )

    return build


@pytest.fixture(scope="session")
def workspace_rows() -> list[dict]:
    """Workspace `post_message` train rows with the agent's system prompt (the shortest forced calls)."""
    from training.data import load_rows
    from training.envs.prompting import render_system_prompt, with_system_prompt
    from training.envs.workspace import WorkspaceEnv

    rows = [r for r in load_rows("data/workspace/train.jsonl") if r["task"] == "post_message"]
    return with_system_prompt(rows, render_system_prompt("prompts/workspace_agent.jinja", WorkspaceEnv))


@pytest.fixture
def make_env_trainer(make_trainer, workspace_rows):
    """`make_trainer` with the workspace environment (its goal checker joins the length reward) and tool-sized
    completions."""
    from training.envs.workspace import WorkspaceEnv

    torch.set_num_threads(1)  # ~800-token tool prompts on 2 shared cores: one thread is several times faster

    def build(**overrides):
        settings = dict(
            rows=workspace_rows[:16],
            environment_factory=WorkspaceEnv,
            per_device_train_batch_size=4,
            num_generations=2,
            max_completion_length=72,
            max_tool_calling_iterations=2,
        )
        settings.update(overrides)
        return make_trainer(**settings)

    return build
