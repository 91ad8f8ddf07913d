"""Every surrogate, by name (`registry.SurrogateKind`): importing this module imports each surrogate module of this
package, which registers itself.

The modules are found, not listed: every `*_surrogate.py` in this folder (`pkgutil.iter_modules`), so a new
surrogate is one new module named that way, registering itself with `registry.register`, plus its test. A recipe
names it (`environment_settings: {surrogate_kind: NAME}`) and the causal commands take it (`--surrogate NAME`).
"""

from __future__ import annotations

from pathlib import Path

from training.tasks.causal.found_modules import import_all, package_modules
from training.tasks.causal.surrogates.registry import KINDS, SurrogateKind

PACKAGE = __name__.rpartition(".")[0]
SUFFIX = "_surrogate"


def surrogate_modules() -> list[str]:
    """The package's surrogate modules (full names), in file-name order."""
    return package_modules(PACKAGE, Path(__file__).parent, lambda name: name.endswith(SUFFIX))


import_all(surrogate_modules())  # each registers itself on import

SURROGATES: dict[str, SurrogateKind] = KINDS
