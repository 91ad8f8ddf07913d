"""The precision in force, seen from inside the model (training/step/precision_probe.py): a `bf16: true` run's loss
forward runs under bf16 autocast while the transformers sampler does not (the source of its sampler/trainer gap); a
`bf16: false` run has no autocast anywhere. `run_summary.json` carries what the probe saw (tests/test_launchers.py)."""

from __future__ import annotations

import pytest
import torch

from training.step.precision_probe import PrecisionProbe, autocast_dtype


def in_force(trainer) -> dict:
    trainer.train()
    model = trainer.accelerator.unwrap_model(trainer.model)
    return trainer.precision_probe.summary(model, trainer.accelerator.mixed_precision)


@pytest.mark.parametrize(("bf16", "mixed", "loss_autocast"), [(True, "bf16", "bfloat16"), (False, "no", None)])
def test_the_probe_reports_the_autocast_each_forward_ran_under(make_trainer, tmp_path, bf16, mixed, loss_autocast):
    precision = in_force(make_trainer(bf16=bf16, max_steps=1, strict_health=False, output_dir=str(tmp_path / "o")))
    assert precision["accelerator_mixed_precision"] == mixed
    assert precision["loss_forward"] == {"autocast_dtype": loss_autocast, "device": "cpu", "hidden_dtype": "float32"}
    assert precision["no_grad_forward"]["autocast_dtype"] is None  # generate runs outside accelerate's autocast
    assert precision["weights_dtype"] == {"frozen": ["float32"], "trainable": ["float32"]}


def test_the_probe_sees_autocast_and_weights_dtype_and_then_detaches(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.bfloat16)
    probe = PrecisionProbe()
    probe.attach(model)
    ids = torch.tensor([[1, 2, 3]])
    with torch.no_grad():
        model(ids)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        model(ids)
    assert probe.seen == {"no_grad_forward": {"autocast_dtype": None, "device": "cpu", "hidden_dtype": "bfloat16"},
                          "loss_forward": {"autocast_dtype": "bfloat16", "device": "cpu", "hidden_dtype": "bfloat16"}}
    with torch.autocast("cpu", dtype=torch.float16):
        model(ids)  # both kinds seen: the hook is gone, the first observation stands
    assert probe.seen["loss_forward"]["autocast_dtype"] == "bfloat16"
    assert probe.summary(model, "no")["weights_dtype"] == {"frozen": [], "trainable": ["bfloat16"]}
    assert autocast_dtype("cpu") is None
