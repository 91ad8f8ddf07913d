"""A generator of SCMs other than the bundled one (`training/tasks/causal/scm/families.py`), as a user would write it:
`function(seed) -> SCM`, for `python -m training.tasks.causal.scm_rows --generator examples.scm_generators:random_dag`.

`random_dag(seed)`: 4 to 9 variables named `<prefix>_<k>` (one prefix per SCM: node, feat, sig, m), a random DAG
(each pair of variables in a seeded order joined with probability 0.4), Gaussian weights (N(0, 1), not the bundled
|w| in [0.5, 1.5]), mechanisms that are linear or sums of 2 sigmoid(x) - 1, x |x| / 3 and cos(x) terms (not the
bundled tanh, sin and x^2 / (1 + |x|)), noise sd in [0.3, 1.2], one intervention range per SCM from [0, 5], [-2, 2]
and [-4, 1], the goal "max" or "min". The target is a variable with at least one parent, the last in the order.

`sempler_style(seed, n_vars=6)`: the nonlinear SCMs of issue 62's measurement, in the manner of sempler's
`generators.dag_avg_deg` (a seeded causal order, each ordered pair joined with probability 2 / (d - 1): average
degree 2), each node x_v = sum_{j in Pa(v)} w_vj f_vj(x_j) + sigma_v eps with |w| ~ U[0.5, 1] and a random sign,
f drawn from tanh(x), sin(x), x^2 / (1 + |x|) and exp(-|x|), sigma_v ~ U[0.5, 1]; variables V0..V{d-1} listed in
the causal order's seeded permutation; the target the last node in the order that has a parent; ranges [-2, 2]; the
goal "max". What a user coming from sempler or causal-learn brings: `benchmarks/causal_option_cost.py` times the
additive surrogate on them (3 to 10 variables), and examples/scms/sempler6_nonlinear.yaml is one written out.
"""

from __future__ import annotations

import numpy as np

from training.tasks.causal.scm.scm import SCM, ExpressionMechanism, LinearMechanism

PREFIXES = ("node", "feat", "sig", "m")
TERMS = ("(2 * sigmoid({x}) - 1)", "{x} * abs({x}) / 3", "cos({x})")
RANGES = ((0.0, 5.0), (-2.0, 2.0), (-4.0, 1.0))
SEMPLER_TERMS = ("tanh({x})", "sin({x})", "square({x}) / (1 + abs({x}))", "exp(-abs({x}))")


def random_dag(seed: int) -> SCM:
    rng = np.random.default_rng([seed, 0xD46])
    d = int(rng.integers(4, 10))
    prefix = PREFIXES[int(rng.integers(len(PREFIXES)))]
    order = [f"{prefix}_{k}" for k in rng.permutation(d)]
    parents = {v: [u for u in order[:i] if rng.random() < 0.4] for i, v in enumerate(order)}
    if not parents[order[-1]]:
        parents[order[-1]] = [order[int(rng.integers(d - 1))]]
    nonlinear = rng.random() < 0.5
    mechanisms = {}
    for v, pa in parents.items():
        w = rng.standard_normal(len(pa))
        if not nonlinear or not pa:
            mechanisms[v] = LinearMechanism(tuple(pa), tuple(float(x) for x in w))
        else:
            terms = [f"{float(wi)!r} * {TERMS[int(rng.integers(len(TERMS)))].format(x=p)}" for wi, p in zip(w, pa)]
            mechanisms[v] = ExpressionMechanism(tuple(pa), " + ".join(terms))
    target = order[-1]
    span = RANGES[int(rng.integers(len(RANGES)))]
    names = sorted(order)  # listed by name, not in the causal order
    return SCM(names, mechanisms, {v: float(rng.uniform(0.3, 1.2)) for v in order},
               {v: span for v in order if v != target}, target, "min" if rng.random() < 0.3 else "max",
               meta={"family": "random_dag", "mechanism": "nonlinear" if nonlinear else "linear", "seed": seed})


def sempler_style(seed: int, n_vars: int = 6) -> SCM:
    """A seeded nonlinear SCM of `n_vars` variables with sempler-like graphs and terms (module docstring)."""
    if not isinstance(n_vars, int) or n_vars < 3:
        raise ValueError(f"n_vars: must be an int >= 3, got {n_vars!r}")
    rng = np.random.default_rng([seed, n_vars, 0x5E5])
    names = [f"V{k}" for k in range(n_vars)]
    order = [names[k] for k in rng.permutation(n_vars)]
    p_edge = min(1.0, 2.0 / (n_vars - 1))
    parents = {v: [u for u in order[:i] if rng.random() < p_edge] for i, v in enumerate(order)}
    if not any(parents.values()):
        parents[order[-1]] = [order[int(rng.integers(n_vars - 1))]]
    mechanisms = {}
    for v in order:
        pa = parents[v]
        if not pa:
            mechanisms[v] = LinearMechanism((), ())
            continue
        w = rng.uniform(0.5, 1.0, len(pa)) * rng.choice([-1.0, 1.0], len(pa))
        terms = [f"{float(wi)!r} * {SEMPLER_TERMS[int(rng.integers(len(SEMPLER_TERMS)))].format(x=p)}"
                 for wi, p in zip(w, pa)]
        mechanisms[v] = ExpressionMechanism(tuple(pa), " + ".join(terms))
    target = [v for v in order if parents[v]][-1]
    noise = {v: float(rng.uniform(0.5, 1.0)) for v in order}
    return SCM(names, mechanisms, noise, {v: (-2.0, 2.0) for v in names if v != target}, target, "max",
               meta={"family": "sempler_style", "mechanism": "nonlinear", "seed": seed})


def main(argv: list[str] | None = None) -> None:
    """Write `sempler_style(seed, n_vars)` as a user SCM file:
    python -m examples.scm_generators --n_vars 6 --seed 0 --out examples/scms/sempler6_nonlinear.yaml"""
    import argparse
    from pathlib import Path

    import yaml

    from training.tasks.causal.scm.write_scm import scm_spec

    parser = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    parser.add_argument("--n_vars", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    scm = sempler_style(args.seed, args.n_vars)
    command = f"python -m examples.scm_generators --n_vars {args.n_vars} --seed {args.seed} --out {args.out}"
    spec = scm_spec(scm, Path(args.out).stem, f"sempler-style random DAG, nonlinear terms; written by `{command}`")
    Path(args.out).write_text(yaml.safe_dump(spec, sort_keys=False, width=120))
    print(f"{scm.d} variables, target {scm.target} (parents {sorted(scm.parents())}) -> {args.out}")


if __name__ == "__main__":
    main()
