"""The sampler/trainer log-prob gap: in which runs it is measured by default, what is normal for a precision, and
what a gap above normal means.

Record-at-sample (training/features/record_at_sample.py) takes the sampler's log-probs as the PPO old log-probs, so
the first ratio is 1 only as far as the sampler and the trainer compute the same distribution. In float32 on CPU
they agree to ~2e-7 (mean |diff| per token); in bf16 (autocast, or bf16 weights) to ~1e-3, max ~0.05; a sampler with
other weights or another chat template is far off. Every run that can have a gap (CUDA kernels, bf16/fp16, vLLM)
measures it by default, every `DEFAULT_CHECK_EVERY` generation batches (one no-grad forward; its cost on CPU is in
BENCHMARKS.md, "The log-prob check's cost"); a gap above the precision's normal warns, naming the sampler, the
dtype and the likely cause, and logs `sampling/logp_gap_above_normal`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

DEFAULT_CHECK_EVERY = 10

# Mean |sample-time - recomputed| log-prob per token that a run of this precision stays under when sampler and
# trainer compute the same distribution. Measured (issue 42): float32 2e-7 (CPU), 5.5e-7 (H100); bf16 autocast over
# float32 weights 1.0e-3 (CPU), 1.4e-3 (H100); bf16 weights and autocast 3.4e-4 (H100). Each bound leaves about 7x
# headroom or more; float16 has 3 more mantissa bits than bfloat16.
NORMAL_MEAN_GAP = {"float32": 1e-4, "bfloat16": 1e-2, "float16": 2e-3}

LIKELY_CAUSE = {
    "float32": "in float32 sampler and trainer agree to ~1e-6, so they are not computing the same distribution: "
    "the sampler's weights are not the trainer's (vLLM weights not synced), autocast runs on one side only "
    "(ACCELERATE_MIXED_PRECISION, training/run_setup/precision.py), or the chat template, temperature or "
    "truncation differ between sampling and the loss",
    "half": "more than {dtype} rounding explains: the sampler's weights are not synced with the trainer's, sampler "
    "and trainer run different dtypes or kernels (vLLM's dtype against the recipe's, a quantised sampler), or "
    "the chat template, temperature or truncation differ between sampling and the loss",
}


def run_precision(mixed_precision: str, model: torch.nn.Module) -> str:
    """The lowest precision the run computes in: the accelerator's autocast or the weights' floating dtype."""
    floating = {p.dtype for p in model.parameters() if p.dtype.is_floating_point}
    if mixed_precision == "fp16" or torch.float16 in floating:
        return "float16"
    if mixed_precision == "bf16" or torch.bfloat16 in floating:
        return "bfloat16"
    return "float32"


def sampler_name(use_vllm: bool, vllm_mode: str, continuous_batching: bool) -> str:
    if use_vllm:
        return f"vLLM ({vllm_mode})"
    return "transformers continuous batching" if continuous_batching else "transformers generate"


@dataclass(frozen=True)
class GapPlan:
    """How a run measures its sampler/trainer gap: every `check_every` generation batches (0: never), and why."""

    check_every: int
    why: str
    precision: str  # the trainer's
    sampler: str
    warn_above: float  # mean |diff| above which the check warns
    sampler_dtype: str | None = None  # what the sampler computes in (None: not known here, a vLLM server's)

    def as_json(self) -> dict:
        return asdict(self)


def gap_plan(logp_check_steps: int | None, warn_threshold: float | None, device_type: str, precision: str,
             sampler: str, sampler_dtype: str | None = None) -> GapPlan:
    """`logp_check_steps` None (the default) measures every `DEFAULT_CHECK_EVERY` generation batches on CUDA, in
    bf16/fp16 or with vLLM, and never in a float32 CPU run with the transformers sampler (where the gap is ~2e-7 by
    construction and each check costs a forward); a number given is kept (0: never)."""
    reasons = [why for why, holds in (("CUDA", device_type == "cuda"), (precision, precision != "float32"),
                                      ("vLLM", sampler.startswith("vLLM"))) if holds]
    if logp_check_steps is not None:
        check_every, why = logp_check_steps, "logp_check_steps set in the recipe"
    elif reasons:
        check_every, why = DEFAULT_CHECK_EVERY, f"default on: {', '.join(reasons)}"
    else:
        check_every, why = 0, "default off: float32 on CPU with the transformers sampler"
    warn_above = NORMAL_MEAN_GAP[precision] if warn_threshold is None else warn_threshold
    return GapPlan(check_every, why, precision, sampler, warn_above, sampler_dtype)


def gap_warning(plan: GapPlan, mean_gap: float, max_gap: float) -> str:
    cause = LIKELY_CAUSE["float32" if plan.precision == "float32" else "half"].format(dtype=plan.precision)
    return (f"sampler/trainer log-prob gap above normal: mean |diff| {mean_gap:.3g} per token (max {max_gap:.3g}) "
            f"against {plan.warn_above:.3g} for {plan.precision}; sampler: {plan.sampler} in {plan.sampler_dtype}, "
            f"trainer in {plan.precision}. "
            f"Likely cause: {cause}.")
