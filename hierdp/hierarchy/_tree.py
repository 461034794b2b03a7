"""Vectorized array algorithms on parent-index trees (used to compile a Hierarchy).

The canonical node order puts nodes level by level (BFS) and, inside a level, groups them by
parent in parent order. In that order every non-root node ``i`` has ``parent[i] < i`` and the
parents of nodes ``1..n-1`` are non-decreasing, so the children of a node and the nodes of a level
are contiguous index ranges. The loops below run once per *level*, never once per node.
"""

from __future__ import annotations

from typing import Any
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from hierdp._segments import children_csr, gather_ranges
from hierdp.hierarchy.errors import CycleError, MultipleParentsError, NotATreeError


def object_array(values: Iterable[Any] | np.ndarray | pd.Index | pd.Series) -> np.ndarray:
    """A 1-d object array of the given items (tuples stay single items, unlike ``np.asarray``)."""
    if isinstance(values, (pd.Index, pd.Series)):
        values = values.to_numpy(dtype=object)
    if isinstance(values, np.ndarray) and values.ndim == 1:
        return values.astype(object, copy=False)
    items = list(values)
    out = np.empty(len(items), dtype=object)
    for k, item in enumerate(items):  # explicit loop: numpy would split tuple items into columns
        out[k] = item
    return out


def node_on_cycle(parent: np.ndarray, start: int) -> int:
    """A node on the cycle reached by following parents from ``start`` (error path only)."""
    i = int(start)
    for _ in range(parent.size):  # after n steps the walk is surely inside the cycle
        i = int(parent[i])
    return i


def check_unique_names(names: np.ndarray, parent: np.ndarray) -> None:
    """Raise MultipleParentsError when a name occurs twice (one name, two parents)."""
    dup = pd.Index(names, dtype=object, tupleize_cols=False).duplicated(keep=False)
    if dup.any():
        where = np.flatnonzero(dup)
        name = names[where[0]]
        pair = [k for k in where if names[k] == name][:2]  # error path: a short Python scan is fine
        pnames = [repr(names[parent[k]]) if parent[k] >= 0 else "no parent (a root)" for k in pair]
        raise MultipleParentsError(
            f"node {name!r} occurs twice, with parents {pnames[0]} and {pnames[1]}; "
            "node names must be unique"
        )


def canonical_order(parent: np.ndarray, names: Sequence[Any] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(order, level_ptr)``: node indices in canonical order and the level offsets.

    ``order[k]`` is the input index of the node placed at position ``k``. Raises CycleError when
    some node is not below a root, NotATreeError when there is not exactly one root.
    """
    n = parent.size
    roots = np.flatnonzero(parent < 0)
    if roots.size == 0:
        raise CycleError(f"the edges contain a cycle through node {names[node_on_cycle(parent, 0)]!r} "
                         "(no node is without a parent, so there is no root)")
    ptr, child_idx = children_csr(parent, n)
    n_kids = np.diff(ptr)
    frontier = roots.astype(np.int64)
    parts = []
    while frontier.size:  # one iteration per level
        parts.append(frontier)
        frontier = child_idx[gather_ranges(ptr[frontier], n_kids[frontier])[0]]
    order = np.concatenate(parts)
    if order.size < n:
        seen = np.zeros(n, bool)
        seen[order] = True
        lost = int(np.flatnonzero(~seen)[0])
        raise CycleError(f"the edges contain a cycle through node {names[node_on_cycle(parent, lost)]!r}")
    if roots.size > 1:
        shown = ", ".join(repr(names[r]) for r in roots[:5])
        more = f" and {roots.size - 5} more" if roots.size > 5 else ""
        raise NotATreeError(f"the structure has {roots.size} roots ({shown}{more}); "
                            "a hierarchy needs exactly one root, connected to every node")
    level_ptr = np.zeros(len(parts) + 1, np.int64)
    np.cumsum([p.size for p in parts], out=level_ptr[1:])
    return order, level_ptr


def child_sums(values: np.ndarray, child_ptr: np.ndarray, internal: np.ndarray) -> np.ndarray:
    """Sum of the children's values for every internal node (in the order of ``internal``).

    In canonical order the child ranges of the internal nodes tile ``1..n-1`` exactly, so one
    ``reduceat`` over ``values[1:]`` gives every sum at once (exact for int64).
    """
    if internal.size == 0:
        return values[:0].copy()
    return np.add.reduceat(values[1:], child_ptr[internal] - 1)


def fill_bottom_up(values: np.ndarray, level_ptr: np.ndarray, child_ptr: np.ndarray,
                   is_leaf: np.ndarray, fill: np.ndarray) -> np.ndarray:
    """Set ``values[i]`` to the sum of its children for every node with ``fill[i]``, deepest
    level first (so sums use already filled children); modifies and returns ``values``."""
    n_levels = level_ptr.size - 1
    for lev in range(n_levels - 2, -1, -1):  # one vectorized step per level
        a, b = level_ptr[lev], level_ptr[lev + 1]
        internal = np.flatnonzero(~is_leaf[a:b]) + a
        if internal.size == 0:
            continue
        sums = np.add.reduceat(values[b:level_ptr[lev + 2]], child_ptr[internal] - b)
        m = fill[internal]
        values[internal[m]] = sums[m]
    return values
