"""Every surrogate, by name (`registry.SurrogateKind`): importing this module imports each surrogate module of this
package, which registers itself. The one front door to them: the one that fits an SCM (`fitting_surrogate`: exact where
every mechanism is affine in its parents, up to its size limit, additive otherwise, up to its limit, learned beyond),
whether one fits an SCM's size and in-degree bound (`check_surrogate_fits`) and building one (`build_surrogate`).

The modules are found, not listed: every `*_surrogate.py` in this folder (`pkgutil.iter_modules`), so a new
surrogate is one new module named that way, registering itself with `registry.register`, plus its test. A recipe
names it (`environment_settings: {surrogate_kind: NAME}`) and the causal commands take it (`--surrogate NAME`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from training.tasks.causal.found_modules import import_all, package_modules
from training.tasks.causal.row_schema import EpisodeError
from training.tasks.causal.surrogates.registry import KINDS, SurrogateKind
from training.tasks.causal.surrogates.subsets import parent_bound

PACKAGE = __name__.rpartition(".")[0]
SUFFIX = "_surrogate"


def surrogate_modules() -> list[str]:
    """The package's surrogate modules (full names), in file-name order."""
    return package_modules(PACKAGE, Path(__file__).parent, lambda name: name.endswith(SUFFIX))


import_all(surrogate_modules())  # each registers itself on import

SURROGATES: dict[str, SurrogateKind] = KINDS


def sampled_surrogates() -> tuple[str, ...]:
    """The surrogates whose posterior has draws: what the options, the baselines and the structure reward need."""
    return tuple(name for name, kind in SURROGATES.items() if kind.sampled)


def check_surrogate_fits(kind: str, d: int, max_parents: int | None = None) -> None:
    """Refuse, naming the size, the limit and the surrogates that handle it, an SCM of d variables larger than the
    `kind` surrogate handles; and an in-degree bound (`max_parents`) for a surrogate that has none."""
    if kind not in SURROGATES:
        raise EpisodeError(f"surrogate: must be one of {tuple(SURROGATES)}, got {kind!r}")
    limit = SURROGATES[kind].max_vars
    if limit is not None and d > limit:
        fits = [k for k in sampled_surrogates() if SURROGATES[k].max_vars is None or d <= SURROGATES[k].max_vars]
        raise EpisodeError(f"variables: the SCM has {d} variables, more than the {limit} the {kind} surrogate "
                           f"handles; {' and '.join(fits)} handle{'s' if len(fits) == 1 else ''} {d} "
                           f"(--surrogate {fits[0]})")
    if max_parents is not None:
        if not SURROGATES[kind].bounded:
            bounded = [k for k, v in SURROGATES.items() if v.bounded]
            raise EpisodeError(f"max_parents: the {kind} surrogate has no in-degree bound (surrogates with one: "
                               f"{', '.join(bounded)})")
        try:
            parent_bound(d, max_parents)
        except ValueError as err:
            raise EpisodeError(str(err)) from None


def build_surrogate(kind: str, variables: list[str], target: str, max_parents: int | None = None):
    check_surrogate_fits(kind, len(variables), max_parents)
    return SURROGATES[kind].build(variables, target, max_parents)


AFFINE_POINTS = 16  # parent values at which a mechanism is checked for being affine


def affine(mechanism, rng: np.random.Generator) -> bool:
    """Whether `mechanism` is affine in its parents: an affine fit at `AFFINE_POINTS` parent values leaves no residual
    beyond rounding."""
    if not mechanism.parents:
        return True
    x = rng.uniform(-3.0, 3.0, size=(AFFINE_POINTS, len(mechanism.parents)))
    y = np.broadcast_to(np.asarray(mechanism(dict(zip(mechanism.parents, x.T))), dtype=float), (AFFINE_POINTS,))
    design = np.column_stack([np.ones(AFFINE_POINTS), x])
    residual = y - design @ np.linalg.lstsq(design, y, rcond=None)[0]
    return bool(np.all(np.isfinite(y)) and np.abs(residual).max() <= 1e-8 * max(1.0, np.abs(y).max()))


def is_affine(scm) -> bool:
    """Whether every mechanism of `scm` is affine in its parents (what the exact surrogate models)."""
    rng = np.random.default_rng(0)
    return all(affine(m, rng) for m in scm.mechanisms.values())


def fitting_surrogate(scm) -> str:
    """The surrogate that fits an SCM: exact where every mechanism is affine (up to its size limit), additive
    otherwise (up to its limit), learned beyond."""
    wanted = "exact" if is_affine(scm) else "additive"
    limit = SURROGATES[wanted].max_vars
    return wanted if limit is None or scm.d <= limit else "learned"
