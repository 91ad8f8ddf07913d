import math

import torch


def test_lora_trains_adapter_and_freezes_base(make_trainer):
    trainer = make_trainer(max_steps=2, learning_rate=5e-3)
    model = trainer.model
    lora_before = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n}
    base_before = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" not in n}
    assert lora_before and base_before
    trainer.train()

    params = dict(model.named_parameters())
    changed_lora = sum(not torch.equal(params[n], v) for n, v in lora_before.items())
    changed_base = sum(not torch.equal(params[n], v) for n, v in base_before.items())
    assert changed_lora > 0
    assert changed_base == 0

    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 2
    assert all(math.isfinite(x) for x in losses)
    assert any(x != 0.0 for x in losses)
