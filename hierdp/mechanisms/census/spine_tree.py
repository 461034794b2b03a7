"""Histograms over a spine as a level-wise tree of histogram nodes (what the engines run on).

The Census-style TopDown walks the spine's geolevels top down; every geounit holds a histogram of
K cells. :class:`SpineTree` gives the level-wise engine (:mod:`hierdp.mechanisms.levelwise`) that
view, with one level above the spine: level 0 is a virtual node holding the one public number (the
total, under bounded neighbours), level ``l + 1`` is geolevel ``l``. So the root geounit is solved
like any other chunk: one child whose K cells sum to its parent's single cell. Keys are geounit
indices of the spine (the virtual node's key is 0 at level 0).

The tree is sent once per run to process and Dask workers: it holds the spine's arrays, the
blocks' counts and the summed histograms of the geounits above the blocks
(:meth:`SpineHistograms.true_histograms <hierdp.mechanisms.census.SpineHistograms.true_histograms>`:
no dense copy of the blocks'). Its fingerprint (what a checkpoint compares on resume) covers the
spine (names, parents, levels, budget proportions) and the counts.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from hierdp._segments import gather_ranges

__all__ = ["SpineTree"]

#: the name of the virtual level above the spine (the public total)
TOTAL_LEVEL = "(total)"


class _SpineNamer:
    """Geounit names per level (public structure only)."""

    def __init__(self, names: np.ndarray) -> None:
        self._names = names

    def key_names(self, level: int, keys: np.ndarray) -> np.ndarray:
        keys = np.asarray(keys, dtype=np.int64)
        if level == 0:
            return np.array([TOTAL_LEVEL] * keys.size, dtype=object)
        return np.asarray(self._names, dtype=object)[keys].astype(str)

    def key_columns(self, level: int, keys: np.ndarray) -> dict[str, np.ndarray]:
        return {"geounit": self.key_names(level, keys)}


class SpineTree:
    """The level-wise view of a :class:`~hierdp.mechanisms.census.SpineHistograms` (see the module
    docstring).

    Attributes:
        n_levels: the spine's geolevels plus the virtual total level.
        level_names: ``["(total)", *spine.level_names]``.
        n_cells: K.
    """

    def __init__(self, data: Any) -> None:
        spine = data.spine
        self.spine = spine
        self.n_cells = int(data.n_cells)
        self._true = data.true_histograms()
        self._ptr, self._child = spine.children_csr()
        self.n_levels = int(spine.n_levels) + 1
        self.level_names = [TOTAL_LEVEL, *[str(x) for x in spine.level_names]]
        self.root_key = 0
        self.root_count = int(self._true.total)
        self.namer = _SpineNamer(np.asarray(spine.names, dtype=object))
        self.domain_source = data.domain_source
        self.domain_assumption = data.domain_assumption
        self._fingerprint: str | None = None

    def expand(self, level: int, parent_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Children of ``parent_keys`` (level ``level``): ``(child_keys, offsets, true (C, K))``."""
        pk = np.asarray(parent_keys, dtype=np.int64)
        if level == 0:  # the virtual total: its one child is the spine's root
            kids = np.zeros(pk.size, np.int64)
            offsets = np.arange(pk.size + 1, dtype=np.int64)
        else:
            starts = self._ptr[pk]
            kids_pos, offsets = gather_ranges(starts, self._ptr[pk + 1] - starts)
            kids = self._child[kids_pos]
        return kids, offsets, self._true.rows(kids)

    def child_counts(self, level: int, parent_keys: np.ndarray) -> np.ndarray:
        """Children per parent, without expanding (sizes the engines' partitions)."""
        pk = np.asarray(parent_keys, dtype=np.int64)
        if level == 0:
            return np.ones(pk.size, np.int64)
        return (self._ptr[pk + 1] - self._ptr[pk]).astype(np.int64)

    def true_rows(self, keys: np.ndarray) -> np.ndarray:
        """The true ``(len, K)`` histograms of geounits of one geolevel."""
        return self._true.rows(np.asarray(keys, dtype=np.int64))

    def totals(self, keys: np.ndarray) -> np.ndarray:
        """The geounits' true totals (published exactly at invariant geolevels)."""
        return self.true_rows(keys).sum(axis=1)

    def measured(self, keys: np.ndarray) -> np.ndarray:
        """Whether each geounit gets a measurement (γ > 0)."""
        return np.asarray(self.spine.measured)[np.asarray(keys, dtype=np.int64)]

    def gamma_num(self, keys: np.ndarray) -> np.ndarray:
        """The numerators of the geounits' budget proportions γ (over ``spine.gamma_den``)."""
        return np.asarray(self.spine.gamma_num)[np.asarray(keys, dtype=np.int64)]

    def key_names(self, level: int, keys: np.ndarray) -> np.ndarray:
        return self.namer.key_names(level, keys)

    def fingerprint(self) -> str:
        """SHA-256 of the spine and the counts (see the module docstring)."""
        if self._fingerprint is None:
            import pandas as pd

            s = self.spine
            h = hashlib.sha256()
            for part in ("hierdp.SpineTree/1", *s.level_names, str(s.gamma_den), str(self.domain_source),
                         str(self.domain_assumption or "")):
                h.update(str(part).encode("utf-8") + b"\0")
            for arr in (s.parent, s.level, s.gamma_num, self._true.counts.shape, self._true.counts):
                h.update(np.ascontiguousarray(np.asarray(arr), dtype=np.int64).tobytes())
            h.update(pd.util.hash_array(np.asarray(s.names, dtype=object).astype(str).astype(object)).tobytes())
            self._fingerprint = h.hexdigest()
        return self._fingerprint


class SpineCells:
    """The spine's (geounit, cell) variables as a tree with one count per node: what constraint sets
    are resolved against (:meth:`hierdp.Constraints.resolve`, :mod:`hierdp.constraints.cells`).

    Node ``(u, k)`` (cell k of geounit u) has key ``u * K + k`` at level ``spine.level[u] + 1``;
    its parent is cell k of u's parent, and the K cells of the root hang below the virtual node of
    the total (level 0, key 0), as the level-wise engine solves them. Only public structure: the
    root count is the public total; nothing here reads a cell's count.
    """

    #: how a refusal names rows the mechanism imposes itself (none here)
    public_rows_text = ""

    def __init__(self, tree: SpineTree, cells: Any) -> None:
        self.spine = tree.spine
        self.K = int(tree.n_cells)
        self.cells = np.asarray(cells, dtype=object)
        self.n_levels = tree.n_levels
        self.level_names = list(tree.level_names)
        self.root_key = 0
        self.root_count = tree.root_count
        self._ptr, self._child = tree._ptr, tree._child
        self._parent = np.asarray(self.spine.parent, dtype=np.int64)
        self.namer = _CellNamer(np.asarray(self.spine.names, dtype=object), self.cells, self.K)
        self.domain_source = tree.domain_source
        self.domain_assumption = tree.domain_assumption

    def cell_space(self) -> Any:
        """The geounits (as the spine names them) and the cells (as the release labels them)."""
        from hierdp.constraints.cells import CellSpace

        s = self.spine
        return CellSpace(np.asarray(s.names, dtype=object), np.asarray(s.level, dtype=np.int64),
                         [str(x) for x in s.level_names], self.cells, "cell", np.asarray(s.parent, dtype=np.int64))

    def cell_keys(self, node: np.ndarray, cell: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(level, key)`` of (geounit, cell index) pairs."""
        node = np.asarray(node, dtype=np.int64)
        return np.asarray(self.spine.level, dtype=np.int64)[node] + 1, node * self.K + np.asarray(cell, np.int64)

    def public_rows(self, levels: np.ndarray, keys: np.ndarray) -> None:
        return None

    def keys_of(self, geounits: np.ndarray) -> np.ndarray:
        """The keys of every cell of the given geounits, ``(len, K)`` (row-major: a LevelChunk's order)."""
        return np.asarray(geounits, dtype=np.int64)[:, None] * self.K + np.arange(self.K)[None, :]

    def parent_of(self, level: int, keys: np.ndarray) -> np.ndarray:
        keys = np.asarray(keys, dtype=np.int64)
        if level <= 1:
            return np.zeros(keys.size, np.int64)
        u, k = np.divmod(keys, self.K)
        return self._parent[u] * self.K + k

    def expand(self, level: int, parent_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Children of the given cells (structure only: the counts returned are zeros)."""
        pk = np.asarray(parent_keys, dtype=np.int64)
        if level == 0:
            kids = np.tile(np.arange(self.K, dtype=np.int64), pk.size)
            offsets = np.arange(pk.size + 1, dtype=np.int64) * self.K
        else:
            u, k = np.divmod(pk, self.K)
            starts = self._ptr[u]
            pos, offsets = gather_ranges(starts, self._ptr[u + 1] - starts)
            kids = self._child[pos] * self.K + np.repeat(k, np.diff(offsets))
        return kids, offsets, np.zeros(kids.size, np.int64)

    def counts(self, level: int, keys: np.ndarray) -> np.ndarray:
        raise TypeError("the cell view of a spine holds its public structure only, no counts")

    def nonzero(self, level: int) -> tuple[np.ndarray, np.ndarray]:
        raise TypeError("the cell view of a spine holds its public structure only, no counts")

    def level_size(self, level: int) -> int:
        if level == 0:
            return 1
        return int(np.sum(np.asarray(self.spine.level) == level - 1)) * self.K

    def key_names(self, level: int, keys: np.ndarray) -> np.ndarray:
        return self.namer.key_names(level, keys)


class _CellNamer:
    def __init__(self, names: np.ndarray, cells: np.ndarray, K: int) -> None:
        self._names, self._cells, self._K = names, cells, K

    def key_names(self, level: int, keys: np.ndarray) -> np.ndarray:
        keys = np.asarray(keys, dtype=np.int64)
        if level == 0:
            return np.array([TOTAL_LEVEL] * keys.size, dtype=object)
        u, k = np.divmod(keys, self._K)
        return np.array([f"{self._names[a]}|{self._cells[b]}" for a, b in zip(u.tolist(), k.tolist(), strict=True)],
                        dtype=object)

    def key_columns(self, level: int, keys: np.ndarray) -> dict[str, np.ndarray]:
        return {"node": self.key_names(level, keys)}
