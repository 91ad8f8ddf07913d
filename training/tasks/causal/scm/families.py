"""Seeded random SCMs: four graph families x two mechanism families, 3 to 100 variables (the splits use 4 to 6).

Graph families (built on positions 0..d-1, then labelled by a seeded random permutation of the names X0..X{d-1},
so a variable's name never tells its place in the graph):

* ``chain``: 0 -> 1 -> ... -> d-1; the target is position d-2, so it has ancestors upstream (something to optimise
  through) AND a child (position d-1): a regression of the target on the rest would take that child for a parent.
* ``fork``: 0 -> every other position; the target is a leaf (position d-1): its only parent is the root, and its
  siblings correlate with it through the root without being parents.
* ``star`` (collider): every other position -> the target (position d-1).
* ``er``: Erdős–Rényi sparse DAG: an undirected G(d, p) graph from networkx with p = min(1, 2 / (d - 1))
  (expected d edges, average degree 2), each edge oriented from the lower to the higher position; the target is a
  seeded choice among the nodes that have at least one parent (redrawn until one exists).

Mechanism families, each X_v = f_v(Pa) + sigma_v * eps with sigma_v ~ U[0.5, 1.0]:

* ``linear``: f_v = sum_j w_vj X_j with |w_vj| ~ U[0.5, 1.5] and a random sign (no weight near 0, so every edge
  is real).
* ``nonlinear``: additive nonlinear terms f_v = sum_j w_vj * phi_vj(X_j), with w_vj as above and phi_vj drawn from
  tanh(x), sin(x) and softquad(x) = x^2 / (1 + |x|) (even, grows like |x|: non-monotone effects with interior
  optima, without the blow-up of chained squares). Written as restricted expressions, so they round-trip as text.

Every variable's intervention range is [-max_intervention_value, +max_intervention_value] (default 3.0); the goal is
"max". The generator is `np.random.default_rng([seed, family, d, mechanism])`: the same arguments give the same SCM.
"""

from __future__ import annotations

import networkx as nx
import numpy as np

from training.tasks.causal.scm.scm import SCM, ExpressionMechanism, LinearMechanism, SCMError

FAMILIES = ("chain", "fork", "star", "er")
MECHANISMS = ("linear", "nonlinear")
MIN_VARS, MAX_VARS = 3, 100
WEIGHT_RANGE = (0.5, 1.5)
NOISE_STD_RANGE = (0.5, 1.0)
NONLINEAR_TERMS = {"tanh": "tanh({x})", "sin": "sin({x})", "softquad": "square({x}) / (1 + abs({x}))"}
DEFAULT_MAX_INTERVENTION = 3.0


def graph_positions(family: str, d: int, rng: np.random.Generator) -> tuple[list[tuple[int, int]], int]:
    """(edges between positions, target position) for a graph family on d positions."""
    if family == "chain":
        return [(p, p + 1) for p in range(d - 1)], d - 2
    if family == "fork":
        return [(0, p) for p in range(1, d)], d - 1
    if family == "star":
        return [(p, d - 1) for p in range(d - 1)], d - 1
    if family == "er":
        p_edge = min(1.0, 2.0 / (d - 1))
        while True:
            g = nx.gnp_random_graph(d, p_edge, seed=int(rng.integers(2**31)))
            edges = sorted((min(a, b), max(a, b)) for a, b in g.edges)
            children = sorted({c for _, c in edges})
            if children:
                return edges, int(rng.choice(children))
    raise SCMError(f"family: must be one of {FAMILIES}, got {family!r}")


def random_scm(family: str, n_vars: int, seed: int, mechanism: str = "linear",
               max_intervention_value: float = DEFAULT_MAX_INTERVENTION) -> SCM:
    """A seeded SCM of `family` with `n_vars` variables and `mechanism` ("linear" or "nonlinear")."""
    if family not in FAMILIES:
        raise SCMError(f"family: must be one of {FAMILIES}, got {family!r}")
    if mechanism not in MECHANISMS:
        raise SCMError(f"mechanism: must be one of {MECHANISMS}, got {mechanism!r}")
    if not isinstance(n_vars, int) or not MIN_VARS <= n_vars <= MAX_VARS:
        raise SCMError(f"n_vars: must be an int in [{MIN_VARS}, {MAX_VARS}], got {n_vars!r}")
    if not max_intervention_value > 0:
        raise SCMError(f"max_intervention_value: must be > 0, got {max_intervention_value!r}")
    rng = np.random.default_rng([seed, FAMILIES.index(family), n_vars, MECHANISMS.index(mechanism)])
    edges, target_pos = graph_positions(family, n_vars, rng)
    names = [f"X{i}" for i in rng.permutation(n_vars)]  # names[position]
    parents = {p: [] for p in range(n_vars)}
    for a, b in edges:
        parents[b].append(a)
    mechanisms, noise = {}, {}
    for pos in range(n_vars):
        pa = [names[a] for a in parents[pos]]
        w = rng.uniform(*WEIGHT_RANGE, size=len(pa)) * rng.choice([-1.0, 1.0], size=len(pa))
        if mechanism == "linear" or not pa:
            mechanisms[names[pos]] = LinearMechanism(tuple(pa), tuple(float(x) for x in w))
        else:
            kinds = rng.choice(list(NONLINEAR_TERMS), size=len(pa))
            terms = [f"{float(wi)!r} * {NONLINEAR_TERMS[k].format(x=p)}" for wi, k, p in zip(w, kinds, pa)]
            mechanisms[names[pos]] = ExpressionMechanism(tuple(pa), " + ".join(terms))
        noise[names[pos]] = float(rng.uniform(*NOISE_STD_RANGE))
    variables = [f"X{i}" for i in range(n_vars)]
    target = names[target_pos]
    m = float(max_intervention_value)
    return SCM(variables, mechanisms, noise, {v: (-m, m) for v in variables if v != target}, target, "max",
               meta={"family": family, "mechanism": mechanism, "n_vars": n_vars, "seed": seed})
