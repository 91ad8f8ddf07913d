"""Where a run's model comes from: the offline tiny Qwen3 (`tiny-qwen3`), a local checkpoint directory, or a hub id."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from pathlib import Path

from training.outputs.atomic import atomic_directory
from training.errors import MissingPathError
from training.run_setup import tasks
from training.run_setup.tiny_qwen3 import COMPLETE_FILE, build_fingerprint, write_tiny_qwen3

logger = logging.getLogger(__name__)

TINY_MODEL_NAME = "tiny-qwen3"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def cache_root() -> Path:
    """Where built models and warm starts are cached (`STRICT_GRPO_CACHE`, default `~/.cache/strict_grpo`)."""
    return Path(os.environ.get("STRICT_GRPO_CACHE", Path.home() / ".cache" / "strict_grpo"))


def tiny_model_cache(seed: int = 0) -> Path:
    """The cached tiny Qwen3 of `seed`, built once (atomically: the directory appears only when complete)."""
    out = cache_root() / "models" / f"tiny-qwen3-{build_fingerprint()}-seed{seed}"
    if (out / COMPLETE_FILE).exists():
        return out
    if out.exists():
        # Left by an older version that wrote the cache in place and was killed while writing it.
        logger.warning("Removing the incomplete model cache %s (no %s) and building it again", out, COMPLETE_FILE)
        shutil.rmtree(out)
    with atomic_directory(out) as tmp:
        write_tiny_qwen3(tmp, seed=seed)
    return out


def check_model_dir(path: Path, name: str) -> None:
    """A local model directory needs a config.json that names its architecture (`model_type`)."""
    config_path = path / "config.json"
    if not config_path.is_file():
        raise MissingPathError(f"model_name_or_path={name!r} exists but has no config.json")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise MissingPathError(f"model_name_or_path={name!r}: {config_path} is not valid JSON ({err})") from None
    if not isinstance(config, dict) or not config.get("model_type"):
        raise MissingPathError(
            f"model_name_or_path={name!r}: {config_path} has no 'model_type' (it is not a transformers model "
            "config; save the model with save_pretrained)"
        )


def resolve_model_path(name_or_path: str, seed: int = 0) -> str:
    """Turn a recipe's `model_name_or_path` into something `from_pretrained` can load, or raise naming it.

    `tiny-qwen3` builds the offline tiny Qwen3 into the cache (once per seed and build fingerprint). A path that
    exists is used as is once its config.json checks out. Something shaped like a hub id (`Qwen/Qwen3-0.6B`) is
    passed through for `from_pretrained` to fetch.
    """
    if name_or_path == TINY_MODEL_NAME:
        return str(tiny_model_cache(seed))
    task_model = tasks.tiny_model(name_or_path)  # a task's own variant, e.g. `tiny-qwen3-causal`
    if task_model is not None:
        return task_model(cache_root(), seed)
    if Path(name_or_path).exists():
        if not Path(name_or_path).is_dir():
            raise MissingPathError(f"model_name_or_path={name_or_path!r} is a file, not a model directory")
        check_model_dir(Path(name_or_path), name_or_path)
        return name_or_path
    if _HUB_ID.match(name_or_path) and not name_or_path.startswith((".", "/")):
        return name_or_path
    raise MissingPathError(
        f"model_name_or_path={name_or_path!r}: no such directory, and not a hub id of the form 'org/name' "
        f"(use '{TINY_MODEL_NAME}' for the offline tiny Qwen3)"
    )
