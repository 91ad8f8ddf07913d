# Shared by the launchers (sourced, not run). Each launcher: `set -euo pipefail`, then
#   parse_launcher_args "$@"   -> LAUNCHER_* options, EXTRA_ARGS (passed through to training.train)
#   export_strict_flags        -> safe defaults for unset flags, validated once in Python, printed
#   recipe_mixed_precision ... -> MIXED_PRECISION: the recipe's precision, for `accelerate launch --mixed_precision`
#   run_command CMD...          -> prints the command; runs it unless dry-run
# Environment: PYTHON (default python), ACCELERATE (default accelerate), DRY_RUN=1 (same as --dry-run).

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python}"
ACCELERATE="${ACCELERATE:-accelerate}"
DRY_RUN="${DRY_RUN:-0}"
LAUNCHER_RECIPE=""
LAUNCHER_NUM_PROCESSES=""
LAUNCHER_ZERO=""
EXTRA_ARGS=()

# The launcher's own options use dashes; everything else (underscored training flags) passes through.
parse_launcher_args() {
    while (($#)); do
        case "$1" in
            -h | --help) usage; exit 0 ;;
            --dry-run) DRY_RUN=1 ;;
            --recipe) LAUNCHER_RECIPE="${2:?--recipe needs a file}"; shift ;;
            --num-processes) LAUNCHER_NUM_PROCESSES="${2:?--num-processes needs a number}"; shift ;;
            --zero) LAUNCHER_ZERO="${2:?--zero needs 2 or 3}"; shift ;;
            --) shift; EXTRA_ARGS+=("$@"); break ;;
            *) EXTRA_ARGS+=("$1") ;;
        esac
        shift
    done
    case "$DRY_RUN" in
        0 | 1) ;;
        *) echo "error: DRY_RUN=$DRY_RUN is not valid: expected 0 or 1" >&2; exit 2 ;;
    esac
}

# The strict flags in force, exported: the caller's values, and the safe defaults (training/run_setup/flags.py, their one
# source) for those unset. `python -m training.run_setup.flags --export` validates them (exit 2 naming the flag on a bad value).
export_strict_flags() {
    local exports
    if ! exports="$(cd "$REPO_ROOT" && "$PYTHON" -m training.run_setup.flags --export)"; then
        echo "error: refusing to launch with invalid strict flags (see above)" >&2
        exit 2
    fi
    eval "$exports"
    echo "Strict flags in force:"
    echo "$exports" | sed 's/^export /  /'
}

# Sets MIXED_PRECISION to the recipe's precision ('no', 'bf16' or 'fp16', from its bf16/fp16 and the training args
# given; training/run_setup/precision.py) for `accelerate launch --mixed_precision`: the recipe is the run's one source
# of precision, whatever the accelerate config file says. An ACCELERATE_MIXED_PRECISION in the environment that asks
# for another precision is refused (exit 2, naming it). Arguments: [--launch-on-cpu] --config RECIPE [TRAINING ARGS].
recipe_mixed_precision() {
    if ! MIXED_PRECISION="$(cd "$REPO_ROOT" && "$PYTHON" -m training.run_setup.precision "$@")"; then
        exit 2  # the reason is the `error:` line above
    fi
    echo "Precision from the recipe: accelerate launch --mixed_precision $MIXED_PRECISION"
}

# Sets GPU_COUNT to the number of CUDA devices torch sees (one Python start, done at most once).
GPU_COUNT=""
detect_gpus() {
    if [[ -z "$GPU_COUNT" ]]; then
        GPU_COUNT="$("$PYTHON" -c "import torch; print(torch.cuda.device_count())")"
    fi
}

# Sets LAUNCHER_NUM_PROCESSES, when not given, to the number of visible GPUs (at least 1).
default_processes_to_gpus() {
    if [[ -z "$LAUNCHER_NUM_PROCESSES" ]]; then
        detect_gpus
        LAUNCHER_NUM_PROCESSES=$((GPU_COUNT > 1 ? GPU_COUNT : 1))
    fi
}

# The command as it would be typed, with the value of every `--*_token` option hidden (logs are no place for it).
print_command() {
    local arg hide=0
    printf 'Command:'
    for arg in "$@"; do
        if ((hide)); then
            printf ' <redacted>'
            hide=0
        elif [[ "$arg" == --*_token=* ]]; then
            printf ' %q=<redacted>' "${arg%%=*}"
        else
            [[ "$arg" == --*_token ]] && hide=1
            printf ' %q' "$arg"
        fi
    done
    printf '\n'
}

# Print the command, then run it from the repository root (recipes name data files relative to it), unless dry-run.
run_command() {
    print_command "$@"
    if [[ "$DRY_RUN" == 1 ]]; then
        echo "Dry run: not started."
        return 0
    fi
    cd "$REPO_ROOT"
    exec "$@"
}

# GPU launchers without a GPU: show what would run and say why it does not, instead of failing inside accelerate.
refuse_without_gpu() {
    [[ "$DRY_RUN" == 1 ]] && return 0
    detect_gpus
    ((GPU_COUNT > 0)) && return 0
    print_command "$@"
    echo "No CUDA GPU is visible on this machine: the command above was not started." >&2
    echo "Use launchers/launch_cpu.sh here, or --dry-run to only print the command." >&2
    exit 3
}
