"""Fixtures of the causal tests."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # environment_factory / rollout_func warnings, every build


@pytest.fixture(scope="session")
def causal_model_dir() -> str:
    """The offline tiny Qwen3 with the causal tokenizer (`tiny-qwen3-causal`), built once into the test cache."""
    from training.run_setup.models import resolve_model_path

    return resolve_model_path("tiny-qwen3-causal", seed=0)
