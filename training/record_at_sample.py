"""Record-at-sample: the PPO "old" log-probs are the ones recorded when the tokens were sampled.

With `PPO_RECORD_AT_SAMPLE=1`:
- the transformers sampler records each sampled token's log-prob from the logits of the same `generate` pass
  (vLLM already returns them; TRL carries them as `sampling_per_token_logps`);
- TRL's recompute forward for `old_per_token_logps` is skipped (one policy forward fewer per generation batch),
  and the loss uses the recorded log-probs as the old ones, for every `num_iterations` and `steps_per_generation`.
With `=0`, TRL's behaviour is kept. Either way the PPO ratio over completion tokens is logged as `ratio/*`, and every
`logp_check_steps` generation batches one recompute measures `sampling/logp_abs_diff`.
"""

from __future__ import annotations

import logging

import torch

from training.sampling import recording_generate, sampled_token_logprobs
from training.trajectory import check_generation_batch

logger = logging.getLogger(__name__)


def ratio_statistics(per_token_logps: torch.Tensor, old_per_token_logps: torch.Tensor, mask: torch.Tensor) -> dict:
    """Mean, std, min and max of exp(logp - old_logp) over the tokens where `mask` is 1 (empty when none is)."""
    ratio = torch.exp(per_token_logps.detach() - old_per_token_logps)[mask.bool()]
    if ratio.numel() == 0:  # every token masked out of the loss (e.g. all samples forced): there is no ratio
        return {}
    return {
        "ratio/mean": ratio.mean().item(),
        "ratio/std": ratio.std(unbiased=False).item(),
        "ratio/min": ratio.min().item(),
        "ratio/max": ratio.max().item(),
    }


class RecordAtSampleMixin:
    """Overrides TRL's sampling, old-log-prob and loss paths; see the module docstring."""

    _recorded_logps_pending: bool | None = None
    _loss_inputs: dict | None = None
    _generation_batches_seen: int = 0
    policy_forwards_skipped: int = 0

    @property
    def record_at_sample(self) -> bool:
        return self.flags.ppo_record_at_sample

    # ---- 1. sampling: log-probs from the generate pass itself ---------------------------------------------------
    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        if self.use_vllm or self.use_transformers_continuous_batching:
            completion_ids, logprobs = super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images
            )
            if self.record_at_sample and logprobs is None:
                raise RuntimeError(
                    "PPO_RECORD_AT_SAMPLE=1 but the generation backend returned no log-probs "
                    "(transformers continuous batching does not record them; use vLLM or plain generate)"
                )
            return completion_ids, logprobs

        outputs: list = []
        with recording_generate(self.accelerator.unwrap_model(self.model_wrapped), outputs):
            completion_ids, _ = super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images
            )
        if len(outputs) != 1:
            raise RuntimeError(f"expected one generate call per sampling turn, saw {len(outputs)}")
        return completion_ids, sampled_token_logprobs(outputs[0].logits, completion_ids, self.temperature)

    # ---- 2. old log-probs: skip TRL's recompute forward ----------------------------------------------------------
    def _trl_recomputes_old_logps(self) -> bool:
        # Mirrors the condition under which GRPOTrainer._generate_and_score_completions runs a no-grad forward of
        # the policy for `old_per_token_logps`.
        generate_every = self.args.steps_per_generation * self.num_iterations
        return self.args.gradient_accumulation_steps % generate_every != 0 or (
            self.use_vllm and self.vllm_importance_sampling_correction
        )

    def _generate_and_score_completions(self, inputs):
        mode = "train" if self.model.training else "eval"
        skip_forward = self.record_at_sample and self._trl_recomputes_old_logps()
        self._recorded_logps_pending = skip_forward or None
        try:
            batch = super()._generate_and_score_completions(inputs)
        finally:
            self._recorded_logps_pending = None
        if skip_forward:
            self.policy_forwards_skipped += 1

        if self.record_at_sample:
            recorded = batch.get("sampling_per_token_logps")
            if recorded is None:
                raise RuntimeError("PPO_RECORD_AT_SAMPLE=1 but the generation batch carries no sample-time log-probs")
            batch["old_per_token_logps"] = recorded
        self._check_batch(batch, mode)

        self._generation_batches_seen += mode == "train"
        every = self.args.logp_check_steps
        if mode == "train" and every and (self._generation_batches_seen - 1) % every == 0:
            self._measure_logp_gap(batch)
        return batch

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
        if self._recorded_logps_pending and not torch.is_grad_enabled():
            # This is TRL's old-log-prob forward (the first no-grad policy forward while scoring a generation batch):
            # answer it with the recorded log-probs instead of running the model.
            self._recorded_logps_pending = None
            return self._pending_sampling_logps(input_ids, logits_to_keep), None, None
        result = super()._get_per_token_logps_and_entropies(
            model, input_ids, attention_mask, logits_to_keep, *args, **kwargs
        )
        if self._loss_inputs is not None and torch.is_grad_enabled():
            # The loss forward: the ratio statistics come from its log-probs, no extra forward.
            self._log_ratio_statistics(result[0], self._loss_inputs)
            self._loss_inputs = None
        return result

    def _check_batch(self, batch: dict, mode: str) -> None:
        required = set()
        if self.record_at_sample:
            required.add("old_per_token_logps")
        if self.beta != 0.0:
            required.add("ref_per_token_logps")
        check_generation_batch(batch, self.flags.strict_traj_keys, self._metrics[mode], required_extra=required)

    def _pending_sampling_logps(self, input_ids, logits_to_keep) -> torch.Tensor:
        # TRL builds `sampling_per_token_logps` after this call returns, so rebuild the same padded tensor here from
        # the per-sequence lists kept by `_generate`.
        rows = [torch.tensor(lp, dtype=torch.float32) for lp in self._last_sampling_logps]
        out = torch.zeros((input_ids.size(0), logits_to_keep), dtype=torch.float32, device=input_ids.device)
        for i, row in enumerate(rows):
            out[i, : row.numel()] = row.nan_to_num(nan=0.0)  # NaN positions are masked out of the loss below
        return out

    def _generate(self, prompts):
        result = super()._generate(prompts)
        self._last_sampling_logps = result[4]
        return result

    # ---- 3. the loss: recorded old log-probs, ratio statistics -------------------------------------------------
    def _compute_loss(self, model, inputs):
        mode = "train" if self.model.training else "eval"
        self._check_batch(inputs, mode)
        if self.record_at_sample:
            nan = torch.isnan(inputs["old_per_token_logps"])
            if nan.any():
                # Tokens the sampler could not score stay out of the loss (tool_mask is the loss-only mask);
                # they are counted, never read as 0.
                self._metrics[mode]["sampling/logp_nan_tokens"].append(nan.sum().item())
                # In place: the buffered batch is reused by later iterations and features keep state in it.
                keep = (~nan).int()
                inputs["tool_mask"] = inputs["tool_mask"] * keep if "tool_mask" in inputs else keep
                inputs["old_per_token_logps"] = inputs["old_per_token_logps"].nan_to_num(nan=0.0)
        self._loss_inputs = inputs
        try:
            return super()._compute_loss(model, inputs)
        finally:
            self._loss_inputs = None

    def _log_ratio_statistics(self, per_token_logps: torch.Tensor, inputs: dict) -> None:
        mode = "train" if self.model.training else "eval"
        old = inputs.get("old_per_token_logps")
        old = per_token_logps.detach() if old is None else old
        mask = inputs["completion_mask"] * inputs.get("tool_mask", 1)
        stats = ratio_statistics(per_token_logps, old, mask)
        if not stats:
            self._metrics[mode]["ratio/empty_loss_mask"].append(1.0)
        for name, value in stats.items():
            self._metrics[mode][name].append(value)

    # ---- 4. the sampler/trainer agreement check -----------------------------------------------------------------
    @torch.no_grad()
    def _measure_logp_gap(self, batch: dict) -> None:
        sampled = batch.get("sampling_per_token_logps")
        if sampled is None:
            raise RuntimeError("logp_check_steps is set but the generation batch has no sample-time log-probs")
        input_ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
        attention_mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
        recomputed, _, _ = super()._get_per_token_logps_and_entropies(
            self.model, input_ids, attention_mask, batch["completion_ids"].size(1)
        )
        mask = (batch["completion_mask"] * batch.get("tool_mask", 1)).bool() & ~torch.isnan(sampled)
        gap = (sampled - recomputed).abs()[mask]
        mean_gap, max_gap = gap.mean().item(), gap.max().item()
        self._metrics["train"]["sampling/logp_abs_diff"].append(mean_gap)
        self._metrics["train"]["sampling/logp_abs_diff_max"].append(max_gap)
        if mean_gap > self.args.logp_diff_warn_threshold:
            logger.warning(
                "sample-time and recomputed log-probs disagree: mean |diff| %.4g, max %.4g (threshold %.4g). Check "
                "dtype, chat template, and that the sampler's weights are synced with the trainer's.",
                mean_gap,
                max_gap,
                self.args.logp_diff_warn_threshold,
            )
