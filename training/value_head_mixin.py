"""`ValueHeadMixin`: a value head trained with GAE beside GRPO, computed in the loss's own forward pass.

How the one forward serves both: a forward hook on the base model's final norm captures the last hidden states
while TRL's `_compute_loss` runs its forward for the policy log-probs. Right after that forward (in our
`_get_per_token_logps_and_entropies`, before `_compute_loss` reads `inputs["advantages"]`) the values are
computed from those hidden states and the batch's advantages are replaced by per-token (B, T) ones
(`advantage_estimator` `gae` or `hybrid`); after `_compute_loss` returns, the clipped value loss is added.

The head lives outside the model (so weight syncs to vLLM never see it), so this mixin also puts it into the
optimizer, the gradient clipping, cross-process gradient averaging, `zero_grad`, checkpoints and the export.
"""

from __future__ import annotations

import math
import os

import torch
from peft import PeftModel
from safetensors.torch import load_file, save_file
from transformers import TrainerCallback

from training.errors import MissingPathError
from training.trajectory import KeySpec, register_key
from training.value import (
    ValueHead,
    clipped_value_loss,
    explained_variance,
    gae,
    group_normalised,
    masked_whiten,
    sequence_reward_to_tokens,
)

VALUE_HEAD_FILE = "value_head.safetensors"
for _key, _spec in {
    "sequence_rewards": KeySpec(("B",), "float"),
    "group_ids": KeySpec(("B",), "int"),
    "old_values": KeySpec(("B", "C"), "float"),
    "value_returns": KeySpec(("B", "C"), "float"),
    "value_advantages": KeySpec(("B", "C"), "float"),
}.items():
    register_key(_key, _spec)
ADVANTAGE_ESTIMATORS = ("grpo", "gae", "hybrid")


def final_norm(model) -> torch.nn.Module:
    """The base model's final norm module (its output is the hidden state the LM head reads)."""
    base = model.get_base_model() if isinstance(model, PeftModel) else model
    decoder = base.get_decoder()
    norm = getattr(decoder, "norm", None)
    if not isinstance(norm, torch.nn.Module):
        raise TypeError(f"{type(decoder).__name__} has no final `norm` module to read hidden states from")
    return norm


class ValueHeadStepCallback(TrainerCallback):
    """Around each optimizer step: check that the value head moved when it had a gradient and a learning rate
    (a head left out of the optimizer would otherwise never train, silently), then clear its gradients
    (`Trainer` only zeroes the model's)."""

    def __init__(self, trainer: ValueHeadMixin):
        self.trainer = trainer
        self.before: list[torch.Tensor] | None = None

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self.before = [p.detach().clone() for p in self.trainer.value_head.parameters()]

    def on_optimizer_step(self, args, state, control, **kwargs):
        head = list(self.trainer.value_head.parameters())
        had_gradient = any(p.grad is not None and bool(torch.any(p.grad != 0)) for p in head)
        unchanged = self.before is not None and all(torch.equal(p, b) for p, b in zip(head, self.before))
        if had_gradient and unchanged and self.trainer.value_head_lr() > 0:
            raise RuntimeError(
                f"value head did not change at optimizer step {state.global_step + 1} although it had a non-zero "
                "gradient and learning rate: is it in the optimizer?"
            )
        self.before = None
        self.trainer.value_head.zero_grad(set_to_none=True)
        self.trainer._value_grads_synced = False


class ValueHeadMixin:
    """Adds a value head and GAE when `advantage_estimator` is `gae` or `hybrid`; `grpo` leaves TRL's path alone."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.value_head: ValueHead | None = None
        self._captured_hidden: list[torch.Tensor] | None = None
        self._value_batch: dict | None = None
        self._value_estimates: torch.Tensor | None = None
        self._last_rewards_per_func: torch.Tensor | None = None
        self._value_grads_synced = False
        estimator = self.args.advantage_estimator
        if estimator not in ADVANTAGE_ESTIMATORS:
            raise ValueError(f"advantage_estimator={estimator!r} is not one of {ADVANTAGE_ESTIMATORS}")
        if estimator == "grpo":
            return
        if self.is_deepspeed_enabled or self.is_fsdp_enabled:
            raise NotImplementedError(
                f"advantage_estimator={estimator!r} (value head) is not supported with DeepSpeed/FSDP yet: the head "
                "sits outside the sharded model. Use advantage_estimator='grpo' there."
            )
        if self.args.value_kl_coef and self.beta == 0.0:
            raise ValueError(
                f"value_kl_coef={self.args.value_kl_coef} needs reference log-probs, which TRL computes only with "
                "beta != 0; set beta > 0 or value_kl_coef=0"
            )
        model = self.accelerator.unwrap_model(self.model)
        hidden_size = model.config.get_text_config().hidden_size
        self.value_head = ValueHead(hidden_size).to(device=self.accelerator.device, dtype=torch.float32)
        final_norm(model).register_forward_hook(self._capture_hidden)
        self.add_callback(ValueHeadStepCallback(self))

    # ---- rollout: carry each completion's reward and group into the batch -----------------------------------
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._last_rewards_per_func = rewards_per_func
        return rewards_per_func

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        if self.value_head is None:
            return output
        rewards_per_func, self._last_rewards_per_func = self._last_rewards_per_func, None
        if rewards_per_func is None:
            raise RuntimeError("value head: no rewards were computed for this generation batch")
        unscorable = torch.isnan(rewards_per_func).all(dim=1)
        if unscorable.any():
            rows = torch.nonzero(unscorable).flatten().tolist()
            raise ValueError(f"value head: completions {rows} got no reward from any reward function (all None)")
        rewards = (rewards_per_func * self.reward_weights.to(rewards_per_func.device).unsqueeze(0)).nansum(dim=1)
        local = output["completion_ids"].size(0)
        start = self.accelerator.process_index * local
        mode = "train" if self.model.training else "eval"
        num_generations = self.num_generations if mode == "train" else self.num_generations_eval
        output["sequence_rewards"] = rewards[start : start + local].float()
        output["group_ids"] = torch.arange(start, start + local, device=rewards.device) // num_generations
        return output

    # ---- the loss: values from the same forward, per-token advantages, value loss -----------------------------
    def _capture_hidden(self, module, args, output):
        if self._captured_hidden is not None:
            self._captured_hidden.append(output)

    def _compute_loss(self, model, inputs):
        if self.value_head is None:
            return super()._compute_loss(model, inputs)
        self._value_batch = inputs
        try:
            loss = super()._compute_loss(model, inputs)
        finally:
            self._value_batch = None
            self._captured_hidden = None
        values, self._value_estimates = self._value_estimates, None
        if values is None:
            raise RuntimeError("value head: the loss forward did not pass through the value head")
        mask = inputs["completion_mask"].float()
        if "tool_mask" in inputs:
            mask = mask * inputs["tool_mask"].float()
        value_loss = clipped_value_loss(
            values, inputs["old_values"], inputs["value_returns"], mask, self.args.cliprange_value
        )
        if not torch.isfinite(value_loss):
            raise FloatingPointError(f"value/loss is {value_loss.item()}: values or returns are not finite")
        mode = "train" if self.model.training else "eval"
        normalizer = self.current_gradient_accumulation_steps if mode == "train" else 1.0
        variance = explained_variance(inputs["old_values"], inputs["value_returns"], mask)
        stats = torch.tensor([value_loss.item(), variance], device=self.accelerator.device)
        stats = self.accelerator.gather(stats.unsqueeze(0)).nanmean(dim=0)
        self._metrics[mode]["value/loss"].append(stats[0].item())
        self._metrics[mode]["value/explained_variance"].append(stats[1].item())
        return loss + self.args.vf_coef * value_loss / normalizer

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
        batch, self._value_batch = self._value_batch, None  # only the loss's forward feeds the value head
        if batch is None:
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, *args, **kwargs
            )
        self._captured_hidden = []
        result = super()._get_per_token_logps_and_entropies(
            model, input_ids, attention_mask, logits_to_keep, *args, **kwargs
        )
        if not self._captured_hidden:
            raise RuntimeError("value head: the final-norm hook captured no hidden states during the loss forward")
        hidden = torch.cat(self._captured_hidden, dim=0)
        self._captured_hidden = None
        # The hidden state at position p predicts token p + 1: completion token t is predicted from P + t - 1.
        values = self.value_head(hidden[:, -logits_to_keep - 1 : -1])
        self._value_estimates = values
        self._set_value_advantages(batch, values.detach(), result[0].detach())
        return result

    def _set_value_advantages(self, batch: dict, values: torch.Tensor, logps: torch.Tensor) -> None:
        """First visit of a batch: fix old values, GAE returns and the policy advantages; then use them."""
        if "value_advantages" not in batch:
            for key in ("sequence_rewards", "group_ids", "completion_mask"):
                if key not in batch:
                    raise KeyError(f"value head: the training batch has no {key!r} (keys: {sorted(batch)})")
            mask = batch["completion_mask"].float()
            token_rewards = sequence_reward_to_tokens(batch["sequence_rewards"], mask)
            kl = None
            if self.args.value_kl_coef:
                kl = logps - batch["ref_per_token_logps"]  # k1 estimate of the per-token KL to the reference
            gae_kwargs = dict(kl=kl, kl_coef=self.args.value_kl_coef)
            advantages, returns = gae(token_rewards, values, mask, self.args.gamma, self.args.lam, **gae_kwargs)
            if self.args.advantage_estimator == "gae":
                policy_advantages = masked_whiten(advantages, mask)
            else:  # hybrid: Monte Carlo return-to-go minus the value baseline, normalised within each group
                self._check_whole_groups(batch["group_ids"])
                mc_advantages, _ = gae(token_rewards, values, mask, self.args.gamma, 1.0, **gae_kwargs)
                policy_advantages = group_normalised(mc_advantages, mask, batch["group_ids"])
            batch["old_values"] = values
            batch["value_returns"] = returns
            batch["value_advantages"] = policy_advantages
        batch["advantages"] = batch["value_advantages"]

    def _check_whole_groups(self, group_ids: torch.Tensor) -> None:
        _, counts = torch.unique(group_ids, return_counts=True)
        expected = self.num_generations if self.model.training else self.num_generations_eval
        if torch.any(counts != expected):
            raise ValueError(
                f"advantage_estimator='hybrid' needs every group of {expected} completions whole in one micro-batch, "
                f"got group sizes {counts.tolist()}; make per_device_train_batch_size a multiple of num_generations "
                "and steps_per_generation equal to gradient_accumulation_steps"
            )

    # ---- optimizer, clipping, gradient averaging --------------------------------------------------------------
    def create_optimizer(self, model=None):
        optimizer = super().create_optimizer(model)
        if self.value_head is not None:
            held = {id(p) for group in optimizer.param_groups for p in group["params"]}
            head = [p for p in self.value_head.parameters() if id(p) not in held]
            if head:
                optimizer.add_param_group({"params": head, "weight_decay": 0.0})
        return optimizer

    def value_head_lr(self) -> float:
        """The learning rate the optimizer applies to the value head now (0.0 if the head is not in it)."""
        head = {id(p) for p in self.value_head.parameters()}
        for group in self.optimizer.param_groups:
            if any(id(p) in head for p in group["params"]):
                return group["lr"]
        return float(self._get_learning_rate())

    def _value_head_params(self) -> list[torch.nn.Parameter]:
        if self._value_grads_synced:
            return list(self.value_head.parameters())
        for name, param in self.value_head.named_parameters():
            if param.grad is None:
                raise RuntimeError(f"value head: {name} has no gradient at the optimizer step (value loss not added?)")
            if self.accelerator.num_processes > 1:  # DDP averages the model's gradients; do the same for the head
                param.grad = self.accelerator.reduce(param.grad, reduction="mean")
        self._value_grads_synced = True
        return list(self.value_head.parameters())

    def _clip_grad_norm(self, model):
        if self.value_head is None:
            return super()._clip_grad_norm(model)
        params = [*model.parameters(), *self._value_head_params()]
        return self.accelerator.clip_grad_norm_(params, self.args.max_grad_norm)

    def _get_grad_norm(self, model, grad_norm=None):
        if self.value_head is None or grad_norm is not None:
            return super()._get_grad_norm(model, grad_norm=grad_norm)
        params = [*model.parameters(), *self._value_head_params()]
        return self.accelerator.clip_grad_norm_(params, math.inf)

    # ---- checkpoints and export -------------------------------------------------------------------------------
    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        super().save_model(output_dir, _internal_call)
        if self.value_head is not None and self.args.should_save:
            out = output_dir or self.args.output_dir
            os.makedirs(out, exist_ok=True)
            tensors = {k: v.detach().cpu().contiguous() for k, v in self.value_head.state_dict().items()}
            save_file(tensors, os.path.join(out, VALUE_HEAD_FILE))

    def _load_from_checkpoint(self, resume_from_checkpoint, model=None):
        super()._load_from_checkpoint(resume_from_checkpoint, model)
        if self.value_head is None:
            return
        path = os.path.join(resume_from_checkpoint, VALUE_HEAD_FILE)
        if not os.path.isfile(path):
            raise MissingPathError(
                f"checkpoint {resume_from_checkpoint!r} has no {VALUE_HEAD_FILE} for the value head"
            )
        self.value_head.load_state_dict(load_file(path, device=str(self.accelerator.device)))
