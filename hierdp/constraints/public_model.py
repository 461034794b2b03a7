"""The whole constraint set as one integer program on the tree's public structure.

Before any noise, "can every entry hold at once?" is decided on a *reduced* tree: the nodes the
entries name, their ancestors up to the root, and, under every such parent, one extra node standing
for all its other children (any non-negative total: their subtrees are unconstrained). That is
exact - a point of the reduced tree extends to the whole tree and back - and its size follows the
constraint set, not the tree. The root is fixed at its public count under bounded DP.

Only the user's own entries are in the model (carried rows and intervals are implied by them), so
an infeasible set is explained in the user's terms: :func:`~hierdp.constraints.feasibility.irreducible_subset`
runs over entries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hierdp.constraints.bound import BoundRows
from hierdp.constraints.carry import child_counts

__all__ = ["PublicModel"]


class PublicModel:
    """Builds the reduced problem of any subset of entries (see the module docstring).

    Args:
        tree: the TopDown tree.
        node_level, node_key, node_lo, node_hi, node_item: the interval entries (bounds, zeros,
            invariants, single-node rows), one per stated interval, with the index of their entry.
        rows: the multi-node user rows (``origin`` = entry index).
        root_value: the public root count (bounded DP), or None.
        public_rows: rows the mechanism itself imposes on public values (group sizes' region
            totals), in every subset; their nodes join the model.
    """

    def __init__(self, tree: Any, node_level: np.ndarray, node_key: np.ndarray, node_lo: np.ndarray,
                 node_hi: np.ndarray, node_item: np.ndarray, rows: BoundRows, root_value: int | None,
                 public_rows: BoundRows | None = None) -> None:
        self.node_level, self.node_key = node_level, node_key
        self.node_lo, self.node_hi, self.node_item = node_lo, node_hi, node_item
        self.rows = rows
        self.root_value = root_value
        self.public_rows = public_rows if public_rows is not None else BoundRows.empty()
        lv = np.concatenate([node_level, rows.level, self.public_rows.level, [0]]).astype(np.int64)
        ky = np.concatenate([node_key, rows.key, self.public_rows.key, [int(tree.root_key)]]).astype(np.int64)
        per_level: dict[int, np.ndarray] = {}
        for L in np.unique(lv):
            per_level[int(L)] = np.unique(ky[lv == L])
        # ancestors, deepest level first
        top = max(per_level)
        for D in range(top, 0, -1):
            keys = per_level.get(D)
            if keys is None or not keys.size:
                continue
            par = np.asarray(tree.parent_of(D, keys), dtype=np.int64)
            per_level[D - 1] = np.union1d(per_level.get(D - 1, np.zeros(0, np.int64)), par)
        self.levels = sorted(per_level)
        self.keys = per_level
        start = {}
        n = 0
        for L in self.levels:
            start[L] = n
            n += per_level[L].size
        self.start = start
        parent = np.full(n, -1, np.int64)
        rest_parent: list[np.ndarray] = []
        for L in self.levels:
            if L == 0:
                continue
            keys = per_level[L]
            par = np.asarray(tree.parent_of(L, keys), dtype=np.int64)
            parent[start[L]:start[L] + keys.size] = start[L - 1] + np.searchsorted(per_level[L - 1], par)
            # one "other children" node under every parent that has children outside the model
            uniq, cnt = np.unique(par, return_counts=True)
            more = child_counts(tree, L - 1, uniq) > cnt
            rest_parent.append(start[L - 1] + np.searchsorted(per_level[L - 1], uniq[more]))
        rest = np.concatenate(rest_parent) if rest_parent else np.zeros(0, np.int64)
        self.n_nodes = n
        self.parent = np.concatenate([parent, rest])

    def index(self, level: np.ndarray, key: np.ndarray) -> np.ndarray:
        """Model indices of ``(level, key)`` pairs (every pair is in the model)."""
        out = np.empty(level.size, np.int64)
        for L in np.unique(level):
            m = level == L
            out[m] = self.start[int(L)] + np.searchsorted(self.keys[int(L)], key[m])
        return out

    def problem(self, items: Sequence[int] | None = None) -> Any:
        """The reduced feasibility problem of the given entries (all when None).

        Raises:
            ProblemError: the intervals of the chosen entries contradict one another (infeasible).
        """
        from hierdp.models import Problem

        n_all = self.parent.size
        lower = np.full(n_all, -np.inf)
        upper = np.full(n_all, np.inf)
        sel_n = np.ones(self.node_item.size, bool) if items is None else np.isin(self.node_item, list(items))
        if sel_n.any():
            idx = self.index(self.node_level[sel_n], self.node_key[sel_n])
            np.maximum.at(lower, idx, self.node_lo[sel_n])
            np.minimum.at(upper, idx, self.node_hi[sel_n])
        fixed = np.full(n_all, np.nan)
        if self.root_value is not None:
            fixed[self.start[0]] = float(self.root_value)
        p = Problem(self.parent, np.full(n_all, np.nan), fixed=fixed, objective="l1", integer=True,
                    nonnegative=True, lower=lower, upper=upper)
        rows = self.rows
        sel_r = np.arange(rows.n_rows) if items is None else np.flatnonzero(np.isin(rows.origin, list(items)))
        for name, sub in (("rows", rows.take(sel_r)), ("public", self.public_rows)):
            if sub.n_rows:
                from scipy.sparse import csr_matrix

                cols = self.index(sub.level, sub.key)
                mat = csr_matrix((sub.coef.astype(float), cols, sub.ptr), shape=(sub.n_rows, n_all))
                p.add_constraints(mat, sub.lo, sub.hi, name=name)
        return p
