"""One registry shape for every name-keyed registry of the stack (tasks, evaluation tasks, judge rewards, advantage
estimators, the causal task's surrogates and scripted policies): a dict of values by name that

* `register(name, value, order=...)` fills (the same value again changes nothing; another value under a taken name is
  a `ValueError` naming both), `add(name, ...)` being the same as a decorator;
* keeps its names in `order` (a number each registration may give: by it, then by name), else in the order registered,
  so that what a command lists does not depend on which module happened to import first;
* `named(name)` reads, refusing an unknown name with the registered ones, the closest first (`unknown`: the error type
  a registry raises, a `BadInputError` where the name comes from a user).

Any file may import it, like `training.errors`.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class Registry(dict):
    def __init__(self, what: str, unknown: type[Exception] = KeyError):
        super().__init__()
        self.what = what
        self.unknown = unknown
        self.order: dict[str, float] = {}

    def register(self, name: str, value: T, *, order: float | None = None) -> T:
        if name in self and (not _same(self[name], value) or self.order.get(name) != order):
            at = f" (order {self.order.get(name)} and {order})" if order is not None else ""
            raise ValueError(f"{self.what} {name!r} is registered twice: {self[name]!r} and {value!r}{at}")
        self[name] = value
        if order is not None:
            self.order[name] = order
            ranked = sorted(self.items(), key=lambda item: (self.order.get(item[0], float("inf")), item[0]))
            self.clear()
            self.update(ranked)
        return value

    def add(self, name: str, *, order: float | None = None) -> Callable[[T], T]:
        """`register` as a decorator: registers what it decorates and returns it."""
        return lambda value: self.register(name, value, order=order)

    def named(self, name: str):
        if name in self:
            return self[name]
        close = difflib.get_close_matches(name, list(self), n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise self.unknown(f"{self.what} {name!r} is not registered{hint}; registered: {', '.join(sorted(self))}")


def _same(a, b) -> bool:
    return a is b or a == b
