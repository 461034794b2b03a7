"""Constraint sets over histograms: one histogram of cells per node of a hierarchy.

Histogram releases (group sizes: a histogram of sizes per region; the Census TopDown: a histogram
of cells per geounit) have one variable per ``(node, cell)``. A :class:`CellSpace` describes them
from public structure only - the node names and levels (of a :class:`~hierdp.hierarchy.Hierarchy`,
or any list of named nodes) and the cell labels - and :func:`bind_cells` binds a
:class:`~hierdp.constraints.Constraints` to it:

* a node is named as for trees (a name, a tuple of level values, level columns); a cell by its
  label as the release names it (a size ``3``; ``"gq_persons"``; a tuple of attribute values) - a
  string also matches a label whose text it is, since JSON object keys are strings;
* a node quantity is the sum of the entry's ``cells`` of the node, or, without ``cells``, the
  node's total (the sum of all its cells);
* ``linear`` rows sum their terms' quantities; ``bounds`` and ``invariant`` bound one quantity;
  ``zero`` makes every listed cell (every cell, without ``cells``) 0; a ``cell_rule`` becomes one
  row over the node's cells in every node of its levels (or in each listed node).

The result, :class:`CellConstraints`, holds every entry as rows over ``(node, cell)`` pairs (to
check a release exactly, in integers), the rows over several variables (to pose), and the
variables' intervals (rows over one variable, zeros, single-cell bounds: what a fast path that
takes bounds can honour). Nothing here reads a count.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hierdp.constraints.entries import (
    CellRule,
    Invariant,
    LinearRow,
    StructuralZero,
    entry_label,
    node_label,
)
from hierdp.constraints.errors import ConstraintError, ConstraintsInfeasible
from hierdp.constraints.report import StatedConstraints

__all__ = ["CellConstraints", "CellRows", "CellSpace", "bind_cells"]


class _Levels:
    """What :class:`~hierdp.constraints.nodes.NodeLocator` reads of a tree: its level names."""

    def __init__(self, level_names: Sequence[str]) -> None:
        self.level_names = list(level_names)


@dataclass(frozen=True)
class CellSpace:
    """The variables of a hierarchy of histograms: ``(node, cell)`` for every node and cell.

    Attributes:
        names: node names (as the release names them), one per node.
        level: the level of each node (0: the root).
        level_names: one name per level.
        cells: the cell labels (as the release names them).
        cell_name: what a cell is (``"size"``, ``"cell"``), for messages.
        parent: the parent of each node (-1 for the root), or None (cell rules are then not
            carried up: :meth:`CellConstraints.carried_rules`).
    """

    names: np.ndarray
    level: np.ndarray
    level_names: list[str]
    cells: np.ndarray
    cell_name: str = "cell"
    parent: np.ndarray | None = None
    _cell_index: dict[Any, int] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        labels = list(np.asarray(self.cells, dtype=object).tolist())
        index: dict[Any, int] = {}
        for i, c in enumerate(labels):
            if c in index:
                raise ConstraintError(f"the histogram's {self.cell_name} labels are not unique ({c!r} twice)")
            index[c] = i
        for i, c in enumerate(labels):  # a JSON key is a string: "3" names the size 3
            index.setdefault(str(c), i)
        object.__setattr__(self, "_cell_index", index)

    @classmethod
    def of_hierarchy(cls, hierarchy: Any, cells: Sequence[Any], *, cell_name: str = "cell") -> CellSpace:
        """The cell space of a :class:`~hierdp.hierarchy.Hierarchy` (node names and levels as it names them)."""
        return cls(np.asarray(hierarchy.names, dtype=object), np.asarray(hierarchy.level, dtype=np.int64),
                   [str(x) for x in hierarchy.level_names], np.asarray(list(cells), dtype=object), cell_name,
                   np.asarray(hierarchy.parent, dtype=np.int64))

    @property
    def n_nodes(self) -> int:
        return int(np.asarray(self.names).size)

    @property
    def n_cells(self) -> int:
        return int(np.asarray(self.cells).size)

    def locate_nodes(self, refs: Sequence[Any]) -> tuple[np.ndarray, list[str | None]]:
        """Node indices of ``refs`` (-1 where not found) and, per reference, why not."""
        from hierdp.constraints.nodes import NodeLocator

        n = self.n_nodes
        locator = NodeLocator(_Levels(self.level_names), np.asarray(self.names, dtype=object),
                              np.asarray(self.level, dtype=np.int64), np.arange(n, dtype=np.int64))
        _, keys, problems = locator.locate(list(refs))
        return keys, problems

    def locate_cells(self, refs: Sequence[Any] | None, label: str) -> np.ndarray:
        """Cell indices of ``refs`` (all cells when None).

        Raises:
            ConstraintError: an unknown cell (naming the entry and the labels).
        """
        if refs is None:
            return np.arange(self.n_cells, dtype=np.int64)
        out = []
        for ref in refs:
            i = self._cell_index.get(ref)
            if i is None:
                shown = ", ".join(repr(c) for c in np.asarray(self.cells, dtype=object)[:8].tolist())
                more = ", ..." if self.n_cells > 8 else ""
                raise ConstraintError(f"{label}: unknown {self.cell_name} {ref!r}; the {self.cell_name}s are "
                                      f"[{shown}{more}]")
            out.append(i)
        return np.asarray(out, dtype=np.int64)


@dataclass
class CellRows:
    """Rows ``lo <= sum(coef * x[node, cell]) <= hi`` as CSR arrays (one entry per term).

    Attributes:
        ptr: CSR row pointers (m + 1).
        node, cell, coef: per term (int64).
        lo, hi: per row (float64, ±inf for an open side).
        origin: per row, the index of the entry it comes from.
        at: per row, the node a cell rule was expanded at (-1 for other entries).
    """

    ptr: np.ndarray
    node: np.ndarray
    cell: np.ndarray
    coef: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    origin: np.ndarray
    at: np.ndarray

    @property
    def n_rows(self) -> int:
        return int(self.ptr.size - 1)

    @property
    def row_of_term(self) -> np.ndarray:
        return np.repeat(np.arange(self.n_rows, dtype=np.int64), np.diff(self.ptr))

    def take(self, rows: np.ndarray) -> CellRows:
        rows = np.asarray(rows, dtype=np.int64)
        sizes = np.diff(self.ptr)[rows]
        ptr = np.zeros(rows.size + 1, np.int64)
        np.cumsum(sizes, out=ptr[1:])
        idx = np.repeat(self.ptr[:-1][rows], sizes) + (np.arange(int(ptr[-1])) - np.repeat(ptr[:-1], sizes))
        return CellRows(ptr, self.node[idx], self.cell[idx], self.coef[idx], self.lo[rows], self.hi[rows],
                        self.origin[rows], self.at[rows])

    def matrix(self, column: Callable[[np.ndarray, np.ndarray], np.ndarray], n_columns: int) -> Any:
        """The rows as a ``scipy.sparse.csr_matrix`` over the problem's columns (``column(node, cell)``
        gives each term's column, vectorized); terms on the same column are summed."""
        from scipy.sparse import csr_matrix

        cols = np.asarray(column(self.node, self.cell), dtype=np.int64)
        m = csr_matrix((self.coef.astype(float), (self.row_of_term, cols)), shape=(self.n_rows, n_columns))
        m.sum_duplicates()
        return m

    def activity(self, values: np.ndarray) -> list[int]:
        """Per row, ``sum(coef * values[node, cell])`` exactly (Python integers)."""
        v = np.asarray(values)[self.node, self.cell]
        if v.dtype.kind == "f":
            if not np.all(np.isfinite(v)) or np.any(v != np.rint(v)):
                raise ValueError("the values are not integers")
            v = v.astype(np.int64)
        terms = self.coef.astype(np.int64) * v.astype(np.int64)
        big = float(np.abs(self.coef).max(initial=0)) * float(np.abs(v).max(initial=0))
        if big * float(np.diff(self.ptr).max(initial=0)) < 2.0 ** 62:
            out = np.zeros(self.n_rows, np.int64)
            np.add.at(out, self.row_of_term, terms)
            return [int(x) for x in out]
        acc = [0] * self.n_rows
        for c, x, r in zip(self.coef.tolist(), v.tolist(), self.row_of_term.tolist(), strict=True):
            acc[r] += int(c) * int(x)
        return acc


class CellConstraints(StatedConstraints):
    """A constraint set bound to a :class:`CellSpace` (see the module docstring).

    Attributes:
        constraints: the set.
        space: the cell space.
        entry_rows: every entry as rows over ``(node, cell)`` (what a release is checked against).
        rows: the rows over several variables (what a general solver is given).
        var_node, var_cell, var_lo, var_hi: the intervals of single variables (rows over one
            variable, zeros, single-cell bounds and invariants), one per variable, intersected.
        stats: public figures for the accounting.
    """

    def __init__(self, constraints: Any, space: CellSpace, entry_rows: CellRows, rows: CellRows,
                 var_node: np.ndarray, var_cell: np.ndarray, var_lo: np.ndarray, var_hi: np.ndarray,
                 stats: dict[str, Any]) -> None:
        self.constraints = constraints
        self.space = space
        self.entry_rows = entry_rows
        self.rows = rows
        self.var_node, self.var_cell, self.var_lo, self.var_hi = var_node, var_cell, var_lo, var_hi
        self.stats = stats

    @property
    def n_bounded(self) -> int:
        """Variables with an interval."""
        return int(self.var_node.size)

    def applied(self) -> str:
        s = self.stats
        return (f"{s['rows']} rows over several (node, {self.space.cell_name}) variables and {s['bounded_variables']} "
                f"variable intervals, in the post-processing solve")

    def bounds(self, column: Callable[[np.ndarray, np.ndarray], np.ndarray], n_columns: int
               ) -> tuple[np.ndarray, np.ndarray]:
        """``(lower, upper)`` per column (``-inf`` / ``inf`` where a column has no interval)."""
        lo = np.full(n_columns, -np.inf)
        hi = np.full(n_columns, np.inf)
        cols = np.asarray(column(self.var_node, self.var_cell), dtype=np.int64)
        lo[cols], hi[cols] = self.var_lo, self.var_hi
        return lo, hi

    def carried_rules(self) -> CellRows:
        """The cell rules carried up where they aggregate exactly: a rule that holds in *every* child
        of a node holds, summed, in the node (bounds times the number of nodes summed), as the DAS
        aggregates its block-level edit constraints to every geolevel. Implied by the entries, so
        they change no feasible set; level-wise engines need them to keep finer levels feasible.
        ``at`` is the node, ``origin`` the rule's entry."""
        parent = self.space.parent
        er = self.entry_rows
        if parent is None or not er.n_rows:
            return er.take(np.zeros(0, np.int64))
        n = self.space.n_nodes
        level = np.asarray(self.space.level, dtype=np.int64)
        has = parent >= 0
        n_children = np.bincount(parent[has], minlength=n)
        parts: list[CellRows] = []
        rule_rows = np.flatnonzero(er.at >= 0)
        for origin in np.unique(er.origin[rule_rows]):
            rows_o = rule_rows[er.origin[rule_rows] == origin]
            template = er.take(rows_o[:1])  # the rule's terms, at its first node
            weight = np.zeros(n, np.int64)
            weight[er.at[rows_o]] = 1
            holds = weight > 0
            for L in range(int(level.max()), 0, -1):
                kids = np.flatnonzero(holds & (level == L))
                if not kids.size:
                    continue
                par = parent[kids]
                cnt = np.bincount(par, minlength=n)
                full = np.flatnonzero((cnt > 0) & (cnt == n_children) & ~holds)
                if not full.size:
                    continue
                weight[full] = np.bincount(par, weights=weight[kids], minlength=n)[full].astype(np.int64)
                holds[full] = True
                t = template.coef.size
                g = full.size
                w = weight[full].astype(float)
                with np.errstate(invalid="ignore"):
                    lo = np.where(np.isfinite(template.lo[0]), w * template.lo[0], -np.inf)
                    hi = np.where(np.isfinite(template.hi[0]), w * template.hi[0], np.inf)
                parts.append(CellRows(np.arange(g + 1, dtype=np.int64) * t, np.repeat(full, t),
                                      np.tile(template.cell, g), np.tile(template.coef, g), lo, hi,
                                      np.full(g, origin, np.int64), full.copy()))
        if not parts:
            return er.take(np.zeros(0, np.int64))
        cat = np.concatenate
        shift = np.cumsum([0] + [int(p.ptr[-1]) for p in parts[:-1]])
        return CellRows(cat([[0]] + [p.ptr[1:] + s for p, s in zip(parts, shift, strict=True)]).astype(np.int64),
                        cat([p.node for p in parts]), cat([p.cell for p in parts]), cat([p.coef for p in parts]),
                        cat([p.lo for p in parts]), cat([p.hi for p in parts]), cat([p.origin for p in parts]),
                        cat([p.at for p in parts]))

    def check(self, values: np.ndarray) -> list[str]:
        """Every entry a release violates, checked exactly in integers (empty: all hold).

        Args:
            values: ``(n_nodes, n_cells)`` released values (integers).
        """
        v = np.asarray(values)
        if v.shape != (self.space.n_nodes, self.space.n_cells):
            raise ValueError(f"values has shape {v.shape}, expected {(self.space.n_nodes, self.space.n_cells)}")
        er = self.entry_rows
        act = er.activity(v)
        out: list[str] = []
        entries = self.constraints.entries
        for r, a in enumerate(act):
            lo, hi = er.lo[r], er.hi[r]
            if (np.isfinite(lo) and a < int(lo)) or (np.isfinite(hi) and a > int(hi)):
                e = entries[int(er.origin[r])]
                at = f" at {self.space.names[int(er.at[r])]}" if er.at[r] >= 0 else ""
                out.append(f"{e.kind} {e.name!r}{at}: {a} not in [{_fmt(lo)}, {_fmt(hi)}]")
        return out

    def __repr__(self) -> str:
        return (f"CellConstraints({self.constraints.summary()}; {self.rows.n_rows} rows, "
                f"{self.n_bounded} variable intervals)")


def _fmt(x: float) -> str:
    return str(int(x)) if np.isfinite(x) else ("-inf" if x < 0 else "inf")


def bind_cells(constraints: Any, space: CellSpace) -> CellConstraints:
    """Bind ``constraints`` to the histograms of ``space`` (public structure only).

    Raises:
        ConstraintError: an unknown node, level or cell, a non-integer coefficient or bound (the
            counts are integers), a number beyond the exact ranges.
        ConstraintsInfeasible: an entry contradicts itself or another on one variable (a zero
            and a lower bound on the same cell), or its terms cancel to ``0`` outside its bounds.
    """
    import time

    from hierdp.constraints.integers import check_numbers

    t0 = time.perf_counter()
    entries = constraints.entries
    for e in entries:
        check_numbers(e)
    refs: list[Any] = []
    owner: list[int] = []
    for i, e in enumerate(entries):
        if isinstance(e, LinearRow):
            refs += [node for node, _ in e.terms]
            owner += [i] * len(e.terms)
        elif isinstance(e, CellRule):
            if e.nodes is not None:
                refs += list(e.nodes)
                owner += [i] * len(e.nodes)
        else:
            refs.append(e.node)
            owner.append(i)
    found, problems = space.locate_nodes(refs) if refs else (np.zeros(0, np.int64), [])
    bad = [j for j, p in enumerate(problems) if p is not None]
    if bad:
        shown = [f"{entries[owner[j]].kind} {entry_label(entries[owner[j]])}: {problems[j]}" for j in bad[:3]]
        raise ConstraintError("; ".join(shown) + (f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""))
    node_of = iter(found.tolist())

    parts: list[tuple[np.ndarray, ...]] = []
    lo_all: list[np.ndarray] = []
    hi_all: list[np.ndarray] = []
    level = np.asarray(space.level, dtype=np.int64)
    for i, e in enumerate(entries):
        label = f"{e.kind} {entry_label(e)}"
        cells = space.locate_cells(getattr(e, "cells", None), label)
        if isinstance(e, LinearRow):
            nodes = np.array([next(node_of) for _ in e.terms], np.int64)
            coefs = np.array([c for _, c in e.terms], np.int64)
            t = cells.size
            parts.append(_rows(np.array([0, nodes.size * t]), np.repeat(nodes, t), np.tile(cells, nodes.size),
                               np.repeat(coefs, t), i, -1))
            lo_all.append(np.array([_side(e.lower, -np.inf)]))
            hi_all.append(np.array([_side(e.upper, np.inf)]))
        elif isinstance(e, CellRule):
            if e.nodes is not None:
                at = np.array([next(node_of) for _ in e.nodes], np.int64)
            else:
                unknown = [x for x in e.levels or () if x not in space.level_names]
                if unknown:
                    raise ConstraintError(f"{label}: unknown level {unknown[0]!r}; the levels are {space.level_names}")
                at = np.flatnonzero(np.isin(level, [space.level_names.index(x) for x in e.levels or ()]))
            rule_cells = space.locate_cells([c for c, _ in e.terms], label)
            coefs = np.array([c for _, c in e.terms], np.int64)
            t, g = rule_cells.size, at.size
            parts.append(_rows(np.arange(g + 1, dtype=np.int64) * t, np.repeat(at, t), np.tile(rule_cells, g),
                               np.tile(coefs, g), i, at))
            lo_all.append(np.full(g, _side(e.lower, -np.inf)))
            hi_all.append(np.full(g, _side(e.upper, np.inf)))
        elif isinstance(e, StructuralZero):  # every listed cell is 0: one row per cell
            node = next(node_of)
            t = cells.size
            parts.append(_rows(np.arange(t + 1, dtype=np.int64), np.full(t, node), cells, np.ones(t, np.int64), i,
                               -1))
            lo_all.append(np.zeros(t))
            hi_all.append(np.zeros(t))
        else:  # bounds / invariant: one row over the node's cells
            node = next(node_of)
            t = cells.size
            parts.append(_rows(np.array([0, t]), np.full(t, node), cells, np.ones(t, np.int64), i, -1))
            lo_v = float(e.value) if isinstance(e, Invariant) else _side(e.lower, -np.inf)
            hi_v = float(e.value) if isinstance(e, Invariant) else _side(e.upper, np.inf)
            lo_all.append(np.array([lo_v]))
            hi_all.append(np.array([hi_v]))
    entry_rows = _concat(parts, lo_all, hi_all, space.n_cells)
    empty = np.flatnonzero(np.diff(entry_rows.ptr) == 0)
    for r in empty:  # every term cancelled: the row reads 0
        if not entry_rows.lo[r] <= 0 <= entry_rows.hi[r]:
            e = entries[int(entry_rows.origin[r])]
            raise ConstraintsInfeasible(f"row {entry_label(e)}: its terms cancel (they name the same variable), and "
                                        "0 is outside its bounds", entries=[e.name])
    sizes = np.diff(entry_rows.ptr)
    single = np.flatnonzero(sizes == 1)
    rows = entry_rows.take(np.flatnonzero(sizes > 1))
    var_node, var_cell, var_lo, var_hi = _intervals(entry_rows, single, space.n_cells)
    clash = np.flatnonzero(var_lo > var_hi)
    if clash.size:
        j = int(clash[0])
        names = [entries[int(entry_rows.origin[r])].name for r in single
                 if entry_rows.node[entry_rows.ptr[r]] == var_node[j] and entry_rows.cell[entry_rows.ptr[r]] == var_cell[j]]
        raise ConstraintsInfeasible(
            f"the constraints cannot all hold: {space.cell_name} {space.cells[var_cell[j]]!r} of "
            f"{node_label(space.names[var_node[j]])} would be at least {_fmt(var_lo[j])} and at most "
            f"{_fmt(var_hi[j])} (entries {', '.join(repr(n) for n in dict.fromkeys(names))}); nothing was released",
            entries=list(dict.fromkeys(names)))
    kinds: dict[str, int] = {}
    for e in entries:
        kinds[e.kind] = kinds.get(e.kind, 0) + 1
    stats = {"sha256": constraints.digest(), "entries": len(entries), "kinds": kinds, "rows": int(rows.n_rows),
             "bounded_variables": int(var_node.size), "feasibility_checked": False,
             "resolve_s": round(time.perf_counter() - t0, 4)}
    return CellConstraints(constraints, space, entry_rows, rows, var_node, var_cell, var_lo, var_hi, stats)


def _side(v: Any, default: float) -> float:
    return default if v is None else float(v)


def _rows(ptr: np.ndarray, node: np.ndarray, cell: np.ndarray, coef: np.ndarray, origin: int,
          at: Any) -> tuple[np.ndarray, ...]:
    """One entry's rows as arrays: ``(ptr, node, cell, coef, origin, at)``."""
    m = ptr.size - 1
    return (np.asarray(ptr, np.int64), np.asarray(node, np.int64), np.asarray(cell, np.int64),
            np.asarray(coef, np.int64), np.full(m, origin, np.int64),
            np.broadcast_to(np.asarray(at, np.int64), (m,)).copy())


def _concat(parts: list[Any], lo: list[np.ndarray], hi: list[np.ndarray], n_cells: int) -> CellRows:
    """The rows of every entry, duplicate terms (same variable twice in a row) merged."""
    if not parts:
        z = np.zeros(0, np.int64)
        return CellRows(np.zeros(1, np.int64), z, z.copy(), z.copy(), np.zeros(0), np.zeros(0), z.copy(), z.copy())
    shift = np.cumsum([0] + [int(p[0][-1]) for p in parts[:-1]])
    ptr = np.concatenate([[0]] + [p[0][1:] + s for p, s in zip(parts, shift, strict=True)]).astype(np.int64)
    node = np.concatenate([p[1] for p in parts])
    cell = np.concatenate([p[2] for p in parts])
    coef = np.concatenate([p[3] for p in parts])
    origin = np.concatenate([p[4] for p in parts])
    at = np.concatenate([p[5] for p in parts])
    m = ptr.size - 1
    row = np.repeat(np.arange(m, dtype=np.int64), np.diff(ptr))
    var = node * n_cells + cell
    order = np.lexsort((var, row))
    row, var, coef = row[order], var[order], coef[order]
    if row.size:
        new = np.concatenate([[True], (row[1:] != row[:-1]) | (var[1:] != var[:-1])])
        starts = np.flatnonzero(new)
        coef = np.add.reduceat(coef, starts)
        row, var = row[starts], var[starts]
        keep = coef != 0
        row, var, coef = row[keep], var[keep], coef[keep]
    ptr = np.zeros(m + 1, np.int64)
    np.cumsum(np.bincount(row, minlength=m), out=ptr[1:])
    return CellRows(ptr, var // n_cells, var % n_cells, coef, np.concatenate(lo), np.concatenate(hi), origin, at)


def _intervals(rows: CellRows, single: np.ndarray, n_cells: int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rows over one variable as its interval: ``c * x in [lo, hi]`` is ``[ceil(lo/c), floor(hi/c)]``
    (sides swapped for c < 0), exact on integers; intervals of one variable intersected."""
    t = rows.ptr[:-1][single]
    c = rows.coef[t].astype(float)
    lo_r, hi_r = rows.lo[single], rows.hi[single]
    a = np.where(c > 0, lo_r, hi_r) / c  # merged terms never have a zero coefficient
    b = np.where(c > 0, hi_r, lo_r) / c
    with np.errstate(invalid="ignore"):
        lo = np.where(np.isfinite(a), np.ceil(a), -np.inf)
        hi = np.where(np.isfinite(b), np.floor(b), np.inf)
    var = rows.node[t] * n_cells + rows.cell[t]
    uniq, inv = np.unique(var, return_inverse=True)
    inv = inv.ravel()
    out_lo = np.full(uniq.size, -np.inf)
    out_hi = np.full(uniq.size, np.inf)
    np.maximum.at(out_lo, inv, lo)
    np.minimum.at(out_hi, inv, hi)
    return uniq // n_cells, uniq % n_cells, out_lo, out_hi
