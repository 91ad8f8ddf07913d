"""Structure metrics: SHD between graphs (gadjid), and precision / recall / F1 of an estimated parent set.

Conventions for parent sets (estimate E, truth T, TP = |E ∩ T|):
precision = TP / |E| (1.0 when E is empty: no false claim), recall = TP / |T| (1.0 when T is empty: nothing
missed), F1 = 2 TP / (|E| + |T|) (1.0 when both are empty; 0.0 when exactly one is empty). F1 is defined directly
rather than from precision and recall so that "nothing claimed" about a target that has parents scores 0, not 1.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import gadjid
import numpy as np


@dataclass(frozen=True)
class SetScores:
    precision: float
    recall: float
    f1: float


def parent_scores(estimated: Iterable[str], true: Iterable[str]) -> SetScores:
    est, tru = frozenset(estimated), frozenset(true)
    tp = len(est & tru)
    precision = tp / len(est) if est else 1.0
    recall = tp / len(tru) if tru else 1.0
    f1 = 2 * tp / (len(est) + len(tru)) if (est or tru) else 1.0
    return SetScores(precision, recall, f1)


def parent_f1(estimated: Iterable[str], true: Iterable[str]) -> float:
    return parent_scores(estimated, true).f1


def shd(true_adjacency: np.ndarray, estimated_adjacency: np.ndarray) -> int:
    """Structural Hamming distance between two DAG adjacency matrices (A[i, j] = 1 iff i -> j): the number of node
    pairs whose edge differs (missing, extra or reversed each count 1), as computed by gadjid."""
    a, b = (np.asarray(x, dtype=np.int8) for x in (true_adjacency, estimated_adjacency))
    if a.shape != b.shape or a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"shd: adjacency matrices must be square and of one shape, got {a.shape} and {b.shape}")
    return int(gadjid.shd(a, b)[1])


def brier_score(marginals: Mapping[str, float], true: Iterable[str]) -> float:
    """Mean over candidates of (P(j ∈ Pa) - 1[j ∈ Pa])^2."""
    tru = frozenset(true)
    if not marginals:
        raise ValueError("brier_score: no candidate marginals")
    return float(np.mean([(p - (v in tru)) ** 2 for v, p in marginals.items()]))


def reliability_table(probs: np.ndarray, outcomes: np.ndarray, bins: int = 5) -> list[tuple[float, float, float, int]]:
    """(bin low, bin high, mean predicted, observed frequency, count) per probability bin with data."""
    probs, outcomes = np.asarray(probs, float), np.asarray(outcomes, float)
    edges = np.linspace(0.0, 1.0, bins + 1)
    rows = []
    for i in range(bins):
        sel = (probs >= edges[i]) & ((probs < edges[i + 1]) | (i == bins - 1))
        if sel.any():
            rows.append((edges[i], edges[i + 1], float(probs[sel].mean()), float(outcomes[sel].mean()),
                         int(sel.sum())))
    return rows


def expected_calibration_error(probs: np.ndarray, outcomes: np.ndarray, bins: int = 5) -> float:
    """sum over bins of (count / N) * |mean predicted - observed frequency|."""
    n = len(probs)
    return float(sum(c / n * abs(p - o) for _, _, p, o, c in reliability_table(probs, outcomes, bins)))
