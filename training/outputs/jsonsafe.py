"""Strict JSON: NaN and infinity have no JSON spelling (`json.dumps` writes a bare `NaN`, which no parser accepts).

`nonfinite_to_null` replaces them by null and says where; `dumps_strict` refuses them outright.
"""

from __future__ import annotations

import json
import math


def nonfinite_to_null(obj, path: str = "$") -> tuple[object, list[str]]:
    """A copy of `obj` with every NaN/inf float replaced by None, and the JSON paths of the replaced values."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None, [path]
    if isinstance(obj, dict):
        out, where = {}, []
        for key, value in obj.items():
            out[key], found = nonfinite_to_null(value, f"{path}.{key}")
            where += found
        return out, where
    if isinstance(obj, list | tuple):
        out, where = [], []
        for i, value in enumerate(obj):
            clean, found = nonfinite_to_null(value, f"{path}[{i}]")
            out.append(clean)
            where += found
        return out, where
    if hasattr(obj, "item") and getattr(obj, "shape", None) == ():  # numpy / torch scalars
        return nonfinite_to_null(obj.item(), path)
    return obj, []


def dumps_strict(obj, **kwargs) -> str:
    """`json.dumps` that raises `ValueError` on NaN or infinity instead of writing invalid JSON."""
    return json.dumps(obj, allow_nan=False, **kwargs)
