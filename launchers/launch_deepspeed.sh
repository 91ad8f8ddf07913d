#!/usr/bin/env bash
# Train with DeepSpeed ZeRO-2 or ZeRO-3 over the visible GPUs through `accelerate launch`. See docs/launchers.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

usage() {
    cat <<'USAGE'
Usage: launchers/launch_deepspeed.sh [--zero 2|3] [--recipe FILE] [--num-processes N] [--dry-run] [TRAINING ARGS...]

ZeRO stage: --zero, else ZERO_STAGE, else 2 (accelerate_configs/deepspeed_zero{2,3}.yaml).
Default N: the number of visible CUDA devices. Default recipe: recipes/qwen3_0.6b_lora.yaml.
TRAINING ARGS pass through to `python -m training.train`.
Without a GPU it prints the command it would run and exits 3; --dry-run (or DRY_RUN=1) prints it and exits 0.
USAGE
}

parse_launcher_args "$@"
ZERO="${LAUNCHER_ZERO:-${ZERO_STAGE:-2}}"
case "$ZERO" in
    2 | 3) ;;
    *) echo "error: ZeRO stage '$ZERO' is not valid (--zero / ZERO_STAGE): expected 2 or 3" >&2; exit 2 ;;
esac
export_strict_flags
default_processes_to_gpus
echo "DeepSpeed ZeRO stage $ZERO on $LAUNCHER_NUM_PROCESSES process(es)"
RECIPE="${LAUNCHER_RECIPE:-recipes/qwen3_0.6b_lora.yaml}"
recipe_mixed_precision --config "$RECIPE" "${EXTRA_ARGS[@]}"
CMD=("$ACCELERATE" launch --config_file "accelerate_configs/deepspeed_zero${ZERO}.yaml"
    --num_processes "$LAUNCHER_NUM_PROCESSES" --mixed_precision "$MIXED_PRECISION"
    -m training.train --config "$RECIPE" "${EXTRA_ARGS[@]}")
refuse_without_gpu "${CMD[@]}"
run_command "${CMD[@]}"
