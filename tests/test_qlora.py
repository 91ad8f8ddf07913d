"""QLoRA: the base model loaded in 4 bits (bitsandbytes NF4) under a LoRA that trains.

bitsandbytes >= 0.50 quantises on CPU, so the path is tested here for real; the CUDA-specific part (4-bit weights
on the GPU, bf16 compute) is the `gpu` test.
"""

from __future__ import annotations

import pytest
import torch
from trl import ModelConfig, get_quantization_config

bnb = pytest.importorskip("bitsandbytes", reason="QLoRA needs bitsandbytes (the `gpu` extra)")


def quantization_config(dtype: str):
    # The same route as training/train.py: TRL's ModelConfig -> get_quantization_config -> model_init_kwargs.
    return get_quantization_config(ModelConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", dtype=dtype))


def four_bit_layers(model) -> dict[str, torch.nn.Module]:
    return {name: m for name, m in model.named_modules() if isinstance(m, bnb.nn.Linear4bit)}


def test_qlora_trains_lora_over_frozen_4bit_base_on_cpu(make_trainer):
    trainer = make_trainer(
        max_steps=2, learning_rate=5e-3, model_init_kwargs={"quantization_config": quantization_config("float32")}
    )
    layers = four_bit_layers(trainer.model)
    assert layers, "no bitsandbytes Linear4bit layers: the base model was not quantised"
    assert all(m.weight.quant_state.quant_type == "nf4" for m in layers.values())
    assert all(m.weight.dtype == torch.uint8 for m in layers.values())  # packed 4-bit storage
    packed_before = {n: m.weight.detach().clone() for n, m in layers.items()}
    lora_before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora_" in n}
    assert lora_before and all(p.requires_grad for n, p in trainer.model.named_parameters() if "lora_" in n)

    trainer.train()

    params = dict(trainer.model.named_parameters())
    assert sum(not torch.equal(params[n], v) for n, v in lora_before.items()) > 0
    assert all(torch.equal(layers[n].weight, v) for n, v in packed_before.items())  # base stays frozen
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 2 and all(torch.isfinite(torch.tensor(losses)))


@pytest.mark.gpu
def test_qlora_4bit_weights_on_cuda_with_bf16_compute(make_trainer):
    trainer = make_trainer(
        max_steps=1,
        use_cpu=False,
        bf16=True,
        model_init_kwargs={"quantization_config": quantization_config("bfloat16")},
    )
    layers = four_bit_layers(trainer.model)
    assert layers and all(m.weight.device.type == "cuda" for m in layers.values())
    assert all(m.compute_dtype == torch.bfloat16 for m in layers.values())
    trainer.train()
    assert all(torch.isfinite(torch.tensor(h["loss"])) for h in trainer.state.log_history if "loss" in h)
