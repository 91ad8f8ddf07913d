"""Pure functions that regroup a flat, process-split reward batch by prompt and scatter group scores back.

TRL's sampler repeats each prompt `num_generations` times consecutively, and the generation batch is split across
processes, so one prompt's group may span processes. The judge adapter gathers every process's rows, groups them
by prompt (not by position, so any batch order works), lets each group be scored by exactly one process, gathers
the scores and hands each process its own slice. Everything here is plain Python, tested for any order and any
process count.
"""

from __future__ import annotations

import json
import math
from typing import Any


def prompt_key(prompt: Any) -> str:
    """A stable text key for a prompt (chat messages or text); equal prompts give equal keys."""
    if isinstance(prompt, str):
        return "text:" + prompt
    return "json:" + json.dumps(prompt, sort_keys=True, ensure_ascii=False, default=str)


def group_indices(keys: list[str]) -> list[list[int]]:
    """Indices of equal keys, grouped; groups in order of first appearance, indices ascending within a group."""
    groups: dict[str, list[int]] = {}
    for index, key in enumerate(keys):
        groups.setdefault(key, []).append(index)
    return list(groups.values())


def owner_of(group_index: int, num_processes: int) -> int:
    """The process that scores group `group_index` (round robin), so each group is scored exactly once."""
    return group_index % num_processes


def local_slice(lengths: list[int], process_index: int) -> slice:
    """The slice of the gathered (rank-ordered) flat batch that belongs to `process_index`."""
    start = sum(lengths[:process_index])
    return slice(start, start + lengths[process_index])


def scatter_group_scores(groups: list[list[int]], group_scores: list[list[float] | None], total: int) -> list[float]:
    """Flat per-row scores from per-group scores; a failed group (`None`) becomes NaN for each of its rows.

    Every row must belong to exactly one group, and each group's scores must match its size.
    """
    out: list[float | None] = [None] * total
    for indices, scores in zip(groups, group_scores, strict=True):
        if scores is not None and len(scores) != len(indices):
            raise ValueError(f"a group of {len(indices)} rows got {len(scores)} scores")
        for position, index in enumerate(indices):
            if out[index] is not None:
                raise ValueError(f"row {index} belongs to more than one group")
            out[index] = math.nan if scores is None else float(scores[position])
    missing = [i for i, value in enumerate(out) if value is None]
    if missing:
        raise ValueError(f"rows {missing[:5]} belong to no group")
    return out  # type: ignore[return-value]


def shared_columns(rows: list[dict[str, Any]], indices: list[int]) -> dict[str, Any]:
    """The dataset columns of one group; they must be equal across the group's rows (one prompt, one row)."""
    first = rows[indices[0]]
    for index in indices[1:]:
        for column, value in rows[index].items():
            if column not in first or first[column] != value:
                raise ValueError(
                    f"rows {indices[0]} and {index} share a prompt but differ in column {column!r} "
                    f"({first.get(column)!r} vs {value!r}); a judge group needs one value per column"
                )
    return dict(first)
