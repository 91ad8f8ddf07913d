"""Where a run's model comes from: the offline tiny Qwen3 (`tiny-qwen3`), a local checkpoint directory, or a hub id."""

from __future__ import annotations

import os
import re
from pathlib import Path

from training.errors import MissingPathError
from training.tiny_qwen3 import build_fingerprint, write_tiny_qwen3

TINY_MODEL_NAME = "tiny-qwen3"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def cache_root() -> Path:
    """Where built models and warm starts are cached (`STRICT_GRPO_CACHE`, default `~/.cache/strict_grpo`)."""
    return Path(os.environ.get("STRICT_GRPO_CACHE", Path.home() / ".cache" / "strict_grpo"))


def resolve_model_path(name_or_path: str, seed: int = 0) -> str:
    """Turn a recipe's `model_name_or_path` into something `from_pretrained` can load, or raise naming it.

    `tiny-qwen3` builds the offline tiny Qwen3 into the cache (once per seed and build fingerprint). A path that
    exists is used as is. Something shaped like a hub id (`Qwen/Qwen3-0.6B`) is passed through for
    `from_pretrained` to fetch.
    """
    if name_or_path == TINY_MODEL_NAME:
        out = cache_root() / "models" / f"tiny-qwen3-{build_fingerprint()}-seed{seed}"
        if not (out / "model.safetensors").exists():
            write_tiny_qwen3(out, seed=seed)
        return str(out)
    if name_or_path == "tiny-qwen3-causal":  # the causal task's tokenizer variant (training/causal/tiny_model.py)
        from training.causal.tiny_model import resolve_causal_model

        return resolve_causal_model(cache_root(), seed)
    if Path(name_or_path).exists():
        if not (Path(name_or_path) / "config.json").exists():
            raise MissingPathError(f"model_name_or_path={name_or_path!r} exists but has no config.json")
        return name_or_path
    if _HUB_ID.match(name_or_path) and not name_or_path.startswith((".", "/")):
        return name_or_path
    raise MissingPathError(
        f"model_name_or_path={name_or_path!r}: no such directory, and not a hub id of the form 'org/name' "
        f"(use '{TINY_MODEL_NAME}' for the offline tiny Qwen3)"
    )
