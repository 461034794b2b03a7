"""Constraint entries bound to a tree: rows and node intervals over ``(level, key)``, as arrays.

:class:`BoundRows` is a CSR block of rows over tree nodes (one entry per term: level, key, integer
coefficient) with row bounds, names and provenance; :class:`Intervals` holds per-level node
intervals ``[lo, hi]`` (sorted keys). Both are plain numpy: the carrying-up of
:mod:`hierdp.constraints.carry` and the level blocks of :mod:`hierdp.constraints.levels` work on
whole levels at once.

Numbers: coefficients are int64 (|c| <= 2^31), bounds float64 holding exact integers (|b| <= 2^52;
``-inf`` / ``inf`` for an open side), so every sum the tree can reach is exact.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["BoundRows", "Intervals", "merge_duplicate_terms"]


@dataclass
class BoundRows:
    """Rows ``lo <= sum(coef * node) <= hi`` over tree nodes.

    Attributes:
        ptr: CSR row pointers (int64, m + 1).
        level, key, coef: per term (int64).
        lo, hi: per row (float64, ±inf for an open side).
        name: per row (object): the user's name, or ``"name (carried to state)"``.
        origin: per row, the index of the user entry it comes from.
        carried: per row, how many levels it was carried up (0: the user's own row).
    """

    ptr: np.ndarray
    level: np.ndarray
    key: np.ndarray
    coef: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    name: np.ndarray
    origin: np.ndarray
    carried: np.ndarray

    @classmethod
    def empty(cls) -> BoundRows:
        z = np.zeros(0, np.int64)
        return cls(np.zeros(1, np.int64), z, z.copy(), z.copy(), np.zeros(0), np.zeros(0),
                   np.zeros(0, dtype=object), z.copy(), z.copy())

    @property
    def n_rows(self) -> int:
        return int(self.ptr.size - 1)

    def __len__(self) -> int:
        return self.n_rows

    @property
    def row_of_term(self) -> np.ndarray:
        """Row index of every term."""
        return np.repeat(np.arange(self.n_rows, dtype=np.int64), np.diff(self.ptr))

    def deepest(self) -> np.ndarray:
        """Per row, the deepest level among its terms (the level at which TopDown applies it)."""
        out = np.zeros(self.n_rows, np.int64)
        has = np.diff(self.ptr) > 0  # a row without terms (they cancelled) reads 0: level 0
        if has.any():
            out[has] = np.maximum.reduceat(self.level, self.ptr[:-1][has])
        return out

    def take(self, rows: np.ndarray) -> BoundRows:
        """The given rows (in that order)."""
        rows = np.asarray(rows, dtype=np.int64)
        sizes = np.diff(self.ptr)[rows]
        ptr = np.zeros(rows.size + 1, np.int64)
        np.cumsum(sizes, out=ptr[1:])
        idx = np.repeat(self.ptr[:-1][rows], sizes) + (np.arange(int(ptr[-1])) - np.repeat(ptr[:-1], sizes))
        return BoundRows(ptr, self.level[idx], self.key[idx], self.coef[idx], self.lo[rows], self.hi[rows],
                         self.name[rows], self.origin[rows], self.carried[rows])

    @staticmethod
    def concat(parts: list[BoundRows]) -> BoundRows:
        parts = [p for p in parts if p.n_rows]
        if not parts:
            return BoundRows.empty()
        shift = np.cumsum([0] + [int(p.ptr[-1]) for p in parts[:-1]])
        ptr = np.concatenate([[0]] + [p.ptr[1:] + s for p, s in zip(parts, shift, strict=True)]).astype(np.int64)
        cat = np.concatenate
        return BoundRows(ptr, cat([p.level for p in parts]), cat([p.key for p in parts]),
                         cat([p.coef for p in parts]), cat([p.lo for p in parts]), cat([p.hi for p in parts]),
                         cat([p.name for p in parts]), cat([p.origin for p in parts]),
                         cat([p.carried for p in parts]))


def merge_duplicate_terms(row: np.ndarray, level: np.ndarray, key: np.ndarray, coef: np.ndarray,
                          n_rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Terms sorted by (row, level, key), duplicates summed, zero coefficients dropped.

    Returns ``(ptr, level, key, coef)`` for ``n_rows`` rows (a row may end up empty).
    """
    order = np.lexsort((key, level, row))
    row, level, key, coef = row[order], level[order], key[order], coef[order]
    if row.size:
        new = np.concatenate([[True], (row[1:] != row[:-1]) | (level[1:] != level[:-1]) | (key[1:] != key[:-1])])
        starts = np.flatnonzero(new)
        coef = np.add.reduceat(coef, starts)
        row, level, key = row[starts], level[starts], key[starts]
        keep = coef != 0
        row, level, key, coef = row[keep], level[keep], key[keep], coef[keep]
    ptr = np.zeros(n_rows + 1, np.int64)
    np.cumsum(np.bincount(row, minlength=n_rows), out=ptr[1:])
    return ptr, level, key, coef


@dataclass
class Intervals:
    """Node intervals per level: ``keys[L]`` sorted, ``lo[L]``, ``hi[L]`` aligned (float64)."""

    keys: dict[int, np.ndarray] = field(default_factory=dict)
    lo: dict[int, np.ndarray] = field(default_factory=dict)
    hi: dict[int, np.ndarray] = field(default_factory=dict)

    def levels(self) -> list[int]:
        return sorted(L for L, k in self.keys.items() if k.size)

    def intersect(self, level: int, keys: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> None:
        """Intersect the intervals of ``keys`` at ``level`` with ``[lo, hi]`` (adding new keys)."""
        keys = np.asarray(keys, dtype=np.int64)
        if not keys.size:
            return
        k0 = self.keys.get(level, np.zeros(0, np.int64))
        allk = np.concatenate([k0, keys])
        alo = np.concatenate([self.lo.get(level, np.zeros(0)), np.asarray(lo, dtype=float)])
        ahi = np.concatenate([self.hi.get(level, np.zeros(0)), np.asarray(hi, dtype=float)])
        uk, inv = np.unique(allk, return_inverse=True)
        nlo = np.full(uk.size, -np.inf)
        nhi = np.full(uk.size, np.inf)
        np.maximum.at(nlo, inv, alo)
        np.minimum.at(nhi, inv, ahi)
        self.keys[level], self.lo[level], self.hi[level] = uk, nlo, nhi

    def lookup(self, level: int, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(lo, hi)`` of ``keys`` at ``level`` (``-inf``/``inf`` where the node has no interval)."""
        keys = np.asarray(keys, dtype=np.int64)
        lo = np.full(keys.size, -np.inf)
        hi = np.full(keys.size, np.inf)
        k = self.keys.get(level)
        if k is None or not k.size or not keys.size:
            return lo, hi
        pos = np.minimum(np.searchsorted(k, keys), k.size - 1)
        hit = k[pos] == keys
        lo[hit], hi[hit] = self.lo[level][pos[hit]], self.hi[level][pos[hit]]
        return lo, hi

    def copy(self) -> Intervals:
        return Intervals(dict(self.keys), dict(self.lo), dict(self.hi))

    def count(self) -> int:
        return int(sum(k.size for k in self.keys.values()))

    def as_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(level, key, lo, hi)`` of every interval."""
        Ls = self.levels()
        if not Ls:
            z = np.zeros(0, np.int64)
            return z, z.copy(), np.zeros(0), np.zeros(0)
        return (np.concatenate([np.full(self.keys[L].size, L, np.int64) for L in Ls]),
                np.concatenate([self.keys[L] for L in Ls]), np.concatenate([self.lo[L] for L in Ls]),
                np.concatenate([self.hi[L] for L in Ls]))


def as_float_bound(v: Any, default: float) -> float:
    """A bound of an entry (None: open) as float."""
    return default if v is None else float(v)
