"""The imitation-ceiling sweep's table (issue 68): one row per cell, each cell the output directory of
`benchmarks/imitation_ceiling.sh` (its build's flags in BUILD_FLAGS; SHARED names the directory of the evaluations
the cells share: the CBO rows, the shipped starting policy's and the one-step rule's episodes).

    SHARED=S BUILD_FLAGS="--steps 3000" benchmarks/imitation_ceiling.sh S/../steps3000      # a cell
    python -m benchmarks.imitation_sweep steps3000=CELL_DIR h256=CELL_DIR ... [--out table.md]

Per cell: the base's shape and size, the build's steps and any other flag it changed, its time and final loss, the
build's acceptance (greedy agreement with the rule on 32 held-out SCMs); then per held-out set (the main job's 128
SCMs, CBO's 128 episodes): the ceiling's sampled and greedy mean reward, its sampled calls' agreement with the rule,
and the paired difference from the rule (sampled; `OUT/<where>/compare`, the mean over rows with its paired t
interval), and the share of its sampled episodes that made fewer calls than their budget (cut by the completion's
or the context's length, where a turn writes more than its call). The cell reaches the rule where the interval's
upper end is at or above 0.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from training.tasks.causal.starting_policy import BUILD_RECORD, BuildSettings, call_shares

WHERE = ("main", "cbo")
SHAPE = ("hidden_size", "num_hidden_layers", "num_attention_heads")
LISTED = (*SHAPE, "steps", "imitated", "acceptance_rows", "acceptance_bar", "device")


def build_record(cell: Path) -> tuple[dict, Path]:
    for name in ("rule_policy", "rule_policy-rejected"):
        if (cell / name / BUILD_RECORD).is_file():
            return json.loads((cell / name / BUILD_RECORD).read_text()), cell / name
    raise SystemExit(f"{cell}: no rule_policy/{BUILD_RECORD} (or -rejected): the cell's build has not finished")


def parameters(policy: Path) -> int:
    from safetensors import safe_open

    with safe_open(policy / "model.safetensors", "pt") as weights:
        return sum(math.prod(weights.get_slice(k).get_shape()) for k in weights.keys())


def episode_records(eval_dir: Path) -> list[dict]:
    return [json.loads(line)["extra"] for line in (eval_dir / "eval.jsonl").read_text().splitlines() if line]


def short_of_budget(records: list[dict]) -> float:
    return sum(r["calls"] < r["budget"] for r in records) / len(records)


def versus_rule(cell: Path, where: str) -> dict:
    comparison = json.loads((cell / where / "compare" / "comparison.json").read_text())
    means = {m["name"]: m["mean"] for m in comparison["models"]}
    pair = next(p for p in comparison["pairwise"] if p["a"] == "ceiling" and p["b"] == "one_step")
    greedy = json.loads((cell / where / "compare_greedy" / "comparison.json").read_text())
    records = episode_records(cell / where / "ceiling")
    return {"sampled": means["ceiling"], "diff": pair["mean_diff"],
            "ci": pair["mean_diff_ci95"], "greedy": next(m["mean"] for m in greedy["models"]
                                                           if m["name"] == "ceiling_greedy"),
            "agreement": call_shares(records)["follows_one_step"], "short": short_of_budget(records)}


def cell_row(name: str, cell: Path) -> str:
    record, policy = build_record(cell)
    settings = record["settings"]
    defaults = BuildSettings().__dict__
    width, depth, heads = (settings.get(k, defaults[k]) for k in SHAPE)  # a record before the flags: the default
    shape = f"{width}x{depth}, {heads} heads"
    changed = [f"{k} {v}" for k, v in settings.items() if k not in LISTED and defaults.get(k) != v]
    cells = [name, shape, f"{parameters(policy) / 1e6:.2f}M", str(settings["steps"]), ", ".join(changed) or "-",
             f"{record['build_seconds'] / 60:.0f}", f"{record['training']['final_loss']:.3f}",
             f"{record['acceptance']['greedy']['follows_one_step']:.3f}"]
    for where in WHERE:
        v = versus_rule(cell, where)
        lo, hi = v["ci"]
        cells += [f"{v['sampled']:.3f}", f"{v['greedy']:.3f}", f"{v['agreement']:.2f}",
                  f"{v['diff']:+.3f} [{lo:+.3f}, {hi:+.3f}]", f"{v['short']:.2f}"]
    return "| " + " | ".join(cells) + " |"


HEADER = ["cell", "shape (width x layers)", "parameters", "steps", "other flags", "build min", "final loss",
          "acceptance agreement", *(f"{w} {c}" for w in WHERE for c in
                                    ("sampled", "greedy", "agreement (sampled)", "minus the rule [95%]",
                                     "short of budget"))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cells", nargs="+", help="NAME=DIR: a cell's benchmarks/imitation_ceiling.sh output")
    parser.add_argument("--out", help="also write the table here")
    args = parser.parse_args(argv)
    rows = []
    for spec in args.cells:
        name, _, path = spec.rpartition("=")
        rows.append(cell_row(name or Path(path).name, Path(path)))
    table = "\n".join(["| " + " | ".join(HEADER) + " |", "|" + " --- |" * len(HEADER), *rows])
    print(table)
    if args.out:
        Path(args.out).write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
