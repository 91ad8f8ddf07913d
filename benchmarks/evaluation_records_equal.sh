#!/usr/bin/env bash
# Whether this checkout's evaluation entry writes the same per-episode records, line for line, as an earlier commit's
# evaluation commands: a trained causal run, every causal baseline, a user's SCM file (the CBO example, additive
# surrogate), the tool agent and the larger-number task. Both sides run from their own clone (the earlier commit's
# command as it was then: `training.tasks.causal.evaluate_policy` for the SCM file), with this checkout's Python
# environment, one thread, the same tiny models. Prints one line per case: "same" or the first differing field.
#   benchmarks/evaluation_records_equal.sh OLD_COMMIT [OUT_DIR]     # about 10 minutes on 2 cores
set -euo pipefail
repo=$(git -C "$(dirname "${BASH_SOURCE[0]}")/.." rev-parse --show-toplevel)
old=${1:?usage: $0 OLD_COMMIT [OUT_DIR]}
out=${2:-/tmp/evaluation_records_equal/$(date +%Y%m%d-%H%M%S)}
python=${PYTHON:-$repo/.venv/bin/python}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
mkdir -p "$out"
git clone -q "$repo" "$out/old" && git -C "$out/old" checkout -q "$old"
git clone -q "$repo" "$out/new"
[ -z "$(git -C "$repo" status --porcelain --untracked-files=no)" ] || echo "note: $repo has uncommitted changes; 'new' is its HEAD $(git -C "$repo" rev-parse --short HEAD)"
cbo=$repo/examples/scms/cbo_toy.yaml
causal=(--recipe recipes/causal_cpu.yaml --max-rows 4 --samples-per-prompt 2)

run() {  # run SIDE ARGS...: python -m ARGS in that side's clone
  local side=$1; shift
  (cd "$out/$side" && "$python" -m "$@" > "$out/$side.log" 2>&1) || { echo "failed: $side $*; see $out/$side.log" >&2; exit 1; }
}

# a trained causal run (one GRPO step), trained by the old commit: both sides re-evaluate the same run
run old training.train --config recipes/causal_cpu.yaml --output_dir "$out/run" --max_steps 1 \
  --per_device_train_batch_size 4 --num_generations 4 --heldout_max_samples 4 --heldout_samples_per_prompt 2
for side in old new; do
  run $side training.evaluate "$out/run" --out "$out/$side-trained"
  run $side training.evaluate --recipe recipes/tool_agent_cpu.yaml --set warm_start_steps=0 --max-rows 3 \
    --samples-per-prompt 2 --set max_completion_length=24 --out "$out/$side-tool_agent"
  run $side training.evaluate --recipe recipes/tiny_cpu.yaml --max-rows 8 --out "$out/$side-larger_number"
  for b in $("$python" -c "import sys; sys.path.insert(0, '$out/new'); from training.tasks.causal.policies.policy_catalogue import POLICIES; print(*POLICIES)"); do
    run $side training.evaluate "${causal[@]}" --baseline "$b" --out "$out/$side-baseline-$b"
  done
done
model=$(cd "$out/new" && "$python" -c "import json; print(json.load(open('$out/run/run_summary.json'))['resolved_model_path'])")
if [ -f "$out/old/training/tasks/causal/evaluate_policy.py" ]; then  # a commit from before training.evaluate took --scm
  run old training.tasks.causal.evaluate_policy --model "$model" --scm "$cbo" --surrogate additive --episodes 2 --out "$out/old-cbo"
else
  run old training.evaluate --recipe recipes/causal_cpu.yaml --model "$model" --scm "$cbo" --surrogate additive \
    --samples-per-prompt 2 --out "$out/old-cbo"
fi
run new training.evaluate --recipe recipes/causal_cpu.yaml --model "$model" --scm "$cbo" --surrogate additive \
  --samples-per-prompt 2 --out "$out/new-cbo"

"$python" - "$out" <<'EOF'
import json, sys
from pathlib import Path

out = Path(sys.argv[1])
for new in sorted(out.glob("new-*")):
    case = new.name[len("new-"):]
    a = (out / f"old-{case}" / "eval.jsonl").read_text().splitlines()
    b = (new / "eval.jsonl").read_text().splitlines()
    if a == b:
        print(f"{case}: same ({len(b)} records)")
        continue
    for i, (x, y) in enumerate(zip(a, b)):
        x, y = json.loads(x), json.loads(y)
        fields = sorted(k for k in set(x) | set(y) if x.get(k) != y.get(k))
        extra = sorted(k for k in set(x.get("extra", {})) | set(y.get("extra", {}))
                       if x.get("extra", {}).get(k) != y.get("extra", {}).get(k))
        if fields:
            print(f"{case}: {len(a)} vs {len(b)} records; record {i} differs in {fields} (extra: {extra}): "
                  + "; ".join(f"{k} {x['extra'].get(k)!r} -> {y['extra'].get(k)!r}" for k in extra[:3]))
            break
    else:
        print(f"{case}: {len(a)} vs {len(b)} records, the common ones equal")
EOF
