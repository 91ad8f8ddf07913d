#!/usr/bin/env bash
# The records a fixed set of causal commands writes, for a before/after check: the rows `scm_rows` and `train_scm`
# make, the held-out episodes of a short `training.train` and `train_scm` run, `training.evaluate` on a run directory,
# on a recipe's starting policy and on a baseline (a split, an SCM file, another surrogate, a frozen one, greedy), and
# `evaluate_baselines` on a split, on rows `train_scm` wrote and on an SCM file. Every record file is copied under
# OUT_DIR/records/ (the baseline tables too, without their timing line); the runs stay under OUT_DIR/runs/ (an old run
# directory to resume and re-evaluate with later code). Records hold absolute paths (the rows' file, the SCM file),
# so two checkouts compare byte for byte when both run from the same checkout path into the same OUT_DIR:
#   git worktree add /tmp/records_checkout COMMIT && (cd /tmp/records_checkout && \
#     benchmarks/causal_command_records.sh /tmp/records_out) && mv /tmp/records_out KEEP_A   # then the other commit
#   diff -r KEEP_A/records KEEP_B/records && echo byte-identical
# About 10 minutes on 2 cores, one thread per process.
set -euo pipefail
repo=$(git -C "$(dirname "${BASH_SOURCE[0]}")/.." rev-parse --show-toplevel)
out=${1:?usage: $0 OUT_DIR}
mkdir -p "$out/records" "$out/logs"
out=$(cd "$out" && pwd)
cd "$repo"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false
cbo=$repo/examples/scms/cbo_toy.yaml
recipe=(--recipe recipes/causal_cpu.yaml)
small_run=(--max_steps 1 --per_device_train_batch_size 4 --num_generations 4 --save_steps 1 --logging_steps 1)

run() {  # run NAME ARGS...: python -m ARGS, its output in logs/NAME.log
  local name=$1; shift
  echo "$(date +%T) $name: python -m $*"
  python -m "$@" > "$out/logs/$name.log" 2>&1 || { echo "failed: $name; see $out/logs/$name.log" >&2; exit 1; }
}
keep() {  # keep NAME DIR: DIR's record files as records/NAME/
  mkdir -p "$out/records/$1"
  (cd "$2" && find . -name '*.jsonl' ! -name metrics.jsonl | sort | while read -r f; do
     mkdir -p "$out/records/$1/$(dirname "$f")" && cp "$f" "$out/records/$1/$f"; done)
}
table() {  # table NAME: a baseline command's printed table (its header and rows; not its timing line)
  grep -E '^\||mean ± std over episodes$' "$out/logs/$1.log" > "$out/records/$1.txt"
}

# rows of an SCM file, the teacher's traces played with the additive surrogate
run scm_rows training.tasks.causal.scm_rows --scm "$cbo" --out "$out/rows" --train_rows 3 --heldout_rows 2 --teacher \
  --surrogate additive --budget 4
keep scm_rows "$out/rows"

# a short run of each training command, with its held-out evaluations before and after
run train training.train --config recipes/causal_cpu.yaml --output_dir "$out/runs/causal" "${small_run[@]}" \
  --heldout_max_samples 3 --heldout_samples_per_prompt 2
keep train "$out/runs/causal"
run train_scm training.tasks.causal.train_scm --scm "$cbo" --output_dir "$out/runs/cbo" "${small_run[@]}" \
  --train_rows 8 --heldout_rows 3 --heldout_max_samples 3 --heldout_samples_per_prompt 1
keep train_scm "$out/runs/cbo"

# training.evaluate: a run directory (its own settings, an SCM file, a frozen surrogate), a starting policy, baselines
run eval_run training.evaluate "$out/runs/causal" --out "$out/eval/run"
keep eval_run "$out/eval/run"
run eval_run_scm training.evaluate "$out/runs/causal" --scm "$cbo" --surrogate additive --episodes_per_row 2 \
  --budget 4 --out "$out/eval/run_scm"
keep eval_run_scm "$out/eval/run_scm"
run eval_run_frozen training.evaluate "$out/runs/causal" --frozen --max_rows 2 --out "$out/eval/run_frozen"
keep eval_run_frozen "$out/eval/run_frozen"
run eval_scm_run training.evaluate "$out/runs/cbo" --heldout_seed 3 --out "$out/eval/scm_run"
keep eval_scm_run "$out/eval/scm_run"
run eval_start training.evaluate "${recipe[@]}" --max_rows 3 --episodes_per_row 2 --out "$out/eval/start"
keep eval_start "$out/eval/start"
run eval_start_greedy training.evaluate "${recipe[@]}" --greedy --split train --max_rows 2 --out "$out/eval/start_greedy"
keep eval_start_greedy "$out/eval/start_greedy"
run eval_teacher training.evaluate "${recipe[@]}" --baseline teacher --split heldout --max_rows 3 \
  --episodes_per_row 2 --out "$out/eval/teacher"
keep eval_teacher "$out/eval/teacher"
run eval_belief_line_scm training.evaluate "${recipe[@]}" --baseline belief_line --scm "$cbo" --surrogate additive \
  --episodes_per_row 2 --budget 4 --initial_samples 8 --out "$out/eval/belief_line_scm"
keep eval_belief_line_scm "$out/eval/belief_line_scm"
run eval_random_rows training.evaluate "${recipe[@]}" --baseline random --split "$out/rows/heldout.jsonl" \
  --surrogate additive --out "$out/eval/random_rows"
keep eval_random_rows "$out/eval/random_rows"

# evaluate_baselines: the bundled held-out split, train_scm's rows, an SCM file
run baselines_heldout training.tasks.causal.evaluate_baselines --split heldout --episodes_per_row 2 --max_rows 3 \
  --out "$out/baselines/heldout"
keep baselines_heldout "$out/baselines/heldout"; table baselines_heldout
run baselines_scm_rows training.tasks.causal.evaluate_baselines --split "$out/runs/cbo/scm_rows/heldout.jsonl" \
  --surrogate additive --episodes_per_row 1 --policies random,belief_line,teacher,oracle --out "$out/baselines/scm_rows"
keep baselines_scm_rows "$out/baselines/scm_rows"; table baselines_scm_rows
run baselines_scm training.tasks.causal.evaluate_baselines --scm "$cbo" --surrogate additive --episodes_per_row 2 \
  --budget 3 --policies random,thompson,expected_improvement,belief_line --out "$out/baselines/scm"
keep baselines_scm "$out/baselines/scm"; table baselines_scm

# the comparison commands over those records
run compare training.compare "$out/eval/run" "$out/eval/start" --out "$out/compare"
cp "$out/compare/comparison.json" "$out/records/compare.json"
run results training.compare "teacher=$out/baselines/heldout/teacher" "random=$out/baselines/heldout/random" \
  --baseline random --out "$out/compare_tables"
cp "$out/compare_tables/causal_tables.md" "$out/records/results.txt"
echo "records -> $out/records"
