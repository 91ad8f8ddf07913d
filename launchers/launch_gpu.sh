#!/usr/bin/env bash
# Train on one GPU, or DDP over several, through `accelerate launch`. See docs/launchers.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

usage() {
    cat <<'USAGE'
Usage: launchers/launch_gpu.sh [--recipe FILE] [--num-processes N] [--dry-run] [TRAINING ARGS...]

N = 1 (default when one GPU is visible) uses accelerate_configs/single_gpu.yaml; N > 1 uses multi_gpu.yaml (DDP).
Default N: the number of visible CUDA devices (CUDA_VISIBLE_DEVICES decides which; leave the vLLM server's GPUs
out). Default recipe: recipes/qwen3_0.6b_lora.yaml. TRAINING ARGS pass through to `python -m training.train`.
Without a GPU it prints the command it would run and exits 3; --dry-run (or DRY_RUN=1) prints it and exits 0.
USAGE
}

parse_launcher_args "$@"
export_strict_flags
default_processes_to_gpus
CONFIG=accelerate_configs/single_gpu.yaml
((LAUNCHER_NUM_PROCESSES > 1)) && CONFIG=accelerate_configs/multi_gpu.yaml
RECIPE="${LAUNCHER_RECIPE:-recipes/qwen3_0.6b_lora.yaml}"
recipe_mixed_precision --config "$RECIPE" "${EXTRA_ARGS[@]}"
CMD=("$ACCELERATE" launch --config_file "$CONFIG" --num_processes "$LAUNCHER_NUM_PROCESSES"
    --mixed_precision "$MIXED_PRECISION" -m training.train --config "$RECIPE" "${EXTRA_ARGS[@]}")
refuse_without_gpu "${CMD[@]}"
run_command "${CMD[@]}"
