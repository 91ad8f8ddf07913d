"""What a colocated vLLM engine computes, read beside the trainer: log-probs of fixed tokens under each."""

from __future__ import annotations

import torch


def engine_prompt_logprobs(trainer, token_ids: list[int]) -> torch.Tensor:
    """The engine's log-prob of each of `token_ids[1:]` given the tokens before it (temperature 1)."""
    from vllm import SamplingParams

    llm = trainer.vllm_generation.llm
    (out,) = llm.generate([{"prompt_token_ids": token_ids}], SamplingParams(max_tokens=1, prompt_logprobs=0),
                          use_tqdm=False)
    return torch.tensor([entry[token].logprob for token, entry in zip(token_ids[1:], out.prompt_logprobs[1:])])


def trainer_prompt_logprobs(trainer, token_ids: list[int]) -> torch.Tensor:
    """The trainer's policy (LoRA merged as it trains) on the same tokens."""
    model = trainer.accelerator.unwrap_model(trainer.model)
    ids = torch.tensor([token_ids])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, :-1].float()
    return torch.log_softmax(logits, dim=-1).gather(1, ids[0, 1:, None])[:, 0]


def engine_gap(trainer, token_ids: list[int]) -> float:
    """Largest |engine - trainer| log-prob over the tokens."""
    return (engine_prompt_logprobs(trainer, token_ids) - trainer_prompt_logprobs(trainer, token_ids)).abs().max().item()
