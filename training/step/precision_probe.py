"""The precision a run actually computes in, seen from inside the model, for `run_summary.json`'s `precision`.

The recipe says `bf16`/`fp16`/`dtype`; what the forward passes run under is decided further down (accelerate wraps
the model's forward in autocast for its mixed precision, TRL's loss forward runs in `accelerator.autocast()`,
DeepSpeed casts the weights). A forward hook on the model's backbone (training/features/final_hidden_state.py: every
forward runs it, in any architecture; TRL's loss forward computes the log-probs from the LM head's weight without
calling the head) notes, the first time it runs with and without gradients (the loss forward; sampling, the log-prob
check and the held-out evaluation), whether autocast is on and in which dtype, and the dtype of the final hidden
state (the LM head's input); then it removes itself. The weights' dtypes are read when the summary is written.

A model with no such place (no backbone, or a backbone whose output has no `last_hidden_state`) gets one warning and
`None` for what the probe would have seen; the run goes on.
"""

from __future__ import annotations

import logging

import torch

from training.features.final_hidden_state import architecture, backbone, hook_final_hidden_state

logger = logging.getLogger(__name__)


def _name(dtype) -> str | None:
    return None if dtype is None else str(dtype).removeprefix("torch.")


def autocast_dtype(device_type: str) -> str | None:
    """The dtype autocast computes in on `device_type` right now, or None when autocast is off there."""
    if not torch.is_autocast_enabled(device_type):
        return None
    return _name(torch.get_autocast_dtype(device_type))


def weights_dtypes(model: torch.nn.Module) -> dict[str, list[str]]:
    """The dtypes of the frozen and of the trainable parameters (LoRA adapters are often float32 over a bf16 base)."""
    frozen = {_name(p.dtype) for p in model.parameters() if not p.requires_grad}
    trainable = {_name(p.dtype) for p in model.parameters() if p.requires_grad}
    return {"frozen": sorted(frozen), "trainable": sorted(trainable)}


class PrecisionProbe:
    """Attach to the unwrapped model once (`attach`); `summary` after training."""

    KINDS = {True: "loss_forward", False: "no_grad_forward"}

    def __init__(self):
        self.seen: dict[str, dict] = {}
        self._handle = None
        self._architecture = ""

    def attach(self, model: torch.nn.Module) -> None:
        self._architecture = architecture(model)
        if backbone(model) is None:
            self._unobservable("it has no backbone module (`base_model`) distinct from the model")
            return
        self._handle = hook_final_hidden_state(model, self._observe)

    def _observe(self, hidden: torch.Tensor | None) -> None:
        if hidden is None:
            self._unobservable("its backbone's output has no `last_hidden_state`")
            self._detach()
            return
        kind = self.KINDS[torch.is_grad_enabled()]
        if kind in self.seen:
            return
        self.seen[kind] = {"autocast_dtype": autocast_dtype(hidden.device.type),
                           "hidden_dtype": _name(hidden.dtype), "device": hidden.device.type}
        if len(self.seen) == len(self.KINDS):
            self._detach()

    def _unobservable(self, why: str) -> None:
        logger.warning("precision probe: %s has no final hidden state to observe (%s); run_summary.json's "
                       "precision will not say which autocast and hidden-state dtype the forwards ran in",
                       self._architecture, why)

    def _detach(self) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def summary(self, model: torch.nn.Module, accelerator_mixed_precision: str) -> dict:
        """What was in force: the accelerator's mixed precision, autocast and the hidden states' dtype in the first
        loss forward and the first no-grad forward (the sampler's: the held-out evaluation's or the first training
        generation's; None for one that never ran), the weights' dtypes."""
        return {
            "accelerator_mixed_precision": accelerator_mixed_precision,
            "loss_forward": self.seen.get("loss_forward"),
            "no_grad_forward": self.seen.get("no_grad_forward"),
            "weights_dtype": weights_dtypes(model),
        }
