"""What the lookahead's one-row data sets share: an anchor row per group of rows that agree on many variables, and
each row's bitmask of the variables where it equals its anchor (`additive_nested.Shared`).

The options' rows (`acquisition.information_gains`) come in groups: the rows a posterior draw gives its candidates
use the same noise, so two of them differ only at the intervened variables and their descendants in the draw's DAG.
A row of such a group equals, at every variable none of the group's interventions reach, the group's most common
value there; so the anchor is the row of each variable's most common value, scored once a node, and a data set
copies the anchor's scores of the parent sets whose family lies where it equals the anchor. Rows are grouped by
sharing a value at a variable not intervened on in either (connected components); the grouping only decides what
is copied, never a value: a copy is made only where the features are equal bit for bit.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

MIN_GROUP = 4  # rows a group needs for its anchor (one more data set scored) to pay


def groups(samples: np.ndarray, intervened: np.ndarray) -> np.ndarray:
    """(B,) each row's group: the connected components of rows sharing a value at a variable neither intervened."""
    b, d = samples.shape
    rows, nodes, offset = [], [], b
    for c in range(d):
        free = np.flatnonzero(~intervened[:, c])
        _, ids = np.unique(samples[free, c], return_inverse=True)
        rows.append(free), nodes.append(offset + ids)
        offset += int(ids.max(initial=-1)) + 1
    rows, nodes = np.concatenate(rows), np.concatenate(nodes)
    graph = coo_matrix((np.ones(len(rows)), (rows, nodes)), shape=(offset, offset))
    return connected_components(graph, directed=False)[1][:b]


def anchor_rows(samples: np.ndarray, intervened: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(anchors (A, d): per group of at least `MIN_GROUP` rows, each variable's most common value among its rows
    not intervened there (the first row's where all are), anchor_of (B,): each row's anchor, -1 for none)."""
    label = groups(samples, intervened)
    names, label, sizes = np.unique(label, return_inverse=True, return_counts=True)
    big = np.flatnonzero(sizes >= MIN_GROUP)
    where = np.full(len(names), -1)
    where[big] = np.arange(len(big))
    anchor_of = where[label]
    anchors = np.zeros((len(big), samples.shape[1]))
    for c in range(samples.shape[1]):
        anchors[:, c] = _common_values(samples[:, c], ~intervened[:, c], anchor_of, len(big))
    return anchors, anchor_of


def _common_values(values: np.ndarray, free: np.ndarray, group: np.ndarray, n: int) -> np.ndarray:
    """(n,) per group g >= 0 the most common of its values where `free` (ties: the smallest), else its first one."""
    out = np.zeros(n)
    member = group >= 0
    first = np.flatnonzero(member)
    out[group[first[::-1]]] = values[first[::-1]]  # the first row of each group wins (written last)
    keep = member & free
    if not keep.any():
        return out
    uniq, ids = np.unique(values[keep], return_inverse=True)
    keys, counts = np.unique(group[keep] * len(uniq) + ids, return_counts=True)
    order = np.lexsort((-counts, keys // len(uniq)))
    g = keys[order] // len(uniq)
    lead = np.r_[True, g[1:] != g[:-1]]
    out[g[lead]] = uniq[keys[order][lead] % len(uniq)]
    return out


def agreement(features: np.ndarray, anchor_features: np.ndarray, anchor_of: np.ndarray, d: int) -> np.ndarray:
    """(B,) int64 bitmask of the variables whose features (B, d F) equal bit for bit those of the row's anchor
    (A, d F); 0 for a row without one."""
    b = len(features)
    if len(anchor_features) == 0:
        return np.zeros(b, dtype=np.int64)
    same = features.reshape(b, d, -1) == anchor_features[np.maximum(anchor_of, 0)].reshape(b, d, -1)
    bits = same.all(axis=-1) & (anchor_of >= 0)[:, None]
    return (bits.astype(np.int64) << np.arange(d, dtype=np.int64)).sum(axis=1)
