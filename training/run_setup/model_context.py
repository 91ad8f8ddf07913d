"""The model's context as a run sets it: `model_init_kwargs: {max_position_embeddings: N}` (TRL's own field, which
it passes to `from_pretrained`, where it overrides the config's value). A rotary-position model (Qwen3's default
RoPE) has no weight per position, so a longer context loads the same weights and plays episodes past the length it
was trained on; the held-out evaluation measures how well. Every reader of the context (the prompt-length check,
the episode loop, `training.evaluate` of a finished run) reads it through here, so they agree with the trainer."""

from __future__ import annotations

import json

from training.errors import BadInputError

CONFIG_KEYS = ("max_position_embeddings",)


class ContextError(BadInputError):
    """A context setting that cannot be honoured."""


def config_overrides(model_init_kwargs: dict | str | None) -> dict:
    """The config attributes `model_init_kwargs` overrides (`CONFIG_KEYS`), as `from_pretrained` keyword arguments."""
    if isinstance(model_init_kwargs, str):
        model_init_kwargs = json.loads(model_init_kwargs)
    overrides = {k: v for k, v in (model_init_kwargs or {}).items() if k in CONFIG_KEYS}
    for key, value in overrides.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ContextError(f"model_init_kwargs.{key}: a positive number of tokens, got {value!r}")
    return overrides


def check_vllm_context(overrides: dict, config_context: int | None, use_vllm: bool) -> None:
    """vLLM takes its context from the model's config.json (TRL passes `vllm_max_model_length` as `max_model_len`,
    which vLLM refuses above the config's): a longer one set at load time would sample under another limit than
    the trainer checks, so it is refused."""
    wanted = overrides.get("max_position_embeddings")
    if use_vllm and wanted is not None and config_context is not None and wanted > config_context:
        raise ContextError(f"model_init_kwargs.max_position_embeddings={wanted}: above the model config's "
                           f"{config_context}, which vLLM samples under; write it into the model's config.json, or "
                           "sample with transformers (use_vllm: false)")
