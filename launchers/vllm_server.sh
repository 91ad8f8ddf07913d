#!/usr/bin/env bash
# TRL's vLLM generation server on dedicated GPUs (or on this CPU without one), for `--use_vllm true --vllm_mode
# server`. See docs/launchers.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

usage() {
    cat <<'USAGE'
Usage: launchers/vllm_server.sh [--dry-run] [--model ID] [TRL VLLM-SERVE ARGS...]

Starts `trl vllm-serve` on the GPUs in VLLM_GPUS (default "0"), tensor-parallel over all of them; train on the
other GPUs (e.g. CUDA_VISIBLE_DEVICES=1,2,3 launchers/launch_gpu.sh --use_vllm true --vllm_mode server).
MODEL (or --model) default: Qwen/Qwen3-0.6B; it must be the model the trainer trains. VLLM_PORT default 8000.
Other args pass through to `trl vllm-serve`. The strict flags are validated and printed here too, so a server
and its trainer are started from one environment.
Without a GPU (and VLLM_GPUS unset) it serves on this CPU, from the CPU-vLLM venv (scripts/install_vllm_cpu.sh):
TRL's flags, the trainer's dtype (--dtype, default float32), weights synced over gloo, a local model directory
as well as a hub id (python -m training.run_setup.vllm_serve_cpu --help); it prints the URL it listens on. With
VLLM_GPUS set and no GPU it prints the command and exits 3. --dry-run (or DRY_RUN=1) prints the command and exits 0.
USAGE
}

MODEL="${MODEL:-Qwen/Qwen3-0.6B}"
ARGS=()
while (($#)); do
    case "$1" in
        --model) MODEL="${2:?--model needs an id or path}"; shift ;;
        *) ARGS+=("$1") ;;
    esac
    shift
done
parse_launcher_args "${ARGS[@]+"${ARGS[@]}"}"
export_strict_flags
GPUS_GIVEN="${VLLM_GPUS+set}"
VLLM_GPUS="${VLLM_GPUS:-0}"
if [[ ! "$VLLM_GPUS" =~ ^[0-9]+(,[0-9]+)*$ ]]; then
    echo "error: VLLM_GPUS='$VLLM_GPUS' is not valid: expected GPU indices like 0 or 0,1" >&2
    exit 2
fi
if [[ -z "$GPUS_GIVEN" ]]; then detect_gpus; fi
if [[ -z "$GPUS_GIVEN" && "$GPU_COUNT" == 0 ]]; then
    echo "vLLM server on CPU (no CUDA GPU is visible)"
    run_command "$PYTHON" -m training.run_setup.vllm_serve_cpu --model "$MODEL" --port "${VLLM_PORT:-8000}" \
        "${EXTRA_ARGS[@]+"${EXTRA_ARGS[@]}"}"
    exit 0  # reached on a dry run only: run_command execs the server
fi
IFS=, read -r -a GPU_LIST <<<"$VLLM_GPUS"
export CUDA_VISIBLE_DEVICES="$VLLM_GPUS"
echo "vLLM server on GPU(s) $VLLM_GPUS"
CMD=(trl vllm-serve --model "$MODEL" --tensor_parallel_size "${#GPU_LIST[@]}" --port "${VLLM_PORT:-8000}"
    "${EXTRA_ARGS[@]}")
refuse_without_gpu "${CMD[@]}"
run_command "${CMD[@]}"
