#!/usr/bin/env bash
# The README's main command as a new user runs it: a fresh clone of this checkout's HEAD, an empty HOME (no model,
# warm-start or pip cache of ours), the launcher's default threads. The command is read from the README itself (the
# first bash block after "The main job"), so this measures what the README says. Prints the wall time of the whole
# command, the run's own end-of-run comparison and its median GRPO step; the clone, the run and its log stay under
# OUT_DIR.
#   benchmarks/readme_main_run.sh [OUT_DIR]        # default /tmp/readme_main_run/<time>
set -euo pipefail
repo=$(git -C "$(dirname "${BASH_SOURCE[0]}")/.." rev-parse --show-toplevel)
out=${1:-/tmp/readme_main_run/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out/home"
git clone -q "$repo" "$out/clone"
cd "$out/clone"
command=$(awk '/^The main job/ {found = 1} found && /^```bash/ {getline; print; exit}' README.md)
[ -n "$command" ] || { echo "error: no bash block after 'The main job' in README.md" >&2; exit 2; }
echo "commit $(git rev-parse HEAD); command: $command" | tee "$out/command.txt"
start=$(date +%s)
HOME="$out/home" bash -c "$command" > "$out/run.log" 2>&1 || { echo "the command failed; see $out/run.log" >&2; exit 1; }
end=$(date +%s)
echo "wall time of the whole command: $((end - start)) s" | tee -a "$out/command.txt"
grep -A 5 "Held-out change from step 0" "$out/run.log" | tee -a "$out/command.txt"
# the GRPO step's median and its generation phase (tool calls included), from the run's own metrics.jsonl
metrics=$(find "$out/clone/runs" -name metrics.jsonl | head -1)
python3 - "$metrics" <<'PY' | tee -a "$out/command.txt"
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
steps = [r for r in rows if "step_time" in r]
print(f"GRPO steps logged: {len(steps)}; median step {statistics.median(r['step_time'] for r in steps):.2f} s, "
      f"median generation phase {statistics.median(r['timing/generate_s'] for r in steps):.2f} s")
PY
