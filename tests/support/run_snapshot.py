"""An output_dir as a finished earlier run leaves it, and a byte-level snapshot of a directory, to show that refused
input writes nothing into an existing run."""

from __future__ import annotations

import json
from pathlib import Path

# What `training.train` leaves in a finished 3-step run's output_dir (the files a later attempt would rewrite).
FINISHED_RUN_FILES = {
    "metrics.jsonl": "".join(json.dumps({"step": s, "loss": 0.1 * s}) + "\n" for s in (1, 2, 3)),
    "run_summary.json": json.dumps({"global_step": 3, "stopped_reason": "completed"}),
    "run_record.json": json.dumps({"attempts": [{"ended": "completed", "global_step": 3}]}),
    "eval.jsonl": json.dumps({"episode": 0, "reward": 0.5}) + "\n",
    "adapter_config.json": json.dumps({"r": 16, "peft_type": "LORA"}),
    "adapter_model.safetensors": "weights",
    "README.md": "# model card\n",
    "checkpoint-3/trainer_state.json": json.dumps({"global_step": 3, "max_steps": 3}),
    "checkpoint-3/adapter_model.safetensors": "weights",
    "checkpoint-3/optimizer.pt": "optimizer",
}


def write_finished_run(out: Path) -> Path:
    for name, text in FINISHED_RUN_FILES.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)
    return out


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file (its bytes) and directory (None) under `root`, by relative path."""
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))
    }
