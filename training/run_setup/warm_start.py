"""A short supervised warm start, so GRPO begins from a policy that succeeds sometimes.

The model is trained on `prompt -> answer<|im_end|>` pairs rendered exactly as the GRPO sampler renders prompts
(same chat template and `chat_template_kwargs`), with the loss on the completion tokens only. The result is cached
under a key of everything that changes it (`cache_key`): the encoded training sequences themselves (so the code that
renders them, the tokenizer and the data are all in it), the base model's files, the hyperparameters, this module's
source, the library versions and the thread count (training/run_setup/build_keys.py). It is rebuilt when missing.

`fine_tune` is the one training loop, also used by the causal job's starting-policy build
(training/tasks/causal/starting_policy.py). An encoded sequence is `(input_ids, labels)` or
`(input_ids, labels, decisions)`: `decisions` marks the label tokens that carry a choice (a tool call's name and
argument values), and with `decision_weight` the loss is the mean over the other label tokens plus `decision_weight`
times the mean over the decision tokens, so that the few tokens that decide are not drowned by the many that only
repeat the format (a 6-call causal trace has 104 label tokens, 18 of them decisions).
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm
from transformers import AutoModelForCausalLM, AutoTokenizer

from training.outputs.atomic import atomic_directory
from training.run_setup.build_keys import key_of, numerics, source_digest
from training.run_setup.models import cache_root

WARM_START_FILE = "warm_start.json"


@dataclass(frozen=True)
class FineTuneSettings:
    steps: int
    lr: float
    batch_size: int
    seed: int
    warmup_steps: int = 0  # linear warmup, then linear decay to 0 at `steps`
    decision_weight: float | None = None  # None: one mean over every label token
    device: str = "cpu"  # where the fine-tune runs (torch device name); part of the key, as its numerics differ


def encoded_digest(encoded) -> str:
    digest = hashlib.sha256()
    for item in encoded:
        digest.update(json.dumps([list(map(int, part)) for part in item]).encode())
    return digest.hexdigest()


def model_digest(model_path: str) -> str:
    """sha256 over a local model directory's files (a hub id or name stands for itself)."""
    path = Path(model_path)
    if not path.is_dir():
        return model_path
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(str(file.relative_to(path)).encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()


def cache_key(model_path: str, encoded, settings: FineTuneSettings) -> str:
    return key_of({"model": model_digest(model_path), "data": encoded_digest(encoded), "settings": asdict(settings),
                   "code": source_digest(__name__), "numerics": numerics(threads=True)})


def encode_pair(tokenizer, prompt: list[dict], answer: str, template_kwargs: dict) -> tuple[list[int], list[int]]:
    prompt_ids = tokenizer.apply_chat_template(
        prompt, add_generation_prompt=True, tokenize=True, return_dict=False, **template_kwargs
    )
    completion_ids = tokenizer(answer + tokenizer.eos_token, add_special_tokens=False)["input_ids"]
    return list(prompt_ids), completion_ids


def _batch(items, pad_token_id: int):
    width = max(len(item[0]) for item in items)
    input_ids = torch.full((len(items), width), pad_token_id)
    labels = torch.full((len(items), width), -100)
    decisions = torch.zeros((len(items), width), dtype=torch.bool)
    attention = torch.zeros((len(items), width), dtype=torch.long)
    for i, item in enumerate(items):
        n = len(item[0])
        input_ids[i, :n] = torch.tensor(item[0])
        labels[i, :n] = torch.tensor(item[1])
        attention[i, :n] = 1
        if len(item) > 2:
            decisions[i, :n] = torch.tensor(item[2], dtype=torch.bool)
    return input_ids, labels, decisions, attention


def weighted_loss(logits: torch.Tensor, labels: torch.Tensor, decisions: torch.Tensor,
                  decision_weight: float | None) -> torch.Tensor:
    """Next-token cross-entropy over the label tokens: the mean over the format tokens plus `decision_weight`
    times the mean over the decision tokens (module docstring); `decision_weight` None: one mean over all."""
    logits, labels, decisions = logits[:, :-1], labels[:, 1:], decisions[:, 1:]
    per_token = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1),
                                                  reduction="none", ignore_index=-100).view_as(labels)
    labelled = labels != -100
    if decision_weight is None:
        return per_token[labelled].mean()
    decided, formatted = labelled & decisions, labelled & ~decisions
    loss = per_token[formatted].mean() if formatted.any() else per_token.new_zeros(())
    if decided.any():
        loss = loss + decision_weight * per_token[decided].mean()
    return loss


def fine_tune(model_path: str, encoded, settings: FineTuneSettings, show_progress: bool = True, on_step=None,
              model=None, desc: str = "warm start"):
    """Full fine-tuning of `model_path` (or of `model`, already loaded from it, which goes on training) on the
    encoded sequences (module docstring); returns (model, tokenizer, final loss). `on_step(step, loss)` is called
    after every optimizer step."""
    torch.manual_seed(settings.seed)
    rng = random.Random(settings.seed)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if model is None:
        model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    model.to(settings.device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=0.0)
    steps, warmup = settings.steps, settings.warmup_steps
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / warmup if warmup else 1.0) * (1.0 - s / max(steps, 1)))
    bar = tqdm(range(steps), desc=desc, unit="step", disable=not show_progress)
    loss = torch.tensor(float("nan"))
    for step in bar:
        batch = _batch(rng.sample(encoded, min(settings.batch_size, len(encoded))), tokenizer.pad_token_id)
        input_ids, labels, decisions, attention = (t.to(settings.device) for t in batch)
        if settings.decision_weight is None:  # transformers' own causal-LM loss
            loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
        else:
            logits = model(input_ids=input_ids, attention_mask=attention).logits
            loss = weighted_loss(logits, labels, decisions, settings.decision_weight)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
        if on_step is not None:
            on_step(step + 1, loss.item())
    bar.close()
    return model, tokenizer, loss.item()


def fine_tune_cached(model_path: str, kind: str, encode, settings: FineTuneSettings, show_progress: bool = True) -> str:
    """`fine_tune` of `model_path` on `encode(tokenizer)`, saved atomically under `cache_root()/kind/<cache_key>` (the
    directory appears only once complete, so a killed warm start is redone from its start, never half-used); an
    existing one is returned as it is. A progress bar with the loss and an ETA goes to stderr unless
    `show_progress` is False (the recipe's `disable_tqdm`)."""
    encoded = encode(AutoTokenizer.from_pretrained(model_path))
    out = cache_root() / kind / cache_key(model_path, encoded, settings)
    if out.is_dir():
        return str(out)
    model, tokenizer, final_loss = fine_tune(model_path, encoded, settings, show_progress)
    with atomic_directory(out) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / WARM_START_FILE).write_text(json.dumps({"base": model_path, **asdict(settings),
                                                       "final_loss": final_loss, "numerics": numerics(threads=True)}))
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

    def encode(tokenizer) -> list[tuple[list[int], list[int]]]:
        pairs = [encode_pair(tokenizer, r["prompt"], r.get("demonstration", r["answer"]), template_kwargs) for r in rows]
        return [(p + c, [-100] * len(p) + c) for p, c in pairs]

    settings = FineTuneSettings(steps=steps, lr=lr, batch_size=batch_size, seed=seed)
    return fine_tune_cached(model_path, "warm_start", encode, settings, show_progress=show_progress)
