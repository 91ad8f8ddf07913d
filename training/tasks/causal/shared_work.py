"""The environment's work shared between episodes that reached the same state.

An episode's state after its calls is a function of its row (SCM, seed, budget, initial rows, in-degree bound), the
environment's settings (surrogate kind, frozen or not) and its valid calls in order: the samples come from the
row's seeded generator, the surrogate is updated with them, and the belief's and the lookahead's draws are seeded by
(seed, updates) and (seed, call index) (`belief_rng`, `lookahead.look_ahead`). A GRPO group's rollouts share a row, so
they start in the same state and often make the same first calls, each computing the same options again.
`SharedWork` keeps the two costly results, the options of a belief (`Belief.of`) and a call's expected information
gain, under that state, so a state is worked out once a process.

The values are the ones each episode would compute itself (tests/tasks/causal/test_shared_work.py compares whole
episode records with and without it). Bounded (least recently used out first); a process's entries never outlive
its code.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable


class SharedWork:
    def __init__(self, maxsize: int = 8192):
        self.maxsize = maxsize
        self._entries: OrderedDict = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable, compute: Callable[[], object]):
        if key in self._entries:
            self._entries.move_to_end(key)
            self.hits += 1
            return self._entries[key]
        self.misses += 1
        value = compute()
        self._entries[key] = value
        if len(self._entries) > self.maxsize:
            self._entries.popitem(last=False)
        return value

    def put(self, key: Hashable, value: object) -> None:
        """Keep `value` under `key`, as `get` would have after computing it."""
        self._entries[key] = value
        self._entries.move_to_end(key)
        if len(self._entries) > self.maxsize:
            self._entries.popitem(last=False)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def clear(self) -> None:
        self._entries.clear()
        self.hits = self.misses = 0


SHARED = SharedWork()
