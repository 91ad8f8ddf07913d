"""`StrictGRPOTrainer` is a drop-in for `GRPOTrainer`: TRL's documented constructions work unchanged, and with every
strict feature that changes the maths turned off a run takes exactly TRL's steps."""

from __future__ import annotations

import math

import pytest
import torch
from datasets import Dataset
from peft import LoraConfig
from trl import GRPOConfig, GRPOTrainer

from tests.support.tiny_trainer import length_reward
from training.algorithms.sampled_logprobs import sampled_token_logprobs
from training.run_setup.config import StrictGRPOConfig
from training.run_setup.flags import read_flags
from training.trainer import StrictGRPOTrainer

TINY = dict(
    use_cpu=True, bf16=False, seed=0, max_steps=2, learning_rate=5e-3, per_device_train_batch_size=8,
    num_generations=4, max_completion_length=6, logging_steps=1, save_strategy="no", report_to="none",
    gradient_checkpointing=False, chat_template_kwargs={"enable_thinking": False},
)


def lora() -> LoraConfig:
    return LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj", "up_proj"], task_type="CAUSAL_LM")


@pytest.fixture
def dataset(task_rows) -> Dataset:
    return Dataset.from_list(task_rows[:32])


def test_no_args_gives_strict_defaults_named_like_trls(tiny_model_dir, dataset, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    trainer = StrictGRPOTrainer(model=tiny_model_dir, reward_funcs=length_reward, train_dataset=dataset)
    assert type(trainer.args) is StrictGRPOConfig
    assert trainer.args.output_dir.endswith(f"{tiny_model_dir.rstrip('/').split('/')[-1]}-GRPO")
    assert trainer.args.bf16 is False  # our CPU default, not TRL's bf16 autocast


def test_a_plain_grpo_config_is_carried_over_and_trains(tiny_model_dir, dataset, tmp_path):
    args = GRPOConfig(output_dir=str(tmp_path / "out"), **TINY)
    trainer = StrictGRPOTrainer(model=tiny_model_dir, reward_funcs=[length_reward], args=args,
                                train_dataset=dataset, peft_config=lora())
    assert isinstance(trainer.args, StrictGRPOConfig)
    assert (trainer.args.max_steps, trainer.args.num_generations, trainer.args.output_dir) == (2, 4, args.output_dir)
    assert trainer.args.advantage_estimator == "grpo" and trainer.args.dynamic_sampling is False
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 2 and all(math.isfinite(x) for x in losses)


def test_with_strict_features_off_the_run_takes_trls_steps(tiny_model_dir, dataset, tmp_path):
    """PPO_RECORD_AT_SAMPLE=0 (TRL's old log-probs), no forcing, no dynamic sampling, grpo advantages, beta 0: the
    schema checks, health detectors and extra metrics must not change a single weight."""
    runs = {}
    for name, cls, extra in (("trl", GRPOTrainer, {}), ("strict", StrictGRPOTrainer,
                                                      {"flags": read_flags({"PPO_RECORD_AT_SAMPLE": "0"})})):
        args = GRPOConfig(output_dir=str(tmp_path / name), **TINY)
        trainer = cls(model=tiny_model_dir, reward_funcs=[length_reward], args=args, train_dataset=dataset,
                      peft_config=lora(), **extra)
        trainer.train()
        runs[name] = (
            [h["loss"] for h in trainer.state.log_history if "loss" in h],
            {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora_" in n},
        )
    (trl_losses, trl_weights), (our_losses, our_weights) = runs["trl"], runs["strict"]
    assert our_losses == trl_losses
    assert our_weights.keys() == trl_weights.keys()
    assert all(torch.equal(our_weights[n], trl_weights[n]) for n in trl_weights)
    assert any(not torch.equal(w, torch.zeros_like(w)) for n, w in trl_weights.items() if "lora_B" in n)  # it trained


def test_rollout_func_supplies_the_sample_time_logps(tiny_model_dir, dataset, tmp_path):
    calls = []

    def rollout(prompts, trainer):
        """TRL's rollout_func contract: prompt ids, completion ids and the sampled tokens' log-probs."""
        tokenizer = trainer.processing_class
        texts = [tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=False, enable_thinking=False)
                 for p in prompts]
        tokenizer.padding_side = "left"
        enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            out = trainer.model.generate(**enc, max_new_tokens=4, do_sample=True, temperature=trainer.temperature,
                                         output_logits=True, return_dict_in_generate=True)
        width = enc["input_ids"].shape[1]
        completions = []
        for row in out.sequences[:, width:].tolist():
            eos = [i for i, t in enumerate(row) if t in trainer.eos_token_ids]
            completions.append(row[: eos[0] + 1] if eos else row)
        prompt_ids = [[t for t, m in zip(ids, mask) if m] for ids, mask in zip(enc["input_ids"].tolist(),
                                                                              enc["attention_mask"].tolist())]
        calls.append(len(prompts))
        logprobs = sampled_token_logprobs(out.logits, completions, trainer.temperature)
        return {"prompt_ids": prompt_ids, "completion_ids": completions, "logprobs": logprobs}

    args = StrictGRPOConfig(output_dir=str(tmp_path / "out"), **{**TINY, "max_steps": 1})
    trainer = StrictGRPOTrainer(model=tiny_model_dir, reward_funcs=[length_reward], args=args, train_dataset=dataset,
                                peft_config=lora(), rollout_func=rollout)
    trainer.train()
    (log,) = [h for h in trainer.state.log_history if "loss" in h]
    assert calls == [8] and math.isfinite(log["loss"])
    assert log["ratio/mean"] == pytest.approx(1.0, abs=1e-4)  # the rollout's log-probs are the old ones


def test_rollout_func_with_forcing_is_refused(tiny_model_dir, dataset, tmp_path):
    args = StrictGRPOConfig(output_dir=str(tmp_path / "out"), **TINY)
    with pytest.raises(ValueError, match="FORCE_RATE > 0 needs TRL's own sampler"):
        StrictGRPOTrainer(model=tiny_model_dir, reward_funcs=[length_reward], args=args, train_dataset=dataset,
                          rollout_func=lambda prompts, trainer: {}, flags=read_flags({"FORCE_RATE": "0.5"}))
