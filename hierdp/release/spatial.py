"""A spatial release: a partition of the grid into rectangles with private counts (paper 002).

A :class:`SpatialRelease` holds the released *leaves* - cell rectangles ``[r0, r1) x [c0, c1)`` that
tile the public grid exactly once - with their values, and, for mechanisms that publish a whole tree
(QuadTree, kd-tree, AG after consistency), the :class:`SpatialTree` of every node. It answers range
queries under the **uniformity assumption** (a leaf's value is spread evenly over its cells), for
thousands of queries at once: the leaves are rasterised into a per-cell density (a 2-D difference
array), whose prefix sums give any cell-aligned rectangle in O(1); rectangles in coordinates are
answered exactly by bilinear interpolation of those prefix sums (the cumulative of a density that is
constant per cell is bilinear inside each cell).

``check_consistency()`` checks what the release promises: leaves inside the grid, tiling it exactly
once, finite values; for a tree, every internal node equal to the sum of its children (exactly for
integers, within 1e-9 relative for real values) and its children tiling it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from hierdp.hierarchy.spatial import SpatialDomain, prefix_sums_2d, rect_sums
from hierdp.release.base import BaseRelease

__all__ = ["CONSISTENCY_RTOL", "SpatialRelease", "SpatialTree"]

#: relative tolerance of the parent = sum of children check for real-valued trees (values are sums
#: of up to ~10^6 doubles: a few hundred ulps)
CONSISTENCY_RTOL = 1e-9


@dataclass(frozen=True)
class SpatialTree:
    """Every node of a released spatial tree (root first, parents before children).

    Attributes:
        parent: parent index per node (-1 for the root).
        rects: ``(n, 4)`` int64 ``[r0, r1, c0, c1]`` per node.
        values: released value per node.
        level: depth per node (root 0).
    """

    parent: np.ndarray
    rects: np.ndarray
    values: np.ndarray
    level: np.ndarray

    @property
    def n(self) -> int:
        """Number of nodes."""
        return int(self.parent.size)

    @property
    def is_leaf(self) -> np.ndarray:
        """Mask of nodes without children."""
        has = np.zeros(self.n, bool)
        p = self.parent[self.parent >= 0]
        has[p] = True
        return ~has

    def to_frame(self) -> pd.DataFrame:
        """One row per node: node, parent, level, r0, r1, c0, c1, value, leaf."""
        r = self.rects
        return pd.DataFrame({"node": np.arange(self.n), "parent": self.parent, "level": self.level,
                             "r0": r[:, 0], "r1": r[:, 1], "c0": r[:, 2], "c1": r[:, 3],
                             "value": self.values, "leaf": self.is_leaf})


@dataclass(kw_only=True, eq=False)
class SpatialRelease(BaseRelease):
    """Released leaves of a spatial partition (see the module docstring).

    Attributes:
        domain: the public box and grid.
        rects: ``(L, 4)`` int64 leaf rectangles ``[r0, r1, c0, c1]`` in cells (half-open).
        values: released value of each leaf (int64 counts, or float64 after post-processing).
        accounting: the typed :class:`~hierdp.release.accounting.Accounting`.
        mechanism, params, timings: provenance (``timings``: seconds per phase).
        tree: every released node, for mechanisms that publish a tree (else ``None``).
        details: mechanism figures that are public (tree height, leaves per height, ...).
        solver: the consistency solver, when one post-processed the release.
        axes: the names of the two coordinates in :meth:`to_frame` (``("lon", "lat")`` gives
            ``lon_min ... lat_max``); default ``("x", "y")``.
    """

    domain: SpatialDomain
    rects: np.ndarray
    values: np.ndarray
    accounting: Any
    mechanism: str = "spatial"
    params: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    tree: SpatialTree | None = None
    details: dict[str, Any] = field(default_factory=dict)
    solver: str | None = None
    axes: tuple[str, str] = ("x", "y")
    _density_prefix: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.rects = np.asarray(self.rects, dtype=np.int64).reshape(-1, 4)
        self.values = np.asarray(self.values)
        if self.values.shape != (self.rects.shape[0],):
            raise ValueError(f"values has shape {self.values.shape} for {self.rects.shape[0]} leaves")

    # -- the protocol -------------------------------------------------------------------------------
    def to_frame(self) -> pd.DataFrame:
        """One row per leaf: cell bounds, coordinates, area in cells and the released value."""
        r = self.rects
        d = self.domain
        x, y = self.axes
        return pd.DataFrame({
            "leaf": np.arange(r.shape[0]),
            "r0": r[:, 0], "r1": r[:, 1], "c0": r[:, 2], "c1": r[:, 3],
            f"{x}_min": d.x_min + r[:, 2] * d.cell_width, f"{x}_max": d.x_min + r[:, 3] * d.cell_width,
            f"{y}_min": d.y_min + r[:, 0] * d.cell_height, f"{y}_max": d.y_min + r[:, 1] * d.cell_height,
            "cells": (r[:, 1] - r[:, 0]) * (r[:, 3] - r[:, 2]),
            "value": self.values,
        })

    # -- saving and loading ---------------------------------------------------------------------------
    def _saved_structure(self) -> dict[str, Any]:
        from hierdp.release.encoding import encode

        d = self.domain
        return {**super()._saved_structure(), "axes": list(self.axes),
                "domain": encode({"x_min": d.x_min, "x_max": d.x_max, "y_min": d.y_min, "y_max": d.y_max,
                                  "rows": d.rows, "cols": d.cols}),
                "details": encode(dict(self.details))}

    def _saved_tables(self) -> dict[str, pd.DataFrame]:
        return {} if self.tree is None else {"tree": self.tree.to_frame()}

    @classmethod
    def _from_saved(cls, frame: pd.DataFrame, structure: dict[str, Any], *, accounting: Any,
                    params: dict[str, Any], tables: dict[str, pd.DataFrame]) -> SpatialRelease:
        rects = frame[["r0", "r1", "c0", "c1"]].to_numpy(dtype=np.int64)
        tree = None
        if "tree" in tables:
            t = tables["tree"]
            tree = SpatialTree(parent=t["parent"].to_numpy(dtype=np.int64),
                               rects=t[["r0", "r1", "c0", "c1"]].to_numpy(dtype=np.int64),
                               values=t["value"].to_numpy(), level=t["level"].to_numpy(dtype=np.int64))
        x, y = structure["axes"]
        return cls(domain=SpatialDomain(**structure["domain"]), rects=rects, values=frame["value"].to_numpy(),
                   accounting=accounting, mechanism=structure["mechanism"], params=params, tree=tree,
                   details=structure["details"], solver=structure["solver"], axes=(x, y))

    def check_consistency(self) -> list[str]:
        """Violations of what the release promises (empty list: all hold)."""
        out = _tiling_violations(self.rects, self.domain.shape, "leaf")
        v = self.values
        if not (np.issubdtype(v.dtype, np.integer) or np.all(np.isfinite(v))):
            out.append(f"{int(np.sum(~np.isfinite(v)))} leaf value(s) are NaN or infinite")
        if self.tree is not None:
            out.extend(_tree_violations(self.tree, self.domain.shape))
            leaves = self.tree.is_leaf
            if int(leaves.sum()) != self.rects.shape[0]:
                out.append(f"the tree has {int(leaves.sum())} leaves but the release lists {self.rects.shape[0]}")
        return out

    # -- range queries ------------------------------------------------------------------------------
    @property
    def n_leaves(self) -> int:
        """Number of released leaves."""
        return int(self.rects.shape[0])

    def density(self) -> np.ndarray:
        """The released values spread uniformly over their leaves' cells (``rows x cols`` float64)."""
        rows, cols = self.domain.shape
        r = self.rects
        area = ((r[:, 1] - r[:, 0]) * (r[:, 3] - r[:, 2])).astype(np.float64)
        d = self.values.astype(np.float64) / area
        return np.cumsum(np.cumsum(_stamp(r, d, (rows, cols)), axis=0), axis=1)[:rows, :cols]

    @property
    def density_prefix(self) -> np.ndarray:
        """Prefix sums of :meth:`density` (computed once)."""
        if self._density_prefix is None:
            self._density_prefix = prefix_sums_2d(self.density())
        return self._density_prefix

    def answer(self, queries: np.ndarray) -> np.ndarray:
        """Answers to cell-aligned rectangle queries ``(Q, 4)`` ``[r0, r1, c0, c1]`` (half-open) under
        the uniformity assumption (vectorized)."""
        q = np.asarray(queries, dtype=np.int64).reshape(-1, 4)
        rows, cols = self.domain.shape
        bad = ((q[:, 0] < 0) | (q[:, 0] > q[:, 1]) | (q[:, 1] > rows)
               | (q[:, 2] < 0) | (q[:, 2] > q[:, 3]) | (q[:, 3] > cols))
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise ValueError(f"query {k} {q[k].tolist()} is not a rectangle inside the {rows} x {cols} grid")
        return rect_sums(self.density_prefix, q[:, 0], q[:, 1], q[:, 2], q[:, 3])

    def answer_box(self, x_min: Any, x_max: Any, y_min: Any, y_max: Any) -> np.ndarray:
        """Answers to rectangles given in coordinates (arrays), exact under the uniformity
        assumption: partial cells count in proportion to their overlap. Parts outside the box count 0."""
        d = self.domain
        fx0, fx1 = ((np.asarray(v, dtype=np.float64) - d.x_min) / d.cell_width for v in (x_min, x_max))
        fy0, fy1 = ((np.asarray(v, dtype=np.float64) - d.y_min) / d.cell_height for v in (y_min, y_max))
        if np.any(fx0 > fx1) or np.any(fy0 > fy1):
            raise ValueError("every query needs x_min <= x_max and y_min <= y_max")
        p = self.density_prefix
        return (_cumulative(p, fy1, fx1) - _cumulative(p, fy0, fx1) - _cumulative(p, fy1, fx0)
                + _cumulative(p, fy0, fx0))

    def __repr__(self) -> str:
        return (f"SpatialRelease(mechanism={self.mechanism!r}, leaves={self.n_leaves:,}, "
                f"grid={self.domain.rows}x{self.domain.cols}, guarantee={self.guarantee!r})")


def _cumulative(prefix: np.ndarray, fy: np.ndarray, fx: np.ndarray) -> np.ndarray:
    """The released mass below ``fy`` and left of ``fx`` (fractional cell coordinates), by bilinear
    interpolation of the prefix table (exact for a density constant per cell)."""
    rows, cols = prefix.shape[0] - 1, prefix.shape[1] - 1
    y = np.clip(fy, 0.0, rows)
    x = np.clip(fx, 0.0, cols)
    i = np.minimum(np.floor(y).astype(np.int64), rows - 1)
    j = np.minimum(np.floor(x).astype(np.int64), cols - 1)
    a, b = y - i, x - j
    return ((1 - a) * (1 - b) * prefix[i, j] + a * (1 - b) * prefix[i + 1, j]
            + (1 - a) * b * prefix[i, j + 1] + a * b * prefix[i + 1, j + 1])


def _stamp(rects: np.ndarray, weight: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """The 2-D difference array of ``weight`` spread over each rectangle (its double cumulative sum
    is the per-cell total)."""
    rows, cols = shape
    width = cols + 1
    r = rects
    idx = np.concatenate([r[:, 0] * width + r[:, 2], r[:, 0] * width + r[:, 3],
                          r[:, 1] * width + r[:, 2], r[:, 1] * width + r[:, 3]])
    w = np.concatenate([weight, -weight, -weight, weight])
    return np.bincount(idx, weights=w, minlength=(rows + 1) * width).reshape(rows + 1, width)


def _tiling_violations(rects: np.ndarray, shape: tuple[int, int], what: str) -> list[str]:
    rows, cols = shape
    r = rects
    out: list[str] = []
    if r.shape[0] == 0:
        return [f"no {what}s"]
    bad = ((r[:, 0] < 0) | (r[:, 0] >= r[:, 1]) | (r[:, 1] > rows)
           | (r[:, 2] < 0) | (r[:, 2] >= r[:, 3]) | (r[:, 3] > cols))
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        return [f"{int(bad.sum())} {what}(s) are empty or outside the {rows} x {cols} grid, "
                f"e.g. {what} {k} {r[k].tolist()}"]
    diff = np.rint(_stamp(r, np.ones(r.shape[0]), shape)).astype(np.int64)
    cover = np.cumsum(np.cumsum(diff, axis=0), axis=1)[:rows, :cols]
    if np.any(cover != 1):
        n0, n2 = int(np.sum(cover == 0)), int(np.sum(cover > 1))
        i, j = np.argwhere(cover != 1)[0]
        out.append(f"the {what}s do not tile the grid exactly once: {n0} cell(s) uncovered, {n2} covered "
                   f"more than once, e.g. cell ({i}, {j})")
    return out


def _tree_violations(tree: SpatialTree, shape: tuple[int, int]) -> list[str]:
    out: list[str] = []
    n = tree.n
    p = tree.parent
    if n == 0 or p[0] != -1 or np.sum(p < 0) != 1:
        return ["the tree needs exactly one root, first"]
    kids = np.flatnonzero(p >= 0)
    if np.any(p[kids] >= kids):
        return ["parents must come before their children"]
    r = tree.rects
    pr = r[p[kids]]
    inside = (r[kids, 0] >= pr[:, 0]) & (r[kids, 1] <= pr[:, 1]) & (r[kids, 2] >= pr[:, 2]) & (r[kids, 3] <= pr[:, 3])
    if not inside.all():
        k = int(kids[np.flatnonzero(~inside)[0]])
        out.append(f"node {k} lies outside its parent {int(p[k])}")
    area = (r[:, 1] - r[:, 0]) * (r[:, 3] - r[:, 2])
    child_area = np.bincount(p[kids], weights=area[kids], minlength=n)
    internal = ~tree.is_leaf
    if np.any(child_area[internal] != area[internal]):
        k = int(np.flatnonzero(internal & (child_area != area))[0])
        out.append(f"the children of node {k} do not tile it")
    root = r[0]
    if root.tolist() != [0, shape[0], 0, shape[1]]:
        out.append(f"the root {root.tolist()} is not the whole grid")
    v = tree.values
    if np.issubdtype(v.dtype, np.integer):
        sums = np.zeros(n, np.int64)
        np.add.at(sums, p[kids], v[kids])
        bad = internal & (sums != v)
    else:
        if not np.all(np.isfinite(v)):
            return [*out, "tree values are NaN or infinite"]
        sums = np.bincount(p[kids], weights=v[kids], minlength=n)
        scale = np.maximum(1.0, np.bincount(p[kids], weights=np.abs(v[kids]), minlength=n))
        bad = internal & (np.abs(sums - v) > CONSISTENCY_RTOL * scale)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        out.append(f"{int(bad.sum())} node(s) differ from the sum of their children, e.g. node {k}: "
                   f"{v[k]!r} vs {sums[k]!r}")
    return out
