"""A value head trained with GAE beside GRPO, computed in the loss's own forward pass.

How one forward serves both: a forward hook on the model's backbone captures the final hidden states (the LM head's
input, training/features/final_hidden_state.py) while TRL's `_compute_loss` runs its forward for the policy
log-probs. Right after that forward (before TRL reads `batch["advantages"]`) the values are computed from those
hidden states and the batch's advantages are replaced by per-token (B, T) ones from the registered estimator
(training/algorithms/advantages.py); after TRL's loss, the clipped value loss is added. The first visit of a
generation batch fixes its old values, returns and advantages (batch keys `old_values`, `value_returns`,
`value_advantages`); later visits (`num_iterations > 1`) reuse them.

The head lives outside the model (so weight syncs to vLLM never see it), so this feature also puts it into the
optimizer, the gradient clipping, cross-process gradient averaging, `zero_grad`, checkpoints and the export.
Metrics: `value/loss`, `value/explained_variance`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch
from safetensors.torch import load_file, save_file
from transformers import TrainerCallback

from training.algorithms.advantages import AdvantageSettings, get_estimator
from training.algorithms.trajectory import loss_mask
from training.algorithms.value import ValueHead, clipped_value_loss, explained_variance
from training.errors import MissingPathError
from training.features.final_hidden_state import architecture, hook_final_hidden_state

VALUE_HEAD_FILE = "value_head.safetensors"


class ValueHeadStepCallback(TrainerCallback):
    """Around each optimizer step: check that the value head moved when it had a gradient and a learning rate
    (a head left out of the optimizer would otherwise never train, silently), then clear its gradients
    (`Trainer` only zeroes the model's)."""

    def __init__(self, value: ValueHeadFeature, optimizer_of):
        self.value = value
        self.optimizer_of = optimizer_of
        self.before: list[torch.Tensor] | None = None

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self.before = [p.detach().clone() for p in self.value.head.parameters()]

    def on_optimizer_step(self, args, state, control, **kwargs):
        head = list(self.value.head.parameters())
        had_gradient = any(p.grad is not None and bool(torch.any(p.grad != 0)) for p in head)
        unchanged = self.before is not None and all(torch.equal(p, b) for p, b in zip(head, self.before))
        lr = self.value.learning_rate(self.optimizer_of())
        if had_gradient and unchanged and (lr is None or lr > 0):
            raise RuntimeError(
                f"value head did not change at optimizer step {state.global_step + 1} although it had a non-zero "
                "gradient and learning rate: is it in the optimizer?"
            )
        self.before = None
        self.value.head.zero_grad(set_to_none=True)
        self.value.grads_synced = False


class ValueHeadFeature:
    """The value head when `advantage_estimator` needs values (`gae`, `hybrid`); `head` is None otherwise, and TRL's
    group-relative advantages stand."""

    def __init__(self, args, model, accelerator, beta: float, sharded: bool, group_size: int):
        self.args = args
        self.accelerator = accelerator
        self.estimator = get_estimator(args.advantage_estimator)
        self.group_size = group_size
        self.head: ValueHead | None = None
        self.grads_synced = False
        self._captured: list[torch.Tensor] | None = None
        self._architecture = architecture(model)
        if not self.estimator.needs_values:
            return
        if sharded:
            raise NotImplementedError(
                f"advantage_estimator={args.advantage_estimator!r} (value head) is not supported with DeepSpeed/FSDP "
                "yet: the head sits outside the sharded model. Use advantage_estimator='grpo' there."
            )
        if args.value_kl_coef and beta == 0.0:
            raise ValueError(
                f"value_kl_coef={args.value_kl_coef} needs reference log-probs, which TRL computes only with "
                "beta != 0; set beta > 0 or value_kl_coef=0"
            )
        try:
            hook_final_hidden_state(model, self._capture)
        except TypeError as err:
            raise TypeError(f"advantage_estimator={args.advantage_estimator!r} needs the final hidden states for its "
                            f"value head: {err}") from err
        hidden_size = model.config.get_text_config().hidden_size
        self.head = ValueHead(hidden_size).to(device=accelerator.device, dtype=torch.float32)

    @property
    def enabled(self) -> bool:
        return self.head is not None

    # ---- the loss forward -------------------------------------------------------------------------------------------
    def _capture(self, hidden: torch.Tensor | None) -> None:
        if self._captured is None:
            return
        if hidden is None:
            raise TypeError(f"value head: {self._architecture}'s backbone returned no `last_hidden_state` in the loss "
                            "forward, so the value head has no final hidden states to read")
        self._captured.append(hidden)

    @contextlib.contextmanager
    def capturing(self) -> Iterator[None]:
        """Capture the final hidden states of the forward run inside the block (the loss's)."""
        self._captured = [] if self.enabled else None
        try:
            yield
        finally:
            self._captured = None

    def values_and_advantages(self, batch: dict, logits_to_keep: int, logps: torch.Tensor) -> torch.Tensor:
        """Values from the hidden states just captured; on the batch's first visit its old values, returns and
        advantages are fixed. Sets `batch["advantages"]` to the per-token ones; returns the values (with grad)."""
        if not self._captured:
            raise RuntimeError(f"value head: the backbone hook of {self._architecture} captured no hidden states "
                               "during the loss forward")
        hidden = torch.cat(self._captured, dim=0)
        # The hidden state at position p predicts token p + 1: completion token t is predicted from P + t - 1.
        values = self.head(hidden[:, -logits_to_keep - 1 : -1])
        if "value_advantages" not in batch:
            self._first_visit(batch, values.detach(), logps.detach())
        batch["advantages"] = batch["value_advantages"]
        return values

    def _first_visit(self, batch: dict, values: torch.Tensor, logps: torch.Tensor) -> None:
        for key in ("sequence_rewards", "group_ids", "completion_mask"):
            if key not in batch:
                raise KeyError(f"value head: the training batch has no {key!r} (keys: {sorted(batch)})")
        unscorable = torch.isnan(batch["sequence_rewards"])
        if unscorable.any():
            rows = unscorable.nonzero().flatten().tolist()
            raise ValueError(f"value head: completions {rows} got no reward from any reward function (all None)")
        # k1 estimate of the KL, on the policy's own tokens (the loss forward scores no others: policy_token_head.py)
        kl = (logps - batch["ref_per_token_logps"]) * loss_mask(batch) if self.args.value_kl_coef else None
        settings = AdvantageSettings(
            gamma=self.args.gamma, lam=self.args.lam, group_size=self.group_size, kl=kl,
            kl_coef=self.args.value_kl_coef,
        )
        mask = batch["completion_mask"].float()
        advantages, returns = self.estimator.fn(batch["sequence_rewards"], values, mask, batch["group_ids"], settings)
        batch["old_values"] = values
        batch["value_returns"] = returns
        batch["value_advantages"] = advantages

    def loss(self, values: torch.Tensor, batch: dict, metrics: dict, normalizer: float) -> torch.Tensor:
        """`vf_coef` x the clipped value loss over the loss mask's tokens (0 for an empty mask, never NaN)."""
        mask = loss_mask(batch).float()
        value_loss = clipped_value_loss(
            values, batch["old_values"], batch["value_returns"], mask, self.args.cliprange_value
        )
        if not torch.isfinite(value_loss):
            raise FloatingPointError(f"value/loss is {value_loss.item()}: values or returns are not finite")
        variance = explained_variance(batch["old_values"], batch["value_returns"], mask)
        stats = torch.tensor([value_loss.item(), variance], device=self.accelerator.device)
        stats = self.accelerator.gather(stats.unsqueeze(0)).nanmean(dim=0)
        metrics["value/loss"].append(stats[0].item())
        metrics["value/explained_variance"].append(stats[1].item())
        return self.args.vf_coef * value_loss / normalizer

    # ---- optimizer, clipping, gradient averaging -------------------------------------------------------------------
    def add_to_optimizer(self, optimizer) -> None:
        held = {id(p) for group in optimizer.param_groups for p in group["params"]}
        head = [p for p in self.head.parameters() if id(p) not in held]
        if head:
            optimizer.add_param_group({"params": head, "weight_decay": 0.0})

    def learning_rate(self, optimizer) -> float | None:
        """The learning rate the optimizer applies to the value head now; None when the head is not in it."""
        head = {id(p) for p in self.head.parameters()}
        for group in optimizer.param_groups:
            if any(id(p) in head for p in group["params"]):
                return group["lr"]
        return None

    def params_with_grads(self) -> list[torch.nn.Parameter]:
        """The head's parameters for gradient clipping; across processes, their gradients averaged once per step
        (DDP averages only the model's)."""
        if not self.grads_synced:
            for name, param in self.head.named_parameters():
                if param.grad is None:
                    raise RuntimeError(f"value head: {name} has no gradient at the optimizer step (value loss not added?)")
                if self.accelerator.num_processes > 1:
                    param.grad = self.accelerator.reduce(param.grad, reduction="mean")
            self.grads_synced = True
        return list(self.head.parameters())

    # ---- checkpoints and export ------------------------------------------------------------------------------------
    def save(self, out: str) -> None:
        os.makedirs(out, exist_ok=True)
        tensors = {k: v.detach().cpu().contiguous() for k, v in self.head.state_dict().items()}
        save_file(tensors, os.path.join(out, VALUE_HEAD_FILE))

    def load(self, checkpoint: str) -> None:
        path = os.path.join(checkpoint, VALUE_HEAD_FILE)
        if not os.path.isfile(path):
            raise MissingPathError(f"checkpoint {checkpoint!r} has no {VALUE_HEAD_FILE} for the value head")
        self.head.load_state_dict(load_file(path, device=str(self.accelerator.device)))
