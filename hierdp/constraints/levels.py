"""The seam between resolved constraints and a level-wise engine: one level's rows, bounds, coupling.

The engine asks, once per level ``L`` and after the coarser levels were released,

    plan = resolved.at_level(L, released)   # released: one (keys, values) view per level < L

and then, for every chunk of that level's parents,

    labels = plan.coupling(parent_keys)      # chunks never split parents with the same label >= 0
    rows = plan.block(child_keys)            # a LevelRows over the chunk's children, or None

:class:`LevelRows` is what the level solver receives (``rows=``): a CSR block over the chunk's
children in the engine's order, with the contributions of fixed nodes (coarser levels, and children
of parents released as 0, which are 0) moved to the bounds, and the children's intervals.
Rows whose every node is fixed are not in any block; they are checked once per level
(:attr:`LevelConstraints.fixed_violations`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hierdp.constraints.bound import BoundRows, Intervals

__all__ = ["LevelConstraints", "LevelRows", "released_values"]


@dataclass(frozen=True)
class LevelRows:
    """Rows and bounds over one chunk's children (what ``LevelSolver.solve(..., rows=)`` takes).

    Attributes:
        matrix: ``scipy.sparse.csr_matrix`` (rows x children of the chunk, in its order).
        lower, upper: row bounds, fixed contributions already moved here (float64, ±inf open).
        names: row names (``"cap"``, ``"cap (carried to state)"``).
        child_lower, child_upper: per child interval (float64, ±inf), or None when no child of the
            chunk has one.
        level: the level the children belong to.
    """

    matrix: Any
    lower: np.ndarray
    upper: np.ndarray
    names: np.ndarray
    child_lower: np.ndarray | None
    child_upper: np.ndarray | None
    level: int

    @property
    def n_rows(self) -> int:
        return int(self.matrix.shape[0])

    @property
    def empty(self) -> bool:
        """No row and no child interval: the chunk solves as without constraints."""
        return self.n_rows == 0 and self.child_lower is None

    def violated_groups(self, values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """Per group: does ``values`` (one per child) break a row or a child interval reaching it?
        Checked exactly in integers (Python integers where int64 products could wrap)."""
        offsets = np.asarray(offsets, dtype=np.int64)
        sizes = np.diff(offsets)
        group = np.repeat(np.arange(sizes.size), sizes)
        bad_child = np.zeros(int(offsets[-1]), bool)
        v = np.asarray(values)
        if self.child_lower is not None and self.child_upper is not None:
            bad_child |= (v < self.child_lower) | (v > self.child_upper)
        if self.n_rows:
            act = _row_activity(self.matrix, v)
            lo = np.where(np.isfinite(self.lower), self.lower, 0).astype(np.int64)
            hi = np.where(np.isfinite(self.upper), self.upper, 0).astype(np.int64)
            bad_row = (np.isfinite(self.lower) & (act < lo)) | (np.isfinite(self.upper) & (act > hi))
            if bad_row.any():
                bad_child[self.matrix[np.flatnonzero(bad_row)].indices] = True
        return np.bincount(group[bad_child], minlength=sizes.size) > 0

    def restrict(self, children: np.ndarray) -> LevelRows:
        """The rows and intervals over a subset of the children (``children``: their positions,
        increasing), with columns renumbered ``0 .. len(children) - 1``; rows with no child in the
        subset are dropped (a row must not have children both in and out of it)."""
        children = np.asarray(children, dtype=np.int64)
        sub = self.matrix[:, children].tocsr()
        keep = np.flatnonzero(np.diff(sub.indptr) > 0)
        lo = None if self.child_lower is None else self.child_lower[children]
        hi = None if self.child_upper is None else self.child_upper[children]
        return LevelRows(sub[keep], self.lower[keep], self.upper[keep], self.names[keep], lo, hi, self.level)

    def group_components(self, offsets: np.ndarray) -> np.ndarray:
        """Per group, the id of its component: groups are joined when a row has children in both."""
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import connected_components

        offsets = np.asarray(offsets, dtype=np.int64)
        sizes = np.diff(offsets)
        G = sizes.size
        if not self.n_rows:
            return np.arange(G, dtype=np.int64)
        group = np.repeat(np.arange(G), sizes)
        m = self.matrix
        g_of = group[m.indices]
        row_of = np.repeat(np.arange(m.shape[0]), np.diff(m.indptr))
        same = np.concatenate([[False], row_of[1:] == row_of[:-1]])
        a, b = g_of[:-1][same[1:]], g_of[1:][same[1:]]
        _, labels = connected_components(coo_matrix((np.ones(a.size), (a, b)), shape=(G, G)), directed=False)
        return labels.astype(np.int64)

    def touched_groups(self, offsets: np.ndarray) -> np.ndarray:
        """Per group (children ``offsets[g]:offsets[g+1]``): does a row or a child interval reach it?"""
        offsets = np.asarray(offsets, dtype=np.int64)
        n = int(offsets[-1])
        hit = np.zeros(n, bool)
        if self.n_rows:
            hit[np.unique(self.matrix.indices)] = True
        if self.child_lower is not None and self.child_upper is not None:
            hit |= (self.child_lower > 0) | np.isfinite(self.child_upper)
        sizes = np.diff(offsets)
        group = np.repeat(np.arange(sizes.size), sizes)
        return np.bincount(group[hit], minlength=sizes.size) > 0


class _Released:
    """Released values of one level, by key (absent keys: 0, as TopDown never expands a zero)."""

    def __init__(self, keys: np.ndarray, values: np.ndarray) -> None:
        keys = np.asarray(keys, dtype=np.int64)
        order = np.argsort(keys, kind="stable")
        self.keys, self.values = keys[order], np.asarray(values, dtype=np.int64)[order]

    def get(self, keys: np.ndarray) -> np.ndarray:
        keys = np.asarray(keys, dtype=np.int64)
        out = np.zeros(keys.size, np.int64)
        if not self.keys.size or not keys.size:
            return out
        pos = np.minimum(np.searchsorted(self.keys, keys), self.keys.size - 1)
        hit = self.keys[pos] == keys
        out[hit] = self.values[pos[hit]]
        return out


def released_values(levels: Sequence[Any]) -> list[_Released]:
    """Lookups of released levels (anything with ``keys`` and ``values``, e.g. ``ReleaseLevel``)."""
    return [_Released(lv.keys, lv.values) for lv in levels]


class LevelConstraints:
    """One level's constraints once the coarser levels are released (see the module docstring).

    Attributes:
        level: the level.
        rows: the rows applied at this level (its deepest level), as bound to the tree.
        lower, upper: their bounds with every fixed contribution moved in (float64).
        fixed_violations: ``(row, activity)`` of rows whose nodes are all fixed and which do not hold.
    """

    def __init__(self, level: int, rows: BoundRows, intervals: Intervals, tree: Any, released: Sequence[Any]) -> None:
        self.level = level
        self.rows = rows
        self._intervals = intervals
        look = released_values(released) if released and not isinstance(released[0], _Released) else list(released)
        m = rows.n_rows
        r = rows.row_of_term
        at = rows.level == level
        free = np.zeros(rows.key.size, bool)
        value = np.zeros(rows.key.size, np.int64)
        for L in np.unique(rows.level[~at]):
            sel = rows.level == L
            value[sel] = look[int(L)].get(rows.key[sel])
        parents = np.full(rows.key.size, -1, np.int64)
        if at.any():
            parents[at] = np.asarray(tree.parent_of(level, rows.key[at]), dtype=np.int64)
            free[at] = look[level - 1].get(parents[at]) > 0  # children of a parent released 0 are 0
        const = _exact_dot(rows.coef, value, r, m)
        self.lower = _shift(rows.lo, const)
        self.upper = _shift(rows.hi, const)
        self._free_row, self._free_key = r[free], rows.key[free]
        self._free_coef, self._free_parent = rows.coef[free], parents[free]
        n_free = np.bincount(self._free_row, minlength=m)
        self._n_free = n_free
        fixed_rows = np.flatnonzero(n_free == 0)
        bad = (const[fixed_rows] < rows.lo[fixed_rows]) | (const[fixed_rows] > rows.hi[fixed_rows])
        self.fixed_violations = [(int(i), float(const[i])) for i in fixed_rows[bad]]
        self._coupling_keys, self._coupling_labels = self._components()

    def _components(self) -> tuple[np.ndarray, np.ndarray]:
        """Parents of free children, each with the id of its coupling component."""
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import connected_components

        if not self._free_parent.size:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        uniq, inv = np.unique(self._free_parent, return_inverse=True)
        inv = inv.ravel()
        # chain the parents of each row: consecutive free terms of a row are linked
        same = np.concatenate([[False], self._free_row[1:] == self._free_row[:-1]])
        a, b = inv[:-1][same[1:]], inv[1:][same[1:]]
        g = coo_matrix((np.ones(a.size), (a, b)), shape=(uniq.size, uniq.size))
        _, labels = connected_components(g, directed=False)
        return uniq, labels.astype(np.int64)

    @property
    def couples_parents(self) -> bool:
        """True when some row spans the children of several parents."""
        if not self._coupling_keys.size:
            return False
        return bool(np.unique(self._coupling_labels).size < self._coupling_keys.size)

    @property
    def has_work(self) -> bool:
        """Rows with free nodes, or node intervals, at this level."""
        keys = self._intervals.keys.get(self.level)
        return bool(self._free_row.size) or (keys is not None and keys.size > 0)

    def coupling(self, parent_keys: np.ndarray) -> np.ndarray:
        """Coupling component of each parent (>= 0), or -1 for a parent no row couples to another."""
        pk = np.asarray(parent_keys, dtype=np.int64)
        out = np.full(pk.size, -1, np.int64)
        ck = self._coupling_keys
        if not ck.size or not pk.size:
            return out
        pos = np.minimum(np.searchsorted(ck, pk), ck.size - 1)
        hit = ck[pos] == pk
        out[hit] = self._coupling_labels[pos[hit]]
        return out

    def block(self, child_keys: np.ndarray) -> LevelRows | None:
        """The rows and child intervals over a chunk's children (None: nothing applies to them).

        Raises:
            RuntimeError: the chunk holds some but not all of a row's free children (the engine
                split parents the row couples; :meth:`coupling` says which to keep together).
        """
        from scipy.sparse import csr_matrix

        ck = np.asarray(child_keys, dtype=np.int64)
        n = ck.size
        lo_c, hi_c = self._intervals.lookup(self.level, ck)
        has_iv = bool(np.any(lo_c > 0) | np.any(np.isfinite(hi_c)))
        rows_idx = np.zeros(0, np.int64)
        cols = np.zeros(0, np.int64)
        data = np.zeros(0)
        ptr = np.zeros(1, np.int64)
        if self._free_key.size and n:
            order = np.argsort(ck, kind="stable")
            sk = ck[order]
            pos = np.minimum(np.searchsorted(sk, self._free_key), n - 1)
            found = sk[pos] == self._free_key
            if found.any():
                per_row = np.bincount(self._free_row[found], minlength=self.rows.n_rows)
                rows_idx = np.flatnonzero(per_row > 0)
                partial = rows_idx[per_row[rows_idx] != self._n_free[rows_idx]]
                if partial.size:
                    raise RuntimeError(f"a chunk holds only part of the nodes of row {self.rows.name[partial[0]]!r}: "
                                       "the engine must keep the parents it couples together")
                fr, fc = self._free_row[found], order[pos[found]]
                ordr = np.argsort(fr, kind="stable")
                cols, data = fc[ordr], self._free_coef[found][ordr].astype(float)
                ptr = np.zeros(rows_idx.size + 1, np.int64)
                np.cumsum(per_row[rows_idx], out=ptr[1:])
        if not rows_idx.size and not has_iv:
            return None
        mat = csr_matrix((data, cols, ptr), shape=(rows_idx.size, n))
        return LevelRows(mat, self.lower[rows_idx], self.upper[rows_idx], self.rows.name[rows_idx],
                         lo_c if has_iv else None, hi_c if has_iv else None, self.level)


def _row_activity(matrix: Any, values: np.ndarray) -> np.ndarray:
    """``matrix @ values`` for integer coefficients and values, exactly (int64 or Python integers)."""
    coef = np.rint(matrix.data).astype(np.int64)
    v = np.asarray(values, dtype=np.int64)[matrix.indices]
    row = np.repeat(np.arange(matrix.shape[0]), np.diff(matrix.indptr))
    return _exact_dot(coef, v, row, matrix.shape[0])


def _exact_dot(coef: np.ndarray, value: np.ndarray, row: np.ndarray, m: int) -> np.ndarray:
    """Per row, ``sum(coef * value)`` exactly: int64 when it cannot wrap (the usual case), else an
    object array of Python integers."""
    if not coef.size:
        return np.zeros(m, np.int64)
    big = float(np.abs(coef).max()) * float(np.abs(value).max()) * float(np.bincount(row).max())
    if big < 2.0 ** 62:
        out = np.zeros(m, np.int64)
        np.add.at(out, row, coef.astype(np.int64) * value.astype(np.int64))
        return out
    acc = [0] * m
    for c, v, r in zip(coef.tolist(), value.tolist(), row.tolist(), strict=True):
        acc[r] += c * v
    return np.array(acc, dtype=object)


def _shift(bound: np.ndarray, const: np.ndarray) -> np.ndarray:
    """``bound - const`` as float64 (±inf stays), exact while the result is below 2^53."""
    out = np.array(bound, dtype=float)
    fin = np.isfinite(out)
    if const.dtype != object:
        out[fin] = (out[fin].astype(np.int64) - const[fin]).astype(float)
    else:
        out[fin] = [float(int(b) - int(c)) for b, c in zip(out[fin], const[fin], strict=True)]
    return out
