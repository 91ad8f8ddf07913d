"""Held-out reward: greedy completions of held-out prompts, scored by the run's reward functions."""

from __future__ import annotations

import torch


@torch.no_grad()
def heldout_reward(
    model,
    tokenizer,
    rows: list[dict],
    reward_funcs: list,
    reward_weights: list[float] | None = None,
    template_kwargs: dict | None = None,
    max_new_tokens: int = 16,
    batch_size: int = 64,
) -> float:
    """Mean weighted reward of greedy completions over `rows`; the model is left in the mode it was in."""
    template_kwargs = template_kwargs or {}
    weights = reward_weights or [1.0] * len(reward_funcs)
    was_training = model.training
    model.eval()
    padding_side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    total = 0.0
    try:
        for start in range(0, len(rows), batch_size):
            chunk = rows[start : start + batch_size]
            texts = [
                tokenizer.apply_chat_template(r["prompt"], add_generation_prompt=True, tokenize=False, **template_kwargs)
                for r in chunk
            ]
            enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
            out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False)
            completions = [
                [{"role": "assistant", "content": t}]
                for t in tokenizer.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
            ]
            columns = {k: [r[k] for r in chunk] for k in chunk[0] if k != "prompt"}
            prompts = [r["prompt"] for r in chunk]
            for func, w in zip(reward_funcs, weights, strict=True):
                scores = func(prompts=prompts, completions=completions, **columns)
                total += w * sum(scores)
    finally:
        tokenizer.padding_side = padding_side
        model.train(was_training)
    return total / len(rows)
