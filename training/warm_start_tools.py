"""Supervised warm start on multi-turn tool-call traces, so GRPO begins from an agent that succeeds sometimes.

Each row's reference calls are run in a fresh environment; the trace (prompt, assistant tool call, tool result,
final answer) is rendered with the chat template GRPO samples with (TRL's prefix-preserving training template
when the tokenizer's own is not prefix-preserving) and the tools in the system prompt, and the loss is on the
assistant tokens only (the template's generation mask). Cached like `training.warm_start`.
"""

from __future__ import annotations

import json
import random

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl.chat_template_utils import get_training_chat_template, is_chat_template_prefix_preserving

from training.envs.evaluation import environment_tools
from training.models import cache_root
from training.tasks.workspace import reference_trace
from training.warm_start import _cache_key


def sampling_chat_template(tokenizer) -> str | None:
    """The template TRL's GRPOTrainer renders tool conversations with (None: the tokenizer's own)."""
    return None if is_chat_template_prefix_preserving(tokenizer) else get_training_chat_template(tokenizer)


def encode_trace(tokenizer, row: dict, env_factory, chat_template: str | None, template_kwargs: dict):
    """(input_ids, labels) of one row's reference trace; labels are -100 outside assistant turns."""
    env = env_factory()
    env.reset(**row)
    tools = environment_tools(env)
    results = [str(tools[c["name"]](**c["arguments"])) for c in json.loads(row["reference_calls_json"])]
    out = tokenizer.apply_chat_template(
        reference_trace(row, results),
        tools=list(tools.values()),
        chat_template=chat_template,
        tokenize=True,
        return_dict=True,
        return_assistant_tokens_mask=True,
        **template_kwargs,
    )
    ids, mask = out["input_ids"], out["assistant_masks"]
    if not any(mask):
        raise ValueError("the chat template marks no assistant tokens ({% generation %}); cannot warm start on traces")
    return ids, [t if m else -100 for t, m in zip(ids, mask, strict=True)]


def trace_warm_start(
    model_path: str,
    rows: list[dict],
    env_factory,
    steps: int,
    lr: float = 3e-3,
    batch_size: int = 8,
    seed: int = 0,
    template_kwargs: dict | None = None,
) -> str:
    """Return the directory of `model_path` fine-tuned for `steps` steps on the rows' tool-call traces; cached."""
    template_kwargs = template_kwargs or {}
    key = _cache_key(model_path, rows, steps, lr, seed, {**template_kwargs, "traces": repr(env_factory)})
    out = cache_root() / "warm_start_tools" / key
    if (out / "model.safetensors").exists():
        return str(out)

    torch.manual_seed(seed)
    rng = random.Random(seed)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    chat_template = sampling_chat_template(tokenizer)
    encoded = [encode_trace(tokenizer, r, env_factory, chat_template, template_kwargs) for r in rows]
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 - s / max(steps, 1))
    for _ in range(steps):
        batch = rng.sample(encoded, min(batch_size, len(encoded)))
        width = max(len(ids) for ids, _ in batch)
        input_ids = torch.full((len(batch), width), tokenizer.pad_token_id)
        labels = torch.full((len(batch), width), -100)
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        for i, (ids, lab) in enumerate(batch):
            input_ids[i, : len(ids)] = torch.tensor(ids)
            labels[i, : len(ids)] = torch.tensor(lab)
            attention[i, : len(ids)] = 1
        loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()

    tmp = out.with_name(out.name + ".tmp")
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "warm_start.json").write_text(
        json.dumps({"base": model_path, "steps": steps, "lr": lr, "seed": seed, "final_loss": loss.item()})
    )
    tmp.rename(out)
    return str(out)
