"""`RewardModelJudge`: a sequence-classification reward model (one logit) scoring a group's completions, batched."""

from __future__ import annotations

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from judges.protocol import Group, GroupScores, JudgeConfigError, JudgeError


class RewardModelJudge:
    """Scores prompt + completion with a reward model's single logit; the group goes through in batches.

    Args:
        model_path: a directory or hub id of a `...ForSequenceClassification` model with `num_labels=1` and a pad
            token (batched scoring needs one to find each sequence's last token).
        batch_size: completions per forward pass.
        max_length: longest prompt + completion in tokens; a longer one fails the group (NaN, counted), never silently truncated.
        template_kwargs: extra chat-template arguments (e.g. `enable_thinking`) for conversational prompts.
        device: where the model runs.
    """

    def __init__(
        self,
        model_path: str,
        batch_size: int = 16,
        max_length: int = 1024,
        template_kwargs: dict | None = None,
        device: str = "cpu",
    ):
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.model = AutoModelForSequenceClassification.from_pretrained(model_path).to(device).eval()
        if self.model.config.num_labels != 1:
            raise JudgeConfigError(f"reward model {model_path!r} has num_labels={self.model.config.num_labels}, need 1")
        if self.model.config.pad_token_id is None or self.tokenizer.pad_token_id is None:
            raise JudgeConfigError(f"reward model {model_path!r} has no pad token; batched scoring needs one")
        self.batch_size = batch_size
        self.max_length = max_length
        self.template_kwargs = template_kwargs or {}
        self.device = device

    def texts(self, group: Group) -> list[str]:
        """The full prompt + completion texts the reward model reads."""
        if isinstance(group.prompt, str):
            return [group.prompt + c for c in group.completions]
        return [
            self.tokenizer.apply_chat_template(
                [*group.prompt, {"role": "assistant", "content": c}], tokenize=False, **self.template_kwargs
            )
            for c in group.completions
        ]

    @torch.no_grad()
    def score_group(self, group: Group) -> GroupScores:
        texts = self.texts(group)
        scores: list[float] = []
        calls = 0
        for start in range(0, len(texts), self.batch_size):
            batch = self.tokenizer(
                texts[start : start + self.batch_size],
                return_tensors="pt",
                padding=True,
                padding_side="right",
                add_special_tokens=False,
            ).to(self.device)
            if batch["input_ids"].shape[1] > self.max_length:
                raise JudgeError(
                    f"RewardModelJudge: a prompt + completion has {batch['input_ids'].shape[1]} tokens > "
                    f"max_length={self.max_length}; not truncated"
                )
            scores.extend(self.model(**batch).logits[:, 0].float().tolist())
            calls += 1
        return GroupScores(scores, calls=calls)
