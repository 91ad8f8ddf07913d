#!/usr/bin/env bash
# A trained causal policy on users' SCM files beside the scripted baselines, on the same paired episodes of each file
# (docs/causal.md, "SCMs at the sizes of real benchmarks"; results: docs/results/causal.md §4.1): the share of its calls that are valid, the weighted reward,
# and paired tests over the episodes. Each episode is a held-out row of the file (`scm_rows --heldout_rows N`: its own seed,
# so its own initial data and noise), the unit the tests pair. Each file is played with the surrogate that fits it
# (surrogates/catalogue.fitting_surrogate: exact for the linear files, additive for the CBO graph); greedy EIG and the rollout
# reference are left out above 8 variables (tens of seconds to minutes a call there: policy_episodes.COSTLY_POLICIES).
#   benchmarks/causal_users_scms.sh RUN_DIR OUT_DIR [EPISODES] [FILE ...]   # default 20 episodes; the three examples
set -euo pipefail
run=$1
out=$2
episodes=${3:-20}
shift $(( $# < 3 ? $# : 3 ))
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(examples/scms/cbo_toy.yaml examples/scms/sachs_linear.yaml examples/scms/er12_linear.yaml)
repo=$(git -C "$(dirname "${BASH_SOURCE[0]}")/.." rev-parse --show-toplevel)
cd "$repo"
for scm in "${files[@]}"; do
  name=$(basename "$scm" .yaml)
  surrogate=$(python -c "from training.tasks.causal.episode_source import load_scm_file
from training.tasks.causal.surrogates.catalogue import fitting_surrogate
print(fitting_surrogate(load_scm_file('$scm')))")
  rows="$out/$name/rows"
  echo "== $name: $surrogate surrogate, $episodes episodes"
  python -m training.tasks.causal.scm_rows --scm "$scm" --out "$rows" --train_rows 1 --heldout_rows "$episodes" \
    --surrogate "$surrogate" > /dev/null
  python -m training.evaluate "$run" --split "$rows/heldout.jsonl" --surrogate "$surrogate" --episodes_per_row 1 \
    --out "$out/$name/trained" --overwrite > /dev/null 2>&1
  python -m training.tasks.causal.evaluate_baselines --split "$rows/heldout.jsonl" --surrogate "$surrogate" \
    --episodes_per_row 1 --out "$out/$name/baselines" | grep -v "^|" || true
  python -m training.compare trained="$out/$name/trained" \
    $(for b in "$out/$name/baselines"/*; do printf '%s=%s ' "$(basename "$b")" "$b"; done) --baseline trained \
    --out "$out/$name/comparison" > /dev/null
  cat "$out/$name/comparison/causal_tables.md"
done
