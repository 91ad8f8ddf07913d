"""R^2 = c' (A + RIDGE I)^-1 c of each node on each parent set, from the nodes' correlation matrices: the batched
regressions of the g-prior scores (`linear_scores`).

By a Cholesky factorisation A + RIDGE I = L L', z = L^-1 c, R^2 = z'z, vectorised over (data set, pair) and grown
one parent at a time: the sets of size k are their prefixes of size k - 1 (`SizeGroup.prefix`) plus their largest
member, and the factor of the larger set is the prefix's with one more row, l = L_prefix^-1 a (a forward solve),
pivot = 1 + RIDGE - l'l, z_k = (c_k - l'z_prefix) / sqrt(pivot), R^2 = R^2_prefix + z_k^2. The same
backward-stable algorithm LAPACK would run on each system, at O(k^2) a set instead of O(k^3), without the per-system
overhead of `np.linalg.solve` on some 10^5 systems of size 1 to 9. A system whose pivot is not positive (not a
correlation matrix up to rounding; the ridge keeps real ones positive definite), and every set grown from it, goes
to `np.linalg.solve`.
"""

from __future__ import annotations

import numpy as np

RIDGE = 1e-10
NESTED = True  # False: every R^2 by `reference_explained_share` (the tests' reference)


def explained_shares(corr: np.ndarray, groups) -> list[np.ndarray]:
    """(B, m) R^2 per `SizeGroup` of `groups` (sizes 1, 2, ... in order), with A = corr[:, v, S, S] and
    c = corr[:, v, S, v] for each group's pairs (v, S); `corr` (B, d, d, d) has a unit diagonal. The factor is kept
    as one (B, m) array per entry (elementwise arithmetic, no small-matrix calls)."""
    if not NESTED:
        return [reference_explained_share(corr, grp.nodes, grp.idx) for grp in groups]
    bsz, d = corr.shape[:2]
    flat = corr.reshape(bsz, d ** 3)
    diag = 1.0 + RIDGE
    out = []
    low: dict[tuple[int, int], np.ndarray | float] = {}
    z: list[np.ndarray] = []
    bad = np.zeros((bsz, 0), dtype=bool)
    for grp in groups:
        nodes, idx, k = grp.nodes, grp.idx, grp.k
        last = idx[:, -1]

        def entry(row: np.ndarray, col: np.ndarray) -> np.ndarray:  # corr[:, nodes, row, col], (B, m)
            return flat.take(nodes * d * d + row * d + col, axis=1)

        if k == 1:
            low, z, r2, bad = {}, [], 0.0, np.zeros((bsz, len(nodes)), dtype=bool)
        else:
            p = grp.prefix
            low = {key: v if np.isscalar(v) else v.take(p, axis=1) for key, v in low.items()}
            z, r2, bad = [zj.take(p, axis=1) for zj in z], out[-1].take(p, axis=1), bad.take(p, axis=1)
        new_row, pivot = [], diag
        for j in range(k - 1):  # forward solve L_prefix l = A[prefix, last]
            acc = entry(idx[:, j], last)
            for q in range(j):
                acc -= low[j, q] * new_row[q]
            acc /= low[j, j]
            new_row.append(acc)
            pivot = pivot - acc * acc
        bad = bad | np.logical_not(pivot > 0)  # NaN too
        root = np.sqrt(np.where(bad, 1.0, pivot)) if k > 1 else np.sqrt(diag)
        z_new = entry(last, nodes)
        for j in range(k - 1):
            z_new -= new_row[j] * z[j]
        z_new /= root
        r2 = r2 + z_new * z_new
        if bad.any():
            where = np.nonzero(bad)
            r2[where] = _solve_pairs(corr, nodes, idx, where)
        out.append(r2)
        low.update({(k - 1, j): new_row[j] for j in range(k - 1)})
        low[k - 1, k - 1] = root
        z.append(z_new)
    return out


def _solve_pairs(corr: np.ndarray, nodes: np.ndarray, idx: np.ndarray, where: tuple[np.ndarray, np.ndarray]
                 ) -> np.ndarray:
    """`reference_explained_share` at the (data set, pair) positions `where` only."""
    bi, mi = where
    v, s = nodes[mi], idx[mi]
    a = corr[bi[:, None, None], v[:, None, None], s[:, :, None], s[:, None, :]] + RIDGE * np.eye(s.shape[1])
    c = corr[bi[:, None], v[:, None], s, v[:, None]]
    return np.einsum("mk,mk->m", c, np.linalg.solve(a, c[..., None])[..., 0])


def reference_explained_share(corr: np.ndarray, nodes: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """R^2 by `np.linalg.solve` on every system: the plain statement."""
    k = idx.shape[1]
    a = corr[:, nodes[:, None, None], idx[:, :, None], idx[:, None, :]] + RIDGE * np.eye(k)  # (B, m, k, k)
    c = corr[:, nodes[:, None], idx, nodes[:, None]]  # (B, m, k)
    sol = np.linalg.solve(a, c[..., None])[..., 0]
    return np.einsum("bmk,bmk->bm", c, sol)
