"""Held-out reward: completions of held-out prompts, scored by the run's reward functions.

Sampled (the policy's expected reward, what GRPO optimises: `num_samples` completions per prompt at the training
temperature, top-p and top-k, from a fixed seed so that before/after comparisons are paired) or greedy.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def seeded_rng(seed: int, device: torch.device) -> Iterator[None]:
    """Seed the generators `generate` samples from (the CPU's, and `device`'s on CUDA) and restore them on exit, so
    held-out samples are paired across evaluations and training's own random stream is left as it was."""
    devices = []
    if device.type == "cuda":
        devices = [device.index if device.index is not None else torch.cuda.current_device()]
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


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
    sampling: dict | None = None,
    num_samples: int = 1,
    seed: int = 0,
) -> float:
    """Mean weighted reward over `rows` of greedy completions (`sampling=None`) or of `num_samples` sampled ones per
    prompt (`sampling`: `generate` kwargs such as temperature, top_p, top_k). The model is left in the mode it was
    in, and the global RNG state is left untouched."""
    template_kwargs = template_kwargs or {}
    weights = reward_weights or [1.0] * len(reward_funcs)
    repeats = num_samples if sampling is not None else 1
    generate_kwargs = {"do_sample": False}
    if sampling is not None:
        generate_kwargs = {"do_sample": True, "num_return_sequences": num_samples, **sampling}
    was_training, padding_side = model.training, tokenizer.padding_side
    model.eval()
    tokenizer.padding_side = "left"
    total = 0.0
    with seeded_rng(seed, model.device):
        try:
            for start in range(0, len(rows), batch_size):
                chunk = rows[start : start + batch_size]
                texts = [
                    tokenizer.apply_chat_template(
                        r["prompt"], add_generation_prompt=True, tokenize=False, **template_kwargs
                    )
                    for r in chunk
                ]
                enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
                out = model.generate(**enc, max_new_tokens=max_new_tokens, **generate_kwargs)
                decoded = tokenizer.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
                completions = [[{"role": "assistant", "content": text}] for text in decoded]
                repeated = [r for r in chunk for _ in range(repeats)]  # generate keeps each prompt's samples together
                columns = {k: [r[k] for r in repeated] for k in chunk[0] if k != "prompt"}
                prompts = [r["prompt"] for r in repeated]
                for func, w in zip(reward_funcs, weights, strict=True):
                    total += w * sum(func(prompts=prompts, completions=completions, **columns))
        finally:
            tokenizer.padding_side = padding_side
            model.train(was_training)
    return total / (len(rows) * repeats)
