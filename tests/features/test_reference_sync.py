"""The LoRA reference adapter: frozen, read by the KL term, synced (hard and EMA) and verified."""

import pytest
import torch

from training.features.reference import REF_ADAPTER, ReferenceSyncError, count_differing, sync_reference

SYNC = dict(beta=0.04, sync_ref_model=True, ref_model_mixup_alpha=1.0)


def logged(trainer, name):
    return [h[name] for h in trainer.state.log_history if name in h]


def test_reference_adapter_is_a_frozen_copy_outside_the_optimizer(make_trainer):
    trainer = make_trainer(max_steps=1, **SYNC)
    model = trainer.model
    assert REF_ADAPTER in model.peft_config and model.active_adapter == "default"
    pairs = trainer.reference.pairs()
    assert len(pairs) == 12  # 2 layers x (q, v, up) x (A, B)
    assert count_differing(pairs) == 0
    assert all(not ref.requires_grad for _, _, ref in pairs)
    trainer.create_optimizer()
    held = {id(p) for group in trainer.optimizer.param_groups for p in group["params"]}
    assert not any(id(ref) in held for _, _, ref in pairs)
    assert all(id(policy) in held for _, policy, _ in pairs)


def test_hard_sync_leaves_no_difference_and_kl_reads_the_synced_reference(make_trainer):
    trainer = make_trainer(max_steps=3, ref_model_sync_steps=2, learning_rate=5e-3, **SYNC)
    trainer.train()
    assert logged(trainer, "ref_sync/param_diffs") == [0.0]  # measured right after the sync at step 2, only then
    assert logged(trainer, "ref_sync/count") == [0.0, 1.0, 1.0]
    kls = logged(trainer, "kl")
    assert kls[0] == 0.0  # the reference starts as a copy of the policy adapter
    assert kls[1] > 0.0  # step 2's loss ran before that step's sync: the policy had moved once
    assert kls[2] == 0.0  # step 3 reads the reference synced after step 2


def test_policy_drifts_without_sync_and_ema_sync_moves_ref_by_alpha(make_trainer):
    trainer = make_trainer(max_steps=2, ref_model_sync_steps=3, learning_rate=5e-3, **SYNC)
    trainer.train()
    assert logged(trainer, "ref_sync/param_diffs") == []
    pairs = trainer.reference.pairs()
    assert count_differing(pairs) > 0  # two optimizer steps, no sync

    alpha = 0.3
    trainer.args.ref_model_mixup_alpha = alpha
    before = {name: (policy.detach().clone(), ref.detach().clone()) for name, policy, ref in pairs}
    diffs = trainer.reference.sync()
    assert diffs > 0  # an EMA step leaves the reference between the two
    assert trainer._metrics["train"]["ref_sync/param_diffs"] == [float(diffs)]
    moved = 0
    for name, policy, ref in pairs:
        policy_before, ref_before = before[name]
        assert torch.equal(policy, policy_before)
        assert torch.allclose(ref - ref_before, alpha * (policy_before - ref_before), rtol=1e-5, atol=1e-7), name
        moved += not torch.equal(ref, ref_before)
    assert moved == diffs > 0


def test_sync_reference_refuses_alpha_out_of_range():
    pair = [("w", torch.ones(2), torch.zeros(2))]
    with pytest.raises(ValueError, match="ref_model_mixup_alpha"):
        sync_reference(pair, 1.5)


def test_hard_sync_that_leaves_differences_raises(make_trainer, monkeypatch):
    trainer = make_trainer(max_steps=1, **SYNC)
    with torch.no_grad():
        trainer.reference.pairs()[0][1].add_(1.0)
    monkeypatch.setattr("training.features.reference.sync_reference", lambda pairs, alpha: None)  # a sync that does nothing
    with pytest.raises(ReferenceSyncError, match="1 of 12"):
        trainer.reference.sync()


def test_sync_ref_model_needs_beta(make_trainer):
    with pytest.raises(ValueError, match="beta=0.0"):
        make_trainer(beta=0.0, sync_ref_model=True)


def test_full_fine_tuning_keeps_trls_reference_model_and_callback(make_trainer):
    from trl.trainer.callbacks import SyncRefModelCallback

    from training.features.reference import ReferenceSyncCallback

    trainer = make_trainer(peft=False, max_steps=1, **SYNC)
    callbacks = [type(cb) for cb in trainer.callback_handler.callbacks]
    assert SyncRefModelCallback in callbacks and ReferenceSyncCallback not in callbacks
    assert trainer.ref_model is not None and trainer.args.sync_ref_model is True

    lora = make_trainer(max_steps=1, **SYNC)
    callbacks = [type(cb) for cb in lora.callback_handler.callbacks]
    assert ReferenceSyncCallback in callbacks and SyncRefModelCallback not in callbacks
    assert lora.ref_model is None and lora.args.sync_ref_model is True


def test_reference_covers_modules_to_save_and_trainable_tokens(tiny_model_dir):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from training.features.reference import adapter_param_pairs, add_reference_adapter

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    config = LoraConfig(
        r=4, target_modules=["q_proj"], modules_to_save=["mlp.down_proj"], trainable_token_indices=[5, 7],
        task_type="CAUSAL_LM",
    )
    model = get_peft_model(model, config)
    add_reference_adapter(model, "default")
    pairs = adapter_param_pairs(model, "default")
    names = [name for name, _, _ in pairs]
    assert sum("lora_" in n for n in names) == 4  # 2 layers x (A, B)
    assert sum("modules_to_save" in n for n in names) == 2  # 2 layers' down_proj copies
    assert any("trainable_tokens" in n for n in names)
    assert count_differing(pairs) == 0 and all(not ref.requires_grad for _, _, ref in pairs)
    with torch.no_grad():
        for _, policy, _ in pairs:
            policy.add_(0.5)
    assert count_differing(pairs) == len(pairs)
    sync_reference(pairs, 1.0)
    assert count_differing(pairs) == 0


def test_restoring_the_reference_loads_its_own_tensors_and_refuses_a_policy_saved_as_reference(make_trainer, tmp_path):
    """The DeepSpeed resume loads "ref/" itself (`restore(load_weights=True)`). A ZeRO-3 save used to write the policy
    adapter there (transformers leaves frozen tensors out of the ZeRO-3 state dict; PEFT then fell back to the whole
    dict): such a directory is refused by name, never loaded into the reference (or the policy)."""
    from safetensors.torch import load_file, save_file

    from training.errors import MissingPathError

    trainer = make_trainer(max_steps=1, **SYNC)
    trainer.save_model(str(tmp_path / "ckpt"))
    saved = load_file(tmp_path / "ckpt" / REF_ADAPTER / "adapter_model.safetensors")
    pairs = trainer.reference.pairs()
    with torch.no_grad():
        for _, _, ref in pairs:
            ref.add_(1.0)  # the reference moves away from what was saved
    trainer.reference.restore(str(tmp_path / "ckpt"), load_weights=True)
    assert count_differing(pairs) == 0  # saved when ref == policy; the policy never moved
    assert len(saved) == len(pairs)

    bad = tmp_path / "bad"
    (bad / REF_ADAPTER).mkdir(parents=True)
    config = (tmp_path / "ckpt" / REF_ADAPTER / "adapter_config.json").read_text()
    (bad / REF_ADAPTER / "adapter_config.json").write_text(config)
    policy_named = {name: policy.detach().clone() for name, policy, _ in pairs}  # `...lora_A.default.weight`
    save_file(policy_named, bad / REF_ADAPTER / "adapter_model.safetensors")
    with pytest.raises(MissingPathError, match="holds the policy adapter's tensors"):
        trainer.reference.restore(str(bad), load_weights=True)
