"""Assisted (forced) tool calls: the schedule, the `forced` flag, and their absence from the on-policy loss."""

import json
import math

import pytest
import torch

from training.features.forcing import ForcedSampleInRLError, assisting, choose_forced, forced_tool_call_text
from training.run_setup.flags import read_flags


def test_schedule_assists_only_during_warmup_and_only_with_a_rate():
    assert [assisting(s, 1.0, 2) for s in range(4)] == [True, True, False, False]
    assert not any(assisting(s, 0.0, 10) for s in range(10))
    import random

    assert sum(choose_forced(1000, 0.25, random.Random(0))) in range(200, 300)


def test_forced_call_text_is_what_the_chat_template_renders(workspace_rows, tiny_model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    row = workspace_rows[0]
    call = json.loads(row["reference_calls_json"])[0]
    messages = [{"role": "user", "content": "x"},
                {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": call}]}]
    rendered = tokenizer.apply_chat_template(messages, tokenize=False, enable_thinking=False)
    assert forced_tool_call_text(row, 0) + "<|im_end|>" in rendered
    with pytest.raises(KeyError, match="row 3 has no 'reference_calls_json'"):
        forced_tool_call_text({"prompt": []}, 3)


def spy_loss_inputs(trainer) -> list[dict]:
    """Record (step, forced, loss mask) of every batch that reaches the policy loss."""
    seen = []
    original = trainer._compute_loss

    def spy(model, inputs):
        mask = inputs["completion_mask"] * inputs.get("tool_mask", torch.ones_like(inputs["completion_mask"]))
        seen.append({"step": trainer.state.global_step, "forced": inputs["forced"].clone(), "mask": mask.clone()})
        return original(model, inputs)

    trainer._compute_loss = spy
    return seen


def logged(trainer, name) -> list[float]:
    return [h[name] for h in trainer.state.log_history if name in h]


def test_default_flags_never_force_and_rl_fraction_is_exactly_zero(make_env_trainer):
    trainer = make_env_trainer(flags=read_flags({}), max_steps=2)
    seen = spy_loss_inputs(trainer)
    trainer.train()
    assert logged(trainer, "forced/rl_fraction") == [0.0, 0.0]
    assert logged(trainer, "forced/assist_fraction") == [0.0, 0.0]
    assert seen and not any(s["forced"].any() for s in seen)


def test_assist_warmup_forces_first_two_steps_and_keeps_them_out_of_the_loss(make_env_trainer):
    trainer = make_env_trainer(flags=read_flags({"FORCE_RATE": "1", "ASSIST_WARMUP": "2"}), max_steps=3)
    seen = spy_loss_inputs(trainer)
    trainer.train()
    assert logged(trainer, "forced/assist_fraction") == [1.0, 1.0, 0.0]
    assert logged(trainer, "forced/rl_fraction") == [0.0, 0.0, 0.0]
    assert [s["step"] for s in seen] == [0, 1, 2]
    for s in seen:
        forced_rows = s["mask"][s["forced"]]
        assert forced_rows.sum() == 0, f"forced tokens in the loss mask at step {s['step']}"
        assert s["forced"].all() if s["step"] < 2 else not s["forced"].any()
    assert all(s["mask"].sum() > 0 for s in seen if s["step"] >= 2)
    # the forced first turn is the reference call, run in the environment: the goal checker passes every sample
    assert logged(trainer, "rewards/WorkspaceEnv/mean")[:2] == [1.0, 1.0]


@pytest.fixture
def forced_batch(make_env_trainer):
    def build(rl_disable_forced: str, **overrides):
        flags = read_flags({"FORCE_RATE": "1", "ASSIST_WARMUP": "1", "RL_DISABLE_FORCED": rl_disable_forced})
        trainer = make_env_trainer(flags=flags, **overrides)
        trainer.model.train()
        trainer.current_gradient_accumulation_steps = 1  # set by Trainer's training loop, which we do not run here
        batch = trainer._generate_and_score_completions([trainer.train_dataset[i] for i in (0, 0, 1, 1)])
        return trainer, batch

    return build


def test_forced_sample_inside_the_loss_raises_with_rl_disable_forced(forced_batch):
    trainer, batch = forced_batch("1")
    assert batch["forced"].all() and (batch["completion_mask"] * batch["tool_mask"]).sum() == 0
    batch["tool_mask"] = torch.ones_like(batch["tool_mask"])  # a later stage rebuilt the mask: the bug we guard
    with pytest.raises(ForcedSampleInRLError, match=r"4 forced \(assisted\) sample\(s\).*RL_DISABLE_FORCED=1"):
        trainer._compute_loss(trainer.model, batch)


def test_forced_sample_inside_the_loss_is_measured_without_rl_disable_forced(forced_batch):
    trainer, batch = forced_batch("0")
    batch["tool_mask"] = torch.ones_like(batch["tool_mask"])
    trainer._compute_loss(trainer.model, batch)
    assert trainer._metrics["train"]["forced/rl_fraction"] == [1.0]


def test_optional_supervised_term_trains_on_forced_tokens_only(forced_batch):
    trainer, batch = forced_batch("1", forced_sft_coef=1.0)
    sft_mask = batch["forced_sft_mask"]
    assert sft_mask.sum() > 0 and (sft_mask * batch["tool_mask"]).sum() == 0
    loss = trainer._compute_loss(trainer.model, batch)
    (sft,) = trainer._metrics["train"]["forced/sft_loss"]
    assert math.isfinite(sft) and sft > 0 and loss.item() != 0.0
    loss.backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for n, p in trainer.model.named_parameters() if "lora_" in n)


def test_policy_logps_of_forced_tokens_match_the_trainers_forward(make_env_trainer):
    """What replaces sample-time log-probs of forced tokens when a sampler records them (vLLM, record-at-sample):
    batched and padded, they agree with the trainer's own log-probs of each sequence alone and with a plain forward
    (to a few 1e-3: left padding shifts positions as in TRL's own padded forward, and TRL's fused head differs)."""
    trainer = make_env_trainer()
    prompts, completions = [[5, 6, 7], [8, 9]], [[10, 11], [12, 13, 14]]
    got = trainer._policy_logps(prompts, completions)
    assert [len(x) for x in got] == [2, 3]
    for prompt, completion, logps in zip(prompts, completions, got):
        ids = torch.tensor([prompt + completion])
        with torch.no_grad():
            alone, _, _ = trainer._get_per_token_logps_and_entropies(
                trainer.model, ids, torch.ones_like(ids), len(completion)
            )
            logits = trainer.model(input_ids=ids).logits[0] / trainer.temperature
        plain = torch.log_softmax(logits[len(prompt) - 1 : -1], dim=-1)[range(len(completion)), completion]
        assert torch.allclose(torch.tensor(logps), alone[0], atol=5e-3)
        assert torch.allclose(torch.tensor(logps), plain, atol=5e-3)
