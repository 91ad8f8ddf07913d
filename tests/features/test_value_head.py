"""The value head inside the trainer: same forward, in the optimizer and clipping, logged, exported, learns."""

import pytest
import torch
from safetensors.torch import load_file

from tests.support.tiny_trainer import value_task_settings
from training.features.value_head import VALUE_HEAD_FILE


def logged(trainer, name):
    return [h[name] for h in trainer.state.log_history if name in h]


def test_value_head_params_are_in_the_optimizer_and_the_gradient_clipping(make_trainer):
    trainer = make_trainer(advantage_estimator="gae", max_grad_norm=1.0)
    head = list(trainer.value.head.parameters())
    trainer.create_optimizer()
    held = {id(p) for group in trainer.optimizer.param_groups for p in group["params"]}
    assert all(id(p) in held for p in head)
    # Only the head has a gradient: the norm the trainer reports and clips must be the head's.
    trainer.model.zero_grad(set_to_none=True)
    for p in head:
        p.grad = torch.full_like(p, 3.0)
    expected = torch.sqrt(sum((p.grad**2).sum() for p in head))
    norm = trainer._clip_grad_norm(trainer.model)
    assert norm.item() == pytest.approx(expected.item(), rel=1e-6)
    clipped = torch.sqrt(sum((p.grad**2).sum() for p in head))
    assert clipped.item() == pytest.approx(1.0, rel=1e-4)


def test_training_logs_value_metrics_uses_token_advantages_and_exports_the_head(make_trainer, tmp_path):
    trainer = make_trainer(advantage_estimator="gae", gamma=0.99, lam=0.9, max_steps=2, learning_rate=5e-3)
    seen = []
    original = trainer._compute_loss

    def spy(model, inputs):
        loss = original(model, inputs)
        keys = ("advantages", "old_values", "value_returns", "completion_mask")
        seen.append({k: inputs[k].detach().clone() for k in keys})
        return loss

    trainer._compute_loss = spy
    before = [p.detach().clone() for p in trainer.value.head.parameters()]
    trainer.train()
    assert len(logged(trainer, "value/loss")) == 2 and len(logged(trainer, "value/explained_variance")) == 2
    assert all(v > 0 for v in logged(trainer, "value/loss"))
    shape = seen[0]["completion_mask"].shape  # (B, T): per-token advantages replaced TRL's (B,) ones
    assert seen[0]["advantages"].shape == seen[0]["old_values"].shape == seen[0]["value_returns"].shape == shape
    # The head trained: its weights moved, and step 2's values are no longer the zero-initialised ones.
    assert any(not torch.equal(p, b) for p, b in zip(trainer.value.head.parameters(), before))
    assert torch.all(seen[0]["old_values"] == 0) and torch.any(seen[1]["old_values"] != 0)
    assert all(p.grad is None for p in trainer.value.head.parameters())  # cleared after the optimizer step

    out = tmp_path / "export"
    trainer.save_model(str(out))
    assert (out / "adapter_model.safetensors").exists()
    exported = load_file(str(out / VALUE_HEAD_FILE))
    assert set(exported) == {"proj.weight", "proj.bias"}
    assert torch.equal(exported["proj.weight"], trainer.value.head.proj.weight.detach())


def test_grpo_estimator_has_no_value_head(make_trainer):
    trainer = make_trainer(advantage_estimator="grpo", max_steps=1)
    assert trainer.value.head is None
    trainer.train()
    assert logged(trainer, "value/loss") == []


def test_bad_advantage_estimator_and_kl_without_reference_are_refused(make_trainer):
    with pytest.raises(ValueError, match="advantage_estimator='ppo'"):
        make_trainer(advantage_estimator="ppo")
    with pytest.raises(ValueError, match="value_kl_coef"):
        make_trainer(advantage_estimator="gae", value_kl_coef=0.1, beta=0.0)


def test_hybrid_advantages_are_group_normalised_per_token(make_trainer):
    trainer = make_trainer(advantage_estimator="hybrid", max_steps=1)
    seen = []
    original = trainer._compute_loss
    trainer._compute_loss = lambda model, inputs: (seen.append(inputs), original(model, inputs))[1]
    trainer.train()
    batch = seen[0]
    mask = batch["completion_mask"].bool()
    for group in torch.unique(batch["group_ids"]):
        rows = batch["group_ids"] == group
        adv = batch["advantages"][rows][mask[rows]]
        assert adv.mean().abs().item() < 1e-5
        assert adv.std(unbiased=False).item() == pytest.approx(1.0, abs=1e-3)


def test_value_head_learns_a_return_predictable_from_the_prompt(make_trainer):
    """Reward 1 when the prompt says "Type A", else 0: value loss falls, explained variance passes 0.5."""
    trainer = make_trainer(**value_task_settings())
    trainer.train()
    losses = logged(trainer, "value/loss")
    variances = [v for v in logged(trainer, "value/explained_variance") if v is not None]
    assert len(losses) == 25
    assert sum(losses[-5:]) / 5 < 0.3 * sum(losses[:5]) / 5
    assert max(variances) > 0.5
    assert sum(variances[-5:]) / 5 > 0.5


def test_a_value_head_left_out_of_the_optimizer_stops_the_run(make_trainer):
    from trl import GRPOTrainer

    trainer = make_trainer(advantage_estimator="gae", max_steps=1)
    trainer.create_optimizer = lambda model=None: GRPOTrainer.create_optimizer(trainer, model)  # skips our group
    with pytest.raises(RuntimeError, match="value head did not change"):
        trainer.train()


def test_hybrid_refuses_micro_batches_that_split_groups(make_trainer):
    # Two micro-batches per generation batch: TRL shuffles the 16 completions, so groups of 4 are split.
    trainer = make_trainer(
        advantage_estimator="hybrid", max_steps=1, steps_per_generation=2, gradient_accumulation_steps=2
    )
    with pytest.raises(ValueError, match="needs every group of 4 completions whole"):
        trainer.train()


def test_kl_penalty_in_the_gae_rewards_reads_the_reference_log_probs(make_trainer):
    trainer = make_trainer(
        advantage_estimator="gae", beta=0.04, value_kl_coef=0.5, max_steps=2, learning_rate=5e-3, gamma=0.9, lam=0.8
    )
    seen = []
    original = trainer._compute_loss
    trainer._compute_loss = lambda model, inputs: (seen.append(inputs), original(model, inputs))[1]
    trainer.train()
    batch = seen[1]  # step 2: the policy has moved away from the reference, so the penalty is non-zero
    assert "ref_per_token_logps" in batch
    from training.algorithms.value import gae, sequence_reward_to_tokens

    mask = batch["completion_mask"].float()
    rewards = sequence_reward_to_tokens(batch["sequence_rewards"], mask)
    _, without_kl = gae(rewards, batch["old_values"], mask, 0.9, 0.8)
    assert not torch.allclose(batch["value_returns"], without_kl)


def test_value_head_adds_no_forward_pass(make_trainer):
    from training.features.final_hidden_state import hook_final_hidden_state

    counts = {}
    for estimator in ("grpo", "gae"):
        trainer = make_trainer(advantage_estimator=estimator, max_steps=1, beta=0.04)
        calls = []
        hook_final_hidden_state(trainer.model, lambda hidden: calls.append(1))
        trainer.train()
        counts[estimator] = len(calls)
    assert counts["gae"] == counts["grpo"] > 0
