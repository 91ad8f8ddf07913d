"""Regrouping a flat, process-split batch by prompt: right for any batch order and any process count."""

import math
import random

import pytest

from judges.grouping import group_indices, local_slice, owner_of, prompt_key, scatter_group_scores, shared_columns


def _score(prompt: str, completions: list[str]) -> list[float]:
    """A reference group score that depends on the prompt and on the whole group (rank within the group)."""
    ranked = sorted(completions)
    return [len(prompt) + ranked.index(c) / 10 for c in completions]


def _simulate(flat: list[tuple[str, str]], num_processes: int) -> list[float]:
    """Split `flat` into contiguous per-process chunks (as TRL does), run the adapter's regrouping as each process
    would, and concatenate what each process returns."""
    per_process = [len(flat) // num_processes + (r < len(flat) % num_processes) for r in range(num_processes)]
    chunks, start = [], 0
    for size in per_process:
        chunks.append(flat[start : start + size])
        start += size
    gathered = [row for chunk in chunks for row in chunk]  # gather_object: rank order
    groups = group_indices([prompt_key(p) for p, _ in gathered])
    scored = {}
    for rank in range(num_processes):  # each process scores only the groups it owns
        for g, indices in enumerate(groups):
            if owner_of(g, num_processes) == rank:
                assert g not in scored, "a group was scored twice"
                scored[g] = _score(gathered[indices[0]][0], [gathered[i][1] for i in indices])
    scores = scatter_group_scores(groups, [scored[g] for g in range(len(groups))], len(gathered))
    out = []
    for rank in range(num_processes):
        out.extend(scores[local_slice(per_process, rank)])
    return out


@pytest.mark.parametrize("num_processes", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("seed", range(5))
def test_regrouping_matches_per_prompt_scoring_for_any_order_and_process_count(num_processes, seed):
    rng = random.Random(seed)
    num_generations = rng.choice([2, 3, 4, 8])
    prompts = [f"prompt-{i}-" + "x" * rng.randrange(5) for i in range(rng.randrange(2, 6))]
    flat = [(p, f"{p}:completion-{j}-{rng.random():.6f}") for p in prompts for j in range(num_generations)]
    if seed % 2:  # TRL's consecutive layout for even seeds, any order for odd ones
        rng.shuffle(flat)
    expected_by_row = {}
    for p in prompts:
        group = [c for q, c in flat if q == p]
        expected_by_row.update(zip(group, _score(p, group)))
    got = _simulate(flat, num_processes)
    assert got == [expected_by_row[c] for _, c in flat]


def test_chat_prompts_group_by_content_not_identity():
    a = [{"role": "user", "content": "Which is larger: 1 or 2?"}]
    b = [{"content": "Which is larger: 1 or 2?", "role": "user"}]  # same message, other key order
    c = [{"role": "user", "content": "Which is larger: 3 or 4?"}]
    assert group_indices([prompt_key(p) for p in (a, c, b, c)]) == [[0, 2], [1, 3]]
    assert prompt_key("hi") != prompt_key([{"role": "user", "content": "hi"}])


def test_failed_group_becomes_nan_never_zero():
    scores = scatter_group_scores([[0, 2], [1, 3]], [None, [0.5, 0.25]], 4)
    assert math.isnan(scores[0]) and math.isnan(scores[2])
    assert scores[1] == 0.5 and scores[3] == 0.25


def test_scatter_refuses_rows_without_group_and_wrong_sizes():
    with pytest.raises(ValueError, match="belong to no group"):
        scatter_group_scores([[0]], [[1.0]], 2)
    with pytest.raises(ValueError, match="got 1 scores"):
        scatter_group_scores([[0, 1]], [[1.0]], 2)


def test_group_columns_must_agree():
    rows = [{"answer": "5"}, {"answer": "5"}, {"answer": "7"}]
    assert shared_columns(rows, [0, 1]) == {"answer": "5"}
    with pytest.raises(ValueError, match="'answer'"):
        shared_columns(rows, [0, 2])
