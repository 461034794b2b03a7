"""Public constraint sets in the spatial consistency step (docs/constraints.md, "Spatial").

Entries name **rectangles of the grid** the way a spatial release names its leaves:

* ``(r, c)``: one cell (row ``r``, column ``c``);
* ``{"r0": .., "r1": .., "c0": .., "c1": ..}``: the cells ``[r0, r1) x [c0, c1)`` (the ``r0, r1,
  c0, c1`` columns of ``SpatialRelease.to_frame()``);
* ``{"x_min": .., "x_max": .., "y_min": .., "y_max": ..}``: every cell entirely inside that box of
  coordinates (a lake, a military zone, a forest).

An entry is about the count of points in its rectangle. ``zero`` makes every node of the released
tree that lies inside the rectangle 0 (structural zeros: water); ``bounds``, ``invariant`` and
``linear`` bound the count of a rectangle, which must then be a union of nodes of the tree (it is
written as the sum of its largest nodes inside it). Cell entries (``cells=``, ``cell_rule``) are
for histograms and are refused.

Two steps, like the TopDown family's resolution:

1. :meth:`SpatialConstraints.bind` - on the public grid, before any noise: every rectangle is
   checked (inside the grid, not empty), and the whole set is decided as one linear program over
   the blocks the rectangles' edges cut the grid into (values are real and signed, as in Hay's
   consistency); an infeasible set is refused with an irreducible subset of its entries. A set
   that passes is feasible on every tree (a tree's constraints are implied by the cells').
2. :meth:`SpatialConstraints.on_tree` - on the released tree: the nodes each rectangle covers.
   For a quadtree (its nodes depend on the grid and the height only) this runs before any noise;
   for trees whose splits are private (kd-tree, AG's second level, HTF) it runs once the partition
   is drawn, and a rectangle that is not a union of its nodes stops the release then, naming the
   entry and the budget spent.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from hierdp.constraints.entries import (
    ByLevels,
    CellRule,
    Invariant,
    LinearRow,
    NodeBounds,
    StructuralZero,
    describe_entry,
    entry_label,
    node_label,
)
from hierdp.constraints.errors import ConstraintError, ConstraintsInfeasible
from hierdp.constraints.report import StatedConstraints

__all__ = ["SpatialConstraints", "TreeConstraints", "rectangle_of"]

_CELL_KEYS = {"r0", "r1", "c0", "c1"}
_BOX_KEYS = {"x_min", "x_max", "y_min", "y_max"}
#: box edges within this fraction of a cell of a cell boundary are on it (coordinates are floats)
_EDGE_TOL = 1e-9


def rectangle_of(ref: Any, domain: Any, label: str) -> tuple[int, int, int, int]:
    """``(r0, r1, c0, c1)`` (half-open, in cells) of a node reference on ``domain``'s grid.

    Raises:
        ConstraintError: not a cell, a cell rectangle or a box; outside the grid; empty.
    """
    rows, cols = domain.shape
    if isinstance(ref, tuple) and len(ref) == 2 and all(_is_int(v) for v in ref):
        r, c = int(ref[0]), int(ref[1])
        out = (r, r + 1, c, c + 1)
    elif isinstance(ref, ByLevels) and {k for k, _ in ref.items} == _CELL_KEYS:
        cell: dict[str, Any] = dict(ref.items)
        if not all(_is_int(cell[k]) for k in _CELL_KEYS):
            raise ConstraintError(f"{label}: r0, r1, c0, c1 are cell indices (integers), got {node_label(ref)}")
        out = (int(cell["r0"]), int(cell["r1"]), int(cell["c0"]), int(cell["c1"]))
    elif isinstance(ref, ByLevels) and {k for k, _ in ref.items} == _BOX_KEYS:
        box = {k: _coordinate(x, label) for k, x in ref.items}
        if not (box["x_min"] < box["x_max"] and box["y_min"] < box["y_max"]):
            raise ConstraintError(f"{label}: the box {node_label(ref)} is empty")
        c0 = math.ceil((box["x_min"] - domain.x_min) / domain.cell_width - _EDGE_TOL)
        c1 = math.floor((box["x_max"] - domain.x_min) / domain.cell_width + _EDGE_TOL)
        r0 = math.ceil((box["y_min"] - domain.y_min) / domain.cell_height - _EDGE_TOL)
        r1 = math.floor((box["y_max"] - domain.y_min) / domain.cell_height + _EDGE_TOL)
        r0, r1, c0, c1 = max(r0, 0), min(r1, rows), max(c0, 0), min(c1, cols)
        if r0 >= r1 or c0 >= c1:
            raise ConstraintError(f"{label}: the box {node_label(ref)} holds no whole cell of the grid "
                                  f"({domain.describe()})")
        return r0, r1, c0, c1
    else:
        raise ConstraintError(f"{label}: {node_label(ref)} is not a cell of the grid; name a cell (row, col), "
                              "cells {r0, r1, c0, c1} or a box {x_min, x_max, y_min, y_max}")
    r0, r1, c0, c1 = out
    if not (0 <= r0 < r1 <= rows and 0 <= c0 < c1 <= cols):
        raise ConstraintError(f"{label}: cells [{r0}, {r1}) x [{c0}, {c1}) are not a non-empty rectangle of the "
                              f"{rows} x {cols} grid")
    return out


def _coordinate(v: Any, label: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not math.isfinite(float(v)):
        raise ConstraintError(f"{label}: a box's coordinates are finite numbers, got {v!r}")
    return float(v)


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


@dataclass
class TreeConstraints:
    """A constraint set bound to one released tree: what the consistency step poses.

    Attributes:
        fixed: per node, the value it is fixed at (NaN: free): zeros and single-node invariants.
        matrix: ``scipy.sparse.csr_matrix`` of the rows over the nodes (None without rows).
        lower, upper: row bounds.
        names: row names (the entries').
        stats: public figures (nodes zeroed, rows, zero cells in nodes that also hold other cells).
    """

    fixed: np.ndarray
    matrix: Any
    lower: np.ndarray
    upper: np.ndarray
    names: np.ndarray
    stats: dict[str, Any]

    @property
    def n_rows(self) -> int:
        return 0 if self.matrix is None else int(self.matrix.shape[0])


class SpatialConstraints(StatedConstraints):
    """A constraint set bound to a spatial grid (see the module docstring).

    Attributes:
        constraints: the set.
        rects: ``(m, 4)`` the rectangle of each entry (``r0, r1, c0, c1``).
        stats: public figures for the accounting (updated by :meth:`on_tree`).
    """

    def __init__(self, constraints: Any, domain: Any, rects: np.ndarray, owner: np.ndarray,
                 stats: dict[str, Any]) -> None:
        self.constraints = constraints
        self.domain = domain
        self.rects = rects
        self._owner = owner  # the entry of each rectangle
        self.stats = stats
        self._block_cache: tuple[np.ndarray, np.ndarray] | None = None

    @classmethod
    def bind(cls, constraints: Any, domain: Any, *, time_limit: float | None = 60.0) -> SpatialConstraints:
        """Bind ``constraints`` to the grid of ``domain`` and decide it before any noise.

        Raises:
            ConstraintError: a cell entry, a reference that is not a rectangle of the grid.
            ConstraintsInfeasible: the set cannot hold on the grid (an irreducible subset named).
        """
        t0 = time.perf_counter()
        entries = constraints.entries
        rects = []
        for e in entries:
            label = f"{e.kind} {entry_label(e)}"
            if isinstance(e, CellRule) or getattr(e, "cells", None) is not None:
                raise ConstraintError(f"{label} is about histogram cells; a spatial release has one count per cell of "
                                      "its grid (name cells and rectangles instead)")
            refs = [n for n, _ in e.terms] if isinstance(e, LinearRow) else [e.node]
            rects.append([rectangle_of(r, domain, label) for r in refs])
        flat = np.array([r for rs in rects for r in rs], dtype=np.int64).reshape(-1, 4)
        owner = np.repeat(np.arange(len(entries)), [len(rs) for rs in rects])
        out = cls(constraints, domain, flat, owner, {})
        kinds: dict[str, int] = {}
        for e in entries:
            kinds[e.kind] = kinds.get(e.kind, 0) + 1
        out.stats = {"sha256": constraints.digest(), "entries": len(entries), "kinds": kinds,
                     "feasibility_checked": True}
        out._check_feasible(time_limit)
        out.stats["resolve_s"] = round(time.perf_counter() - t0, 4)
        return out

    # -- before any noise: the set on the grid's blocks ----------------------------------------------
    def _blocks(self) -> tuple[np.ndarray, np.ndarray]:
        """The grid cut at every rectangle edge: ``(inside, area)``, ``inside[j, b]`` True when block
        ``b`` lies in rectangle ``j``."""
        if self._block_cache is not None:
            return self._block_cache
        rows, cols = self.domain.shape
        re = np.unique(np.concatenate([[0, rows], self.rects[:, 0], self.rects[:, 1]]))
        ce = np.unique(np.concatenate([[0, cols], self.rects[:, 2], self.rects[:, 3]]))
        br0, bc0 = np.meshgrid(re[:-1], ce[:-1], indexing="ij")
        br1, bc1 = np.meshgrid(re[1:], ce[1:], indexing="ij")
        br0, br1, bc0, bc1 = br0.ravel(), br1.ravel(), bc0.ravel(), bc1.ravel()
        R = self.rects
        inside = ((br0[None, :] >= R[:, 0:1]) & (br1[None, :] <= R[:, 1:2]) & (bc0[None, :] >= R[:, 2:3])
                  & (bc1[None, :] <= R[:, 3:4]))
        self._block_cache = (inside, (br1 - br0) * (bc1 - bc0))
        return self._block_cache

    def _grid_problem(self, items: list[int] | None) -> Any:
        """The set's entries ``items`` (all when None) as a continuous signed problem on the blocks."""
        from scipy.sparse import csr_matrix

        from hierdp.models import Problem

        entries = self.constraints.entries
        chosen = range(len(entries)) if items is None else items
        inside, _ = self._blocks()
        nb = inside.shape[1]
        parent = np.concatenate([[-1], np.zeros(nb, np.int64)])
        lower, upper = np.full(nb + 1, -np.inf), np.full(nb + 1, np.inf)
        rows, lo, hi = [], [], []
        for i in chosen:
            e = entries[i]
            pos = np.flatnonzero(self._owner == i)
            if isinstance(e, StructuralZero):
                blocks = np.flatnonzero(inside[pos[0]])
                lower[1 + blocks], upper[1 + blocks] = 0.0, 0.0
                continue
            coefs = [c for _, c in e.terms] if isinstance(e, LinearRow) else [1]
            row = np.zeros(nb + 1)
            for p, c in zip(pos, coefs, strict=True):
                row[1:] += float(c) * inside[p]
            rows.append(row)
            lo_v, hi_v = _sides(e)
            lo.append(lo_v)
            hi.append(hi_v)
        problem = Problem(parent, np.full(nb + 1, np.nan), objective="l1", integer=False, nonnegative=False,
                          lower=lower, upper=upper)
        if rows:
            problem.add_constraints(csr_matrix(np.array(rows)), np.array(lo), np.array(hi), name="rows")
        return problem

    def _check_feasible(self, time_limit: float | None) -> None:
        from hierdp.constraints.feasibility import decide, irreducible_subset
        from hierdp.models import ProblemError

        def feasible(items: list[int] | None) -> bool | None:
            try:
                return decide(self._grid_problem(items), time_limit=time_limit)
            except ProblemError:
                return False

        verdict = feasible(None)
        if verdict is True:
            return
        if verdict is None:
            raise ConstraintError(f"could not decide within {time_limit} s whether the constraints can all hold on the "
                                  "grid; nothing was released")
        entries = self.constraints.entries
        subset = irreducible_subset(list(range(len(entries))), feasible)
        if not subset:
            raise ConstraintsInfeasible("the constraints cannot all hold on the grid (no irreducible subset named); "
                                        "nothing was released")
        named = [entries[i] for i in subset]
        lines = "; ".join(describe_entry(e) + (f" ({e.where})" if e.where else "") for e in named)
        what = (f"entry {lines} cannot hold" if len(named) == 1 else
                f"these {len(named)} cannot hold together (each of them is needed for the conflict): {lines}")
        raise ConstraintsInfeasible(f"the constraints cannot all hold on the grid: {what}; nothing was released",
                                    entries=[e.name for e in named])

    # -- on a released tree ---------------------------------------------------------------------------
    def on_tree(self, parent: np.ndarray, rects: np.ndarray) -> TreeConstraints:
        """The set over the nodes of a tree (``rects``: ``(n, 4)`` node rectangles, parents first).

        Raises:
            ConstraintError: a rectangle of a bound, invariant or row is not a union of the tree's nodes.
        """
        from scipy.sparse import csr_matrix

        parent = np.asarray(parent, dtype=np.int64)
        rects = np.asarray(rects, dtype=np.int64)
        n = parent.size
        area = (rects[:, 1] - rects[:, 0]) * (rects[:, 3] - rects[:, 2])
        fixed = np.full(n, np.nan)
        entries = self.constraints.entries
        r_cols: list[np.ndarray] = []
        r_vals: list[np.ndarray] = []
        lo: list[float] = []
        hi: list[float] = []
        names: list[str] = []
        zeroed = shared_zero_cells = 0
        for i, e in enumerate(entries):
            pos = np.flatnonzero(self._owner == i)
            coefs = [c for _, c in e.terms] if isinstance(e, LinearRow) else [1]
            cols: list[np.ndarray] = []
            vals: list[np.ndarray] = []
            for p, c in zip(pos, coefs, strict=True):
                R = self.rects[p]
                inside = ((rects[:, 0] >= R[0]) & (rects[:, 1] <= R[1]) & (rects[:, 2] >= R[2])
                          & (rects[:, 3] <= R[3]))
                if isinstance(e, StructuralZero):
                    fixed[inside] = 0.0
                    zeroed += int(inside.sum())
                    top = inside & ~np.where(parent >= 0, inside[np.maximum(parent, 0)], False)
                    shared_zero_cells += int((R[1] - R[0]) * (R[3] - R[2]) - area[top].sum())
                    continue
                top = np.flatnonzero(inside & ~np.where(parent >= 0, inside[np.maximum(parent, 0)], False))
                covered = int(area[top].sum())
                whole = int((R[1] - R[0]) * (R[3] - R[2]))
                if covered != whole:
                    raise ConstraintError(
                        f"{e.kind} {entry_label(e)}: cells [{R[0]}, {R[1]}) x [{R[2]}, {R[3]}) are not a union of nodes "
                        f"of the released tree ({whole - covered:,} of its {whole:,} cells lie in nodes that also hold "
                        "cells outside it), so its count is not a sum of released values")
                cols.append(top)
                vals.append(np.full(top.size, float(c)))
            if isinstance(e, StructuralZero):
                continue
            col = np.concatenate(cols)
            val = np.concatenate(vals)
            lo_v, hi_v = _sides(e)
            if isinstance(e, Invariant) and col.size == 1:
                # one node: fixed, which the closed form honours (the grid check has ruled out a
                # conflict with a zero or another invariant: the node's cells would disagree)
                fixed[col[0]] = lo_v
                continue
            r_cols.append(col)
            r_vals.append(val)
            lo.append(lo_v)
            hi.append(hi_v)
            names.append(e.name)
        matrix = None
        if r_cols:
            ptr = np.concatenate([[0], np.cumsum([c.size for c in r_cols])])
            matrix = csr_matrix((np.concatenate(r_vals), np.concatenate(r_cols), ptr), shape=(len(r_cols), n))
            matrix.sum_duplicates()
        stats = {"zeroed_nodes": zeroed, "rows": len(r_cols), "fixed_nodes": int((~np.isnan(fixed)).sum()),
                 "zero_cells_in_shared_nodes": shared_zero_cells}
        self.stats.update(stats)
        return TreeConstraints(fixed, matrix, np.array(lo, dtype=float), np.array(hi, dtype=float),
                               np.array(names, dtype=object), stats)

    def applied(self) -> str:
        s = self.stats
        if "rows" not in s:
            return "in the consistency step"
        return (f"{s['fixed_nodes']} tree nodes fixed (zeros and invariants), {s['rows']} rows over tree nodes, in the "
                "consistency step")


def _sides(e: Any) -> tuple[float, float]:
    if isinstance(e, Invariant):
        return float(e.value), float(e.value)
    if isinstance(e, StructuralZero):
        return 0.0, 0.0
    assert isinstance(e, (LinearRow, NodeBounds))
    return (-np.inf if e.lower is None else float(e.lower)), (np.inf if e.upper is None else float(e.upper))
