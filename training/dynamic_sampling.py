"""DAPO dynamic sampling: drop groups whose rewards are all equal and top the batch up with fresh groups.

`DynamicSamplingMixin` wraps `_generate_and_score_completions` (cooperatively: it calls `super()` once per round).
After a round, each local group whose weighted rewards have zero spread (or are all NaN) is dropped; while any
process is short, every process generates another round from prompts drawn from the train dataset (all processes
run the same number of rounds, since generation and reward gathering are collective). The kept groups' rows of
every batch tensor are stitched into one batch of the original size. Advantages are those each round computed; with
`scale_rewards="group"` (TRL's default) a group's advantages do not depend on the other groups.

Metrics: `dynamic_sampling/rounds`, `dynamic_sampling/dropped_groups` (zero-variance groups seen, all rounds),
`dynamic_sampling/kept_frac_first_round`, `dynamic_sampling/unfilled_groups` (zero-variance groups left in the batch
because `dynamic_sampling_max_rounds` ran out; a warning too).
"""

from __future__ import annotations

import logging
import random

import torch
from trl.trainer.utils import nanstd

logger = logging.getLogger(__name__)


def signal_groups(rewards: torch.Tensor, num_generations: int) -> list[bool]:
    """Per consecutive group of `num_generations` rows: True when its rewards (NaN = unscorable) have spread."""
    grouped = rewards.view(-1, num_generations)
    std = nanstd(grouped, dim=1)
    return [bool(torch.isfinite(s) and not torch.isclose(s, torch.zeros_like(s))) for s in std]


def weighted_rewards(rewards_per_func: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """TRL's summed reward per row: NaN components left out, rows NaN in every component stay NaN."""
    rewards = (rewards_per_func * weights.to(rewards_per_func.device).unsqueeze(0)).nansum(dim=1)
    rewards[torch.isnan(rewards_per_func).all(dim=1)] = torch.nan
    return rewards


def _pad_value(key: str, pad_token_id: int) -> float:
    if key.endswith("_ids"):
        return pad_token_id
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


class DynamicSamplingMixin:
    """See the module docstring. Active only in training mode and when `args.dynamic_sampling` is on."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._dynamic_draws = 0
        self._last_rewards_per_func: torch.Tensor | None = None
        if not self.args.dynamic_sampling:
            return
        local = self.args.per_device_train_batch_size * self.args.steps_per_generation
        if local % self.num_generations != 0:
            raise ValueError(
                f"dynamic_sampling needs whole groups on each process: per_device_train_batch_size * "
                f"steps_per_generation = {local} is not a multiple of num_generations = {self.num_generations}"
            )
        if not hasattr(self.train_dataset, "__len__"):
            raise ValueError("dynamic_sampling needs a map-style train_dataset to draw top-up prompts from")
        if self.args.dynamic_sampling_max_rounds < 1:
            raise ValueError(f"dynamic_sampling_max_rounds must be >= 1, got {self.args.dynamic_sampling_max_rounds}")

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._last_rewards_per_func = rewards_per_func
        return rewards_per_func

    def _local_signal_groups(self, num_rows: int) -> list[bool]:
        rewards = weighted_rewards(self._last_rewards_per_func, self.reward_weights)
        start = self.accelerator.process_index * num_rows
        return signal_groups(rewards[start : start + num_rows], self.num_generations)

    def _draw_topup_inputs(self, num_groups: int) -> list[dict]:
        """`num_groups` fresh prompts from the train dataset, each repeated `num_generations` times in a row."""
        self._dynamic_draws += 1
        rng = random.Random(f"{self.args.seed}:{self.accelerator.process_index}:{self._dynamic_draws}")
        indices = rng.sample(range(len(self.train_dataset)), min(num_groups, len(self.train_dataset)))
        while len(indices) < num_groups:
            indices.append(rng.randrange(len(self.train_dataset)))
        return [dict(self.train_dataset[i]) for i in indices for _ in range(self.num_generations)]

    def _generate_and_score_completions(self, inputs):
        if not (self.args.dynamic_sampling and self.model.training):
            return super()._generate_and_score_completions(inputs)
        g = self.num_generations
        needed = len(inputs) // g
        batch = super()._generate_and_score_completions(inputs)
        signal = self._local_signal_groups(len(inputs))
        first_round = (batch, signal)
        parts: list[tuple[dict, list[int]]] = []
        kept = dropped = 0
        rounds = 1
        while True:
            dropped += signal.count(False)
            take = [j for j, ok in enumerate(signal) if ok][: needed - kept]
            if take:
                parts.append((batch, [j * g + r for j in take for r in range(g)]))
                kept += len(take)
            short = torch.tensor([needed - kept], device=self.accelerator.device)
            if self.accelerator.gather(short).max().item() == 0 or rounds >= self.args.dynamic_sampling_max_rounds:
                break
            batch = super()._generate_and_score_completions(self._draw_topup_inputs(needed))
            signal = self._local_signal_groups(len(inputs))
            rounds += 1

        unfilled = needed - kept
        if unfilled:
            first_batch, first_signal = first_round
            fill = [j for j, ok in enumerate(first_signal) if not ok][:unfilled]
            parts.append((first_batch, [j * g + r for j in fill for r in range(g)]))
            logger.warning(
                "dynamic sampling: %d of %d groups still have equal rewards after %d rounds; kept them to fill the "
                "batch (raise dynamic_sampling_max_rounds or check the reward's spread)",
                unfilled, needed, rounds,
            )
        metrics = self._metrics["train"]
        metrics["dynamic_sampling/rounds"].append(float(rounds))
        metrics["dynamic_sampling/dropped_groups"].append(float(dropped))
        metrics["dynamic_sampling/kept_frac_first_round"].append(first_round[1].count(True) / needed)
        metrics["dynamic_sampling/unfilled_groups"].append(float(unfilled))
        if len(parts) == 1 and parts[0][0] is first_round[0] and rounds == 1:
            return first_round[0]
        output = select_rows(parts, self._tokenizer.pad_token_id)
        mask = output["completion_mask"] if "tool_mask" not in output else output["completion_mask"] * output["tool_mask"]
        output["num_items_in_batch"] = self.accelerator.gather(mask.sum()).sum()
        return output
