"""What a TopDown mechanism needs from a tree, level by level, without materializing it.

A :class:`TopDownTree` is a rooted tree whose nodes are identified, within a level, by int64
*keys*. Level 0 holds the root only. Mechanisms walk it top down: :meth:`TopDownTree.expand`
returns, for a whole level's surviving nodes at once, all their children (zero-count children
included) and their true counts, vectorized. Product trees (origin/destination, :mod:`.od`)
generate children on demand; :class:`HierarchyTree` adapts a plain :class:`Hierarchy`.

Besides ``expand``, metrics and baselines use ``counts`` (true count of given keys),
``nonzero`` (the true non-zero nodes of a level, sorted by key), ``parent_of`` and
``level_size`` (the number of potential nodes of a level, for universe-wide baselines).

Node names come from a *namer* (``tree.namer``): an object holding only the public structure
(no counts), which a :class:`~hierdp.release.TreeRelease` keeps to label its rows.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from hierdp._segments import gather_ranges

__all__ = ["HierarchyTree", "KeyNamer", "TopDownTree", "as_topdown_tree"]


@runtime_checkable
class KeyNamer(Protocol):
    """Maps level keys to human-readable labels (public structure only, never counts)."""

    def key_names(self, level: int, keys: np.ndarray) -> np.ndarray:
        """One string label per key of ``level``."""
        ...

    def key_columns(self, level: int, keys: np.ndarray) -> dict[str, np.ndarray]:
        """Label columns (e.g. ``origin``, ``destination``) for the keys of ``level``."""
        ...


@runtime_checkable
class TopDownTree(Protocol):
    """The level-by-level view of a non-negative hierarchical tree (paper 000, §2.2).

    Attributes:
        n_levels: number of levels including the root level 0 (depth T = n_levels - 1).
        level_names: one name per level.
        root_count: the true root count n.
        root_key: the key of the root at level 0.
        namer: a :class:`KeyNamer` for labels.
    """

    n_levels: int
    level_names: list[str]
    root_count: int
    root_key: int
    namer: KeyNamer

    def expand(self, level: int, parent_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Children of ``parent_keys`` (keys of nodes at ``level``), at level ``level + 1``.

        Returns ``(child_keys, offsets, true_counts)``: the children of ``parent_keys[g]`` are
        ``child_keys[offsets[g]:offsets[g+1]]`` (every potential child, zero counts included);
        ``true_counts`` is int64 and aligned with ``child_keys``.
        """
        ...

    def counts(self, level: int, keys: np.ndarray) -> np.ndarray:
        """True counts (int64) of the given keys of ``level`` (0 for empty nodes)."""
        ...

    def nonzero(self, level: int) -> tuple[np.ndarray, np.ndarray]:
        """``(keys, counts)`` of the true non-zero nodes of ``level``, sorted by key."""
        ...

    def parent_of(self, level: int, keys: np.ndarray) -> np.ndarray:
        """Keys (at ``level - 1``) of the parents of the given keys of ``level``."""
        ...

    def level_size(self, level: int) -> int:
        """Number of potential nodes of ``level`` (the universe, zero nodes included)."""
        ...

    def key_names(self, level: int, keys: np.ndarray) -> np.ndarray:
        """String labels of the given keys of ``level``."""
        ...


class _HierarchyNamer:
    """Names of a plain hierarchy's nodes (keys are node indices)."""

    def __init__(self, names: np.ndarray) -> None:
        self._names = names

    def key_names(self, level: int, keys: np.ndarray) -> np.ndarray:
        return np.asarray(self._names, dtype=object)[np.asarray(keys, dtype=np.int64)].astype(str)

    def key_columns(self, level: int, keys: np.ndarray) -> dict[str, np.ndarray]:
        return {"node": self.key_names(level, keys)}


class HierarchyTree:
    """:class:`TopDownTree` adapter for a plain :class:`~hierdp.hierarchy.Hierarchy`.

    Keys are the hierarchy's node indices. The hierarchy's arrays are used as they are
    (``level_ptr``, ``child_ptr`` with contiguous children, ``counts``); nothing is copied per
    node. A node without children at a non-final level is a leaf: ``expand`` returns an empty
    group for it. ``domain_source`` / ``domain_assumption`` are the hierarchy's.
    """

    def __init__(self, hierarchy: Any) -> None:
        h = hierarchy
        self.hierarchy = h
        self._parent = np.asarray(h.parent, dtype=np.int64)
        self._level = np.asarray(h.level, dtype=np.int64)
        self._level_ptr = np.asarray(h.level_ptr, dtype=np.int64)
        self._child_ptr = np.asarray(h.child_ptr, dtype=np.int64)
        self._counts = np.asarray(h.counts, dtype=np.int64)
        self.n_levels = int(h.n_levels)
        self.level_names = [str(x) for x in h.level_names]
        roots = np.flatnonzero(self._parent < 0)
        if roots.size != 1:
            from hierdp.hierarchy.errors import NotATreeError
            raise NotATreeError(f"a TopDown tree needs exactly one root, found {roots.size}")
        self.root_key = int(roots[0])
        self.root_count = int(self._counts[self.root_key])
        self.namer: KeyNamer = _HierarchyNamer(np.asarray(h.names, dtype=object))
        # the public-domain statement travels with the tree (hierdp.privacy.domain reads it)
        self.domain_source = getattr(h, "domain_source", "declared")
        self.domain_assumption = getattr(h, "domain_assumption", None)

    def expand(self, level: int, parent_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """See :meth:`TopDownTree.expand`."""
        pk = np.asarray(parent_keys, dtype=np.int64)
        starts = self._child_ptr[pk]
        sizes = self._child_ptr[pk + 1] - starts
        kids, offsets = gather_ranges(starts, sizes)
        return kids, offsets, self._counts[kids]

    def counts(self, level: int, keys: np.ndarray) -> np.ndarray:
        """See :meth:`TopDownTree.counts`."""
        return self._counts[np.asarray(keys, dtype=np.int64)]

    def nonzero(self, level: int) -> tuple[np.ndarray, np.ndarray]:
        """See :meth:`TopDownTree.nonzero`."""
        lo, hi = int(self._level_ptr[level]), int(self._level_ptr[level + 1])
        keys = np.arange(lo, hi, dtype=np.int64)
        c = self._counts[lo:hi]
        m = c != 0
        return keys[m], c[m]

    def parent_of(self, level: int, keys: np.ndarray) -> np.ndarray:
        """See :meth:`TopDownTree.parent_of`."""
        return self._parent[np.asarray(keys, dtype=np.int64)]

    def level_size(self, level: int) -> int:
        """See :meth:`TopDownTree.level_size`."""
        return int(self._level_ptr[level + 1] - self._level_ptr[level])

    def key_names(self, level: int, keys: np.ndarray) -> np.ndarray:
        """See :meth:`TopDownTree.key_names`."""
        return self.namer.key_names(level, keys)


def as_topdown_tree(obj: Any) -> TopDownTree:
    """``obj`` itself if it already is a :class:`TopDownTree`, a :class:`HierarchyTree` for a
    plain hierarchy (anything with ``child_ptr``/``level_ptr``/``counts``); else ``TypeError``."""
    if all(hasattr(obj, a) for a in ("expand", "nonzero", "n_levels", "root_key")):
        return obj
    if all(hasattr(obj, a) for a in ("child_ptr", "level_ptr", "counts", "parent")):
        return HierarchyTree(obj)
    raise TypeError(f"expected a TopDownTree (e.g. ODTree) or a Hierarchy, got {type(obj).__name__}")
