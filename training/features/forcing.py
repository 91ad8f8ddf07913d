"""Assisted sampling: forced tool-call prefixes during a warm-up, kept out of the on-policy loss.

A policy that never calls tools gets no reward signal from tool tasks. During the first `ASSIST_WARMUP` steps each
sample is, with probability `FORCE_RATE`, *forced*: its first assistant turn is the row's reference tool call
(`reference_calls_json`) instead of a sampled one; TRL's tool loop then runs that call in the environment and the
policy continues from the result. Those tokens were not drawn from the policy, so a forced sample is never part of
the on-policy loss: its row is zeroed in the loss mask (`tool_mask`), and the loss re-checks the mask it is handed.
With `RL_DISABLE_FORCED=1` a forced sample with any token left in the loss raises `ForcedSampleInRLError`.
A recipe may opt into a separate supervised term on the forced tokens (`forced_sft_coef`, off by default).

Metrics: `forced/assist_fraction` (forced share of each generation batch), `forced/rl_fraction` (forced share of
the samples that are in the on-policy loss; 0.0 is the only correct value), `forced/sft_loss` when the supervised
term is on.
"""

from __future__ import annotations

import json
import logging
import random

import torch
from trl.trainer.utils import pad

from training.algorithms.trajectory import loss_mask, loss_tokens

logger = logging.getLogger(__name__)

Plan = list[list[int] | None]  # per sample of a generation round: the forced first-turn token ids, or None


class ForcedSampleInRLError(RuntimeError):
    """A forced (assisted) sample has tokens in the on-policy loss mask."""


def assisting(step: int, force_rate: float, assist_warmup: int) -> bool:
    """Whether samples generated at optimizer step `step` may be forced."""
    return force_rate > 0.0 and step < assist_warmup


def choose_forced(n: int, force_rate: float, rng: random.Random) -> list[bool]:
    """Which of `n` samples are forced: each independently with probability `force_rate`."""
    return [rng.random() < force_rate for _ in range(n)]


def forced_tool_call_text(row: dict, index: int) -> str:
    """The first reference tool call of a row, as the assistant writes it in Qwen3's tool-call format."""
    if "reference_calls_json" not in row:
        raise KeyError(
            f"generation batch row {index} has no 'reference_calls_json' column (columns: {sorted(row)}); "
            "FORCE_RATE > 0 needs a reference tool call for every row to force"
        )
    calls = json.loads(row["reference_calls_json"])
    if not calls:
        raise ValueError(f"generation batch row {index}: 'reference_calls_json' is empty; nothing to force")
    return tool_call_text(calls[0]["name"], calls[0]["arguments"])


def tool_call_text(name: str, arguments: dict) -> str:
    """A tool call as the assistant writes it in Qwen3's tool-call format."""
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def rows_in_loss(mask: torch.Tensor) -> torch.Tensor:
    """(B,) bool: samples with at least one token in the loss mask."""
    return mask.sum(dim=1) > 0


def forced_prefix_mask(plan: Plan, completion_mask: torch.Tensor) -> torch.Tensor:
    """(B, C) 1 on the forced first-turn tokens of each forced sample."""
    mask = torch.zeros_like(completion_mask)
    for i, ids in enumerate(plan):
        if ids is not None:
            mask[i, : len(ids)] = 1
    return mask * completion_mask


@torch.no_grad()
def policy_logps(model, prompts: list[list[int]], completions: list[list[int]], temperature: float, pad_id: int,
                 device) -> list[list[float]]:
    """Per-token log-probs of `completions` after `prompts` under `model`, at the sampling temperature: a plain
    forward, batched and padded (the trainer's log-prob forward is answered from recorded log-probs while a
    generation batch is scored, which is exactly when this runs)."""
    p = pad([torch.tensor(x) for x in prompts], padding_value=pad_id, padding_side="left")
    pm = pad([torch.ones(len(x), dtype=torch.long) for x in prompts], padding_value=0, padding_side="left")
    c = pad([torch.tensor(x) for x in completions], padding_value=pad_id, padding_side="right")
    cm = pad([torch.ones(len(x), dtype=torch.long) for x in completions], padding_value=0, padding_side="right")
    logits = model(
        input_ids=torch.cat([p, c], dim=1).to(device),
        attention_mask=torch.cat([pm, cm], dim=1).to(device),
        logits_to_keep=c.size(1) + 1,
    ).logits[:, :-1]
    logps = torch.log_softmax(logits.float() / temperature, dim=-1)
    logps = logps.gather(-1, c.to(device).unsqueeze(-1)).squeeze(-1)
    return [row[: len(x)].tolist() for row, x in zip(logps, completions, strict=True)]


class Forcing:
    """Forced tool-call prefixes from the strict flags (`FORCE_RATE`, `ASSIST_WARMUP`, `RL_DISABLE_FORCED`)."""

    def __init__(self, flags, tokenizer, max_completion_length: int, sft_coef: float, seed: int):
        self.flags = flags
        self.tokenizer = tokenizer
        self.max_completion_length = max_completion_length
        self.sft_coef = sft_coef
        self.seed = seed

    # ---- generation -------------------------------------------------------------------------------------------------
    def plan(self, inputs: list[dict], step: int, mode: str, process_index: int) -> Plan:
        """Which samples of this round are forced, and their first turn's token ids."""
        if mode != "train" or not assisting(step, self.flags.force_rate, self.flags.assist_warmup):
            return [None] * len(inputs)
        rng = random.Random(f"{self.seed}-{step}-{process_index}")
        plan: Plan = []
        for i, (row, forced) in enumerate(zip(inputs, choose_forced(len(inputs), self.flags.force_rate, rng))):
            if not forced:
                plan.append(None)
                continue
            text = forced_tool_call_text(row, i) + self.tokenizer.eos_token
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            if len(ids) > self.max_completion_length:
                raise ValueError(
                    f"row {i}: the forced tool call is {len(ids)} tokens, longer than max_completion_length="
                    f"{self.max_completion_length}"
                )
            plan.append(ids)
        return plan

    def rewrite_first_turn(self, plan: Plan, prompt_ids, completion_ids, logprobs, logps_of):
        """The first sampled turn with forced samples' turns replaced by their forced ids. Where the sampler recorded
        log-probs, the forced tokens get the policy's own (`logps_of(prompts, completions)`)."""
        if not any(p is not None for p in plan):
            return completion_ids, logprobs
        if len(plan) != len(completion_ids):
            raise RuntimeError(f"forcing plan covers {len(plan)} samples but the first turn has {len(completion_ids)}")
        completion_ids = [list(p) if p is not None else c for p, c in zip(plan, completion_ids, strict=True)]
        if logprobs is not None:
            forced_logps = iter(logps_of([prompt_ids[i] for i, p in enumerate(plan) if p is not None],
                                         [p for p in plan if p is not None]))
            logprobs = [next(forced_logps) if p is not None else lp for p, lp in zip(plan, logprobs, strict=True)]
        return completion_ids, logprobs

    def mark(self, batch: dict, plan: Plan, accelerator, metrics: dict) -> None:
        """`forced` per sample; forced rows out of the loss mask (`tool_mask`), the supervised mask when asked for."""
        forced = torch.tensor([p is not None for p in plan], dtype=torch.bool, device=batch["completion_ids"].device)
        batch["forced"] = forced
        if forced.any():
            tool_mask = batch.get("tool_mask", torch.ones_like(batch["completion_mask"]))
            if self.sft_coef > 0:
                batch["forced_sft_mask"] = forced_prefix_mask(plan, batch["completion_mask"]) * tool_mask
            batch["tool_mask"] = tool_mask * (~forced).unsqueeze(1).to(tool_mask.dtype)
            # TRL normalised by the tokens of the whole batch; the loss now covers only the on-policy ones.
            batch["num_items_in_batch"] = accelerator.gather(loss_tokens(batch)).sum()
        elif self.sft_coef > 0:
            batch["forced_sft_mask"] = torch.zeros_like(batch["completion_mask"])
        metrics["forced/assist_fraction"].append(accelerator.gather(forced.float()).mean().item())

    # ---- the loss ---------------------------------------------------------------------------------------------------
    def check_loss_batch(self, batch: dict, step: int, accelerator, metrics: dict) -> None:
        """`forced/rl_fraction`, and the leak check: no forced sample may have a token in the on-policy loss."""
        if "forced" not in batch:
            raise KeyError(
                f"the batch reaching the loss has no 'forced' key (keys: {sorted(batch)}); forcing marks every "
                "generation batch, so something between there and the loss dropped it"
            )
        forced = batch["forced"]
        in_loss = rows_in_loss(loss_mask(batch))
        leaked = forced & in_loss
        counts = accelerator.gather(torch.stack([leaked.sum(), in_loss.sum()]).unsqueeze(0)).sum(dim=0)
        n_leaked, n_in_loss = counts.tolist()
        # No sample in the loss at all (every one forced): no forced one is in it either, so the fraction is 0.
        metrics["forced/rl_fraction"].append(n_leaked / n_in_loss if n_in_loss else 0.0)
        if not leaked.any():
            return
        message = (
            f"{int(leaked.sum())} forced (assisted) sample(s) have tokens in the on-policy loss mask at step {step} "
            f"(batch rows {leaked.nonzero().flatten().tolist()}): forced tool calls were not sampled from the policy "
            "and must not be trained on as if they were. Something rebuilt 'tool_mask'/'completion_mask' after "
            "forcing zeroed those rows."
        )
        if self.flags.rl_disable_forced:
            raise ForcedSampleInRLError(message + " (RL_DISABLE_FORCED=1)")
        logger.warning(message)

    def sft_term(self, batch: dict, logps_of, metrics: dict, normalizer: float) -> torch.Tensor | None:
        """`forced_sft_coef` x the mean negative log-likelihood of the forced tool-call tokens (a supervised term, not a
        policy gradient); None when it is off or the batch has no forced sample. `logps_of(batch)` runs a forward."""
        if self.sft_coef <= 0:
            return None
        if "forced_sft_mask" not in batch:
            raise KeyError("forced_sft_coef > 0 but the batch has no 'forced_sft_mask' key")
        sft_mask = batch["forced_sft_mask"]
        if not sft_mask.any():
            return None
        nll = -(logps_of(batch) * sft_mask).sum() / sft_mask.sum()
        metrics["forced/sft_loss"].append(nll.item())
        return self.sft_coef * nll / normalizer
