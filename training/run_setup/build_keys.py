"""What a built model's cache key must hold besides its inputs: the code that builds it and the numerics it ran on.

A cached model (the offline tiny Qwen3, a warm start) is served again only when everything that changes its content
is the same: the source of the modules that build it (`source_digest`), the library versions whose kernels and
initialisers compute it, and, for anything trained, the number of threads (floating-point reductions are summed in
another order on another thread count, so the weights differ in their last bits and the training trajectory after
them). `numerics(threads=...)` lists the latter; a key hashes both with the build's own inputs.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json


def source_digest(*modules: str) -> str:
    """sha256 of the source files of the named modules (dotted names), in the order given."""
    digest = hashlib.sha256()
    for name in modules:
        source = inspect.getsource(importlib.import_module(name))
        digest.update(name.encode() + b"\0" + source.encode() + b"\0")
    return digest.hexdigest()


def numerics(threads: bool) -> dict:
    """The library versions a build's numbers depend on, and with `threads` torch's intra-op thread count."""
    import tokenizers
    import torch
    import transformers

    out = {"torch": torch.__version__, "transformers": transformers.__version__, "tokenizers": tokenizers.__version__}
    if threads:
        out["threads"] = torch.get_num_threads()
    return out


def key_of(payload) -> str:
    """A short, stable hash of a JSON-serialisable payload."""
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]
