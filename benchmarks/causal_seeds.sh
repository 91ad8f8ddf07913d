#!/usr/bin/env bash
# The causal job's measurements (docs/causal.md, "Measured"): the recipe on 3 seeds (its warm start included), each
# reward component removed in turn (weight 0) on the same seeds, and on the held-out SCMs the trained policies, their
# warm starts, the frozen-surrogate evaluation and the three baselines. Per-episode records (JSONL) go to
# $OUT/eval; the tables are printed by `python -m training.causal.results` (commands at the end).
#
#   OUT=runs/causal JOBS=2 benchmarks/causal_seeds.sh            # everything (about 2.5 h on 2 shared cores)
#   PHASES="baselines all" benchmarks/causal_seeds.sh             # a subset of the phases below
#   TRAIN_ARGS="--max_steps 25" OUT=runs/causal_short PHASES=single benchmarks/causal_seeds.sh   # extra train flags
#
# Phases: baselines (random, greedy_eig, oracle), all (the recipe, seeds $SEEDS; also builds each seed's warm start),
# eval (the trained policies sampled + greedy, their warm starts, the frozen surrogate), ablations (the recipe with one
# weight set to 0, then sampled evaluation), single (the recipe with one weight alone: $SINGLE, then sampled
# evaluation).
set -euo pipefail
OUT=${OUT:-runs/causal}
SEEDS=${SEEDS:-"0 1 2"}
EPISODES=${EPISODES:-4}
JOBS=${JOBS:-2}
PHASES=${PHASES:-"baselines all eval single ablations"}
SINGLE=${SINGLE:-"only_optimization only_structure"}
RECIPE=${RECIPE:-recipes/causal_cpu.yaml}
# Every measured run takes all of the recipe's steps: its 600 s GRPO wall-time guard (there for the 15-minute
# promise on an idle machine) would otherwise cut runs by however busy the shared cores happen to be.
MAX_WALL=${MAX_WALL:-7200}
TRAIN_ARGS=${TRAIN_ARGS:-}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false OUT EPISODES RECIPE MAX_WALL TRAIN_ARGS
mkdir -p "$OUT/eval" "$OUT/logs"

declare -A WEIGHTS=(
  [all]="1.0 0.5 0.3 0.1"
  [no_optimization]="0 0.5 0.3 0.1"
  [no_structure]="1.0 0 0.3 0.1"
  [no_parent]="1.0 0.5 0 0.1"
  [no_exploration]="1.0 0.5 0.3 0"
  [only_optimization]="1.0 0 0 0"
  [only_structure]="0 0.5 0 0"
)

train_job() {  # variant seed weights...
  local variant=$1 seed=$2; shift 2
  local dir="$OUT/$variant/s$seed"
  if [ -f "$dir/run_summary.json" ]; then echo "skip $dir (done)"; return; fi
  echo "train $variant seed $seed"
  python -m training.train --config "$RECIPE" --seed "$seed" --model_seed "$seed" --output_dir "$dir" \
    --save_steps 1000 --max_wall_time_s "$MAX_WALL" --overwrite_output_dir true $TRAIN_ARGS --reward_weights "$@" \
    > "$OUT/logs/${variant}_s$seed.log" 2>&1
}

eval_job() {  # label out-name args...
  local label=$1 name=$2; shift 2
  if [ -f "$OUT/eval/$name.jsonl" ]; then echo "skip $name (done)"; return; fi
  echo "eval $name"
  python -m training.causal.evaluate_policy --recipe "$RECIPE" --split heldout --episodes "$EPISODES" \
    --label "$label" --out "$OUT/eval/$name.jsonl" "$@" > "$OUT/logs/eval_$name.log" 2>&1
}
export -f train_job eval_job

for phase in $PHASES; do
  case $phase in
    baselines)
      for b in random greedy_eig oracle; do echo "eval_job $b $b --baseline $b"; done | xargs -P "$JOBS" -I{} bash -c "{}";;
    all)
      for s in $SEEDS; do echo "train_job all $s ${WEIGHTS[all]}"; done | xargs -P "$JOBS" -I{} bash -c "{}";;
    eval)
      for s in $SEEDS; do
        ws=$(python -c "import json; print(json.load(open('$OUT/all/s$s/run_summary.json'))['resolved_model_path'])")
        echo "eval_job trained trained_s$s --model $OUT/all/s$s"
        echo "eval_job warm_start warm_start_s$s --model $ws"
        echo "eval_job trained_frozen trained_frozen_s$s --model $OUT/all/s$s --frozen --decoding sampled"
      done | xargs -P "$JOBS" -I{} bash -c "{}";;
    single|ablations)
      variants="no_optimization no_structure no_parent no_exploration"
      [ "$phase" = single ] && variants=$SINGLE
      for v in $variants; do
        for s in $SEEDS; do echo "train_job $v $s ${WEIGHTS[$v]} && eval_job $v ${v}_s$s --model $OUT/$v/s$s --decoding sampled"; done
      done | xargs -P "$JOBS" -I{} bash -c "{}";;
    *) echo "unknown phase $phase" >&2; exit 2;;
  esac
done

cat <<EOF
Tables:
  python -m training.causal.results trained="$OUT/eval/trained_s*.jsonl" warm_start="$OUT/eval/warm_start_s*.jsonl" \\
    random="$OUT/eval/random.jsonl" greedy_eig="$OUT/eval/greedy_eig.jsonl" oracle="$OUT/eval/oracle.jsonl" --versus warm_start
  python -m training.causal.results trained="$OUT/eval/trained_s*.jsonl" random="$OUT/eval/random.jsonl" --versus random
  python -m training.causal.results trained="$OUT/eval/trained_s*.jsonl" --decoding greedy
  python -m training.causal.results active="$OUT/eval/trained_s*.jsonl" frozen="$OUT/eval/trained_frozen_s*.jsonl" --versus frozen
  python -m training.causal.results all="$OUT/eval/trained_s*.jsonl" no_optimization="$OUT/eval/no_optimization_s*.jsonl" \\
    no_structure="$OUT/eval/no_structure_s*.jsonl" no_parent="$OUT/eval/no_parent_s*.jsonl" \\
    no_exploration="$OUT/eval/no_exploration_s*.jsonl" --versus all
  python -m training.causal.results warm_start="$OUT/eval/warm_start_s*.jsonl" \\
    only_optimization="$OUT/eval/only_optimization_s*.jsonl" only_structure="$OUT/eval/only_structure_s*.jsonl" \\
    --versus warm_start
EOF
