"""Every scripted policy, by name (`policy_registry.POLICIES`, in its registered order): importing this module imports
each module of the `training.tasks.causal.policies` package, which registers its policies itself.

The modules are found, not listed (`pkgutil.iter_modules` over this package's folder, names starting with `_`
skipped), so a new policy is one new module in the package plus its test; where it stands in `POLICIES` is the
`order` it registers with, not the order of discovery (see `policy_registry`). Compare
`training.tasks.causal.surrogates.catalogue`, which finds its `*_surrogate.py` modules the same way.

(The module is `policy_catalogue`, not `catalogue`, because no two modules under `training/` share a file name and
`surrogates/catalogue.py` exists.)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from training.tasks.causal.found_modules import import_all, package_modules
from training.tasks.causal.policies.policy_registry import POLICIES as REGISTERED
from training.tasks.causal.policies.policy_registry import Policy

PACKAGE, _, NAME = __name__.rpartition(".")


def policy_modules() -> list[str]:
    """The package's modules (full names), this one excepted, in file-name order."""
    return package_modules(PACKAGE, Path(__file__).parent, lambda name: not name.startswith("_") and name != NAME)


import_all(policy_modules())  # each registers its policies on import

POLICIES: dict[str, Callable[[], Policy]] = REGISTERED
