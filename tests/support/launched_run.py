"""One short training through `launchers/launch_cpu.sh`, shared by the launcher and Hub tests through the session
fixture `launched_cpu_run` in conftest.py (a run costs ~15 s of CPU): the default recipe, ASSIST_WARMUP=3 set by
the caller, checkpoints, `--push_to_hub` with a sentinel token on the command line and in HF_TOKEN, and a push dry
run with merged weights."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ARG_TOKEN = "hf_SENTINELargTOKEN4242424242"
ENV_TOKEN = "hf_SENTINELenvTOKEN1717171717"
STRICT_FLAGS = ("FORCE_RATE", "ASSIST_WARMUP", "RL_DISABLE_FORCED", "PPO_RECORD_AT_SAMPLE", "STRICT_TRAJ_KEYS")


def run_launch_cpu(root: Path) -> dict:
    """Run it into `root`; return the output dir, the push dir, the combined log, and `root`."""
    out, push_dir = root / "out", root / "push"
    env = {k: v for k, v in os.environ.items() if k not in STRICT_FLAGS and k != "DRY_RUN"}
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}",
        PYTHON=sys.executable,
        ASSIST_WARMUP="3",
        HF_TOKEN=ENV_TOKEN,
        HF_HUB_OFFLINE="1",
    )
    cmd = [
        "bash", str(REPO / "launchers" / "launch_cpu.sh"), "--output_dir", str(out),
        "--max_steps", "2", "--save_steps", "1", "--warm_start_steps", "0", "--heldout_max_samples", "4",
        # an untrained model never answers right: a reward with spread makes the adapter move
        "--reward_funcs", "tests.support.tiny_trainer.length_reward", "--reward_weights", "1.0",
        "--heldout_eval_steps", "0", "--per_device_train_batch_size", "8", "--num_generations", "4",
        "--push_to_hub", "--hub_model_id", "me/tiny-grpo", "--hub_token", ARG_TOKEN,
        "--push_dry_run", str(push_dir), "--push_merged_weights", "true",
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return {"out": out, "push": push_dir, "log": proc.stdout + proc.stderr, "root": root}
