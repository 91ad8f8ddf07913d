"""Record-at-sample: the PPO "old" log-probs are the ones recorded when the tokens were sampled.

With `PPO_RECORD_AT_SAMPLE=1`:
- the transformers sampler records each sampled token's log-prob from the logits of the same `generate` pass
  (vLLM already returns them; TRL carries them as `sampling_per_token_logps`);
- TRL's recompute forward for `old_per_token_logps` is answered from the recorded log-probs (one policy forward fewer
  per generation batch), and they are the old log-probs for every `num_iterations` and `steps_per_generation`.
With `=0`, TRL's behaviour is kept. Either way the PPO ratio over the loss's tokens is logged as `ratio/*` from the
loss's own forward, and every `logp_check_steps` generation batches one recompute measures `sampling/logp_abs_diff`
(on by default where a gap can arise: training/step/sampler_gap.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch

from training.algorithms.sampled_logprobs import recording_generate, sampled_token_logprobs
from training.algorithms.trajectory import loss_mask
from training.step.sampler_gap import GapPlan, gap_warning

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


def recorded_logps_tensor(rows: list[list[float]], batch_size: int, width: int, device) -> torch.Tensor:
    """The recorded per-sequence log-probs as a right-padded (batch, width) tensor, in the layout of TRL's
    `old_per_token_logps`. A NaN (a token the sampler could not score) becomes 0 here; the loss masks it out."""
    out = torch.zeros((batch_size, width), dtype=torch.float32, device=device)
    for i, row in enumerate(rows):
        values = torch.tensor(row, dtype=torch.float32)
        out[i, : values.numel()] = values.nan_to_num(nan=0.0)
    return out


class RecordAtSample:
    """See the module docstring. `enabled` is `PPO_RECORD_AT_SAMPLE`."""

    def __init__(self, enabled: bool, gap: GapPlan):
        self.enabled = enabled
        self.gap = gap
        self.generation_batches_seen = 0

    @property
    def records(self) -> bool:
        """Whether the transformers sampler records log-probs (for the loss, or for the agreement check)."""
        return self.enabled or self.gap.check_every > 0

    # ---- sampling --------------------------------------------------------------------------------------------------
    def sample_turn(
        self, generate_turn: Callable[[], tuple], model, temperature: float, backend_records: bool
    ) -> tuple[list[list[int]], list[list[float]] | None]:
        """One sampling turn (`generate_turn` is TRL's) with each kept token's log-prob. `backend_records`: vLLM or
        continuous batching, which return log-probs themselves."""
        if backend_records:
            completion_ids, logprobs = generate_turn()
            if self.enabled and logprobs is None:
                raise RuntimeError(
                    "PPO_RECORD_AT_SAMPLE=1 but the generation backend returned no log-probs "
                    "(transformers continuous batching does not record them; use vLLM or plain generate)"
                )
            return completion_ids, logprobs
        if not self.records:
            return generate_turn()
        outputs: list = []
        with recording_generate(model, outputs):
            completion_ids, _ = generate_turn()
        if len(outputs) != 1:
            raise RuntimeError(f"expected one generate call per sampling turn, saw {len(outputs)}")
        return completion_ids, sampled_token_logprobs(outputs[0].logits, completion_ids, temperature)

    # ---- the generation batch -------------------------------------------------------------------------------------
    def attach_old_logps(self, batch: dict) -> None:
        """The sample-time log-probs become the batch's old log-probs."""
        if not self.enabled:
            return
        recorded = batch.get("sampling_per_token_logps")
        if recorded is None:
            raise RuntimeError("PPO_RECORD_AT_SAMPLE=1 but the generation batch carries no sample-time log-probs")
        batch["old_per_token_logps"] = recorded

    def required_keys(self) -> set[str]:
        return {"old_per_token_logps"} if self.enabled else set()

    def due_for_logp_check(self, mode: str) -> bool:
        """Counts training generation batches; True on every `logp_check_steps`-th one, starting with the first."""
        if mode != "train":
            return False
        self.generation_batches_seen += 1
        every = self.gap.check_every
        return bool(every) and (self.generation_batches_seen - 1) % every == 0

    def log_logp_gap(self, batch: dict, recomputed: torch.Tensor, metrics: dict) -> None:
        """`sampling/logp_abs_diff` (mean) and `_max` between the recorded and the recomputed log-probs, and
        `sampling/logp_gap_above_normal` (1.0, with a warning naming sampler, dtype and likely cause, when the mean is
        above the precision's normal)."""
        sampled = batch.get("sampling_per_token_logps")
        if sampled is None:
            raise RuntimeError("the log-prob check is due but the generation batch has no sample-time log-probs")
        mask = loss_mask(batch).bool() & ~torch.isnan(sampled)
        if not mask.any():  # every token forced or unscorable: nothing was sampled that the loss reads
            metrics["sampling/logp_check_empty"].append(1.0)
            return
        gap = (sampled - recomputed).abs()[mask]
        mean_gap, max_gap = gap.mean().item(), gap.max().item()
        above = mean_gap > self.gap.warn_above
        metrics["sampling/logp_abs_diff"].append(mean_gap)
        metrics["sampling/logp_abs_diff_max"].append(max_gap)
        metrics["sampling/logp_gap_above_normal"].append(float(above))
        if above:
            logger.warning(gap_warning(self.gap, mean_gap, max_gap))

    # ---- the loss --------------------------------------------------------------------------------------------------
    def mask_unscorable(self, batch: dict, metrics: dict) -> None:
        """Tokens the sampler could not score (NaN old log-prob) leave the loss and are counted, never read as 0.
        In place: the buffered batch is reused by later iterations."""
        if not self.enabled:
            return
        nan = torch.isnan(batch["old_per_token_logps"])
        if not nan.any():
            return
        metrics["sampling/logp_nan_tokens"].append(nan.sum().item())
        keep = (~nan).int()
        batch["tool_mask"] = batch["tool_mask"] * keep if "tool_mask" in batch else keep
        batch["old_per_token_logps"] = batch["old_per_token_logps"].nan_to_num(nan=0.0)

    def log_ratio(self, per_token_logps: torch.Tensor, batch: dict, metrics: dict) -> None:
        """`ratio/*` from the loss forward's log-probs (no extra forward)."""
        old = batch.get("old_per_token_logps")
        old = per_token_logps.detach() if old is None else old
        for name, value in ratio_statistics(per_token_logps, old, loss_mask(batch)).items():
            metrics[name].append(value)

    def state_dict(self) -> dict:
        return {"generation_batches_seen": self.generation_batches_seen}

    def load_state_dict(self, state: dict) -> None:
        self.generation_batches_seen = state["generation_batches_seen"]
