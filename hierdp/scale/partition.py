"""How a TopDown level's surviving parents are cut into partitions for workers.

Partitions are contiguous runs of the surviving parents (in the previous level's order), so the
concatenation of the partitions' results is the level in the serial order, and each partition
holds about ``target_children`` children. Since noise is counter-based (a node's noise depends only
on the seed, its level and its key) and the groups of a level are independent, the partition does
not change the release: it only sets how work is spread and how much memory one task needs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["child_counts", "partition_rows"]


def child_counts(tree: Any, level: int, parent_keys: np.ndarray) -> np.ndarray | None:
    """The number of children of each parent, when the tree can tell without expanding (a
    ``child_counts(level, keys)`` method, or a Hierarchy's ``child_ptr``); else ``None``."""
    method = getattr(tree, "child_counts", None)
    if callable(method):
        return np.asarray(method(level, parent_keys), dtype=np.int64)
    h = getattr(tree, "hierarchy", None)
    ptr = getattr(h, "child_ptr", None)
    if ptr is not None:
        keys = np.asarray(parent_keys, dtype=np.int64)
        return np.asarray(ptr[keys + 1] - ptr[keys], dtype=np.int64)
    return None


def partition_rows(rows: np.ndarray, sizes: np.ndarray | None, *, target_children: int, min_parts: int = 1,
                   fan_out: float = 1.0, cuts: np.ndarray | None = None) -> list[np.ndarray]:
    """Cut ``rows`` (positions of the surviving parents) into contiguous partitions.

    Args:
        rows: the surviving parents, in order.
        sizes: their numbers of children (``None``: unknown, estimated as ``fan_out`` each).
        target_children: children per partition to aim at (memory of one task).
        min_parts: at least this many partitions when there are enough parents (one per worker).
        fan_out: children per parent assumed when ``sizes`` is unknown.
        cuts: the only positions (in ``rows``, increasing, ending at ``rows.size``) where a
            partition may end, or ``None``: anywhere. A cut that falls inside is moved to the next
            allowed position (parents a constraint row couples stay in one partition).

    Returns:
        A list of int64 arrays whose concatenation is ``rows``.
    """
    rows = np.asarray(rows, dtype=np.int64)
    if rows.size == 0:
        return []
    weight = (np.asarray(sizes, dtype=np.float64) if sizes is not None
              else np.full(rows.size, max(1.0, float(fan_out))))
    weight = np.maximum(weight, 1.0)  # a childless parent still costs a little
    total = float(weight.sum())
    n_parts = max(int(np.ceil(total / max(1, int(target_children)))), min(int(min_parts), rows.size), 1)
    n_parts = min(n_parts, rows.size)
    # cut where the running weight crosses k * total / n_parts
    cum = np.cumsum(weight)
    at = np.searchsorted(cum, total * np.arange(1, n_parts) / n_parts, side="left") + 1
    at = np.unique(np.clip(at, 1, rows.size - 1)) if rows.size > 1 else np.zeros(0, np.int64)
    if cuts is not None and at.size:
        allowed = np.asarray(cuts, dtype=np.int64)
        at = np.unique(allowed[np.minimum(np.searchsorted(allowed, at), allowed.size - 1)])
        at = at[(at > 0) & (at < rows.size)]
    return [p for p in np.split(rows, at) if p.size]
