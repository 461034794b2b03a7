"""A release that is a histogram per node of a tree (group sizes per region, attribute cells per geounit).

Paper 001 releases, for every region of a hierarchy, how many groups have each size k; the Census
TopDown of paper 003 releases, for every geounit, a histogram over attribute cells. Both are a tree
of nodes with a *vector* of counts per node, consistent cell by cell (a parent's histogram is the
sum of its children's). :class:`NodeHistogramRelease` stores them as arrays:

* the public structure: node names, ``parent`` index (-1 for a root), ``level`` of every node and
  the level names; nodes are numbered level by level (parents before children);
* ``values``: an ``(n_nodes, n_cells)`` array (int64 for integer releases) and the cell labels.

``to_frame()`` is tidy (one row per node and cell); ``check_consistency()`` checks, exactly in
integers, that every parent with children equals their sum in every cell, and the promises the
release makes (``nonnegative``, ``integer``, optional level totals).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from collections.abc import Sequence

import numpy as np
import pandas as pd

from hierdp.release.base import BaseRelease
from hierdp.release.labels import level_columns

__all__ = ["NodeHistogramRelease"]


@dataclass(kw_only=True, eq=False)
class NodeHistogramRelease(BaseRelease):
    """A histogram per node of a tree, consistent per cell.

    Attributes:
        names: one name per node (level order: every parent precedes its children).
        parent: int64 index of each node's parent, -1 for a root.
        level: int64 level of each node (roots 0).
        level_names: names of the levels.
        cells: labels of the histogram cells (e.g. sizes 1..K, or attribute cells).
        values: ``(n_nodes, n_cells)`` released counts.
        accounting: a :class:`~hierdp.release.accounting.Accounting`.
        mechanism: the mechanism's name; ``solver``: the post-processing solver, if any.
        params: the mechanism's parameters; ``timings``: seconds per phase.
        nonnegative, integer: promises that :meth:`check_consistency` verifies.
        level_totals: when given, the total every level must sum to (e.g. paper 001's public
            number of groups G: "faithfulness").
        consistent: whether the release promises cell-wise consistency (an OP-based baseline that
            rounds region by region does not; its violations are then *counted*, not promised).
        cell_name: the column name of the cells in :meth:`to_frame`.
    """

    names: np.ndarray
    parent: np.ndarray
    level: np.ndarray
    level_names: Sequence[str]
    cells: np.ndarray
    values: np.ndarray
    accounting: Any
    mechanism: str = "histogram"
    solver: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    nonnegative: bool = True
    integer: bool = True
    level_totals: int | None = None
    consistent: bool = True
    cell_name: str = "cell"

    def __post_init__(self) -> None:
        self.names = np.asarray(self.names, dtype=object)
        self.parent = np.asarray(self.parent, dtype=np.int64)
        self.level = np.asarray(self.level, dtype=np.int64)
        self.cells = np.asarray(self.cells)
        self.values = np.asarray(self.values)
        n = self.names.size
        if self.values.ndim != 2 or self.values.shape != (n, self.cells.size):
            raise ValueError(f"values must have shape ({n}, {self.cells.size}), got {self.values.shape}")
        if self.parent.shape != (n,) or self.level.shape != (n,):
            raise ValueError("parent and level need one entry per node")
        has = self.parent >= 0
        if np.any(self.parent[has] >= np.flatnonzero(has)):
            raise ValueError("nodes must be numbered level by level: every parent before its children")

    # ------------------------------------------------------------------ views
    @property
    def n_nodes(self) -> int:
        """Number of nodes."""
        return int(self.names.size)

    @property
    def n_levels(self) -> int:
        """Number of levels."""
        return int(self.level.max()) + 1 if self.level.size else 0

    def level_values(self, level: int) -> pd.DataFrame:
        """The histograms of one level: one row per node, one column per cell."""
        idx = np.flatnonzero(self.level == level)
        return pd.DataFrame(self.values[idx], index=pd.Index(self.names[idx], name="node"),
                            columns=pd.Index(self.cells, name=self.cell_name))

    def to_frame(self) -> pd.DataFrame:
        """One row per (node, cell): ``level, level_name``, one column per level below the root
        (the node's value at that level, :func:`hierdp.release.labels.level_columns`), ``node``,
        ``parent`` (the parent's name, empty for a root), ``<cell_name>``, ``value``."""
        n, k = self.values.shape
        parent_name = np.where(self.parent >= 0, self.names[np.maximum(self.parent, 0)], "")
        data: dict[str, Any] = {
            "level": np.repeat(self.level, k),
            "level_name": np.repeat(np.asarray(self.level_names, dtype=object)[self.level], k),
        }
        cols = level_columns(self.names, self.parent, self.level, self.level_names)
        data.update({c: np.repeat(v, k) for c, v in cols.items() if c != self.cell_name})
        data.update({"node": np.repeat(self.names, k), "parent": np.repeat(parent_name, k),
                     self.cell_name: np.tile(self.cells, n), "value": self.values.ravel()})
        return pd.DataFrame(data)

    # ------------------------------------------------------------------ saving and loading
    def _saved_structure(self) -> dict[str, Any]:
        from hierdp.release.encoding import encode

        return {**super()._saved_structure(), "level_names": [str(x) for x in self.level_names],
                "cells": encode(self.cells), "cell_name": self.cell_name, "nonnegative": bool(self.nonnegative),
                "integer": bool(self.integer), "level_totals": encode(self.level_totals),
                "consistent": bool(self.consistent)}

    @classmethod
    def _from_saved(cls, frame: pd.DataFrame, structure: dict[str, Any], *, accounting: Any,
                    params: dict[str, Any], tables: dict[str, pd.DataFrame]) -> NodeHistogramRelease:
        cells = np.asarray(structure["cells"])
        k = max(cells.size, 1)
        if len(frame) % k:
            raise ValueError(f"saved histogram release: {len(frame)} rows are not whole histograms of {k} cells")
        first = frame.iloc[::k]
        names = first["node"].to_numpy(dtype=object)
        level = first["level"].to_numpy(dtype=np.int64)
        parent = np.full(names.size, -1, np.int64)
        where = {(int(lv), nm): i for i, (lv, nm) in enumerate(zip(level.tolist(), names.tolist(), strict=True))}
        for i, (lv, pn) in enumerate(zip(level.tolist(), first["parent"].tolist(), strict=True)):
            if lv > 0:
                parent[i] = where[(lv - 1, pn)]
        values = frame["value"].to_numpy().reshape(names.size, cells.size)
        return cls(names=names, parent=parent, level=level, level_names=list(structure["level_names"]), cells=cells,
                   values=values, accounting=accounting, mechanism=structure["mechanism"], solver=structure["solver"],
                   params=params, nonnegative=structure["nonnegative"], integer=structure["integer"],
                   level_totals=structure["level_totals"], consistent=structure["consistent"],
                   cell_name=structure["cell_name"])

    # ------------------------------------------------------------------ invariants
    def consistency_violations(self) -> np.ndarray:
        """Boolean ``(n_nodes, n_cells)`` mask: parent cells that differ from their children's sum
        (computed exactly: int64 for integer values, float otherwise)."""
        n, k = self.values.shape
        has = self.parent >= 0
        exact = np.issubdtype(self.values.dtype, np.integer)
        sums = np.zeros((n, k), dtype=np.int64 if exact else float)
        np.add.at(sums, self.parent[has], self.values[has])
        n_children = np.bincount(self.parent[has], minlength=n)
        if exact:
            differ = sums != self.values
        else:
            differ = np.abs(sums - self.values) > 1e-9 * np.maximum(1.0, np.abs(self.values))
        return differ & (n_children > 0)[:, None]

    def count_violations(self) -> int:
        """Number of (parent node, cell) pairs whose value differs from the sum of its children
        (paper 001's #CV)."""
        return int(self.consistency_violations().sum())

    def check_consistency(self) -> list[str]:
        """Violations of the release's promises (empty: all hold)."""
        bad: list[str] = []
        v = self.values
        if self.integer and not np.issubdtype(v.dtype, np.integer):
            bad.append(f"values are not integers ({v.dtype})")
        if self.nonnegative and np.any(v < 0):
            i, j = np.argwhere(v < 0)[0]
            bad.append(f"negative value {v[i, j]} at node {self.names[i]!r}, {self.cell_name} {self.cells[j]!r}")
        if self.consistent:
            mask = self.consistency_violations()
            if mask.any():
                i, j = np.argwhere(mask)[0]
                bad.append(f"{int(mask.sum())} (node, {self.cell_name}) pairs differ from their children's sum, "
                           f"e.g. node {self.names[i]!r}, {self.cell_name} {self.cells[j]!r}")
        if self.level_totals is not None:
            for lev in range(self.n_levels):
                tot = v[self.level == lev].sum()
                if tot != self.level_totals:
                    bad.append(f"level {lev} ({self.level_names[lev]}) sums to {tot}, not {self.level_totals}")
        return bad

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(mechanism={self.mechanism!r}, nodes={self.n_nodes:,}, "
                f"cells={self.cells.size:,}, guarantee={self.guarantee!r})")
