#!/usr/bin/env bash
# Train on CPU through `accelerate launch` (default: the tiny recipe, one process). See docs/launchers.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

usage() {
    cat <<'USAGE'
Usage: launchers/launch_cpu.sh [--recipe FILE] [--num-processes N] [--dry-run] [TRAINING ARGS...]

Trains on CPU with accelerate_configs/cpu.yaml (gloo when N > 1). Default recipe: recipes/tiny_cpu.yaml.
TRAINING ARGS pass through to `python -m training.train` (e.g. --max_steps 3 --output_dir runs/x).
Runs from the repository root. Strict flags come from the environment (safe defaults for unset ones).
  --dry-run (or DRY_RUN=1)   print the flags and the command, start nothing
USAGE
}

parse_launcher_args "$@"
export_strict_flags
RECIPE="${LAUNCHER_RECIPE:-recipes/tiny_cpu.yaml}"
recipe_mixed_precision --launch-on-cpu --config "$RECIPE" "${EXTRA_ARGS[@]}"
CMD=("$ACCELERATE" launch --config_file accelerate_configs/cpu.yaml --num_processes "${LAUNCHER_NUM_PROCESSES:-1}"
    --mixed_precision "$MIXED_PRECISION" -m training.train --config "$RECIPE" "${EXTRA_ARGS[@]}")
run_command "${CMD[@]}"
