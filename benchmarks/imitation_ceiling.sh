#!/usr/bin/env bash
# The imitation ceiling (issue 61): the starting policy's architecture and build, imitating the one-step rule instead
# of the teacher (`starting_policy build --imitated one_step`), evaluated as the starting policy is, sampled and
# greedy, on the main job's 128 held-out SCMs and on the CBO file's 128 held-out episodes, beside the one-step rule
# and the shipped starting policy on the same episodes; then the paired comparisons. One thread each.
#   benchmarks/imitation_ceiling.sh [OUT_DIR]          # about 25 minutes for the build alone, on 2 cores
#   BUILD_FLAGS="--other_option_share 0" benchmarks/imitation_ceiling.sh OUT   # the build's flags (starting_policy build)
set -euo pipefail
out=${1:-runs/imitation_ceiling}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} MKL_NUM_THREADS=${MKL_NUM_THREADS:-1}
R=recipes/causal_cpu.yaml
M=$out/rule_policy
mkdir -p "$out"
[ -d "$M" ] || [ -d "$M-rejected" ] || python -m training.tasks.causal.starting_policy build --imitated one_step ${BUILD_FLAGS:-} --out "$M" || true
[ -d "$M" ] || M=$M-rejected  # the acceptance bar is the teacher's; the ceiling is measured whatever it reaches
[ -f "$out/cbo_rows/heldout.jsonl" ] || python -m training.tasks.causal.scm_rows --scm examples/scms/cbo_toy.yaml --out "$out/cbo_rows" --train_rows 1 --heldout_rows 128
C=(--split "$out/cbo_rows/heldout.jsonl" --surrogate additive)
ev() { local out=$1; shift; [ -f "$out/eval.jsonl" ] || python -m training.evaluate --recipe $R "$@" --out "$out"; }
for where in main cbo; do
  extra=(); [ $where = cbo ] && extra=("${C[@]}")
  o=$out/$where
  ev $o/ceiling --model "$M" "${extra[@]}"
  ev $o/ceiling_greedy --model "$M" "${extra[@]}" --greedy
  ev $o/start "${extra[@]}"
  ev $o/start_greedy "${extra[@]}" --greedy
  ev $o/one_step --baseline belief_line "${extra[@]}"
  # greedy episodes pair only with greedy ones: the sampled policies against the rule, then the two greedy ones
  python -m training.compare ceiling=$o/ceiling start=$o/start one_step=$o/one_step --baseline one_step \
    --out $o/compare
  python -m training.compare ceiling_greedy=$o/ceiling_greedy start_greedy=$o/start_greedy \
    --baseline start_greedy --out $o/compare_greedy
done
