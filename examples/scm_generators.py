"""A generator of SCMs other than the bundled one (`training/tasks/causal/scm/families.py`), as a user would write it:
`function(seed) -> SCM`, for `python -m training.tasks.causal.scm_rows --generator examples.scm_generators:random_dag`.

`random_dag(seed)`: 4 to 9 variables named `<prefix>_<k>` (one prefix per SCM: node, feat, sig, m), a random DAG
(each pair of variables in a seeded order joined with probability 0.4), Gaussian weights (N(0, 1), not the bundled
|w| in [0.5, 1.5]), mechanisms that are linear or sums of 2 sigmoid(x) - 1, x |x| / 3 and cos(x) terms (not the
bundled tanh, sin and x^2 / (1 + |x|)), noise sd in [0.3, 1.2], one intervention range per SCM from [0, 5], [-2, 2]
and [-4, 1], the goal "max" or "min". The target is a variable with at least one parent, the last in the order.
"""

from __future__ import annotations

import numpy as np

from training.tasks.causal.scm.scm import SCM, ExpressionMechanism, LinearMechanism

PREFIXES = ("node", "feat", "sig", "m")
TERMS = ("(2 * sigmoid({x}) - 1)", "{x} * abs({x}) / 3", "cos({x})")
RANGES = ((0.0, 5.0), (-2.0, 2.0), (-4.0, 1.0))


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
