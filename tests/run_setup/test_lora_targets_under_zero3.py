"""`check_lora_targets` reads the model's module names on the meta device. Under DeepSpeed ZeRO-3 (configured as soon
as the training arguments exist) `AutoModelForCausalLM.from_config` builds inside `deepspeed.zero.Init` and then
initialises weights gathered on rank 0, out of the check's meta tensors: every ZeRO-3 run died there ("Cannot copy
out of meta tensor", tests/test_deepspeed_cpu.py). The check must work with ZeRO-3 configured, in-process."""

from __future__ import annotations

import pytest
from transformers.integrations.deepspeed import is_deepspeed_zero3_enabled, unset_hf_deepspeed_config
from trl import ModelConfig

from training.run_setup.config import ConfigError
from training.run_setup.input_checks import check_lora_targets

pytest.importorskip("deepspeed", reason="DeepSpeed is in the `gpu` extra")


@pytest.fixture
def zero3_configured():
    from transformers.integrations import HfDeepSpeedConfig

    config = HfDeepSpeedConfig({"zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": 1})
    assert is_deepspeed_zero3_enabled()
    yield config
    unset_hf_deepspeed_config()
    assert not is_deepspeed_zero3_enabled()


def lora(targets) -> ModelConfig:
    return ModelConfig(model_name_or_path="tiny-qwen3", use_peft=True, lora_target_modules=targets)


def test_lora_targets_are_checked_with_zero3_configured(zero3_configured, tiny_model_dir):
    check_lora_targets(lora(["q_proj", "down_proj"]), tiny_model_dir)  # no DeepSpeed init, no weights
    with pytest.raises(ConfigError, match=r"lora_target_modules: \['qproj'\] match no module"):
        check_lora_targets(lora(["q_proj", "qproj"]), tiny_model_dir)
