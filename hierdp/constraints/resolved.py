"""A constraint set bound to a tree: what a level-wise mechanism applies, level by level.

Built by :meth:`hierdp.Constraints.resolve` (:mod:`hierdp.constraints.resolve`). Holds

* the rows TopDown applies, each at its deepest level (the user's rows over several nodes, and the
  rows carried up from them, :mod:`hierdp.constraints.carry`);
* every node's interval (the user's bounds, zeros, invariants and single-node rows, intersected
  with what their descendants imply);
* the user's entries as bound to the tree, to check a release against them exactly.

Everything here comes from the constraint set and the tree's public structure (plus the public
root count under bounded DP).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hierdp.constraints.bound import BoundRows, Intervals
from hierdp.constraints.levels import LevelConstraints, released_values
from hierdp.constraints.report import StatedConstraints

__all__ = ["ResolvedConstraints"]


class ResolvedConstraints(StatedConstraints):
    """A :class:`~hierdp.constraints.Constraints` bound to one tree (see the module docstring).

    Attributes:
        constraints: the set it was resolved from.
        level_names: the tree's level names.
        rows: the rows applied by TopDown (user rows over several nodes, then carried rows).
        intervals: every node interval (user and implied).
        user_rows: every linear entry as bound to the tree (single-node ones included).
        user_intervals: ``(level, key, lo, hi, entry)`` of the bounds, zeros and invariants.
        root_interval: ``(lo, hi)`` of the root.
        stats: counts for the release's accounting.
        cells: on a tree of histogram cells, the set bound to its (node, cell) variables
            (:class:`~hierdp.constraints.CellConstraints`), else None.
    """

    def __init__(self, constraints: Any, tree: Any, *, rows: BoundRows, intervals: Intervals, user_rows: BoundRows,
                 user_intervals: tuple[np.ndarray, ...], stats: dict[str, Any], cells: Any = None) -> None:
        self.constraints = constraints
        self.tree = tree
        self.level_names = [str(x) for x in tree.level_names]
        self.rows = rows
        self.intervals = intervals
        self.user_rows = user_rows
        self.user_intervals = user_intervals
        self.stats = stats
        self.cells = cells
        lo, hi = intervals.lookup(0, np.array([int(tree.root_key)], np.int64))
        self.root_interval = (float(lo[0]), float(hi[0]))
        self._deepest = rows.deepest()

    # ------------------------------------------------------------------ the engine's seam
    def at_level(self, level: int, released: Sequence[Any]) -> LevelConstraints:
        """The rows and intervals of ``level`` once levels ``0 .. level - 1`` are released
        (``released[L]`` has ``keys`` and ``values``; nodes absent from it are 0)."""
        sel = np.flatnonzero(self._deepest == level)
        return LevelConstraints(level, self.rows.take(sel), self.intervals, self.tree, released)

    def rows_at(self, level: int) -> BoundRows:
        """The rows applied at ``level``."""
        return self.rows.take(np.flatnonzero(self._deepest == level))

    def clip_root(self, value: int) -> int:
        """A noisy root count moved into the root's interval (post-processing; unbounded DP)."""
        lo, hi = self.root_interval
        v = max(int(value), 0)
        if np.isfinite(lo):
            v = max(v, int(lo))
        if np.isfinite(hi):
            v = min(v, int(hi))
        return v

    # ------------------------------------------------------------------ reporting
    def applied(self) -> str:
        """Rows per level, and what was carried up (the middle of the release's note)."""
        s = self.stats
        by_level = ", ".join(f"{k} {v}" for k, v in s["rows_by_level"].items()) or "none"
        return (f"rows applied per level: {by_level}; {s['carried_rows']} rows and {s['implied_intervals']} node "
                "intervals carried up")

    # ------------------------------------------------------------------ checking a release
    def check(self, release: Any) -> list[str]:
        """Every user entry a (TopDown) release violates, checked exactly in integers (empty: all hold).

        Nodes absent from the release are 0 (TopDown releases the non-zero nodes).
        """
        look = released_values(release.levels)
        out: list[str] = []
        ur = self.user_rows
        if ur.n_rows:
            vals = np.zeros(ur.key.size, np.int64)
            for L in np.unique(ur.level):
                m = ur.level == L
                vals[m] = look[int(L)].get(ur.key[m]) if int(L) < len(look) else 0
            act = [0] * ur.n_rows
            for c, v, r in zip(ur.coef.tolist(), vals.tolist(), ur.row_of_term.tolist(), strict=True):
                act[r] += c * v  # Python integers: exact at any magnitude
            for r in range(ur.n_rows):
                lo, hi = ur.lo[r], ur.hi[r]
                if (np.isfinite(lo) and act[r] < int(lo)) or (np.isfinite(hi) and act[r] > int(hi)):
                    out.append(f"row {ur.name[r]!r}: {act[r]} not in [{_fmt(lo)}, {_fmt(hi)}]")
        level, key, lo, hi, item = self.user_intervals
        if level.size:
            vals = np.zeros(key.size, np.int64)
            for L in np.unique(level):
                m = level == L
                vals[m] = look[int(L)].get(key[m]) if int(L) < len(look) else 0
            bad = ((np.isfinite(lo) & (vals < np.where(np.isfinite(lo), lo, 0).astype(np.int64)))
                   | (np.isfinite(hi) & (vals > np.where(np.isfinite(hi), hi, 0).astype(np.int64))))
            entries = self.constraints.entries
            for i in np.flatnonzero(bad):
                out.append(f"{entries[int(item[i])].kind} {entries[int(item[i])].name!r}: {int(vals[i])} not in "
                           f"[{_fmt(lo[i])}, {_fmt(hi[i])}]")
        return out

    def __repr__(self) -> str:
        return (f"ResolvedConstraints({self.constraints.summary()}; {self.rows.n_rows} rows applied, "
                f"{self.intervals.count()} node intervals)")


def _fmt(x: float) -> str:
    return str(int(x)) if np.isfinite(x) else ("-inf" if x < 0 else "inf")
