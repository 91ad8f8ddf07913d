"""Start a 2-rank CPU run of `training.train` (through tests/support/two_process_driver.py) and read its probes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
ACCELERATE = Path(sys.executable).with_name("accelerate")
NUM_GENERATIONS = 4
PER_DEVICE_BATCH = 6  # 2 ranks x 6 = 12 completions = 3 groups; the middle group spans both ranks
MAX_STEPS = 2


def two_rank_env(probe_dir: Path, env: dict | None = None) -> dict:
    return {**os.environ, "TWO_PROC_PROBE_DIR": str(probe_dir), "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1",
            **(env or {})}


def two_rank_command(out_dir: Path, accelerate_config: str, *extra_launch: str, train_args: tuple = (),
                     max_steps: int = MAX_STEPS, save_steps: int = 1) -> list[str]:
    """`accelerate launch` of 2 ranks of `training.train` (the probe driver) on the tiny recipe into `out_dir`."""
    return [
        str(ACCELERATE), "launch",
        "--config_file", accelerate_config,
        "--num_processes", "2",
        "--num_cpu_threads_per_process", "1",
        "--main_process_port", "0",
        *extra_launch,
        "tests/support/two_process_driver.py",
        "--config", "recipes/tiny_cpu.yaml",
        "--output_dir", str(out_dir),
        "--reward_funcs", "__main__.recording_reward", "--reward_weights", "1.0",
        "--warm_start_steps", "0",
        "--max_steps", str(max_steps),
        "--save_steps", str(save_steps),
        "--per_device_train_batch_size", str(PER_DEVICE_BATCH),
        "--num_generations", str(NUM_GENERATIONS),
        "--heldout_max_samples", "4",
        "--heldout_eval_steps", "0",
        "--bf16", "false",  # TRL defaults bf16 on; keep these runs in fp32 on CPU
        *train_args,
    ]  # fmt: skip


def launch_two_ranks(
    root: Path, accelerate_config: str, *extra_launch: str, env: dict | None = None, train_args: tuple = ()
) -> dict:
    """Run 2 ranks for MAX_STEPS steps into `root/out`; return each rank's probe records, the output dir, the log."""
    probe_dir, out_dir = root / "probe", root / "out"
    probe_dir.mkdir()
    cmd = two_rank_command(out_dir, accelerate_config, *extra_launch, train_args=train_args)
    proc = subprocess.run(cmd, cwd=REPO, env=two_rank_env(probe_dir, env), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    records = {
        rank: [json.loads(line) for line in (probe_dir / f"rank{rank}.jsonl").read_text().splitlines()]
        for rank in (0, 1)
    }
    return {"records": records, "out": out_dir, "log": proc.stdout + proc.stderr}


def of_kind(records: list[dict], kind: str) -> list[dict]:
    return [r for r in records if r["kind"] == kind]


def group_advantages(rewards: list[float]) -> list[float]:
    """TRL's default group-relative advantage: (r - group mean) / (group std + 1e-4), unbiased std."""
    r = torch.tensor(rewards, dtype=torch.float64).view(-1, NUM_GENERATIONS)
    adv = (r - r.mean(dim=1, keepdim=True)) / (r.std(dim=1, keepdim=True) + 1e-4)
    return adv.flatten().tolist()


def gathered_advantages_match(run: dict) -> bool:
    """Per step: both ranks' advantages equal the group advantages of the rewards gathered over both ranks."""
    recs = run["records"]
    for step in range(MAX_STEPS):
        rewards = [r for rank in (0, 1) for r in of_kind(recs[rank], "scored")[step]["rewards"]]
        got = [a for rank in (0, 1) for a in of_kind(recs[rank], "batch")[step]["advantages"]]
        expected = group_advantages(rewards)
        if len(got) != len(expected) or any(abs(g - e) > 1e-4 for g, e in zip(got, expected)):
            return False
    return True
