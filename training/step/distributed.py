"""Helpers for code that runs outside the training engine on every rank (held-out generation under ZeRO-3)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def full_weights_for_generation(model: torch.nn.Module, accelerator) -> Iterator[None]:
    """Under DeepSpeed ZeRO-3 every rank holds only a shard of each weight (the full tensors are empty), so a
    `generate()` outside the engine fails; gather the full weights for the block. A collective: every rank enters it.
    Elsewhere it does nothing."""
    plugin = accelerator.state.deepspeed_plugin
    if plugin is None or plugin.zero_stage != 3:
        yield
        return
    import deepspeed

    with deepspeed.zero.GatheredParameters(list(model.parameters())):
        yield
