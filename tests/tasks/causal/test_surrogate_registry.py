"""The surrogate registry: a surrogate module dropped into the package is found without editing any other file, a
recipe names it by `environment_settings`, and an episode runs on it."""

from __future__ import annotations

import importlib
import uuid
from pathlib import Path

import pytest

from tests.tasks.causal.helpers import chain5, dropped_module
from training.run_setup.environment_settings import configured_environment
from training.tasks.causal.env import CausalEnv, EpisodeError, build_surrogate, check_surrogate_fits
from training.tasks.causal.splits import scm_row
from training.tasks.causal.surrogates import catalogue
from training.tasks.causal.surrogates.registry import KINDS

SHIPPED = ["exact", "additive", "learned", "noop"]


def test_the_registry_holds_the_shipped_surrogates():
    assert list(catalogue.SURROGATES) == SHIPPED and catalogue.SURROGATES is KINDS


def test_a_surrogate_module_dropped_into_the_package_is_found_and_a_recipe_can_name_it():
    tag = uuid.uuid4().hex[:12]
    name, module = f"dropped_{tag}", f"zz_dropped_{tag}_surrogate"
    source = (
        "from training.tasks.causal.surrogates.noop_surrogate import NoopSurrogate\n"
        "from training.tasks.causal.surrogates.registry import SurrogateKind, register_surrogate\n\n"
        f"register_surrogate(SurrogateKind({name!r}, lambda variables, target, max_parents=None: "
        "NoopSurrogate(variables, target), None, bounded=False, sampled=False, lookahead=False))\n")
    try:
        with dropped_module(catalogue.PACKAGE, Path(catalogue.__file__).parent, module, source) as full_name:
            assert name not in KINDS
            importlib.reload(catalogue)
            assert full_name in catalogue.surrogate_modules() and name in KINDS
            env = configured_environment(CausalEnv, {"surrogate_kind": name})()  # what the recipe key does
            env.reset(**scm_row(chain5(), seed=1, budget=2, initial_samples=5))
            env.intervene("X1", 1.0)
            assert env.trace.used == 1 and env.trace.surrogate_updates == 0  # the dropped no-op learns nothing
    finally:
        KINDS.pop(name, None)
    assert list(KINDS) == SHIPPED


def test_the_additive_surrogate_takes_an_in_degree_bound_and_says_up_to_what_size():
    """Every parent set up to 7 variables, at most 3 parents above unless set (issue 62), up to 12 variables."""
    names = [f"X{i}" for i in range(12)]
    assert build_surrogate("additive", names[:7], "X0").max_parents == 6
    assert build_surrogate("additive", names[:8], "X0").max_parents == 3
    assert build_surrogate("additive", names[:8], "X0", 5).max_parents == 5
    check_surrogate_fits("additive", 12, 2)
    with pytest.raises(EpisodeError, match="more than the 12 the additive surrogate handles"):
        check_surrogate_fits("additive", 13)
