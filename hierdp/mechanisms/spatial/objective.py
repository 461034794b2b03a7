"""HTF's homogeneity split objective (paper 002 eq. 5-6), exactly, for one node or a whole level.

For a node of ``L x W`` cells split along its first axis after ``k`` rows (``1 <= k < L``), part 1
has ``n1 = k W`` cells holding ``S1`` points and part 2 ``n2 = (L - k) W`` cells holding ``S2``:

    o_k = sum_{part 1} |c - S1/n1| + sum_{part 2} |c - S2/n2| = A_k / n1 + B_k / n2,
    A_k = sum_{part 1} |n1 c - S1|,   B_k = sum_{part 2} |n2 c - S2|     (integers).

So ``o_k`` is an exact rational and everything here is integer arithmetic:

* :func:`split_cost_terms_all` - ``A_k, B_k, n1, n2`` for *every* k of one node at once, from
  2-D prefix sums over (row, value rank): with ``t = floor(S1 / n1)``,
  ``A_k = 2 (S1 cnt_k(t) - n1 sum_k(t))`` where ``cnt_k(t)`` / ``sum_k(t)`` count and add the cells
  of rows ``< k`` with value ``<= t`` - one table lookup per k (O(L D + L W) for D distinct values);
* :func:`probe_cost_terms` - ``A, B`` for one candidate k per node over a whole level of nodes (the
  cells of the level held contiguously per node): one pass over the level's cells, with
  ``numpy.add.reduceat``;
* :func:`gridded_objective` - ``floor(A 2^s / n1) + floor(B 2^s / n2)``, an integer within 2 of
  ``o_k 2^s``, computed in int64 without overflow. Its sensitivity is ``2^s Δo + 1`` (the two floors
  move the value by less than 2 and the result is an integer), so discrete Laplace noise on this
  grid gives an exact, float-free split search (paper 002 notes A13).

Sensitivity (Theorem 1): adding or removing one point changes ``o_k`` by at most
``2 (1 - 1/n_side) < 2``; ``tests/mechanisms/spatial/test_objective.py`` enumerates every neighbour of small
grids to check it.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "INT64_SAFE",
    "gridded_objective",
    "probe_cost_terms",
    "split_cost_terms_all",
    "split_objective_all",
]

#: bound on |value| for int64 intermediate products here (2^62: room for one addition)
INT64_SAFE = 2 ** 62


def split_cost_terms_all(block: np.ndarray, axis: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(A, B, n1, n2)`` of every split ``k = 1 .. L-1`` of ``block`` along ``axis`` (int64 arrays of
    length ``L - 1``; ``o_k = A/n1 + B/n2``). ``axis=0`` splits rows, ``axis=1`` columns.

    Raises:
        ValueError: a block that is not 2-D, has negative or non-integer entries, or is too large
            for exact int64 arithmetic.
    """
    b = np.asarray(block)
    if b.ndim != 2:
        raise ValueError(f"block must be 2-D, got shape {b.shape}")
    if axis not in (0, 1):
        raise ValueError(f"axis must be 0 (rows) or 1 (columns), got {axis!r}")
    if not np.issubdtype(b.dtype, np.integer):
        raise ValueError(f"block must hold integer counts, got dtype {b.dtype}")
    b = b.astype(np.int64, copy=False)
    if axis == 1:
        b = b.T
    L, W = b.shape
    if L < 2:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty, empty
    if b.size and b.min() < 0:
        raise ValueError("block must hold non-negative counts")
    total = int(b.sum())
    if 2 * total * b.size >= INT64_SAFE:
        raise ValueError("block too large for exact int64 split costs")
    vals, rank = np.unique(b, return_inverse=True)
    rank = rank.reshape(b.shape)
    D = vals.size
    # cnt[i, d]: cells of row i with value rank d; cumulated over rows (prefix 0..k) and ranks (<= d)
    cnt = np.bincount((np.arange(L)[:, None] * D + rank).ravel(), minlength=L * D).reshape(L, D)
    cnt_p = np.zeros((L + 1, D + 1), np.int64)
    np.cumsum(np.cumsum(cnt, axis=0), axis=1, out=cnt_p[1:, 1:])
    sum_p = np.zeros((L + 1, D + 1), np.int64)
    np.cumsum(np.cumsum(cnt * vals[None, :], axis=0), axis=1, out=sum_p[1:, 1:])
    k = np.arange(1, L, dtype=np.int64)
    row_tot = np.concatenate([[0], np.cumsum(b.sum(axis=1))])
    s1 = row_tot[k]
    s2 = total - s1
    n1 = k * W
    n2 = (L - k) * W
    # ranks of the values <= floor(S / n) (c <= mean  <=>  n c <= S for integer c)
    r1 = np.searchsorted(vals, s1 // n1, side="right")
    r2 = np.searchsorted(vals, s2 // n2, side="right")
    c1, m1 = cnt_p[k, r1], sum_p[k, r1]
    c2, m2 = cnt_p[L, r2] - cnt_p[k, r2], sum_p[L, r2] - sum_p[k, r2]
    a = 2 * (s1 * c1 - n1 * m1)
    bb = 2 * (s2 * c2 - n2 * m2)
    return a, bb, n1, n2


def split_objective_all(block: np.ndarray, axis: int = 0) -> np.ndarray:
    """``o_k`` (eq. 5) for ``k = 1 .. L-1`` as float64 (``k`` rows, or columns with ``axis=1``, in part 1)."""
    a, b, n1, n2 = split_cost_terms_all(block, axis)
    return a / n1 + b / n2


def probe_cost_terms(values: np.ndarray, pos: np.ndarray, node_of_cell: np.ndarray, starts: np.ndarray,
                     k: np.ndarray, n1: np.ndarray, n2: np.ndarray, s1: np.ndarray, s2: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    """``A, B`` of one candidate split per node for a whole level of nodes.

    Args:
        values: the count of every cell of the level's nodes, node after node (int64).
        pos: each cell's offset along its node's split axis (0 .. L-1).
        node_of_cell: each cell's node (0 .. K-1), non-decreasing.
        starts: first cell of each node in ``values`` (every node has at least one cell).
        k: the candidate per node (cells with ``pos < k`` form part 1).
        n1, n2, s1, s2: cells and points of each node's two parts (from prefix sums).
    """
    left = pos < k[node_of_cell]
    v = values
    t1 = np.abs(n1[node_of_cell] * v - s1[node_of_cell])
    t2 = np.abs(n2[node_of_cell] * v - s2[node_of_cell])
    a = np.add.reduceat(np.where(left, t1, 0), starts)
    b = np.add.reduceat(np.where(left, 0, t2), starts)
    return a, b


def gridded_objective(a: np.ndarray, b: np.ndarray, n1: np.ndarray, n2: np.ndarray, bits: int) -> np.ndarray:
    """``floor(a 2^bits / n1) + floor(b 2^bits / n2)`` exactly in int64 (quotient and remainder
    are scaled separately: ``a = q n1 + r`` gives ``q 2^bits + floor(r 2^bits / n1)``)."""
    scale = np.int64(1) << np.int64(bits)
    q1, rem1 = np.divmod(a, n1)
    q2, rem2 = np.divmod(b, n2)
    return q1 * scale + (rem1 * scale) // n1 + q2 * scale + (rem2 * scale) // n2
