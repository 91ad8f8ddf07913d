"""Deferred surrogate updates, applied in batches across episodes (one GRPO batch's episodes together).

A tool call's reply to the model is the sampled row, which does not depend on the posterior; only the episode's
record (entropies, information gain, the posterior after each call) does. So `CausalEnv` queues each accepted
call's rows here instead of updating its surrogate at once, and the queue is drained the first time anything
reads a posterior (`CausalEnv.record`, `.surrogate`, `.episode_metrics`). TRL's tool loop calls every rollout's
tool before it reads anything, so a whole generation batch's updates are drained together.

Draining goes in rounds: round r applies the r-th queued update of every episode that still has one, so each
episode sees its own rows in order (the result is exactly that of updating after every call). Within a round, the
exact surrogates are updated by one `update_many` call per (number of variables, target index) group: the local
scores of every parent set of every node of every episode in one batched numpy computation, then one batched
Koivisto-Sood DP. Other surrogates (additive, learned, noop) are updated one by one. Before its update, each call's
expected information gain is measured against the same posterior (`CausalEnv._look_ahead`).
"""

from __future__ import annotations

import weakref

from training.causal.exact_surrogate import ExactSurrogate, update_many

_QUEUED: weakref.WeakSet = weakref.WeakSet()


def enqueue(env) -> None:
    """Mark `env` as holding queued updates (its `_pending` list)."""
    _QUEUED.add(env)


def drain() -> int:
    """Apply every queued update of every environment, in rounds; returns the number of rounds."""
    envs = [e for e in list(_QUEUED) if e._pending]
    _QUEUED.clear()
    rounds = 0
    while envs:
        heads = [e._pending.pop(0) for e in envs]
        active = [(e, h) for e, h in zip(envs, heads, strict=True) if e.active]
        for e, h in active:
            e._look_ahead(h)  # the expected gain is measured against the posterior before the call's rows
        exact = [(e, h) for e, h in active if isinstance(e._surrogate, ExactSurrogate)]
        if exact:
            update_many([e._surrogate for e, _ in exact], [(h.rows, h.mask) for _, h in exact])
        for e, h in active:
            if not isinstance(e._surrogate, ExactSurrogate):
                e._surrogate.update(h.rows, h.mask)
        for e, h in zip(envs, heads, strict=True):
            e._settle(h)
        envs = [e for e in envs if e._pending]
        rounds += 1
    return rounds
