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

import importlib
import pkgutil
from collections.abc import Callable
from pathlib import Path

from training.tasks.causal.policies.policy_registry import POLICIES as REGISTERED
from training.tasks.causal.policies.policy_registry import Policy

PACKAGE = __name__.rpartition(".")[0]


def policy_modules() -> list[str]:
    """The package's modules (full names), this one excepted, in file-name order."""
    found = pkgutil.iter_modules([str(Path(__file__).parent)])
    return [f"{PACKAGE}.{m.name}" for m in sorted(found, key=lambda m: m.name)
            if not m.name.startswith("_") and f"{PACKAGE}.{m.name}" != __name__]


for _module in policy_modules():
    importlib.import_module(_module)  # each registers its policies on import

POLICIES: dict[str, Callable[[], Policy]] = REGISTERED
