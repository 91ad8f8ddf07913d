"""Structural causal models with additive Gaussian noise, hard interventions within bounds, and exact expectations.

An `SCM` has variables in a fixed order, one mechanism per variable, and per-variable Gaussian noise::

    X_v = f_v(Pa(X_v)) + sigma_v * eps_v,    eps_v ~ N(0, 1) independent.

Two kinds of mechanism: `LinearMechanism` (f_v = b_v + sum_j w_vj X_j; the linear-Gaussian family, whose
interventional means are exact) and `ExpressionMechanism` (f_v is a restricted expression, see
`training.tasks.causal.scm.expressions`; the nonlinear family and users' SCMs). A hard intervention do(X_i = v) replaces
X_i's mechanism and noise by the constant v; v must be finite and inside X_i's range ``[low, high]``, and the
target itself cannot be intervened on (that would set the objective directly).

Sampling is ancestral (topological order, by networkx). All noise of one call is drawn up front as an (n, d)
standard-normal block, so the same generator state gives the same noise whatever is intervened on (common random
numbers; the environment and the Monte-Carlo expectations rely on it).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

import networkx as nx
import numpy as np

from training.tasks.causal.scm.expressions import compile_expression, shortened
from training.tasks.causal.scm.optimum import Optimum, find_optimum

Goal = Literal["max", "min"]
GOALS = ("max", "min")
# Monte-Carlo size and seed of E[target | do] for nonlinear SCMs (common random numbers across interventions).
MC_SAMPLES = 4096
MC_SEED = 20240531
MC_VALUES_AT_ONCE = 32  # interventions propagated together by `expected_targets` (32 x 4096 rows per pass)


class SCMError(ValueError):
    """An SCM specification that cannot be built; the message names the field."""


class InterventionError(ValueError):
    """An intervention the SCM refuses; `kind` is one of `INTERVENTION_ERROR_KINDS`."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


INTERVENTION_ERROR_KINDS = ("unknown_variable", "target_variable", "bad_value_type", "non_finite", "out_of_bounds")


@dataclass(frozen=True)
class LinearMechanism:
    """f(pa) = bias + sum_j weights[j] * pa[j]."""

    parents: tuple[str, ...]
    weights: tuple[float, ...]
    bias: float = 0.0
    kind: str = field(default="linear", init=False)

    def __post_init__(self):
        if len(self.parents) != len(self.weights):
            raise SCMError(f"linear mechanism: {len(self.parents)} parents but {len(self.weights)} weights")
        if not all(math.isfinite(w) for w in (*self.weights, self.bias)):
            raise SCMError(f"linear mechanism: weights and bias must be finite, got {self.weights}, {self.bias}")

    def __call__(self, values: Mapping[str, np.ndarray]) -> np.ndarray | float:
        out = self.bias
        for p, w in zip(self.parents, self.weights, strict=True):
            out = out + w * values[p]
        return out

    def to_dict(self) -> dict:
        return {"kind": "linear", "parents": list(self.parents), "weights": list(self.weights), "bias": self.bias}


@dataclass(frozen=True)
class ExpressionMechanism:
    """f(pa) = a restricted expression of the parents (`training.tasks.causal.scm.expressions`)."""

    parents: tuple[str, ...]
    source: str
    kind: str = field(default="expression", init=False)

    @cached_property
    def _expression(self):
        expr = compile_expression(self.source, frozenset(self.parents), where=f"mechanism {shortened(self.source)}")
        unused = set(self.parents) - expr.names
        if unused:
            raise SCMError(f"mechanism {self.source!r} does not use its parent(s) {sorted(unused)}: every edge "
                           f"must appear in its child's mechanism")
        return expr

    def __post_init__(self):
        self._expression  # compile now: a bad expression fails when the SCM is built, not when it is sampled

    def __call__(self, values: Mapping[str, np.ndarray]) -> np.ndarray | float:
        return self._expression(values)

    def to_dict(self) -> dict:
        return {"kind": "expression", "parents": list(self.parents), "expression": self.source}


Mechanism = LinearMechanism | ExpressionMechanism


def mechanism_from_dict(spec: Mapping, where: str) -> Mechanism:
    kind = spec.get("kind")
    if kind == "linear":
        return LinearMechanism(tuple(spec["parents"]), tuple(float(w) for w in spec["weights"]),
                               float(spec.get("bias", 0.0)))
    if kind == "expression":
        return ExpressionMechanism(tuple(spec["parents"]), str(spec["expression"]))
    raise SCMError(f"{where}: mechanism kind must be 'linear' or 'expression', got {kind!r}")


class SCM:
    """An additive-Gaussian-noise SCM over `variables` with one `target` and a `goal` ("max" or "min")."""

    def __init__(self, variables: list[str], mechanisms: Mapping[str, Mechanism], noise_std: Mapping[str, float],
                 ranges: Mapping[str, tuple[float, float]], target: str, goal: Goal = "max",
                 meta: Mapping | None = None):
        self.variables = list(variables)
        if len(set(self.variables)) != len(self.variables) or not self.variables:
            raise SCMError(f"variables must be non-empty and distinct, got {self.variables}")
        for name, table in (("mechanisms", mechanisms), ("noise_std", noise_std), ("ranges", ranges)):
            missing, extra = set(self.variables) - set(table), set(table) - set(self.variables)
            if name == "ranges":
                missing -= {target}
            if missing or extra:
                raise SCMError(f"{name}: missing {sorted(missing)} / unknown {sorted(extra)} variables")
        if target not in self.variables:
            raise SCMError(f"target: {target!r} is not a variable ({self.variables})")
        if goal not in GOALS:
            raise SCMError(f"goal: must be one of {GOALS}, got {goal!r}")
        self.mechanisms = {v: mechanisms[v] for v in self.variables}
        for v, mech in self.mechanisms.items():
            bad = [p for p in mech.parents if p not in self.variables or p == v]
            if bad:
                raise SCMError(f"mechanisms.{v}: parents {bad} are not other variables of the SCM")
        self.noise_std = np.array([float(noise_std[v]) for v in self.variables])
        if not np.all(np.isfinite(self.noise_std)) or np.any(self.noise_std < 0):
            raise SCMError(f"noise_std: must be finite and >= 0, got {dict(zip(self.variables, self.noise_std))}")
        self.ranges = {}
        for v, r in ranges.items():
            lo, hi = (float(x) for x in r)
            if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                raise SCMError(f"ranges.{v}: must be finite [low, high] with low < high, got {list(r)}")
            self.ranges[v] = (lo, hi)
        self.target, self.goal = target, goal
        self.meta = dict(meta or {})
        graph = nx.DiGraph()
        graph.add_nodes_from(self.variables)
        graph.add_edges_from((p, v) for v, m in self.mechanisms.items() for p in m.parents)
        if not nx.is_directed_acyclic_graph(graph):
            raise SCMError(f"edges: the graph has a cycle {nx.find_cycle(graph)}")
        self.graph = graph
        self.order = list(nx.lexicographical_topological_sort(graph, key=self.variables.index))
        self.index = {v: i for i, v in enumerate(self.variables)}

    # ---- structure -------------------------------------------------------------------------------------------
    @property
    def d(self) -> int:
        return len(self.variables)

    @property
    def is_linear(self) -> bool:
        return all(isinstance(m, LinearMechanism) for m in self.mechanisms.values())

    def parents(self, variable: str | None = None) -> frozenset[str]:
        """The true parent set of `variable` (default: the target)."""
        return frozenset(self.mechanisms[variable or self.target].parents)

    def adjacency(self) -> np.ndarray:
        """A[i, j] = 1 iff X_i -> X_j (rows are causes), in variable order."""
        a = np.zeros((self.d, self.d), dtype=np.int8)
        for v, m in self.mechanisms.items():
            for p in m.parents:
                a[self.index[p], self.index[v]] = 1
        return a

    @property
    def actionable(self) -> list[str]:
        """Variables that may be intervened on: every non-target variable."""
        return [v for v in self.variables if v != self.target]

    # ---- interventions ---------------------------------------------------------------------------------------
    def check_intervention(self, variable, value) -> tuple[str, float]:
        """(variable, value as float) for a valid do(variable = value); otherwise `InterventionError`."""
        if not isinstance(variable, str) or variable not in self.index:
            raise InterventionError("unknown_variable", f"unknown variable {variable!r}; variables: "
                                    f"{', '.join(self.actionable)}")
        if variable == self.target:
            raise InterventionError("target_variable", f"{variable} is the target and cannot be set; intervene on "
                                    f"one of {', '.join(self.actionable)}")
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise InterventionError("bad_value_type", f"value must be a number, got {type(value).__name__} "
                                    f"{value!r}")
        value = float(value)
        if not math.isfinite(value):
            raise InterventionError("non_finite", f"value must be finite, got {value}")
        lo, hi = self.ranges[variable]
        if not lo <= value <= hi:
            raise InterventionError("out_of_bounds", f"{variable}={value:g} is outside its range [{lo:g}, {hi:g}]")
        return variable, value

    def _checked_do(self, do: Mapping[str, float] | None) -> dict[int, float]:
        out = {}
        for var, val in (do or {}).items():
            var, val = self.check_intervention(var, val)
            out[self.index[var]] = val
        return out

    # ---- sampling --------------------------------------------------------------------------------------------
    def sample(self, n: int, rng: np.random.Generator, do: Mapping[str, float] | None = None) -> np.ndarray:
        """n i.i.d. rows (n, d) in variable order, under the hard interventions `do` ({variable: value})."""
        if not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"n must be a non-negative int, got {n!r}")
        checked = self._checked_do(do)
        noise = rng.standard_normal((n, self.d)) * self.noise_std
        return self._propagate(noise, checked, target_noise=True)

    def _propagate(self, noise: np.ndarray, do: Mapping[int, float], target_noise: bool) -> np.ndarray:
        n = noise.shape[0]
        x = np.zeros((n, self.d))
        values: dict[str, np.ndarray] = {}
        for v in self.order:
            i = self.index[v]
            if i in do:
                x[:, i] = do[i]
            else:
                add = noise[:, i] if (target_noise or v != self.target) else 0.0
                x[:, i] = self.mechanisms[v](values) + add
            values[v] = x[:, i]
        return x

    # ---- expectations ----------------------------------------------------------------------------------------
    def linear_system(self, do: Mapping[int, float] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(W, b) with W[j, i] the weight of X_j in X_i's mechanism and b the biases, after `do` (linear only)."""
        if not self.is_linear:
            raise SCMError("linear_system: the SCM has nonlinear mechanisms")
        w, b = np.zeros((self.d, self.d)), np.zeros(self.d)
        for v, m in self.mechanisms.items():
            i = self.index[v]
            b[i] = m.bias
            for p, wt in zip(m.parents, m.weights, strict=True):
                w[self.index[p], i] = wt
        for i, val in (do or {}).items():
            w[:, i], b[i] = 0.0, val
        return w, b

    def expected_values(self, do: Mapping[str, float] | None = None) -> np.ndarray:
        """E[X | do] for every variable: exact for linear SCMs, mu = (I - W^T)^{-1} b; Monte Carlo otherwise."""
        checked = self._checked_do(do)
        if self.is_linear:
            w, b = self.linear_system(checked)
            return np.linalg.solve(np.eye(self.d) - w.T, b)
        return self._mc_samples(checked).mean(axis=0)

    def expected_target(self, do: Mapping[str, float] | None = None) -> float:
        """E[target | do(X = v)].

        Linear family: exact (the target's row of (I - W^T)^{-1} b). Otherwise Monte Carlo over `MC_SAMPLES`
        noise draws with a fixed seed (common random numbers, so comparisons between interventions are not blurred
        by independent noise), evaluating the target's mechanism WITHOUT its own noise (its mean is 0): exact when
        the target's parents are all fixed by `do`, else standard error ~ sd(f_target(Pa)) / sqrt(MC_SAMPLES)
        (`expected_target_stderr`)."""
        return float(self.expected_target_and_stderr(do)[0])

    def expected_target_and_stderr(self, do: Mapping[str, float] | None = None) -> tuple[float, float]:
        checked = self._checked_do(do)
        if self.is_linear:
            w, b = self.linear_system(checked)
            return float(np.linalg.solve(np.eye(self.d) - w.T, b)[self.index[self.target]]), 0.0
        t = self._mc_samples(checked)[:, self.index[self.target]]
        return float(t.mean()), float(t.std(ddof=1) / math.sqrt(len(t)))

    def expected_targets(self, variable: str, values) -> np.ndarray:
        """`expected_target({variable: v})` for every v of `values`, equal to it value for value (the same noise
        draws, the same operations, the same sums), computed as the grid searches of the optimum need it: a
        variable that is not an ancestor of the target leaves E[target] where it is, and otherwise only the variables
        on a path from it to the target are propagated again, many values at once; the others keep their values of
        the propagation without intervention."""
        values = np.asarray(values, dtype=float)
        for v in values:
            self.check_intervention(variable, float(v))
        if self.is_linear:
            return np.array([self.expected_target({variable: float(v)}) for v in values])
        on_path = nx.descendants(self.graph, variable) & (nx.ancestors(self.graph, self.target) | {self.target})
        if not on_path:
            return np.full(len(values), self.expected_target())
        base, noise, n = self._mc_samples({}), self._mc_noise, len(self._mc_noise)
        out = []
        for chunk in np.array_split(values, max(1, -(-len(values) // MC_VALUES_AT_ONCE))):
            known = {v: base[:, self.index[v]] for v in self.variables if v not in on_path}
            known[variable] = np.repeat(chunk, n)
            tiled: dict[str, np.ndarray] = {}
            for v in (v for v in self.order if v in on_path):
                parents = {p: known[p] if p == variable or p in on_path else
                           tiled.setdefault(p, np.tile(known[p], len(chunk))) for p in self.mechanisms[v].parents}
                add = np.tile(noise[:, self.index[v]], len(chunk)) if v != self.target else 0.0
                known[v] = self.mechanisms[v](parents) + add
            target = known[self.target]
            out.append(np.broadcast_to(target, (len(chunk) * n,)).reshape(len(chunk), n).mean(axis=1))
        return np.concatenate(out) if out else np.zeros(0)

    def _mc_samples(self, do: Mapping[int, float]) -> np.ndarray:
        noise = self._mc_noise
        return self._propagate(noise, do, target_noise=False)

    @cached_property
    def _mc_noise(self) -> np.ndarray:
        return np.random.default_rng(MC_SEED).standard_normal((MC_SAMPLES, self.d)) * self.noise_std

    def optimum(self) -> Optimum:
        """The best E[target | do(X_i = v)] over non-target X_i and v in X_i's range (see `training.tasks.causal.scm.optimum`)."""
        if "_optimum" not in self.__dict__:
            self.__dict__["_optimum"] = find_optimum(self)
        return self.__dict__["_optimum"]

    def better(self, a: float, b: float) -> bool:
        """Whether expected target value `a` is strictly better than `b` under the goal."""
        return a > b if self.goal == "max" else a < b

    def renamed(self, mapping: Mapping[str, str], order: list[str] | None = None) -> SCM:
        """The same SCM with variables renamed by `mapping` (every variable; expressions are rewritten name by
        name), listed in `order` (default: the old order, renamed)."""
        import re

        if set(mapping) != set(self.variables) or len(set(mapping.values())) != len(mapping):
            raise SCMError(f"renamed: mapping must rename every variable to a distinct name, got {dict(mapping)}")
        names = re.compile(r"\b(" + "|".join(sorted(map(re.escape, mapping), key=len, reverse=True)) + r")\b")
        mechanisms = {}
        for v, m in self.mechanisms.items():
            parents = tuple(mapping[p] for p in m.parents)
            if isinstance(m, LinearMechanism):
                mechanisms[mapping[v]] = LinearMechanism(parents, m.weights, m.bias)
            else:
                mechanisms[mapping[v]] = ExpressionMechanism(parents, names.sub(lambda x: mapping[x.group(1)],
                                                                                m.source))
        variables = order or [mapping[v] for v in self.variables]
        return SCM(variables, mechanisms, {mapping[v]: float(s) for v, s in zip(self.variables, self.noise_std)},
                   {mapping[v]: r for v, r in self.ranges.items()}, mapping[self.target], self.goal, self.meta)

    # ---- serialisation ---------------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "variables": list(self.variables),
            "target": self.target,
            "goal": self.goal,
            "mechanisms": {v: m.to_dict() for v, m in self.mechanisms.items()},
            "noise_std": {v: float(s) for v, s in zip(self.variables, self.noise_std)},
            "ranges": {v: list(r) for v, r in self.ranges.items()},
            "meta": dict(self.meta),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, spec: Mapping) -> SCM:
        if not isinstance(spec, Mapping):
            raise SCMError(f"an SCM spec must be a mapping, got {type(spec).__name__}")
        for key in ("variables", "target", "mechanisms", "noise_std", "ranges"):
            if key not in spec:
                raise SCMError(f"SCM spec has no {key!r} field (fields: {sorted(spec)})")
        if not isinstance(spec["variables"], list):
            raise SCMError(f"variables: must be a list of names, got {spec['variables']!r}")
        for key in ("mechanisms", "noise_std", "ranges"):
            if not isinstance(spec[key], Mapping):
                raise SCMError(f"{key}: must be a mapping by variable name, got {type(spec[key]).__name__}")
        return cls(
            variables=list(spec["variables"]),
            mechanisms={v: mechanism_from_dict(m, f"mechanisms.{v}") for v, m in spec["mechanisms"].items()},
            noise_std=spec["noise_std"], ranges={v: tuple(r) for v, r in spec["ranges"].items()},
            target=spec["target"], goal=spec.get("goal", "max"), meta=spec.get("meta"),
        )

    @classmethod
    def from_json(cls, text: str) -> SCM:
        return cls.from_dict(json.loads(text))

    def __repr__(self) -> str:
        edges = ", ".join(f"{p}->{c}" for p, c in self.graph.edges)
        return f"SCM({self.meta.get('family', 'custom')}, target={self.target}, goal={self.goal}, edges=[{edges}])"
