"""A reference policy that stays in sync under LoRA: a frozen second adapter named "ref" on the same base weights.

TRL 1.16 computes the KL term's reference log-probs with the adapter named "ref" whenever the PEFT model has one
(`use_adapter(model, adapter_name="ref")` in `_generate_and_score_completions`), but refuses `sync_ref_model=True`
with a PEFT model. `ReferenceAdapter` creates that adapter (a frozen copy of the policy adapter), lifts TRL's
refusal for the PEFT case only (TRL's own fields are used unchanged; its `SyncRefModelCallback`, which needs a
separate `ref_model`, is replaced by `ReferenceSyncCallback`), and every `ref_model_sync_steps` optimizer steps sets
ref <- alpha * policy + (1 - alpha) * ref over every trainable adapter tensor, then verifies the sync
(`ref_sync/param_diffs`: 0 after a hard sync; `ref_sync/count`). Full fine-tuning (no PEFT) keeps TRL's behaviour.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
from collections.abc import Iterator

import torch
from peft import PeftModel, set_peft_model_state_dict
from peft.utils import load_peft_weights
from transformers import TrainerCallback

from training.errors import MissingPathError

logger = logging.getLogger(__name__)

REF_ADAPTER = "ref"


class ReferenceSyncError(RuntimeError):
    """The reference adapter is missing, not frozen, not in sync, or differs between processes."""


def adapter_param_pairs(
    model: PeftModel, policy: str, ref: str = REF_ADAPTER
) -> list[tuple[str, torch.nn.Parameter, torch.nn.Parameter]]:
    """(name, policy tensor, reference tensor) for every trainable tensor of the `policy` adapter.

    Covers LoRA A/B, `modules_to_save` copies and trainable token deltas: any parameter that requires grad and
    has the adapter name as one segment of its name. Raises naming the tensor when its reference counterpart is missing.
    """
    params = dict(model.named_parameters())
    pairs = []
    for name, param in params.items():
        parts = name.split(".")
        if policy not in parts or not param.requires_grad:
            continue
        # The adapter name is a whole segment, in the middle (`lora_A.default.weight`) or last
        # (`trainable_tokens_delta.default`, a ParameterDict entry).
        ref_name = ".".join(ref if part == policy else part for part in parts)
        if ref_name not in params:
            raise ReferenceSyncError(f"policy tensor {name!r} has no reference counterpart {ref_name!r}")
        pairs.append((name, param, params[ref_name]))
    if not pairs:
        raise ReferenceSyncError(f"adapter {policy!r} has no trainable tensors to mirror into {ref!r}")
    return pairs


def is_partitioned(param: torch.Tensor) -> bool:
    """True for a DeepSpeed ZeRO-3 parameter (partitioned across ranks; its local `.data` is a placeholder)."""
    return hasattr(param, "ds_id")


@contextlib.contextmanager
def gathered(params: list[torch.Tensor], modifier_rank: int | None = 0) -> Iterator[bool]:
    """Gather ZeRO-3 partitioned parameters for the block; yields whether this rank may modify them.

    Without ZeRO-3 this is a no-op that yields True. With ZeRO-3, `deepspeed.zero.GatheredParameters` gathers the
    full tensors; only `modifier_rank` may write, and DeepSpeed re-partitions its values to every rank on exit.
    """
    if not any(is_partitioned(p) for p in params):
        yield True
        return
    import deepspeed  # only reachable under ZeRO-3, where deepspeed is installed

    with deepspeed.zero.GatheredParameters(params, modifier_rank=modifier_rank):
        yield modifier_rank is None or deepspeed.comm.get_rank() == modifier_rank


@torch.no_grad()
def sync_reference(pairs, alpha: float) -> None:
    """ref <- ref + alpha * (policy - ref) for each pair (alpha = 1: a hard copy)."""
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"ref_model_mixup_alpha={alpha} is out of range: expected a value in (0, 1]")
    for _, policy, ref in pairs:
        if alpha == 1.0:
            ref.copy_(policy)
        else:
            ref.lerp_(policy.to(ref.dtype), alpha)


@torch.no_grad()
def count_differing(pairs) -> int:
    """Number of (policy, reference) tensor pairs that are not bit-for-bit equal."""
    return sum(not torch.equal(policy, ref) for _, policy, ref in pairs)


@torch.no_grad()
def reference_checksum(pairs) -> torch.Tensor:
    """A float64 fingerprint of the reference tensors, to compare across processes."""
    return torch.stack([ref.detach().double().sum() for _, _, ref in pairs]).sum()


def add_reference_adapter(model: PeftModel, policy: str) -> None:
    """Add a frozen adapter "ref", a copy of the `policy` adapter, to `model` (no-op if TRL already made one)."""
    if REF_ADAPTER not in model.peft_config:
        config = copy.deepcopy(model.peft_config[policy])
        config.inference_mode = True
        model.add_adapter(REF_ADAPTER, config)
    freeze_reference_adapter(model)
    pairs = adapter_param_pairs(model, policy)
    with gathered([t for _, p, r in pairs for t in (p, r)]) as may_write:
        if may_write:
            sync_reference(pairs, 1.0)


def freeze_reference_adapter(model: PeftModel) -> None:
    """requires_grad False on every reference tensor, so no optimizer can hold it."""
    for name, param in model.named_parameters():
        if REF_ADAPTER in name.split("."):
            param.requires_grad_(False)


class ReferenceSyncCallback(TrainerCallback):
    """After every `ref_model_sync_steps`-th optimizer step, sync the reference adapter and verify it."""

    def __init__(self, reference: ReferenceAdapter):
        self.reference = reference

    def on_train_begin(self, args, state, control, **kwargs):
        # On resume the syncs before the checkpoint happened at every multiple of the interval.
        self.reference.count = state.global_step // args.ref_model_sync_steps

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step % args.ref_model_sync_steps == 0:
            self.reference.sync()


class ReferenceAdapter:
    """With LoRA and `beta != 0`, the reference is a frozen adapter "ref" (TRL's KL term reads it); with
    `sync_ref_model=True` it is synced every `ref_model_sync_steps` optimizer steps with `ref_model_mixup_alpha`."""

    def __init__(self, args, uses_peft: bool):
        self.syncs = bool(args.sync_ref_model and uses_peft)
        if self.syncs and args.beta == 0.0:
            raise ValueError(
                "sync_ref_model=True with beta=0.0: the reference adapter is only read by the KL term, so there is "
                "nothing to sync. Set beta > 0 or sync_ref_model=False."
            )
        self.args = args
        self.model: PeftModel | None = None
        self.policy_adapter: str | None = None
        self.count = 0

    @contextlib.contextmanager
    def trl_init(self) -> Iterator[None]:
        """Around `GRPOTrainer.__init__`: hide `sync_ref_model` from TRL, which raises NotImplementedError for PEFT."""
        if not self.syncs:
            yield
            return
        self.args.sync_ref_model = False
        try:
            yield
        finally:
            self.args.sync_ref_model = True

    def attach(self, model, accelerator, metrics: dict, force: bool = False) -> TrainerCallback | None:
        """Add the reference adapter to a LoRA `model` when the KL term reads it (`beta != 0`, or `force`); returns
        the sync callback to register when syncing is on."""
        if not isinstance(model, PeftModel) or (self.args.beta == 0.0 and not force):
            return None
        self.model, self.accelerator, self.metrics = model, accelerator, metrics
        self.policy_adapter = model.active_adapter
        add_reference_adapter(model, self.policy_adapter)
        return ReferenceSyncCallback(self) if self.syncs or force else None

    @property
    def active(self) -> bool:
        return self.model is not None

    def pairs(self):
        """(name, policy, reference) for every trainable tensor of the policy adapter."""
        return adapter_param_pairs(self.model, self.policy_adapter)

    def sync(self) -> int:
        """Sync ref toward the policy now, verify it, log `ref_sync/param_diffs`; returns the differing count."""
        pairs = self.pairs()
        alpha = self.args.ref_model_mixup_alpha
        tensors = [t for _, p, r in pairs for t in (p, r)]
        with gathered(tensors) as may_write:
            if may_write:
                sync_reference(pairs, alpha)
        with gathered(tensors, modifier_rank=None):
            diffs = count_differing(pairs)
            checksum = reference_checksum(pairs)
        self.count += 1
        self.metrics["ref_sync/param_diffs"].append(float(diffs))
        if alpha == 1.0 and diffs:
            raise ReferenceSyncError(
                f"hard reference sync left {diffs} of {len(pairs)} adapter tensors different from the policy"
            )
        if self.accelerator.num_processes > 1:
            all_sums = self.accelerator.gather(checksum.to(self.accelerator.device).reshape(1))
            if not torch.all(all_sums == all_sums[0]):
                raise ReferenceSyncError(f"reference adapter differs between processes after sync: {all_sums.tolist()}")
        return diffs

    def add_count(self, logs: dict) -> None:
        """`ref_sync/count` on a training-step log: a running count, written as is rather than averaged over the
        logging window like the step metrics."""
        if self.syncs:
            logs["ref_sync/count"] = float(self.count)

    def save_partitioned(self, output_dir: str, should_save: bool) -> None:
        """Under ZeRO-3, write "ref/" from the reference adapter's own (gathered) tensors; a no-op otherwise.

        transformers saves a PEFT model under ZeRO-3 from `_zero3_consolidated_16bit_state_dict(
        exclude_frozen_parameters=True)`, which leaves the frozen reference out; PEFT, finding no "ref" tensor in it,
        falls back to the whole state dict and wrote the *policy* adapter as "ref/". Every rank calls this (the
        gather is collective); the main process writes."""
        if not self.active:
            return
        pairs = self.pairs()
        refs = [ref for _, _, ref in pairs]
        if not any(is_partitioned(ref) for ref in refs):
            return
        with gathered(refs, modifier_rank=None):
            state = {self._ref_name(name): ref.detach().clone().cpu() for name, _, ref in pairs}
        if should_save:
            self.model.save_pretrained(output_dir, selected_adapters=[REF_ADAPTER], state_dict=state)

    def _ref_name(self, policy_name: str) -> str:
        return ".".join(REF_ADAPTER if part == self.policy_adapter else part for part in policy_name.split("."))

    def restore(self, checkpoint: str, load_weights: bool = False) -> None:
        """After transformers restored every adapter saved in a sub-directory (ours: "ref/") on resume; with
        `load_weights`, load "ref/" here (transformers does that only in `_load_from_checkpoint`, which a DeepSpeed
        resume skips), into the full tensors under ZeRO-3 (rank 0 writes, DeepSpeed re-partitions)."""
        if not self.active or REF_ADAPTER not in self.model.peft_config:
            return
        path = os.path.join(checkpoint, REF_ADAPTER)
        if not os.path.isdir(path):
            raise MissingPathError(f"checkpoint {checkpoint!r} has no reference adapter directory {REF_ADAPTER!r}/")
        if load_weights:
            self._load_weights(path)
        freeze_reference_adapter(self.model)
        self.model.set_adapter(self.policy_adapter)

    def _load_weights(self, path: str) -> None:
        weights = load_peft_weights(path, device="cpu")
        named = [key for key in weights if self.policy_adapter in key.split(".")]
        if named:  # written by the ZeRO-3 save before `save_partitioned`: the policy's tensors, not the reference's
            raise MissingPathError(f"{path}: the saved reference adapter holds the policy adapter's tensors "
                                   f"({named[0]!r}, ...): this checkpoint cannot restore the reference")
        pairs = self.pairs()
        with gathered([ref for _, _, ref in pairs]) as may_write:
            if may_write:
                result = set_peft_model_state_dict(self.model, weights, adapter_name=REF_ADAPTER)
                expected = {self._ref_name(name) for name, _, _ in pairs}
                missing = expected & set(result.missing_keys)
                if missing or result.unexpected_keys:
                    raise ReferenceSyncError(f"{path}: reference adapter tensors missing {sorted(missing)[:3]}, "
                                             f"unexpected {sorted(result.unexpected_keys)[:3]}")
