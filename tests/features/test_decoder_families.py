"""Anything plain TRL trains, the strict trainer trains (issue 55): one strict GRPO step, and one with the value head,
on tiny random models of the decoder families TRL's own GRPO/SFT tests train, built offline from configs
(tests/support/decoder_families.py). The precision probe and the value head read the final hidden state from the
backbone's output (training/features/final_hidden_state.py), not from a norm module one family names `norm`:
NemotronH's is `norm_f`, and the strict trainer used to refuse it in `__init__`.

18 families (Qwen2, Qwen3, Qwen2-MoE, Qwen3-MoE, Llama, Gemma, Gemma2, Gemma3 text, Phi, Phi3, GPT-NeoX, Cohere2,
OLMo3, GPT-OSS, GLM4-MoE, LFM2, NemotronH, FalconMamba). The whole module takes 35-45 s on the shared 2 cores (about
0.4 s a step, 4 s for the two `training.train` runs), under a minute, so it runs in the default suite."""

from __future__ import annotations

import json
import logging
import math

import pytest
import torch
from datasets import Dataset
from transformers import AutoTokenizer, Qwen3ForCausalLM

from tests.support.decoder_families import FAMILIES, build_family_model
from tests.support.tiny_trainer import length_reward
from training.features.final_hidden_state import hook_final_hidden_state
from training.features.value_head import ValueHeadFeature
from training.run_setup.config import StrictGRPOConfig
from training.step.precision_probe import PrecisionProbe
from training.train import main
from training.trainer import StrictGRPOTrainer

FP32_CPU = {"autocast_dtype": None, "device": "cpu", "hidden_dtype": "float32"}


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


def one_step_trainer(model, tokenizer, rows, output_dir, **overrides) -> StrictGRPOTrainer:
    """Full fine-tuning, as TRL's `test_train` does, with TRL's defaults but for the sizes (gradient checkpointing
    on)."""
    args = StrictGRPOConfig(
        output_dir=output_dir, use_cpu=True, bf16=False, seed=0, max_steps=1, learning_rate=1e-3,
        per_device_train_batch_size=4, num_generations=2, max_completion_length=4, logging_steps=1,
        save_strategy="no", report_to="none", chat_template_kwargs={"enable_thinking": False}, **overrides,
    )
    return StrictGRPOTrainer(model=model, reward_funcs=[length_reward], args=args,
                             train_dataset=Dataset.from_list(rows), processing_class=tokenizer)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_backbone_output_is_what_the_lm_head_reads(family, tokenizer):
    """The place the hooks read is right in every family: in a plain forward (sampling), the backbone's final hidden
    state is exactly the LM head's input."""
    model = build_family_model(family, tokenizer)
    seen = {}
    hook_final_hidden_state(model, lambda hidden: seen.setdefault("backbone", hidden))
    model.get_output_embeddings().register_forward_pre_hook(lambda module, args: seen.setdefault("head", args[0]))
    with torch.no_grad():
        model(torch.tensor([[5, 6, 7, 8, 9]]))
    assert seen["backbone"].shape == (1, 5, model.config.get_text_config().hidden_size)
    assert torch.equal(seen["backbone"], seen["head"])


@pytest.mark.parametrize("estimator", ["grpo", "gae"])
@pytest.mark.parametrize("family", FAMILIES)
def test_one_strict_step_trains_every_family(family, estimator, tokenizer, task_rows, tmp_path):
    """`gae` adds the value head, which reads the final hidden states captured in TRL's loss forward."""
    trainer = one_step_trainer(build_family_model(family, tokenizer), tokenizer, task_rows[:16], str(tmp_path / "out"),
                               advantage_estimator=estimator)
    weights = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    head = None if trainer.value.head is None else [p.detach().clone() for p in trainer.value.head.parameters()]
    trainer.train()
    (log,) = [h for h in trainer.state.log_history if "loss" in h]
    assert math.isfinite(log["loss"]) and log["grad_norm"] > 0
    params = dict(trainer.model.named_parameters())
    assert any(not torch.equal(params[n], w) for n, w in weights.items())  # it trained
    # the precision probe saw both kinds of forward through the backbone
    assert trainer.precision_probe.seen == {"loss_forward": FP32_CPU, "no_grad_forward": FP32_CPU}
    if estimator == "gae":
        assert math.isfinite(log["value/loss"]) and log["value/loss"] > 0
        assert any(not torch.equal(p, b) for p, b in zip(trainer.value.head.parameters(), head))
    else:
        assert head is None and "value/loss" not in log


# ---- a model with no final hidden state to read ----------------------------------------------------------------------
class HeadlessBackboneQwen3(Qwen3ForCausalLM):
    """A causal LM whose backbone cannot be found: `base_model_prefix` names no submodule, so `base_model` is the
    model itself."""

    base_model_prefix = "no_such_backbone"


def test_without_a_final_hidden_state_the_probe_warns_once_and_the_value_head_refuses(tokenizer, caplog):
    model = HeadlessBackboneQwen3(build_family_model("qwen3", tokenizer).config)
    probe = PrecisionProbe()
    with caplog.at_level(logging.WARNING, logger="training.step.precision_probe"):
        probe.attach(model)
        with torch.no_grad():
            model(torch.tensor([[5, 6, 7]]))
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "training.step.precision_probe"]
    assert "HeadlessBackboneQwen3 has no final hidden state to observe" in warning
    assert probe.summary(model, "no")["loss_forward"] is None  # the run goes on without it

    args = StrictGRPOConfig(output_dir="unused", use_cpu=True, bf16=False, advantage_estimator="gae")
    with pytest.raises(TypeError, match="advantage_estimator='gae' needs the final hidden states .*: "
                                        "HeadlessBackboneQwen3 has no final hidden state to read"):
        ValueHeadFeature(args, model, accelerator=None, beta=0.0, sharded=False, group_size=2)


# ---- run_summary.json's precision block ------------------------------------------------------------------------------
@pytest.mark.parametrize("model", ["tiny-qwen3", "nemotron_h"])
def test_run_summary_precision_is_filled(model, tokenizer, tmp_path):
    extra = []
    if model == "nemotron_h":  # saved as a local checkpoint; LoRA on what PEFT allows (not Mamba's out_proj)
        model = str(tmp_path / "tiny-nemotron-h")
        build_family_model("nemotron_h", tokenizer).save_pretrained(model)
        tokenizer.save_pretrained(model)
        extra = ["--lora_target_modules", "q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj", "in_proj"]
    out = tmp_path / "run"
    main(["--config", "recipes/tiny_cpu.yaml", "--model_name_or_path", model, "--output_dir", str(out),
          "--max_steps", "1", "--warm_start_steps", "0", "--heldout_max_samples", "4",
          "--per_device_train_batch_size", "8", "--max_completion_length", "4", "--strict_health", "false", *extra])
    precision = json.loads((out / "run_summary.json").read_text())["precision"]
    assert precision["accelerator_mixed_precision"] == "no"
    assert precision["loss_forward"] == FP32_CPU and precision["no_grad_forward"] == FP32_CPU
    assert precision["weights_dtype"] == {"frozen": ["float32"], "trainable": ["float32"]}
