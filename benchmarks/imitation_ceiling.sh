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
python -m training.tasks.causal.scm_rows --scm examples/scms/cbo_toy.yaml --out "$out/cbo_rows" --train_rows 1 --heldout_rows 128
C=(--split "$out/cbo_rows/heldout.jsonl" --surrogate additive)
for where in main cbo; do
  extra=(); [ $where = cbo ] && extra=("${C[@]}")
  python -m training.evaluate --recipe $R --model "$M" "${extra[@]}" --out "$out/$where/ceiling"
  python -m training.evaluate --recipe $R --model "$M" "${extra[@]}" --greedy --out "$out/$where/ceiling_greedy"
  python -m training.evaluate --recipe $R "${extra[@]}" --out "$out/$where/start"
  python -m training.evaluate --recipe $R "${extra[@]}" --greedy --out "$out/$where/start_greedy"
  python -m training.evaluate --recipe $R --baseline belief_line "${extra[@]}" --out "$out/$where/one_step"
  python -m training.compare ceiling="$out/$where/ceiling" ceiling_greedy="$out/$where/ceiling_greedy" \
    start="$out/$where/start" start_greedy="$out/$where/start_greedy" one_step="$out/$where/one_step" \
    --baseline one_step --out "$out/$where/compare"
done
