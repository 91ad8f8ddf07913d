"""Resume from a checkpoint restores the reference adapter and the value head bit-for-bit."""

import pytest
import torch
from transformers import TrainerCallback

from training.features.reference import REF_ADAPTER
from training.features.value_head import VALUE_HEAD_FILE

SETTINGS = dict(
    beta=0.04,
    sync_ref_model=True,
    ref_model_sync_steps=1,
    ref_model_mixup_alpha=0.5,  # EMA: the reference ends up neither the initial copy nor the policy
    advantage_estimator="gae",
    max_steps=2,
    learning_rate=5e-3,
    save_strategy="steps",
    save_steps=2,
)


def snapshot(trainer):
    ref = {name: ref.detach().clone() for name, _, ref in trainer.reference.pairs()}
    head = {name: p.detach().clone() for name, p in trainer.value.head.named_parameters()}
    return ref, head


def test_resume_restores_reference_adapter_and_value_head_bit_for_bit(make_trainer):
    first = make_trainer(**SETTINGS)
    initial_ref, initial_head = snapshot(first)
    first.train()
    trained_ref, trained_head = snapshot(first)
    checkpoint = f"{first.args.output_dir}/checkpoint-2"
    assert any(not torch.equal(trained_ref[n], initial_ref[n]) for n in trained_ref)
    assert any(not torch.equal(trained_head[n], initial_head[n]) for n in trained_head)

    second = make_trainer(**SETTINGS)  # fresh: initial reference and a zero value head
    fresh_ref, fresh_head = snapshot(second)
    assert any(not torch.equal(fresh_ref[n], trained_ref[n]) for n in trained_ref)
    at_train_begin = {}

    class SnapshotAtTrainBegin(TrainerCallback):
        """State right after the checkpoint is loaded, before any further step."""

        def on_train_begin(self, args, state, control, **kwargs):
            at_train_begin["step"] = state.global_step
            at_train_begin["state"] = snapshot(second)

    second.add_callback(SnapshotAtTrainBegin())
    second.train(resume_from_checkpoint=checkpoint)
    assert at_train_begin["step"] == 2
    resumed_ref, resumed_head = at_train_begin["state"]
    assert resumed_ref.keys() == trained_ref.keys() and resumed_head.keys() == trained_head.keys()
    assert all(torch.equal(resumed_ref[n], trained_ref[n]) for n in trained_ref)
    assert all(torch.equal(resumed_head[n], trained_head[n]) for n in trained_head)
    # Still frozen, still outside the optimizer; the policy adapter stays the trainable, active one.
    assert all(not ref.requires_grad for _, _, ref in second.reference.pairs())
    assert all(policy.requires_grad for _, policy, _ in second.reference.pairs())
    assert second.model.active_adapter == "default"


def test_resume_from_a_checkpoint_without_value_head_is_refused(make_trainer):
    import os

    first = make_trainer(**SETTINGS)
    first.train()
    checkpoint = f"{first.args.output_dir}/checkpoint-2"
    assert os.path.isdir(os.path.join(checkpoint, REF_ADAPTER))
    os.remove(os.path.join(checkpoint, VALUE_HEAD_FILE))
    with pytest.raises(FileNotFoundError, match=VALUE_HEAD_FILE):
        make_trainer(**SETTINGS).train(resume_from_checkpoint=checkpoint)
