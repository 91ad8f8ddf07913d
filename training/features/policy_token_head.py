"""The loss forward's LM head scores only the tokens the loss trains on.

TRL's fused LM head (`trl.trainer.utils.add_fused_lm_head`) scores every completion position whose label is not
-100, tool results included; and on a device without Triton (the CPU) it scores every position of the sequence,
prompt and padding too, so that a compiler (Neuron's) sees the same tile shapes at every batch. A tool episode is
mostly tool results, so on the causal main job the head scored over ten times the positions the loss reads (the
policy's own tokens); what that cost: `benchmarks/loss_head_cost.py`, in BENCHMARKS.md.

During the loss forward (the one with gradients; TRL's other forwards are untouched) this feature:
- sets the labels of the completion positions outside the loss mask (`trajectory.loss_mask`: padding, tool results,
  appended turn ends, forced or unscorable tokens) to -100, by a forward pre-hook on the model TRL calls;
- lets TRL's head score only the labelled positions on the CPU too (TRL's `_use_triton` device check, read by its
  fused forward at every call, answers True for the CPU inside the block; other devices keep TRL's answer);
- gives the unscored positions the batch's old log-probs, so that their ratio is exactly 1 (TRL's loss masks them
  and no gradient reaches them: the head never saw them); their entropy is 0, and every reader masks it.

The scored positions' log-probs and entropies are those of a full forward (to float rounding: the projection's
matmul has fewer rows). Every reader of the loss forward reads the loss mask's tokens only: TRL's loss, entropy and
clip statistics, `record.log_ratio`, the value head's KL (`value_head.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from unittest import mock

import torch
import trl.trainer.utils as trl_utils

from training.algorithms.trajectory import loss_mask


def _compacting(device_check: Callable[[torch.device], bool]) -> Callable[[torch.device], bool]:
    return lambda device: device.type == "cpu" or device_check(device)


class PolicyTokenHead:
    """See the module docstring."""

    def __init__(self) -> None:
        if not callable(getattr(trl_utils, "_use_triton", None)):
            raise ImportError("trl.trainer.utils has no `_use_triton`: this TRL's fused LM head is not the one "
                              "training/features/policy_token_head.py was written against (TRL 1.16); pin TRL or "
                              "update the feature")

    def forward(self, trl_forward: Callable[[], tuple], model: torch.nn.Module, batch: dict,
                logits_to_keep: int) -> tuple:
        """Run `trl_forward` (TRL's `_get_per_token_logps_and_entropies` for this batch, through `model`) scoring
        only the loss mask's tokens; returns its (log-probs, entropies, aux loss)."""
        keep = loss_mask(batch).bool()
        seen = 0  # rows through the head so far: TRL may split the batch into chunks

        def only_loss_tokens(module, args, kwargs):
            nonlocal seen
            labels = kwargs.get("labels")
            if labels is None or not kwargs.get("fused_lm_head"):
                return None
            rows = keep[seen: seen + labels.size(0)].to(labels.device)
            seen += labels.size(0)
            labels = labels.clone()
            labels[:, -logits_to_keep:] = labels[:, -logits_to_keep:].masked_fill(~rows, -100)
            kwargs["labels"] = labels
            return args, kwargs

        handle = model.register_forward_pre_hook(only_loss_tokens, with_kwargs=True)
        try:
            with mock.patch.object(trl_utils, "_use_triton", _compacting(trl_utils._use_triton)):
                logps, entropies, aux_loss = trl_forward()
        finally:
            handle.remove()
        if seen != keep.size(0):
            raise RuntimeError(f"policy_token_head: the loss forward passed {seen} of the batch's {keep.size(0)} "
                               "rows through the fused LM head; TRL's loss forward has changed")
        old = batch.get("old_per_token_logps")
        if old is not None:
            logps = torch.where(keep.to(logps.device), logps, old.to(logps.dtype))
        return logps, entropies, aux_loss
