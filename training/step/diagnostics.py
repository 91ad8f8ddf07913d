"""Timing and memory probes that feed the trainer's metrics (`timing/*_s`, `memory/rss_mb`)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import psutil


@contextmanager
def timed(metrics: dict, name: str) -> Iterator[None]:
    """Append the block's wall time in seconds to `metrics[f"timing/{name}_s"]`, creating the list when the mapping
    is a plain dict (an exception raised in the block is the one that propagates, never a KeyError of ours)."""
    start = time.perf_counter()
    try:
        yield
    finally:
        metrics.setdefault(f"timing/{name}_s", []).append(time.perf_counter() - start)


def rss_mb() -> float:
    """Resident set size of this process in MiB."""
    return psutil.Process().memory_info().rss / 2**20
