"""`report_to: [trackio, wandb]`, fully offline: every contract metric the run logs reaches both trackers with its
step and value, with the resolved configuration, the run's group, the final held-out metrics and the final adapter
as an artifact. Read back through W&B's offline run file and trackio's local store."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.tracker_readers import trackio_run, wandb_offline_run
from training.step.metric_names import contract

CONTRACT = contract()  # the generic names and every task's

REPO = Path(__file__).resolve().parents[2]


def offline_env(root: Path) -> dict:
    """Neither tracker reaches a server: W&B offline with every directory under `root`, trackio local (no Space)."""
    return {
        **os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1",
        "WANDB_MODE": "offline", "WANDB_DIR": str(root / "wandb"), "WANDB_CACHE_DIR": str(root / "wandb_cache"),
        "WANDB_DATA_DIR": str(root / "wandb_data"), "WANDB_CONFIG_DIR": str(root / "wandb_config"),
        "WANDB_SILENT": "true", "WANDB_PROJECT": "strict-grpo-test", "WANDB_DISABLE_GIT": "true",
        "TRACKIO_DIR": str(root / "trackio"), "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
    }


@pytest.fixture(scope="module")
def tracked_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("tracked")
    recipe = yaml.safe_load((REPO / "recipes" / "tiny_cpu.yaml").read_text())
    recipe.update(report_to=["trackio", "wandb"], run_name="lr-1e-3-seed0", project="strict-grpo-test",
                  tracking_group="lr-1e-3")
    (root / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    (root / "wandb").mkdir()
    cmd = [sys.executable, "-m", "training.train", "--config", str(root / "recipe.yaml"), "--output_dir",
           str(root / "out"), "--warm_start_steps", "0", "--max_steps", "2", "--per_device_train_batch_size", "8",
           "--num_generations", "4", "--heldout_max_samples", "4", "--heldout_eval_steps", "1", "--save_steps", "100",
           "--reward_funcs", "tests.support.tiny_trainer.length_reward", "--reward_weights", "1.0", "--strict_health",
           "false",
           # conditional contract metrics: kl (beta), logp check, reference sync, value head
           "--beta", "0.04", "--logp_check_steps", "1", "--sync_ref_model", "true", "--ref_model_sync_steps", "1",
           "--advantage_estimator", "gae"]
    proc = subprocess.run(cmd, cwd=REPO, env=offline_env(root), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    metrics = [json.loads(line) for line in (root / "out" / "metrics.jsonl").read_text().splitlines()]
    return {"root": root, "out": root / "out", "metrics": metrics}


def contract_points(metrics: list[dict]) -> dict[tuple[str, int], float]:
    return {(name, row["step"]): row[name] for row in metrics for name in row if name in CONTRACT}


def test_every_logged_contract_metric_reaches_wandb_offline(tracked_run):
    expected = contract_points(tracked_run["metrics"])
    names = {name for name, _ in expected}
    assert {"reward", "loss", "kl", "ratio/mean", "sampling/logp_abs_diff", "ref_sync/param_diffs", "value/loss",
            "health/zero_loss", "rewards/nan_count", "memory/rss_mb"} <= names
    logged = wandb_offline_run(tracked_run["root"] / "wandb")
    got = {(key[len("train/"):], row["train/global_step"]): value for row in logged["history"]
           for key, value in row.items() if key.startswith("train/") and key[len("train/"):] in CONTRACT}
    assert got == pytest.approx(expected)
    heldout = [row["train/heldout/reward"] for row in logged["history"] if "train/heldout/reward" in row]
    assert heldout == pytest.approx([m["heldout/reward"] for m in tracked_run["metrics"] if "heldout/reward" in m])

    run = logged["run"]
    assert (run.run_group, run.display_name, run.project) == ("lr-1e-3", "lr-1e-3-seed0", "strict-grpo-test")
    config = logged["config"]
    assert config["script_args"]["reward_funcs"] == ["tests.support.tiny_trainer.length_reward"]
    assert config["learning_rate"] == 3e-3 and config["strict_flags"]["PPO_RECORD_AT_SAMPLE"] == "1"
    (artifact,) = logged["artifacts"]
    files = {c.path: c for c in artifact.manifest.contents}
    assert artifact.type == "model" and {"adapter_model.safetensors", "adapter_config.json", "eval.jsonl"} <= set(files)
    assert files["adapter_model.safetensors"].size == (tracked_run["out"] / "adapter_model.safetensors").stat().st_size


def test_every_logged_contract_metric_reaches_trackio_locally(tracked_run):
    expected = contract_points(tracked_run["metrics"])
    logged = trackio_run(tracked_run["root"] / "trackio", "strict-grpo-test", "lr-1e-3-seed0")
    got = {(key[len("train/"):], row["train/global_step"]): value for row in logged["logs"]
           for key, value in row.items() if key.startswith("train/") and key[len("train/"):] in CONTRACT}
    assert got == pytest.approx(expected)
    assert logged["config"]["_Group"] == "lr-1e-3"
    assert logged["config"]["script_args"]["train_file"] == "data/larger_number/train.jsonl"
    final = [row for row in logged["logs"] if "final/heldout_reward_after" in row]
    summary = json.loads((tracked_run["out"] / "run_summary.json").read_text())
    assert final and final[0]["final/heldout_reward_after"] == pytest.approx(summary["heldout_reward_after"])
    manifest = logged["manifests"]["adapter-lr-1e-3-seed0"]
    digests = {f["path"]: f["digest"] for f in manifest["manifest"]}
    adapter = (tracked_run["out"] / "adapter_model.safetensors").read_bytes()
    assert digests["adapter_model.safetensors"] == hashlib.sha256(adapter).hexdigest()
    assert manifest["type"] == "model" and "final" in manifest["aliases"]
