"""Replace a model's `generate` for the length of a block, restoring what was there before.

Two wrappers stack on one model during a tool run's turn (the turn cache for the whole tool loop, the log-prob
recorder for one turn), so each must put back the wrapper it found, not only remove its own attribute.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def wrapped_generate(model, wrap: Callable[[Callable], Callable]) -> Iterator[None]:
    """`model.generate` becomes `wrap(the generate in force)` inside the block."""
    before = vars(model).get("generate")
    model.generate = wrap(model.generate)
    try:
        yield
    finally:
        if before is None:
            del model.generate  # the instance attribute goes; the class method shows through again
        else:
            model.generate = before
