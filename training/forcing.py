"""Assisted sampling: forced tool-call prefixes during a warm-up, kept out of the on-policy loss.

A policy that never calls tools gets no reward signal from tool tasks. During the first `ASSIST_WARMUP` steps each
sample is, with probability `FORCE_RATE`, *forced*: its first assistant turn is the row's reference tool call
(`reference_calls_json`) instead of a sampled one; TRL's tool loop then runs that call in the environment and the
policy continues from the result. Those tokens were not drawn from the policy, so a forced sample is never part of
the on-policy loss: its row is zeroed in the loss mask (`tool_mask`), and `_compute_loss` re-checks the mask it is
handed. With `RL_DISABLE_FORCED=1` a forced sample with any token left in the loss raises `ForcedSampleInRLError`.
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

from training.trajectory import KeySpec, register_key

logger = logging.getLogger(__name__)


register_key("forced", KeySpec(("B",), "any"))  # bool per sample: its first turn was forced
register_key("forced_sft_mask", KeySpec(("B", "C"), "int"))  # forced tokens for the optional supervised term

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
    return "<tool_call>\n" + json.dumps({"name": calls[0]["name"], "arguments": calls[0]["arguments"]}) + "\n</tool_call>"


def rows_in_loss(loss_mask: torch.Tensor) -> torch.Tensor:
    """(B,) bool: samples with at least one token in the loss mask."""
    return loss_mask.sum(dim=1) > 0


class ForcedToolCallMixin:
    """Forced tool-call prefixes from `self.flags` (`FORCE_RATE`, `ASSIST_WARMUP`, `RL_DISABLE_FORCED`).

    Place it before any mixin that overrides `_generate_single_turn` (e.g. record-at-sample log-probs): it rewrites
    the first turn of forced samples after that mixin produced it.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._forced_ids: list[list[int] | None] | None = None  # per sample of the batch being generated
        self._first_turn = False

    # ---- which samples are forced, and their first turn ----------------------------------------------------------
    def _plan_forcing(self, inputs: list[dict], mode: str) -> list[list[int] | None]:
        step = self.state.global_step
        if mode != "train" or not assisting(step, self.flags.force_rate, self.flags.assist_warmup):
            return [None] * len(inputs)
        rng = random.Random(f"{self.args.seed}-{step}-{self.accelerator.process_index}")
        plan = []
        for i, (row, forced) in enumerate(zip(inputs, choose_forced(len(inputs), self.flags.force_rate, rng))):
            if not forced:
                plan.append(None)
                continue
            ids = self._tokenizer(forced_tool_call_text(row, i) + self._tokenizer.eos_token, add_special_tokens=False)
            ids = ids["input_ids"]
            if len(ids) > self.max_completion_length:
                raise ValueError(
                    f"row {i}: the forced tool call is {len(ids)} tokens, longer than max_completion_length="
                    f"{self.max_completion_length}"
                )
            plan.append(ids)
        return plan

    def _generate(self, prompts):
        self._first_turn = True
        try:
            return super()._generate(prompts)
        finally:
            self._first_turn = False

    def _tool_call_loop(self, *args, **kwargs):
        self._first_turn = False  # turns after a tool result are always the policy's own
        return super()._tool_call_loop(*args, **kwargs)

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        completion_ids, logprobs = super()._generate_single_turn(
            prompt_ids, images, multimodal_fields, num_generations, has_tool_images
        )
        plan = self._forced_ids
        if not self._first_turn or plan is None or not any(p is not None for p in plan):
            return completion_ids, logprobs
        if len(plan) != len(completion_ids):
            raise RuntimeError(f"forcing plan covers {len(plan)} samples but the first turn has {len(completion_ids)}")
        completion_ids = [list(p) if p is not None else c for p, c in zip(plan, completion_ids, strict=True)]
        if logprobs is not None:
            # The sampler recorded log-probs of tokens we discarded; record the policy's log-probs of the forced ones.
            forced_logps = self._policy_logps([prompt_ids[i] for i, p in enumerate(plan) if p is not None],
                                              [p for p in plan if p is not None])
            it = iter(forced_logps)
            logprobs = [next(it) if p is not None else lp for p, lp in zip(plan, logprobs, strict=True)]
        return completion_ids, logprobs

    @torch.no_grad()
    def _policy_logps(self, prompts: list[list[int]], completions: list[list[int]]) -> list[list[float]]:
        """Per-token log-probs of `completions` after `prompts` under the current policy, at the sampling temperature.

        A plain forward of the unwrapped model, not `_get_per_token_logps_and_entropies`: mixins answer that one
        from recorded log-probs while a generation batch is being scored, which is exactly when this runs."""
        device = self.accelerator.device
        pad_id = self._tokenizer.pad_token_id
        p = pad([torch.tensor(x) for x in prompts], padding_value=pad_id, padding_side="left")
        pm = pad([torch.ones(len(x), dtype=torch.long) for x in prompts], padding_value=0, padding_side="left")
        c = pad([torch.tensor(x) for x in completions], padding_value=pad_id, padding_side="right")
        cm = pad([torch.ones(len(x), dtype=torch.long) for x in completions], padding_value=0, padding_side="right")
        model = self.accelerator.unwrap_model(self.model)
        logits = model(
            input_ids=torch.cat([p, c], dim=1).to(device),
            attention_mask=torch.cat([pm, cm], dim=1).to(device),
            logits_to_keep=c.size(1) + 1,
        ).logits[:, :-1]
        logps = torch.log_softmax(logits.float() / self.temperature, dim=-1)
        logps = logps.gather(-1, c.to(device).unsqueeze(-1)).squeeze(-1)
        return [row[: len(x)].tolist() for row, x in zip(logps, completions, strict=True)]

    # ---- the generation batch: `forced` per sample, forced rows out of the loss mask -------------------------------
    def _generate_and_score_completions(self, inputs):
        mode = "train" if self.model.training else "eval"
        self._forced_ids = self._plan_forcing(inputs, mode)
        try:
            output = super()._generate_and_score_completions(inputs)
        finally:
            plan, self._forced_ids = self._forced_ids, None
        device = output["completion_ids"].device
        forced = torch.tensor([p is not None for p in plan], dtype=torch.bool, device=device)
        output["forced"] = forced
        if forced.any():
            keep = (~forced).unsqueeze(1).to(output["completion_mask"].dtype)
            tool_mask = output.get("tool_mask", torch.ones_like(output["completion_mask"]))
            if self.args.forced_sft_coef > 0:
                output["forced_sft_mask"] = self._forced_prefix_mask(plan, output["completion_mask"]) * tool_mask
            output["tool_mask"] = tool_mask * keep
            loss_mask = output["completion_mask"] * output["tool_mask"]
            # TRL normalised by the tokens of the whole batch; the loss now covers only the on-policy ones.
            output["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()
        elif self.args.forced_sft_coef > 0:
            output["forced_sft_mask"] = torch.zeros_like(output["completion_mask"])
        assist = self.accelerator.gather(forced.float())
        self._metrics[mode]["forced/assist_fraction"].append(assist.mean().item())
        return output

    @staticmethod
    def _forced_prefix_mask(plan: list[list[int] | None], completion_mask: torch.Tensor) -> torch.Tensor:
        mask = torch.zeros_like(completion_mask)
        for i, ids in enumerate(plan):
            if ids is not None:
                mask[i, : len(ids)] = 1
        return mask * completion_mask

    # ---- the loss: verify the mask it is given, optional supervised term ------------------------------------------
    def _compute_loss(self, model, inputs):
        mode = "train" if self.model.training else "eval"
        if "forced" not in inputs:
            raise KeyError(
                "the batch reaching the loss has no 'forced' key (keys: "
                f"{sorted(inputs)}); ForcedToolCallMixin adds it in _generate_and_score_completions, so something "
                "between there and the loss dropped it"
            )
        forced = inputs["forced"]
        loss_mask = inputs["completion_mask"]
        if "tool_mask" in inputs:
            loss_mask = loss_mask * inputs["tool_mask"]
        in_loss = rows_in_loss(loss_mask)
        leaked = forced & in_loss
        counts = self.accelerator.gather(torch.stack([leaked.sum(), in_loss.sum()]).unsqueeze(0)).sum(dim=0)
        n_leaked, n_in_loss = counts.tolist()
        # No sample in the loss at all (every one forced): no forced one is in it either, so the fraction is 0.
        self._metrics[mode]["forced/rl_fraction"].append(n_leaked / n_in_loss if n_in_loss else 0.0)
        if leaked.any():
            message = (
                f"{int(leaked.sum())} forced (assisted) sample(s) have tokens in the on-policy loss mask at step "
                f"{self.state.global_step} (batch rows {leaked.nonzero().flatten().tolist()}): forced tool calls were "
                "not sampled from the policy and must not be trained on as if they were. Something rebuilt "
                "'tool_mask'/'completion_mask' after ForcedToolCallMixin zeroed those rows."
            )
            if self.flags.rl_disable_forced:
                raise ForcedSampleInRLError(message + " (RL_DISABLE_FORCED=1)")
            logger.warning(message)
        loss = super()._compute_loss(model, inputs)
        if self.args.forced_sft_coef > 0:
            loss = loss + self.args.forced_sft_coef * self._forced_sft_loss(model, inputs, mode)
        return loss

    def _forced_sft_loss(self, model, inputs, mode: str) -> torch.Tensor:
        """Mean negative log-likelihood of the forced tool-call tokens (a supervised term, not a policy gradient)."""
        if "forced_sft_mask" not in inputs:
            raise KeyError("forced_sft_coef > 0 but the batch has no 'forced_sft_mask' key")
        sft_mask = inputs["forced_sft_mask"]
        if not sft_mask.any():  # no forced sample in this batch: the supervised term is absent, not logged
            return torch.zeros((), device=sft_mask.device)
        input_ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
        attention = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
        logps, _, _ = self._get_per_token_logps_and_entropies(
            model, input_ids, attention, inputs["completion_ids"].size(1)
        )
        nll = -(logps * sft_mask).sum() / sft_mask.sum()
        self._metrics[mode]["forced/sft_loss"].append(nll.item())
        normalizer = self.current_gradient_accumulation_steps if mode == "train" else 1.0
        return nll / normalizer
