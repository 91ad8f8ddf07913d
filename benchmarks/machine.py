"""The machine a benchmark or the GPU check ran on, as one JSON object: Python, platform, CPUs, torch and CUDA, the
GPU, the versions of the libraries the stack runs on (None: not installed), the commit.

    python -m benchmarks.machine
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from importlib import metadata

import torch

LIBRARIES = ("transformers", "trl", "peft", "accelerate", "datasets", "deepspeed", "bitsandbytes", "vllm")


def installed_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def machine() -> dict:
    cuda = torch.cuda.is_available()
    gpu = torch.cuda.get_device_properties(0) if cuda else None
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cuda_available": cuda,
        "gpu": gpu.name if gpu else None,
        "gpu_memory_gib": round(gpu.total_memory / 2**30, 1) if gpu else None,
        "gpu_count": torch.cuda.device_count(),
        "libraries": {name: installed_version(name) for name in LIBRARIES},
        "commit": commit or None,
    }


if __name__ == "__main__":
    print(json.dumps(machine()))
