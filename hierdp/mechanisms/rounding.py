"""Integer rounding of continuous TopDown solutions, vectorized over a level's groups.

:func:`paper_round_batch` is TDA_l2's rule in paper 000 §5 ("rounds and redistributes the
exceeding in a similar fashion of InfTDA, prioritizing the elimination of small values"), as
the authors' artifact implements it: round every entry to the nearest integer (half to even);
if a group then sums below its total, add 1 to its largest entries; if above, subtract 1 from
its smallest non-zero entries. Ties are broken by position (stable sort).
"""

from __future__ import annotations

import numpy as np

__all__ = ["paper_round_batch"]


def _rank_within_groups(group: np.ndarray, sort_key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Order of entries by (group, sort_key) stable, and each entry's rank inside its group."""
    order = np.lexsort((np.arange(group.size), sort_key, group))
    g_sorted = group[order]
    starts = np.flatnonzero(np.r_[True, g_sorted[1:] != g_sorted[:-1]]) if g_sorted.size else np.zeros(0, np.int64)
    first = np.zeros(g_sorted.size, np.int64)
    if g_sorted.size:
        first[starts] = starts
        first = np.maximum.accumulate(first)
    rank = np.empty(group.size, np.int64)
    rank[order] = np.arange(g_sorted.size) - first
    return order, rank


def paper_round_batch(values: np.ndarray, offsets: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """Round each group of a continuous non-negative solution to integers summing to its total.

    Args:
        values: float children values (e.g. the L2 projection), groups contiguous.
        offsets: group g is ``values[offsets[g]:offsets[g+1]]``.
        totals: integer group totals.

    Returns:
        int64 array, non-negative, each group summing exactly to its total.
    """
    x = np.rint(np.asarray(values, dtype=float)).astype(np.int64)
    x = np.maximum(x, 0)
    offsets = np.asarray(offsets, dtype=np.int64)
    totals = np.asarray(totals, dtype=np.int64)
    sizes = np.diff(offsets)
    group = np.repeat(np.arange(sizes.size, dtype=np.int64), sizes)
    # the residual is at most half the group size, but loop defensively until every group is exact
    for _ in range(64):
        diff = totals - np.bincount(group, weights=x, minlength=sizes.size).astype(np.int64)
        if not np.any(diff):
            return x
        d = diff[group]
        # add: the |diff| largest entries of groups below their total
        up = d > 0
        if up.any():
            _, rank = _rank_within_groups(group[up], -x[up])
            idx = np.flatnonzero(up)
            x[idx[rank < d[up]]] += 1
        # remove: the |diff| smallest non-zero entries of groups above their total
        down = (d < 0) & (x > 0)
        if down.any():
            _, rank = _rank_within_groups(group[down], x[down])
            idx = np.flatnonzero(down)
            x[idx[rank < -d[down]]] -= 1
    diff = totals - np.bincount(group, weights=x, minlength=sizes.size).astype(np.int64)
    if np.any(diff):
        g = int(np.flatnonzero(diff)[0])
        raise ValueError(f"rounding failed for group {g}: total {int(totals[g])} not reachable "
                         "with non-negative integers (is the total negative or the group empty?)")
    return x
