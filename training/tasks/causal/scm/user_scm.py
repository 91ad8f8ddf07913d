"""Users' own SCMs from a small YAML file; mechanisms are restricted expressions, never evaluated code.

Format (see examples/scms/cbo_toy.yaml)::

    name: my_scm                      # optional
    source: where it comes from       # optional, free text
    target: Y
    goal: min                         # "max" (default) or "min"
    variables:
      X: {mechanism: "0", noise_std: 1.0, range: [-5, 5]}
      Z: {mechanism: "exp(-X)", noise_std: 1.0, range: [-5, 20]}
      Y: {mechanism: "cos(Z) - exp(-Z / 20)", noise_std: 1.0}   # the target needs no range
    edges: [[X, Z], [Z, Y]]           # every edge must appear in its child's mechanism, and only those names

Each mechanism is X_v = f_v(parents) + noise_std * N(0, 1); f_v is written in the language of
`training.tasks.causal.scm.expressions` (arithmetic, numbers, pi, e, and exp/log/sqrt/abs/sin/cos/tan/tanh/sigmoid/square/
minimum/maximum of the parents). A non-target variable without `range` gets
[-max_intervention_value, +max_intervention_value] (`max_intervention_value` at the top level, default 3.0).
Every mistake raises `UserSCMError` naming the field (``variables.Z.mechanism: ...``); so does a file that is not
UTF-8, an expression outside the language's bounds, and an SCM whose mechanisms raise or give a non-finite value on
its range or whose optimum is not finite (`training.tasks.causal.scm.scm_checks`, naming the variable and the values).
"""

from __future__ import annotations

import math
from pathlib import Path

import yaml

from training.run_setup.strict_yaml import DuplicateKeyError, safe_load_strict
from training.run_setup.yaml_errors import yaml_problem
from training.tasks.causal.scm.expressions import ExpressionError
from training.tasks.causal.scm.scm import SCM, ExpressionMechanism, SCMError
from training.tasks.causal.scm.scm_checks import check_scm

TOP_KEYS = {"name", "source", "target", "goal", "variables", "edges", "max_intervention_value"}
VAR_KEYS = {"mechanism", "noise_std", "range"}
RESERVED = {"pi", "e"}


class UserSCMError(ValueError):
    """A user SCM file we cannot build; the message names the file and the field."""


def _number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UserSCMError(f"{where}: must be a finite number, got {value!r}")
    return float(value)


def scm_from_spec(spec: dict, where: str = "scm") -> SCM:
    if not isinstance(spec, dict):
        raise UserSCMError(f"{where}: the file must hold a mapping, got {type(spec).__name__}")
    unknown = set(spec) - TOP_KEYS
    if unknown:
        raise UserSCMError(f"{where}: unknown field(s) {sorted(unknown)}; known: {sorted(TOP_KEYS)}")
    for key in ("target", "variables", "edges"):
        if key not in spec:
            raise UserSCMError(f"{where}: missing field {key!r}")
    variables = spec["variables"]
    if not isinstance(variables, dict) or not variables:
        raise UserSCMError(f"{where}.variables: must be a non-empty mapping of name -> settings")
    names = list(variables)
    for name in names:
        if not isinstance(name, str) or not name.isidentifier() or name in RESERVED:
            raise UserSCMError(f"{where}.variables: {name!r} is not a valid variable name (an identifier, not pi/e)")
    target = spec["target"]
    if target not in variables:
        raise UserSCMError(f"{where}.target: {target!r} is not one of the variables {names}")
    goal = spec.get("goal", "max")
    if goal not in ("max", "min"):
        raise UserSCMError(f"{where}.goal: must be 'max' or 'min', got {goal!r}")
    bound = _number(spec.get("max_intervention_value", 3.0), f"{where}.max_intervention_value")
    if bound <= 0:
        raise UserSCMError(f"{where}.max_intervention_value: must be > 0, got {bound}")
    parents: dict[str, list[str]] = {v: [] for v in names}
    edges = spec["edges"]
    if not isinstance(edges, list):
        raise UserSCMError(f"{where}.edges: must be a list of [parent, child] pairs")
    for i, edge in enumerate(edges):
        if not (isinstance(edge, list) and len(edge) == 2 and all(e in variables for e in edge)):
            raise UserSCMError(f"{where}.edges[{i}]: must be [parent, child] with both in {names}, got {edge!r}")
        if edge[0] == edge[1] or edge[0] in parents[edge[1]]:
            raise UserSCMError(f"{where}.edges[{i}]: self-loop or duplicate edge {edge!r}")
        parents[edge[1]].append(edge[0])
    mechanisms, noise, ranges = {}, {}, {}
    for v, settings in variables.items():
        at = f"{where}.variables.{v}"
        if not isinstance(settings, dict):
            raise UserSCMError(f"{at}: must be a mapping with {sorted(VAR_KEYS)}")
        unknown = set(settings) - VAR_KEYS
        if unknown:
            raise UserSCMError(f"{at}: unknown field(s) {sorted(unknown)}; known: {sorted(VAR_KEYS)}")
        if "mechanism" not in settings:
            raise UserSCMError(f"{at}: missing field 'mechanism'")
        try:
            mechanisms[v] = ExpressionMechanism(tuple(parents[v]), str(settings["mechanism"]))
        except (ExpressionError, SCMError) as err:
            raise UserSCMError(f"{at}.mechanism: {err}") from None
        noise[v] = _number(settings.get("noise_std", 1.0), f"{at}.noise_std")
        if noise[v] < 0:
            raise UserSCMError(f"{at}.noise_std: must be >= 0, got {noise[v]}")
        if v == target:
            if "range" in settings:
                raise UserSCMError(f"{at}.range: the target cannot be intervened on, so it takes no range")
            continue
        r = settings.get("range", [-bound, bound])
        if not (isinstance(r, list) and len(r) == 2):
            raise UserSCMError(f"{at}.range: must be [low, high], got {r!r}")
        lo, hi = _number(r[0], f"{at}.range[0]"), _number(r[1], f"{at}.range[1]")
        if lo >= hi:
            raise UserSCMError(f"{at}.range: low must be < high, got {r!r}")
        ranges[v] = (lo, hi)
    meta = {"family": "user", "name": spec.get("name", "user_scm")}
    try:
        scm = SCM(names, mechanisms, noise, ranges, target, goal, meta=meta)
        check_scm(scm)
    except SCMError as err:
        raise UserSCMError(f"{where}: {err}") from None
    return scm


def load_user_scm(path: str | Path) -> SCM:
    path = Path(path)
    if not path.exists():
        raise UserSCMError(f"SCM file {str(path)!r} does not exist")
    try:
        spec = safe_load_strict(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise UserSCMError(f"{path}: {yaml_problem(err)}; save the file as UTF-8") from None
    except DuplicateKeyError as err:
        raise UserSCMError(f"{path}: {err}; each variable, mechanism and setting may appear once") from None
    except yaml.YAMLError as err:
        raise UserSCMError(f"{path}: not valid YAML ({yaml_problem(err)})") from None
    return scm_from_spec(spec, where=str(path))
