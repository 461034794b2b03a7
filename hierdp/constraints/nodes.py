"""Bind node references to a tree's ``(level, key)`` pairs, from its public structure only.

Trees name their nodes through their namer (:mod:`hierdp.hierarchy.topdown_tree`); this module
inverts that naming for the nodes a constraint set mentions:

* a :class:`~hierdp.hierarchy.Hierarchy` (or its TopDown view) and a
  :class:`~hierdp.scale.tree.LevelTree`: node names (``"IL/COOK"``; a tuple of level values is
  joined with ``"/"``, level columns are read in the tree's level order);
* an :class:`~hierdp.hierarchy.ODTree`: ``"origin->destination"`` names, or ``(origin,
  destination)`` tuples, at the tree level whose pair of geography levels they belong to;
* any other TopDown tree: every level's names, enumerated from the root (up to
  :data:`MAX_ENUMERATED` nodes).

No count is read here: a constraint set binds the same way whatever the data.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from hierdp.constraints.entries import ByLevels, NodeRef
from hierdp.constraints.errors import ConstraintError

__all__ = ["MAX_ENUMERATED", "NodeLocator", "locator_for"]

#: largest tree a generic locator enumerates to find names
MAX_ENUMERATED = 5_000_000
PATH_SEP = "/"


class NodeLocator:
    """Finds nodes by name in a tree whose names are listed per node (base and generic case).

    Attributes:
        level_names: the tree's level names (level 0 is the root's level).
    """

    def __init__(self, tree: Any, names: np.ndarray, levels: np.ndarray, keys: np.ndarray) -> None:
        self.tree = tree
        self.level_names = [str(x) for x in tree.level_names]
        self._index = pd.Index(np.asarray(names, dtype=object), dtype=object, tupleize_cols=False)
        self._levels = np.asarray(levels, dtype=np.int64)
        self._keys = np.asarray(keys, dtype=np.int64)
        self._unique = bool(self._index.is_unique)

    def candidates(self, ref: NodeRef) -> list[Any]:
        """The spellings of ``ref`` to look up, in order (the name itself first)."""
        out: list[Any] = []
        if isinstance(ref, ByLevels):
            out.append(self._path(self._by_levels(ref)))
            return out
        out.append(ref)
        if isinstance(ref, tuple):
            out.append(self._path(ref))
        return out

    def _by_levels(self, ref: ByLevels) -> tuple[Any, ...]:
        """Level columns -> the tuple of values from the first level below the root."""
        cols = [k for k, _ in ref.items]
        below = self.level_names[1:]
        unknown = [c for c in cols if c not in below]
        if unknown:
            raise ConstraintError(f"unknown level {unknown[0]!r}; the levels below the root are {below}")
        k = len(cols)
        if cols != below[:k]:
            raise ConstraintError(f"level columns {cols} must be the first {k} levels below the root, in order "
                                  f"({below[:k]})")
        return tuple(v for _, v in ref.items)

    @staticmethod
    def _path(values: tuple[Any, ...]) -> str:
        return PATH_SEP.join(str(v) for v in values)

    def locate(self, refs: Sequence[NodeRef]) -> tuple[np.ndarray, np.ndarray, list[str | None]]:
        """``(levels, keys, problems)``: ``problems[i]`` is None when ``refs[i]`` was found, else why not.

        Raises:
            ConstraintError: the tree's names are not unique (a node cannot be named).
        """
        n = len(refs)
        levels = np.full(n, -1, np.int64)
        keys = np.full(n, -1, np.int64)
        problems: list[str | None] = [None] * n
        if not self._unique:
            raise ConstraintError("the tree's node names are not unique, so constraints cannot name its nodes")
        pending = list(range(n))
        spellings: list[list[Any]] = []
        for i, ref in enumerate(refs):
            try:
                spellings.append(self.candidates(ref))
            except ConstraintError as exc:
                spellings.append([])
                problems[i] = str(exc)
        for round_ in range(2):
            todo = [i for i in pending if len(spellings[i]) > round_ and problems[i] is None]
            if not todo:
                continue
            pos = self._index.get_indexer(pd.Index([spellings[i][round_] for i in todo], dtype=object,
                                                   tupleize_cols=False))
            found = pos >= 0
            for i, p in zip(np.asarray(todo)[found], pos[found], strict=True):
                levels[i], keys[i] = self._levels[p], self._keys[p]
            pending = [i for i in pending if keys[i] < 0]
        for i in pending:
            if problems[i] is None:
                problems[i] = f"unknown node {describe(refs[i])}"
        return levels, keys, problems

    def names(self, level: int, keys: np.ndarray) -> np.ndarray:
        """Labels of ``keys`` at ``level`` (as the release labels them)."""
        return np.asarray(self.tree.namer.key_names(level, np.asarray(keys, dtype=np.int64)), dtype=object)


def describe(ref: NodeRef) -> str:
    """A reference for a message."""
    if isinstance(ref, ByLevels):
        return str(ref)
    return repr(ref)


class ODLocator(NodeLocator):
    """Names of an origin/destination tree: ``"origin->destination"`` or ``(origin, destination)``."""

    def __init__(self, tree: Any) -> None:
        self.tree = tree
        self.level_names = [str(x) for x in tree.level_names]
        self._orig = [pd.Index(np.asarray(n, dtype=object).astype(str), dtype=object) for n in tree.origin_geo.names]
        self._dest = [pd.Index(np.asarray(n, dtype=object).astype(str), dtype=object)
                      for n in tree.destination_geo.names]
        self._sizes = [int(s) for s in tree.destination_geo.sizes]

    def _pairs(self, ref: NodeRef) -> list[tuple[str, str]]:
        if isinstance(ref, tuple):
            if len(ref) != 2:
                raise ConstraintError(f"an origin/destination node is (origin, destination), got {ref!r}")
            return [(str(ref[0]), str(ref[1]))]
        if isinstance(ref, ByLevels):
            raise ConstraintError("an origin/destination tree names nodes 'origin->destination', not by level columns")
        text = str(ref)
        out: list[tuple[str, str]] = []
        start = 0
        while True:  # every split at "->" (an area name could contain it)
            at = text.find("->", start)
            if at < 0:
                return out
            out.append((text[:at], text[at + 2:]))
            start = at + 1

    def locate(self, refs: Sequence[NodeRef]) -> tuple[np.ndarray, np.ndarray, list[str | None]]:
        n = len(refs)
        levels = np.full(n, -1, np.int64)
        keys = np.full(n, -1, np.int64)
        problems: list[str | None] = [None] * n
        for i, ref in enumerate(refs):
            try:
                pairs = self._pairs(ref)
            except ConstraintError as exc:
                problems[i] = str(exc)
                continue
            hits = []
            for L, (a, b) in enumerate(self.tree.level_pairs):
                for o, d in pairs:
                    io, idd = self._orig[a].get_indexer([o])[0], self._dest[b].get_indexer([d])[0]
                    if io >= 0 and idd >= 0:
                        hits.append((L, int(io) * self._sizes[b] + int(idd)))
            hits = sorted(set(hits))
            if len(hits) == 1:
                levels[i], keys[i] = hits[0]
            elif hits:
                problems[i] = (f"node {describe(ref)} is ambiguous: it names a node at levels "
                               f"{sorted({self.level_names[h[0]] for h in hits})}")
            else:
                problems[i] = f"unknown node {describe(ref)}"
        return levels, keys, problems


def locator_for(tree: Any) -> NodeLocator:
    """The locator of a TopDown tree (see the module docstring)."""
    h = getattr(tree, "hierarchy", None)
    if h is not None and hasattr(h, "names") and hasattr(h, "level"):
        n = int(np.asarray(h.parent).size)
        return NodeLocator(tree, np.asarray(h.names, dtype=object), np.asarray(h.level), np.arange(n, dtype=np.int64))
    if hasattr(tree, "level_pairs") and hasattr(tree, "origin_geo"):
        return ODLocator(tree)
    structure = getattr(tree, "structure", None)
    if structure is not None and hasattr(structure, "all_names"):
        ptr = np.asarray(structure.level_ptr, dtype=np.int64)
        n = int(ptr[-1])
        levels = np.repeat(np.arange(ptr.size - 1, dtype=np.int64), np.diff(ptr))
        return NodeLocator(tree, structure.all_names(), levels, np.arange(n, dtype=np.int64))
    return _enumerated(tree)


def _enumerated(tree: Any) -> NodeLocator:
    """Every node of a generic TopDown tree, level by level from the root (public structure)."""
    keys = [np.array([int(tree.root_key)], np.int64)]
    total = 1
    for L in range(int(tree.n_levels) - 1):
        child, _, _ = tree.expand(L, keys[-1])  # the true counts it returns are not read
        total += int(child.size)
        if total > MAX_ENUMERATED:
            raise ConstraintError(f"this tree ({type(tree).__name__}) has more than {MAX_ENUMERATED:,} nodes to "
                                  "enumerate for names; constraints on it need a tree type with a name index")
        keys.append(np.asarray(child, dtype=np.int64))
    names = np.concatenate([np.asarray(tree.namer.key_names(L, k), dtype=object) for L, k in enumerate(keys)])
    levels = np.concatenate([np.full(k.size, L, np.int64) for L, k in enumerate(keys)])
    return NodeLocator(tree, names, levels, np.concatenate(keys))
