"""What a run leaves behind besides checkpoints: `run_summary.json` and `reward_curve.png`."""

from __future__ import annotations

import importlib.metadata
import json
import logging
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from training.outputs import run_files  # noqa: E402
from training.outputs.atomic import atomic_write_text  # noqa: E402
from training.outputs.jsonsafe import nonfinite_to_null  # noqa: E402

LIBRARIES = ("torch", "transformers", "trl", "peft", "accelerate", "datasets")


def library_versions() -> dict[str, str]:
    return {name: importlib.metadata.version(name) for name in LIBRARIES}


def read_metrics(output_dir: str | Path) -> list[dict]:
    path = Path(output_dir) / run_files.METRICS
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_run_summary(output_dir: str | Path, summary: dict) -> Path:
    """Strict JSON: a NaN or infinite value is written as null and its path listed under `nonfinite_values`."""
    path = Path(output_dir) / run_files.RUN_SUMMARY
    clean, nonfinite = nonfinite_to_null(summary)
    clean["nonfinite_values"] = nonfinite
    if nonfinite:
        logging.getLogger(__name__).warning("run_summary.json: non-finite values written as null: %s", nonfinite)
    atomic_write_text(path, json.dumps(clean, indent=2, sort_keys=True, default=str, allow_nan=False))
    return path


def plot_reward_curve(output_dir: str | Path, heldout: list[dict], changes=()) -> Path:
    """Train reward per logging step and held-out reward at each evaluation, against the optimizer step; below it,
    the paired held-out changes from step 0 (training.evaluation.heldout_change.MetricChange) in words."""
    rows = [r for r in read_metrics(output_dir) if r.get("reward") is not None]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=120)
    ax.plot([r["step"] for r in rows], [r["reward"] for r in rows], label="train reward (sampled)", alpha=0.8)
    for key, label in (("heldout/reward", "held-out reward (sampled)"), ("heldout/greedy_reward", "held-out (greedy)")):
        points = [(h["step"], h[key]) for h in heldout if key in h]
        if points:
            ax.plot(*zip(*points), "o-", label=label)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("mean reward")
    ax.set_title(Path(output_dir).name)
    ax.grid(alpha=0.3)
    ax.legend()
    text_height = 0.22 * (len(changes) + 1) if changes else 0.0  # inches: a title line and one line per metric
    if changes:
        fig.set_size_inches(7, 4 + text_height)
        fig.text(0.01, 0.01, "Held-out change from step 0, paired per held-out row:\n"
                 + "\n".join(c.short() for c in changes), fontsize=6.5, va="bottom", family="monospace")
    fig.tight_layout(rect=(0, text_height / (4 + text_height), 1, 1))
    path = Path(output_dir) / run_files.REWARD_CURVE
    fig.savefig(path)
    plt.close(fig)
    return path
