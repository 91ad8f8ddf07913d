"""The threads the lookahead's compiled kernels run on: they release the GIL (numba `nogil`), so the options' data
sets of one call are split over the cores (`train_scm` on 2 cores: its held-out evaluations and rows make their calls
one at a time, in one process). `OMP_NUM_THREADS` where set, as for the BLAS (the benchmarks' one thread), else the
cores this process may run on."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

MIN_PER_THREAD = 128  # data sets a thread needs for its share to outweigh handing it over

_pool: tuple[int, ThreadPoolExecutor] | None = None


def lookahead_threads() -> int:
    given = os.environ.get("OMP_NUM_THREADS", "").strip()
    if given.isdigit() and int(given) > 0:
        return int(given)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def parts(n: int) -> list[tuple[int, int]]:
    """[start, end) ranges splitting n data sets over the threads, at least `MIN_PER_THREAD` each."""
    k = max(1, min(lookahead_threads(), n // MIN_PER_THREAD))
    edges = [n * i // k for i in range(k + 1)]
    return list(zip(edges[:-1], edges[1:]))


def run_all(tasks: list, n: int) -> None:
    """Run the callables (the work of n data sets), on the threads where n gives each its `MIN_PER_THREAD` (the pool
    is this process's: made again after a fork)."""
    global _pool
    if len(tasks) == 1 or len(parts(n)) == 1:
        for task in tasks:
            task()
        return
    if _pool is None or _pool[0] != os.getpid():
        _pool = (os.getpid(), ThreadPoolExecutor(max_workers=lookahead_threads(), thread_name_prefix="lookahead"))
    for future in [_pool[1].submit(task) for task in tasks]:
        future.result()
