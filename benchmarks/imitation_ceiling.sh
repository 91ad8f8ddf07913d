#!/usr/bin/env bash
# The imitation ceiling (issue 61): the starting policy's architecture and build, imitating the one-step rule instead
# of the teacher (`starting_policy build --imitated one_step`), evaluated as the starting policy is, sampled and
# greedy, on the main job's 128 held-out SCMs and on the CBO file's 128 held-out episodes, beside the one-step rule
# and the shipped starting policy on the same episodes; then the paired comparisons. One thread each.
#   benchmarks/imitation_ceiling.sh [OUT_DIR]          # the builds' times: docs/results/causal.md §3.8
#   BUILD_FLAGS="--other_option_share 0" benchmarks/imitation_ceiling.sh OUT   # the build's flags (starting_policy build)
#   SHARED=DIR BUILD_FLAGS="--steps 3000" benchmarks/imitation_ceiling.sh OUT   # a cell of the sweep (issue 68)
# SHARED (default OUT): where the evaluations that do not depend on the build go (the CBO rows, the shipped starting
# policy's and the rule's episodes), made once for the cells of a sweep that name the same one, under a lock (cells
# may run side by side).
set -euo pipefail
out=${1:-runs/imitation_ceiling}
shared=${SHARED:-$out}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} MKL_NUM_THREADS=${MKL_NUM_THREADS:-1}
R=recipes/causal_cpu.yaml
M=$out/rule_policy
mkdir -p "$out" "$shared"
[ -d "$M" ] || [ -d "$M-rejected" ] || python -m training.tasks.causal.starting_policy build --imitated one_step ${BUILD_FLAGS:-} --out "$M" || true
[ -d "$M" ] || M=$M-rejected  # the acceptance bar is the teacher's; the ceiling is measured whatever it reaches
locked() { flock "$shared/.lock" "$@"; }
rows() { [ -f "$shared/cbo_rows/heldout.jsonl" ] || python -m training.tasks.causal.scm_rows --scm examples/scms/cbo_toy.yaml --out "$shared/cbo_rows" --train_rows 1 --heldout_rows 128; }
ev() { local out=$1; shift; [ -f "$out/eval.jsonl" ] || python -m training.evaluate --recipe $R "$@" --out "$out"; }
export -f rows ev; export shared R
locked bash -c rows
C=(--split "$shared/cbo_rows/heldout.jsonl" --surrogate additive)
for where in main cbo; do
  extra=(); [ $where = cbo ] && extra=("${C[@]}")
  o=$out/$where s=$shared/$where
  ev $o/ceiling --model "$M" "${extra[@]}"
  ev $o/ceiling_greedy --model "$M" "${extra[@]}" --greedy
  locked bash -c 'ev "$@"' _ $s/start "${extra[@]}"
  locked bash -c 'ev "$@"' _ $s/start_greedy "${extra[@]}" --greedy
  locked bash -c 'ev "$@"' _ $s/one_step --baseline belief_line "${extra[@]}"
  # greedy episodes pair only with greedy ones: the sampled policies against the rule, then the two greedy ones
  python -m training.compare ceiling=$o/ceiling start=$s/start one_step=$s/one_step --baseline one_step \
    --out $o/compare
  python -m training.compare ceiling_greedy=$o/ceiling_greedy start_greedy=$s/start_greedy \
    --baseline start_greedy --out $o/compare_greedy
done
