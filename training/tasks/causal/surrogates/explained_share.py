"""R^2 = c' (A + RIDGE I)^-1 c of each node on each parent set, from the nodes' correlation matrices: the batched
regressions of the g-prior scores (`linear_scores`).

Up to 3 parents (every set under the default in-degree bound) by a Cholesky factorisation written out elementwise,
vectorised over (data set, pair): A + RIDGE I = L L', z = L^-1 c, R^2 = z'z. The same backward-stable algorithm
LAPACK would run, without the per-system call overhead of `np.linalg.solve` on some 10^5 systems of size 1 to 3.
Larger sets (full-space scoring up to 10 variables) go to `np.linalg.solve`, as does any system whose pivot is not
positive (not a correlation matrix up to rounding; the ridge keeps real ones positive definite).
"""

from __future__ import annotations

import numpy as np

RIDGE = 1e-10
CLOSED_FORM_MAX = 3
TINY_PIVOT = 1e-300  # keeps the sqrt of a non-positive pivot finite; those systems are solved again


def explained_share(corr: np.ndarray, nodes: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """(B, m): c' (A + RIDGE I)^-1 c with A = corr[:, v, S, S], c = corr[:, v, S, v] for the pairs (nodes[i], the
    members idx[i]); `corr` (B, d, d, d) has a unit diagonal, so every pivot starts from 1 + RIDGE."""
    k = idx.shape[1]
    if k > CLOSED_FORM_MAX:
        return reference_explained_share(corr, nodes, idx)
    bsz, d = corr.shape[:2]
    flat = corr.reshape(bsz, d ** 3)

    def entry(row: np.ndarray, col: np.ndarray) -> np.ndarray:  # corr[:, nodes, row, col], (B, m)
        return flat.take(nodes * d * d + row * d + col, axis=1)

    diag = 1.0 + RIDGE
    inv0 = 1.0 / np.sqrt(diag)
    z0 = entry(idx[:, 0], nodes) * inv0
    r2 = z0 * z0
    if k == 1:
        return r2
    l10 = entry(idx[:, 1], idx[:, 0]) * inv0
    p1 = diag - l10 * l10
    l11 = np.sqrt(np.maximum(p1, TINY_PIVOT))
    z1 = (entry(idx[:, 1], nodes) - l10 * z0) / l11
    r2 += z1 * z1
    bad = p1 <= 0
    if k == 3:
        l20 = entry(idx[:, 2], idx[:, 0]) * inv0
        l21 = (entry(idx[:, 2], idx[:, 1]) - l20 * l10) / l11
        p2 = diag - l20 * l20 - l21 * l21
        z2 = (entry(idx[:, 2], nodes) - l20 * z0 - l21 * z1) / np.sqrt(np.maximum(p2, TINY_PIVOT))
        r2 += z2 * z2
        bad |= p2 <= 0
    if bad.any():
        where = np.nonzero(bad)
        r2[where] = _solve_pairs(corr, nodes, idx, where)
    return r2


def _solve_pairs(corr: np.ndarray, nodes: np.ndarray, idx: np.ndarray, where: tuple[np.ndarray, np.ndarray]
                 ) -> np.ndarray:
    """`reference_explained_share` at the (data set, pair) positions `where` only."""
    bi, mi = where
    v, s = nodes[mi], idx[mi]
    a = corr[bi[:, None, None], v[:, None, None], s[:, :, None], s[:, None, :]] + RIDGE * np.eye(s.shape[1])
    c = corr[bi[:, None], v[:, None], s, v[:, None]]
    return np.einsum("mk,mk->m", c, np.linalg.solve(a, c[..., None])[..., 0])


def reference_explained_share(corr: np.ndarray, nodes: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """`explained_share` by `np.linalg.solve` on every system: the plain statement, and the path for large sets."""
    k = idx.shape[1]
    a = corr[:, nodes[:, None, None], idx[:, :, None], idx[:, None, :]] + RIDGE * np.eye(k)  # (B, m, k, k)
    c = corr[:, nodes[:, None], idx, nodes[:, None]]  # (B, m, k)
    sol = np.linalg.solve(a, c[..., None])[..., 0]
    return np.einsum("bmk,bmk->bm", c, sol)
