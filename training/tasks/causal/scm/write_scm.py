"""A seeded family SCM written as a user SCM file (the YAML `training.tasks.causal.scm.user_scm` reads):

    python -m training.tasks.causal.scm.write_scm --family er --n_vars 20 --seed 0 --mechanism linear \\
        --out examples/scms/er20_linear.yaml

Each mechanism is written as its expression (a linear one as `w1 * X1 + w2 * X2`, weights to full precision), so the
file rebuilds the same mechanisms, noise scales, ranges, target and goal as `families.random_scm`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from training.tasks.causal.scm.families import FAMILIES, MECHANISMS, random_scm
from training.tasks.causal.scm.scm import SCM, LinearMechanism


def mechanism_text(mechanism) -> str:
    if isinstance(mechanism, LinearMechanism):
        terms = [f"{w!r} * {p}" for p, w in zip(mechanism.parents, mechanism.weights)]
        if mechanism.bias or not terms:
            terms.insert(0, repr(float(mechanism.bias)))
        return " + ".join(terms)
    return mechanism.source


def scm_spec(scm: SCM, name: str, source: str) -> dict:
    """The user-file mapping of `scm` (`user_scm.scm_from_spec` builds it back)."""
    variables = {}
    for v in scm.variables:
        entry = {"mechanism": mechanism_text(scm.mechanisms[v]), "noise_std": float(scm.noise_std[scm.index[v]])}
        if v != scm.target:
            entry["range"] = [float(x) for x in scm.ranges[v]]
        variables[v] = entry
    edges = [[p, v] for v in scm.variables for p in scm.mechanisms[v].parents]
    return {"name": name, "source": source, "target": scm.target, "goal": scm.goal, "variables": variables,
            "edges": edges}


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", choices=FAMILIES, default="er")
    parser.add_argument("--n_vars", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mechanism", choices=MECHANISMS, default="linear")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    scm = random_scm(args.family, args.n_vars, args.seed, args.mechanism)
    command = (f"python -m training.tasks.causal.scm.write_scm --family {args.family} --n_vars {args.n_vars} "
               f"--seed {args.seed} --mechanism {args.mechanism} --out {args.out}")
    spec = scm_spec(scm, Path(args.out).stem, f"written by `{command}`")
    out = Path(args.out)
    out.write_text(yaml.safe_dump(spec, sort_keys=False, width=120))
    print(f"{scm.d} variables, target {scm.target} (parents {sorted(scm.parents())}) -> {out}")
    return out


if __name__ == "__main__":
    main()
