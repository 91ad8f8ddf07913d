"""Deliberate reverts of critical fixes, shared by the tests that prove their detectors and checks fire."""

from __future__ import annotations

import torch
from trl import GRPOTrainer

from training.trainer import StrictGRPOTrainer

_original_compute_loss = StrictGRPOTrainer._compute_loss


def recompute_old_logps_at_loss_time(self, model, inputs):
    """The classic bug: "old" log-probs recomputed with the current policy right before the loss (ratio pinned at 1).
    Patch it over `StrictGRPOTrainer._compute_loss`."""
    ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
    mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
    with torch.no_grad():
        current, _, _ = GRPOTrainer._get_per_token_logps_and_entropies(
            self, model, ids, mask, inputs["completion_ids"].size(1)
        )
    inputs["old_per_token_logps"] = current
    return _original_compute_loss(self, model, inputs)
