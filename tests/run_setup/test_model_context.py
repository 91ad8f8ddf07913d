"""A run's context, `model_init_kwargs: {max_position_embeddings: N}`: the prompt-length check, the evaluation's
model and vLLM's refusal read it as the trainer does."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from training.evaluation.spec import load_policy, spec_from_recipe
from training.run_setup.model_context import ContextError, config_overrides
from training.run_setup.prompt_datasets import DatasetError
from training.run_setup.recipe import check_context

RECIPE = "recipes/causal_cpu.yaml"


def training_args(**kw):
    defaults = {"model_init_kwargs": None, "use_vllm": False, "vllm_max_model_length": None,
                "chat_template_kwargs": {}, "max_completion_length": 1000}
    return SimpleNamespace(**{**defaults, **kw})


def test_a_prompt_that_fits_only_the_longer_context_passes_only_with_it(tiny_model_dir):
    rows = {"train.jsonl": [{"prompt": [{"role": "user", "content": " ".join(["V1"] * 100)}]}]}
    with pytest.raises(DatasetError, match="train.jsonl"):
        check_context(None, training_args(), tiny_model_dir, rows)  # 100 tokens + 1000 > 1024
    check_context(None, training_args(model_init_kwargs={"max_position_embeddings": 2048}), tiny_model_dir, rows)
    with pytest.raises(ContextError, match="model_init_kwargs.max_position_embeddings=2048: above the model config"):
        check_context(None, training_args(model_init_kwargs={"max_position_embeddings": 2048}, use_vllm=True),
                      tiny_model_dir, rows)


def test_the_evaluated_model_takes_the_runs_context_and_keeps_its_weights(tiny_model_dir):
    spec = spec_from_recipe(RECIPE, ["--model_init_kwargs", '{"max_position_embeddings": 2048}'], build_model=False)
    assert spec.config_overrides == {"max_position_embeddings": 2048}
    longer, tokenizer = load_policy(spec.__class__(**{**spec.__dict__, "model_path": tiny_model_dir}))
    shorter, _ = load_policy(spec.__class__(**{**spec.__dict__, "model_path": tiny_model_dir,
                                               "config_overrides": {}}))
    assert (longer.config.max_position_embeddings, shorter.config.max_position_embeddings) == (2048, 1024)
    ids = torch.tensor([tokenizer.encode(" V1 gain 3 info 4" * 20)])
    with torch.no_grad():  # rotary positions: no weight per position, the same logits within the shorter context
        assert torch.equal(longer(ids).logits, shorter(ids).logits)


@pytest.mark.parametrize("value", [0, "2048", True])
def test_a_context_that_is_not_a_number_of_tokens_is_refused_by_name(value):
    with pytest.raises(ContextError, match="model_init_kwargs.max_position_embeddings: a positive number"):
        config_overrides({"max_position_embeddings": value})
    assert config_overrides('{"dtype": "float32", "max_position_embeddings": 1536}') == {"max_position_embeddings": 1536}


def test_a_tool_run_trains_under_the_longer_context_with_lora_and_a_reference(make_env_trainer):
    """TRL loads the policy (and, with beta > 0, the reference: the adapter switched off) with `model_init_kwargs`,
    and its tool loop drops replies past the policy config's context: both read 2048; with dynamic sampling and two
    iterations a step."""
    trainer = make_env_trainer(model_init_kwargs={"max_position_embeddings": 2048}, beta=0.04, max_steps=1,
                               num_iterations=2, dynamic_sampling=True)
    assert trainer.model.config.max_position_embeddings == 2048
    trainer.train()
    assert trainer.state.global_step == 1
