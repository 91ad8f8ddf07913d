"""A vLLM server on this CPU for the server-mode tests, started as a user starts it
(`python -m training.run_setup.vllm_serve_cpu`, what launchers/vllm_server.sh runs without a GPU), and what it
computes read beside the trainer."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests
import torch

from tests.support.vllm_engine import trainer_prompt_logprobs

START_TIMEOUT_S = 300


# what an in-process trainer of an earlier test (vLLM's engine, accelerate) leaves in os.environ for torch.distributed:
# a process started with it would rendezvous on the port that trainer holds
DISTRIBUTED = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def fresh_env(**extra: str) -> dict:
    return {**{key: value for key, value in os.environ.items() if key not in DISTRIBUTED}, **extra}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class CpuServer:
    """One server process (its own process group, so stopping it stops vLLM's engine and workers too)."""

    def __init__(self, model: str, log: Path, port: int | None = None, dtype: str = "float32"):
        self.model, self.log, self.dtype = model, log, dtype
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def start(self) -> CpuServer:
        env = fresh_env(VLLM_CPU_KVCACHE_SPACE=os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"))
        with self.log.open("a") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "training.run_setup.vllm_serve_cpu", "--model", self.model, "--port",
                 str(self.port), "--dtype", self.dtype], stdout=out, stderr=subprocess.STDOUT, env=env,
                start_new_session=True, cwd=Path(__file__).resolve().parents[2])
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the vLLM server exited {self.process.returncode}:\n{self.log_tail()}")
            try:
                if requests.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(2)
        self.stop()
        raise RuntimeError(f"the vLLM server did not answer within {START_TIMEOUT_S} s:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.process = None

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def server_prompt_logprobs(trainer, token_ids: list[int]) -> torch.Tensor:
    """The server's log-prob of each of `token_ids[1:]` given the tokens before it (temperature 1)."""
    client = trainer.vllm_generation.vllm_client
    out = client.get_sequence_logprobs([token_ids], [1], top_logprobs=1)
    return torch.tensor(out["actual_logprobs"][0]).flatten()


def server_gap(trainer, token_ids: list[int]) -> float:
    """Largest |server - trainer| log-prob over the tokens."""
    return (server_prompt_logprobs(trainer, token_ids) - trainer_prompt_logprobs(trainer, token_ids)).abs().max().item()
