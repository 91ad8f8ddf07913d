"""DAPO dynamic sampling: drop groups whose rewards are all equal and top the batch up with fresh groups.

`DynamicSampling.collect` runs the step's sampling round (`sample_round`: generate, score, attach) once, and again
while any process is short of groups with signal. After a round, each local group whose weighted rewards
(`sequence_rewards`) have zero spread (or are all NaN) is dropped; while any process is short, every process
generates another round from prompts drawn from the train dataset (all processes run the same number of rounds,
since generation and reward gathering are collective). The kept groups' rows of every batch tensor are stitched into
one batch of the original size, with `group_ids` renumbered and `num_items_in_batch` recounted. Advantages are those
each round computed; with `scale_rewards="group"` (TRL's default) a group's advantages do not depend on the other
groups.

Metrics: `dynamic_sampling/rounds`, `dynamic_sampling/dropped_groups` (zero-variance groups seen, all rounds),
`dynamic_sampling/kept_frac_first_round`, `dynamic_sampling/unfilled_groups` (zero-variance groups left in the batch
because `dynamic_sampling_max_rounds` ran out; a warning too).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable

import torch
from trl.trainer.utils import nanstd

from training.algorithms.trajectory import loss_tokens

logger = logging.getLogger(__name__)


def signal_groups(rewards: torch.Tensor, num_generations: int) -> list[bool]:
    """Per consecutive group of `num_generations` rows: True when its rewards (NaN = unscorable) have spread."""
    grouped = rewards.view(-1, num_generations)
    std = nanstd(grouped, dim=1)
    return [bool(torch.isfinite(s) and not torch.isclose(s, torch.zeros_like(s))) for s in std]


def _pad_value(key: str, pad_token_id: int) -> float:
    if key.endswith("_ids"):
        return pad_token_id
    if key == "choice_tokens":
        return -1  # no choice token (features/choice_credit.py)
    return 1 if key == "tool_mask" else 0


def select_rows(parts: list[tuple[dict, list[int]]], pad_token_id: int) -> dict:
    """One batch from the chosen rows of several batch dicts.

    Tensors and lists whose first dimension is the batch are indexed and concatenated; 2-D+ tensors of different
    widths are padded (keys starting with `prompt` on the left, as TRL pads prompts, the rest on the right). Any
    other value must be equal in every part. `num_items_in_batch` is left for the caller to recompute.
    """
    keys = set(parts[0][0])
    for batch, _ in parts[1:]:
        if set(batch) != keys:
            raise ValueError(f"dynamic sampling: rounds produced different batch keys {sorted(keys ^ set(batch))}")
    merged = {}
    for key in sorted(keys - {"num_items_in_batch"}):
        sizes = [len(batch["completion_ids"]) for batch, _ in parts]
        values = [batch[key] for batch, _ in parts]
        if isinstance(values[0], torch.Tensor) and values[0].dim() > 0 and values[0].shape[0] == sizes[0]:
            chosen = [v[rows] for v, (_, rows) in zip(values, parts, strict=True)]
            if chosen[0].dim() > 1:
                width = max(c.shape[1] for c in chosen)
                padded = []
                for c in chosen:
                    extra = width - c.shape[1]
                    pad = c.new_full((c.shape[0], extra, *c.shape[2:]), _pad_value(key, pad_token_id))
                    padded.append(torch.cat([pad, c] if key.startswith("prompt") else [c, pad], dim=1))
                chosen = padded
            merged[key] = torch.cat(chosen, dim=0)
        elif isinstance(values[0], list) and len(values[0]) == sizes[0]:
            merged[key] = [v[i] for v, (_, rows) in zip(values, parts, strict=True) for i in rows]
        else:
            first = values[0]
            for v in values[1:]:
                same = torch.equal(v, first) if isinstance(first, torch.Tensor) else v == first
                if not same:
                    raise ValueError(f"dynamic sampling: batch key {key!r} differs between rounds and is not per row")
            merged[key] = first
    return merged


class DynamicSampling:
    """See the module docstring. Active only in training mode and when `args.dynamic_sampling` is on."""

    def __init__(self, args, train_dataset, num_generations: int, seed: int, process_index: int):
        self.enabled = args.dynamic_sampling
        self.max_rounds = args.dynamic_sampling_max_rounds
        self.num_generations = num_generations
        self.train_dataset = train_dataset
        self.seed = seed
        self.process_index = process_index
        self.draws = 0
        if not self.enabled:
            return
        local = args.per_device_train_batch_size * args.steps_per_generation
        if local % num_generations != 0:
            raise ValueError(
                f"dynamic_sampling needs whole groups on each process: per_device_train_batch_size * "
                f"steps_per_generation = {local} is not a multiple of num_generations = {num_generations}"
            )
        if not hasattr(train_dataset, "__len__"):
            raise ValueError("dynamic_sampling needs a map-style train_dataset to draw top-up prompts from")
        if self.max_rounds < 1:
            raise ValueError(f"dynamic_sampling_max_rounds must be >= 1, got {self.max_rounds}")

    def active(self, mode: str) -> bool:
        return self.enabled and mode == "train"

    def collect(self, inputs: list[dict], sample_round: Callable[[list[dict]], dict], accelerator, metrics: dict,
                pad_token_id: int) -> dict:
        g = self.num_generations
        needed = len(inputs) // g
        first_batch = batch = sample_round(inputs)
        first_signal = signal = signal_groups(batch["sequence_rewards"], g)
        parts: list[tuple[dict, list[int]]] = []
        kept = dropped = 0
        rounds = 1
        while True:
            dropped += signal.count(False)
            take = [j for j, ok in enumerate(signal) if ok][: needed - kept]
            if take:
                parts.append((batch, [j * g + r for j in take for r in range(g)]))
                kept += len(take)
            short = torch.tensor([needed - kept], device=accelerator.device)
            if accelerator.gather(short).max().item() == 0 or rounds >= self.max_rounds:
                break
            batch = sample_round(self._draw_topup_inputs(needed))
            signal = signal_groups(batch["sequence_rewards"], g)
            rounds += 1

        unfilled = needed - kept
        if unfilled:
            fill = [j for j, ok in enumerate(first_signal) if not ok][:unfilled]
            parts.append((first_batch, [j * g + r for j in fill for r in range(g)]))
            logger.warning(
                "dynamic sampling: %d of %d groups still have equal rewards after %d rounds; kept them to fill the "
                "batch (raise dynamic_sampling_max_rounds or check the reward's spread)",
                unfilled, needed, rounds,
            )
        metrics["dynamic_sampling/rounds"].append(float(rounds))
        metrics["dynamic_sampling/dropped_groups"].append(float(dropped))
        metrics["dynamic_sampling/kept_frac_first_round"].append(first_signal.count(True) / needed)
        metrics["dynamic_sampling/unfilled_groups"].append(float(unfilled))
        if rounds == 1 and len(parts) == 1 and parts[0][0] is first_batch:
            return first_batch
        output = select_rows(parts, pad_token_id)
        start = self.process_index * len(inputs)
        output["group_ids"] = torch.arange(start, start + len(inputs), device=output["group_ids"].device) // g
        output["num_items_in_batch"] = accelerator.gather(loss_tokens(output)).sum()
        return output

    def _draw_topup_inputs(self, num_groups: int) -> list[dict]:
        """`num_groups` fresh prompts from the train dataset, each repeated `num_generations` times in a row."""
        self.draws += 1
        rng = random.Random(f"{self.seed}:{self.process_index}:{self.draws}")
        indices = rng.sample(range(len(self.train_dataset)), min(num_groups, len(self.train_dataset)))
        while len(indices) < num_groups:
            indices.append(rng.randrange(len(self.train_dataset)))
        return [dict(self.train_dataset[i]) for i in indices for _ in range(self.num_generations)]

    def state_dict(self) -> dict:
        return {"draws": self.draws}

    def load_state_dict(self, state: dict) -> None:
        self.draws = state["draws"]
