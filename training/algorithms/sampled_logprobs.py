"""Log-probabilities recorded at sampling time, in the distribution the loss uses.

The loss scores a token with `log_softmax(logits / temperature)` over the full vocabulary (TRL's
`_get_per_token_logps_and_entropies`), so that is what we record: temperature-scaled, before top-k/top-p
truncation. transformers: from the raw logits `generate` returns in the same pass. vLLM: TRL asks for `logprobs=0`
with `logprobs_mode="processed_logprobs"` and we keep the sampled token's entry.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from training.algorithms.generate_wrap import wrapped_generate


@contextmanager
def recording_generate(model, sink: list) -> Iterator[None]:
    """Make `model.generate` also return its raw per-step logits: each call appends its output to `sink` and
    returns only the sequences, so callers that expect a tensor are unchanged."""

    def wrap(original):
        def generate(*args, **kwargs):
            output = original(*args, **kwargs, output_logits=True, return_dict_in_generate=True)
            sink.append(output)
            return output.sequences

        return generate

    with wrapped_generate(model, wrap):
        yield


def sampled_token_logprobs(
    step_logits: tuple[torch.Tensor, ...], completion_ids: list[list[int]], temperature: float
) -> list[list[float]]:
    """Per completion, the log-prob of each kept token under `log_softmax(logits / temperature)`.

    `step_logits[t]` is the (batch, vocab) raw logits that produced token t of every row; `completion_ids[i]` is row
    i's kept tokens (generation output cut after its first EOS), so only its first `len(completion_ids[i])` steps
    are read.
    """
    if not step_logits:
        return [[] for _ in completion_ids]
    logits = torch.stack(step_logits, dim=1).float()  # (B, T, V)
    result = []
    for row, ids in enumerate(completion_ids):
        if not ids:
            result.append([])
            continue
        row_logits = logits[row, : len(ids)] / temperature
        token_ids = torch.tensor(ids, device=row_logits.device).unsqueeze(-1)
        logps = torch.log_softmax(row_logits, dim=-1).gather(-1, token_ids).squeeze(-1)
        result.append(logps.tolist())
    return result
