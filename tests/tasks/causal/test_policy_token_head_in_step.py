"""The loss forward's LM head (training/features/policy_token_head.py) scores the loss mask's tokens only, in a real
GRPO batch of the causal starting policy (episodes of several calls, so most completion tokens are tool results),
and the step's loss and gradient are those of TRL's full-width head, alone and with the features the loss forward
meets."""

from __future__ import annotations

import math

import pytest
import torch
import trl.trainer.utils as trl_utils

from tests.tasks.causal.trainer_support import build_sampled_causal_trainer, score
from training.algorithms.trajectory import loss_mask
from training.run_setup.flags import StrictFlags
from training.tasks.causal.starting_policy import STARTING_POLICY_DIR

EPISODE = dict(max_completion_length=160, max_tool_calling_iterations=3, max_tool_calls_per_episode=3)
CELLS = {
    "defaults": (0.0, {}),
    # old log-probs a second pass reads, a value head whose GAE reads the forward's log-probs (its KL), a
    # reference, forced first turns (rows with tool_mask 0)
    "gae-kl-it2-ref-forcing": (0.5, dict(advantage_estimator="gae", value_kl_coef=0.1, num_iterations=2,
                                         beta=0.04)),
}


class _HeadRows:
    """The positions TRL's fused LM head projects, call by call (its autograd function's token rows)."""

    def __init__(self, monkeypatch):
        self.rows = []
        apply = trl_utils._ChunkedLogProbFunction.apply

        def counted(hidden, *args):
            self.rows.append(hidden.shape[0])
            return apply(hidden, *args)

        monkeypatch.setattr(trl_utils._ChunkedLogProbFunction, "apply", counted)


def _loss_and_grads(trainer, batch):
    trainer.model.zero_grad()
    loss = trainer._compute_loss(trainer.model, dict(batch))
    loss.backward()
    return loss.item(), {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("cell", CELLS, ids=list(CELLS))
def test_the_loss_forward_scores_only_the_loss_tokens_with_the_same_loss_and_gradient(cell, tmp_path, monkeypatch):
    force_rate, settings = CELLS[cell]
    flags = StrictFlags(force_rate=force_rate, assist_warmup=5 if force_rate else 0, rl_disable_forced=True,
                        ppo_record_at_sample=True, strict_traj_keys=True)
    trainer = build_sampled_causal_trainer(str(tmp_path), str(STARTING_POLICY_DIR), flags, **EPISODE, **settings)
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer's training loop, not run here
    batch = score(trainer)
    keep = loss_mask(batch)
    # most of the completion is tool results the loss does not read
    assert 0 < keep.sum() < 0.5 * batch["completion_mask"].sum()
    head = _HeadRows(monkeypatch)

    loss, grads = _loss_and_grads(trainer, batch)
    assert head.rows == [int(keep.sum())]

    monkeypatch.setattr(trainer.policy_head, "forward", lambda trl_forward, *args: trl_forward())
    full_loss, full_grads = _loss_and_grads(trainer, batch)
    width = batch["prompt_ids"].size(1) + batch["completion_ids"].size(1)
    assert head.rows[1] == keep.size(0) * (width - 1)  # TRL's CPU head: every position of every row

    assert loss == pytest.approx(full_loss, rel=1e-5, abs=1e-8)
    assert grads.keys() == full_grads.keys() and any(g.abs().sum() > 0 for g in grads.values())
    for name, grad in grads.items():
        torch.testing.assert_close(grad, full_grads[name], rtol=1e-4, atol=1e-8, msg=name)


def test_unscored_positions_take_the_old_logprobs_so_their_ratio_is_one(tmp_path):
    """The head never scores a tool result's tokens; their log-probs are the old ones, so TRL's ratio there is
    exactly 1 whatever the old value. An old log-prob of -100 off the mask (exp(100) overflows float32) leaves the
    loss finite and as it was: with a 0 there, the masked-out ratio would be inf and the masked loss NaN."""
    flags = StrictFlags(force_rate=0.0, assist_warmup=0, rl_disable_forced=True, ppo_record_at_sample=True,
                        strict_traj_keys=True)
    trainer = build_sampled_causal_trainer(str(tmp_path), str(STARTING_POLICY_DIR), flags, **EPISODE)
    trainer.current_gradient_accumulation_steps = 1
    batch = score(trainer)
    keep = loss_mask(batch).bool()
    loss = trainer._compute_loss(trainer.model, dict(batch)).item()
    far = dict(batch, old_per_token_logps=batch["old_per_token_logps"].masked_fill(~keep, -100.0))
    far_loss = trainer._compute_loss(trainer.model, far).item()
    assert math.isfinite(far_loss) and far_loss == pytest.approx(loss, rel=1e-6, abs=1e-9)
