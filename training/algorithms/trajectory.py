"""The generation batch schema: the keys the loss reads, their shapes and dtypes, and the strict check.

A key stored under one name and read under another (`old_log_probs` vs `old_per_token_logps`) is the classic silent
failure: the reader finds nothing and falls back to zeros or to the current policy. Under `STRICT_TRAJ_KEYS=1` a
missing, unknown or misshapen key raises naming the key and the expected ones; under `0` it warns once and counts
`trajectory/missing_keys` (and `trajectory/unknown_keys`, `trajectory/bad_shapes`). Nothing is ever zero-filled.
"""

from __future__ import annotations

import difflib
import logging
from dataclasses import dataclass

import torch

logger = logging.getLogger(__name__)


class TrajectoryKeyError(KeyError):
    """A generation batch does not match the schema; the message names the key and the expected ones."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0])


@dataclass(frozen=True)
class KeySpec:
    """`shape` uses B (batch), P (prompt length), C (completion length); `kind` is 'int', 'float' or 'any'."""

    shape: tuple[str, ...] | None
    kind: str


# What TRL's GRPOTrainer loss reads (grpo_trainer.py `_compute_loss`) and what our features add.
REQUIRED = {
    "prompt_ids": KeySpec(("B", "P"), "int"),
    "prompt_mask": KeySpec(("B", "P"), "int"),
    "completion_ids": KeySpec(("B", "C"), "int"),
    "completion_mask": KeySpec(("B", "C"), "int"),
    "advantages": KeySpec(None, "float"),  # (B,) group-relative, or (B, C) per token
    "num_items_in_batch": KeySpec((), "any"),
}
OPTIONAL = {
    "old_per_token_logps": KeySpec(("B", "C"), "float"),
    "sampling_per_token_logps": KeySpec(("B", "C"), "float"),
    "ref_per_token_logps": KeySpec(("B", "C"), "float"),
    "importance_sampling_ratio": KeySpec(None, "float"),
    "tool_mask": KeySpec(("B", "C"), "int"),
    # multimodal inputs TRL may carry through; not read by text-only Qwen3 runs
    **{
        key: KeySpec(None, "any")
        for key in (
            "pixel_values",
            "image_grid_thw",
            "pixel_attention_mask",
            "spatial_shapes",
            "image_sizes",
            "token_type_ids",
            "mm_token_type_ids",
            "image_position_ids",
            "num_images",
            "num_tiles",
        )
    },
}
# What the strict stack's features add to the batch. Data travels between features in these keys, never on the trainer.
FEATURE_KEYS = {
    "forced": KeySpec(("B",), "any"),  # bool per sample: its first turn was forced (features/forcing.py)
    "forced_sft_mask": KeySpec(("B", "C"), "int"),  # forced tokens for the optional supervised term
    "void_tokens": KeySpec(("B",), "int"),  # sampled tokens `void_turn_rule: exclude` kept out of the loss but not
                                            # out of its normaliser (features/turn_limits.py; `loss_tokens`)
    "sequence_rewards": KeySpec(("B",), "float"),  # weighted reward per completion; NaN = unscorable
    "group_ids": KeySpec(("B",), "int"),  # which prompt's group each completion belongs to (global numbering)
    "old_values": KeySpec(("B", "C"), "float"),  # value estimates at the first visit (features/value_head.py)
    "value_returns": KeySpec(("B", "C"), "float"),
    "value_advantages": KeySpec(("B", "C"), "float"),
    # at each choice token (features/choice_credit.py): the offered tokens (-1: none) and each one's value
    "choice_tokens": KeySpec(("B", "C", "J"), "int"),
    "choice_values": KeySpec(("B", "C", "J"), "float"),
}


def loss_mask(batch: dict) -> torch.Tensor:
    """(B, C) 1 on the tokens the policy loss trains on: real completion tokens, minus tool results and samples kept
    out of the loss (`tool_mask` zero: forced rows, tokens the sampler could not score). The one rule every feature
    reads."""
    mask = batch["completion_mask"]
    return mask * batch["tool_mask"] if "tool_mask" in batch else mask


def loss_tokens(batch: dict) -> torch.Tensor:
    """The token count the loss divides by (`num_items_in_batch`, this process's part): the loss mask's tokens plus
    the void episodes' that `void_turn_rule: exclude` kept out, so that a batch of mostly void episodes takes a step
    in proportion to what it kept, not a whole step on its few kept episodes."""
    kept = loss_mask(batch).sum()
    return kept + batch["void_tokens"].sum() if "void_tokens" in batch else kept


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of `x` over the positions where `mask` is 1.

    An empty mask (a micro-batch whose rows are all forced, say) gives 0, never 0/0 = NaN, and keeps `x`'s graph so a
    loss built on it still backpropagates (zero gradient). Callers that train on it count the case
    (`trajectory/empty_loss_mask`)."""
    kept = torch.where(mask.bool(), x, torch.zeros_like(x))
    return kept.sum() / mask.sum().clamp(min=1)


def _dtype_ok(value, kind: str) -> bool:
    if kind == "any" or not isinstance(value, torch.Tensor):
        return kind == "any"
    return value.is_floating_point() if kind == "float" else not value.is_floating_point()


def schema_problems(batch: dict, required: set[str]) -> list[tuple[str, str]]:
    """Everything wrong with `batch`, as (category, message) pairs; empty when it matches the schema.

    `required` names the keys this run's loss must find (the always-required ones plus, for example,
    `old_per_token_logps` under record-at-sample or `ref_per_token_logps` when beta != 0).
    """
    known = {**REQUIRED, **OPTIONAL, **FEATURE_KEYS}
    problems = []
    for key in sorted(set(required) - set(batch)):
        problems.append(("missing_keys", f"missing key {key!r}"))
    for key in sorted(set(batch) - set(known)):
        near = difflib.get_close_matches(key, list(known), n=1, cutoff=0.4)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        problems.append(("unknown_keys", f"unknown key {key!r}{hint}"))

    sizes: dict[str, int] = {}
    for key, spec in known.items():
        if key not in batch:
            continue
        value = batch[key]
        if not _dtype_ok(value, spec.kind):
            problems.append(("bad_shapes", f"key {key!r} should be a {spec.kind} tensor, got {type(value).__name__}"))
            continue
        if spec.shape is None or not isinstance(value, torch.Tensor):
            continue
        if value.dim() != len(spec.shape):
            problems.append(("bad_shapes", f"key {key!r} has shape {tuple(value.shape)}, expected {spec.shape}"))
            continue
        for axis, size in zip(spec.shape, value.shape, strict=True):
            if sizes.setdefault(axis, size) != size:
                problems.append(
                    ("bad_shapes", f"key {key!r} has {axis}={size} but an earlier key has {axis}={sizes[axis]}")
                )
    adv = batch.get("advantages")
    if isinstance(adv, torch.Tensor) and "B" in sizes and adv.shape[0] != sizes["B"]:
        problems.append(("bad_shapes", f"key 'advantages' has {adv.shape[0]} rows, expected B={sizes['B']}"))
    return problems


_warned: set[str] = set()


def check_generation_batch(batch: dict, strict: bool, metrics: dict, required_extra: set[str] = frozenset()) -> None:
    """Raise (strict) or warn once and count (non-strict) on any schema problem in `batch`."""
    problems = schema_problems(batch, set(REQUIRED) | set(required_extra))
    if not problems:
        return
    expected = sorted(set(REQUIRED) | set(required_extra))
    message = "; ".join(m for _, m in problems) + f". Expected keys: {expected} (optional: {sorted(OPTIONAL)})"
    if strict:
        raise TrajectoryKeyError(f"generation batch does not match the schema (STRICT_TRAJ_KEYS=1): {message}")
    for category in {c for c, _ in problems}:
        metrics[f"trajectory/{category}"].append(float(sum(c == category for c, _ in problems)))
    if message not in _warned:
        _warned.add(message)
        logger.warning("generation batch does not match the schema (STRICT_TRAJ_KEYS=0): %s", message)
