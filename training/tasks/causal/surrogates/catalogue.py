"""Every surrogate, by name (`registry.SurrogateKind`): importing this module imports each surrogate module, which
registers itself. Add a surrogate by registering it in its module and listing the module here."""

from __future__ import annotations

from training.tasks.causal.surrogates import (  # noqa: F401  (each registers itself on import)
    additive_surrogate,
    exact_surrogate,
    learned_surrogate,
    noop_surrogate,
)
from training.tasks.causal.surrogates.registry import KINDS, SurrogateKind

SURROGATES: dict[str, SurrogateKind] = KINDS
