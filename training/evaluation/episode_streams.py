"""Sampling with one random stream per episode, inside a batched `generate`.

`generate(do_sample=True)` draws every row of a batch from one generator, so an episode's tokens depend on which
other episodes share its batch. Here each row has its own `torch.Generator` and sampling is done by the Gumbel-max
trick: with z the processed logits (the repetition penalty, then temperature, top-k, top-p and min-p, as `generate`
orders its processors and warpers) and g_i = -log E_i, E_i ~ Exp(1) i.i.d. from the row's generator,

    argmax_i (z_i + g_i)  ~  Categorical(softmax(z)),

so greedy decoding of the noised logits is an exact sample from the same distribution `generate` samples from.
Filtered tokens keep z_i = -inf and are never chosen. The row's generator is seeded once per generation call
(`training.evaluation.pairing_seeds.stream_seed`), and draws one noise vector per generated position, so position t of an episode always uses the
t-th vector of its stream.
"""

from __future__ import annotations

import torch
from transformers import LogitsProcessor, LogitsProcessorList
from transformers.generation.logits_process import (
    MinPLogitsWarper,
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from training.evaluation.episode_settings import SAMPLING_DEFAULTS


class GumbelNoise(LogitsProcessor):
    """Adds Gumbel noise from row b's own generator to row b's scores (see the module docstring)."""

    def __init__(self, seeds: list[int]):
        self.generators = [torch.Generator().manual_seed(int(s)) for s in seeds]

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if scores.shape[0] != len(self.generators):
            raise ValueError(f"GumbelNoise has {len(self.generators)} streams for a batch of {scores.shape[0]} rows")
        vocab = scores.shape[1]
        exponential = torch.stack(
            [torch.empty(vocab, dtype=torch.float64).exponential_(generator=g) for g in self.generators]
        )
        gumbel = -torch.log(exponential).to(device=scores.device, dtype=torch.float32)
        return scores.float() + gumbel


def seeded_sampling_kwargs(sampling: dict, seeds: list[int]) -> dict:
    """`generate` kwargs that sample row b with seed `seeds[b]` from the distribution that `sampling` (temperature,
    top_p, top_k, min_p, repetition_penalty: `episode_settings.SAMPLING_DEFAULTS`) describes."""
    unknown = set(sampling) - set(SAMPLING_DEFAULTS)
    if unknown:
        raise ValueError(f"held-out sampling supports {', '.join(SAMPLING_DEFAULTS)}, not {sorted(unknown)}")
    processors = LogitsProcessorList()
    penalty = sampling.get("repetition_penalty")
    if penalty is not None and penalty != 1.0:
        processors.append(RepetitionPenaltyLogitsProcessor(float(penalty)))
    temperature = sampling.get("temperature")
    if temperature is not None and temperature != 1.0:
        processors.append(TemperatureLogitsWarper(float(temperature)))
    top_k = sampling.get("top_k")
    if top_k:
        processors.append(TopKLogitsWarper(int(top_k)))
    top_p = sampling.get("top_p")
    if top_p is not None and top_p < 1.0:
        processors.append(TopPLogitsWarper(float(top_p)))
    min_p = sampling.get("min_p")
    if min_p:
        processors.append(MinPLogitsWarper(float(min_p)))
    processors.append(GumbelNoise(seeds))
    return {"do_sample": False, "logits_processor": processors, "temperature": None, "top_p": None, "top_k": None,
            "min_p": None, "repetition_penalty": None}
