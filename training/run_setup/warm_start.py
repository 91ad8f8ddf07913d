"""A short supervised warm start, so GRPO begins from a policy that succeeds sometimes.

The model is trained on `prompt -> answer<|im_end|>` pairs rendered exactly as the GRPO sampler renders prompts
(same chat template and `chat_template_kwargs`), with the loss on the completion tokens only. The result is cached
under a key of everything that determines it, and rebuilt only when missing.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import torch
from tqdm.auto import tqdm
from transformers import AutoModelForCausalLM, AutoTokenizer

from training.outputs.atomic import atomic_directory
from training.run_setup.models import cache_root


def _cache_key(model_path: str, rows: list[dict], steps: int, lr: float, seed: int, template_kwargs: dict,
               batch_size: int) -> str:
    payload = json.dumps(
        {"model": model_path, "rows": rows, "steps": steps, "lr": lr, "seed": seed, "kw": template_kwargs,
         "batch_size": batch_size},
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def encode_pair(tokenizer, prompt: list[dict], answer: str, template_kwargs: dict) -> tuple[list[int], list[int]]:
    prompt_ids = tokenizer.apply_chat_template(
        prompt, add_generation_prompt=True, tokenize=True, return_dict=False, **template_kwargs
    )
    completion_ids = tokenizer(answer + tokenizer.eos_token, add_special_tokens=False)["input_ids"]
    return list(prompt_ids), completion_ids


def fine_tune_cached(
    model_path: str,
    out: Path,
    encode,
    steps: int,
    lr: float,
    batch_size: int,
    seed: int,
    show_progress: bool = True,
) -> str:
    """Full fine-tuning of `model_path` on `encode(tokenizer)`'s `(input_ids, labels)` pairs (labels -100 where no
    loss), saved atomically to `out` (the directory appears only once complete, so a killed warm start is redone from
    its start, never half-used); an existing `out` is returned as it is. A progress bar with the loss and an ETA
    goes to stderr unless `show_progress` is False (the recipe's `disable_tqdm`)."""
    if out.is_dir():
        return str(out)
    torch.manual_seed(seed)
    rng = random.Random(seed)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    encoded = encode(tokenizer)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 - s / max(steps, 1))
    bar = tqdm(range(steps), desc="warm start", unit="step", disable=not show_progress)
    for _ in bar:
        batch = rng.sample(encoded, min(batch_size, len(encoded)))
        width = max(len(ids) for ids, _ in batch)
        input_ids = torch.full((len(batch), width), tokenizer.pad_token_id)
        labels = torch.full((len(batch), width), -100)
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        for i, (ids, target) in enumerate(batch):
            input_ids[i, : len(ids)] = torch.tensor(ids)
            labels[i, : len(ids)] = torch.tensor(target)
            attention[i, : len(ids)] = 1
        loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
    bar.close()

    with atomic_directory(out) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "warm_start.json").write_text(
            json.dumps({"base": model_path, "steps": steps, "lr": lr, "seed": seed, "final_loss": loss.item()})
        )
    return str(out)


def supervised_warm_start(
    model_path: str,
    rows: list[dict],
    steps: int,
    lr: float = 3e-3,
    batch_size: int = 32,
    seed: int = 0,
    template_kwargs: dict | None = None,
    show_progress: bool = True,
) -> str:
    """Return the directory of `model_path` fine-tuned for `steps` steps on `rows`; cached.

    Each row's target completion is its `demonstration` when it has one, else its `answer`.
    """
    template_kwargs = template_kwargs or {}
    key = _cache_key(model_path, rows, steps, lr, seed, template_kwargs, batch_size)

    def encode(tokenizer) -> list[tuple[list[int], list[int]]]:
        pairs = [encode_pair(tokenizer, r["prompt"], r.get("demonstration", r["answer"]), template_kwargs) for r in rows]
        return [(p + c, [-100] * len(p) + c) for p, c in pairs]

    out = cache_root() / "warm_start" / key
    return fine_tune_cached(model_path, out, encode, steps, lr, batch_size, seed, show_progress=show_progress)
