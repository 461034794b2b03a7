"""Public constraint sets inside the group-size mechanisms (docs/constraints.md, "Group sizes").

A set names regions and sizes (:mod:`hierdp.constraints.cells`): a region's quantity is the sum of
the entry's ``cells`` (sizes) of the region, or its number of groups. It is bound to the data's
public structure - the region tree, ``K``, ``G`` (and, with ``region_totals_public``, every
``G_r``) - and checked for feasibility before any noise, through the dynamic-programming tree
(:class:`~hierdp.mechanisms.pgsr.topdown_tree.DynProgTopDownTree`: each (region, size) is a node).
Since the feasible set of every mechanism's post-processing is that public structure plus the
set, a set that passes can never make the solve infeasible after the noise.

Each mechanism poses its problem in its own variables; :class:`GroupSizeConstraints` maps the
set's rows over histogram cells ``c[k, r]`` into them through a linear map ``c = T x``
(:meth:`GroupSizeConstraints.histogram_map`: the nodes of Model 1; :meth:`cumulative_map`:
``c_k = s_k - s_{k-1}`` of Model 2; :meth:`chain_map`: differences along Model 3's chain), and
turns an interval of one cell into a bound where the cell is one variable (Model 1: the cost-table
dynamic program honours bounds) and into a row otherwise.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hierdp.hierarchy.count_of_counts import CountOfCounts

__all__ = ["GroupSizeConstraints"]


class GroupSizeConstraints:
    """A constraint set bound to a :class:`CountOfCounts` (see the module docstring).

    Attributes:
        resolved: the :class:`~hierdp.constraints.ResolvedConstraints` on the dynamic-programming tree.
        cells: the set over (region, size) cells (:class:`~hierdp.constraints.CellConstraints`),
            which the release states.
    """

    def __init__(self, resolved: Any, data: CountOfCounts) -> None:
        self.resolved = resolved
        self.cells = resolved.cells
        self._n, self._K = data.n_regions, data.K

    @classmethod
    def bind(cls, constraints: Any, data: CountOfCounts, *, region_totals: bool = False,
             time_limit: float | None = 60.0) -> GroupSizeConstraints:
        """Bind and check ``constraints`` on ``data``'s public structure (before any noise).

        Raises:
            ConstraintError: an unknown region, level or size, a non-integer number, ...
            ConstraintsInfeasible: the set cannot hold with ``G`` (and the region totals) fixed;
                names an irreducible subset of its entries.
        """
        from hierdp.mechanisms.pgsr.topdown_tree import DynProgTopDownTree

        tree = DynProgTopDownTree(data, region_totals=region_totals)
        return cls(constraints.resolve(tree, root_public=True, time_limit=time_limit), data)

    # -- the maps c = T x from a formulation's variables to the histogram cells ---------------------
    @property
    def n_cells(self) -> int:
        """Histogram variables ``c[k, r]``, index ``k * n_regions + r`` (size-major, as ``by_size``)."""
        return self._K * self._n

    def histogram_map(self) -> Any:
        """Model 1 on the dynamic-programming tree: cell ``h`` is node ``1 + h``."""
        from scipy.sparse import csr_matrix

        h = np.arange(self.n_cells, dtype=np.int64)
        return csr_matrix((np.ones(h.size), (h, 1 + h)), shape=(h.size, 1 + h.size))

    def cumulative_map(self) -> Any:
        """Model 2 in cumulative variables ``s[k * n + r]``: ``c_k = s_k - s_{k-1}`` (``s_0 = 0``)."""
        from scipy.sparse import csr_matrix

        n = self._n
        h = np.arange(self.n_cells, dtype=np.int64)
        prev = h >= n
        rows = np.concatenate([h, h[prev]])
        cols = np.concatenate([h, h[prev] - n])
        data = np.concatenate([np.ones(h.size), -np.ones(int(prev.sum()))])
        return csr_matrix((data, (rows, cols)), shape=(h.size, h.size))

    def chain_map(self, data: CountOfCounts, order: np.ndarray) -> Any:
        """Model 3 in chain positions (``order[p]``: the node at position ``p``): along each region
        level's size-major order, a cell is its node's value minus the previous node's."""
        from scipy.sparse import csr_matrix

        n, K = self._n, self._K
        pos = np.empty(order.size, np.int64)
        pos[order] = np.arange(order.size, dtype=np.int64)
        lp = np.asarray(data.regions.level_ptr, dtype=np.int64)
        rows, cols, vals = [], [], []
        for lev in range(lp.size - 1):
            a, b = int(lp[lev]), int(lp[lev + 1])
            m = b - a
            k, j = np.divmod(np.arange(K * m, dtype=np.int64), m)  # flat order of the level's (K, m) block
            h = k * n + a + j
            node = 1 + h
            rows += [h, h[1:]]
            cols += [pos[node], pos[node[:-1]]]
            vals += [np.ones(h.size), -np.ones(h.size - 1)]
        return csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                          shape=(self.n_cells, order.size))

    # -- posing ---------------------------------------------------------------------------------------
    def columns(self, T: Any) -> tuple[np.ndarray | None, np.ndarray | None, Any, np.ndarray, np.ndarray]:
        """The set in a formulation's variables (``c = T x``): ``(lower, upper, matrix, row_lower,
        row_upper)``. A cell's interval is a bound where the cell is one variable of coefficient 1,
        else a row; ``matrix`` (None without rows) holds the rows over several cells and those."""
        from scipy.sparse import csr_matrix, vstack

        T = csr_matrix(T)
        n_cols = T.shape[1]
        c = self.cells
        h = c.var_cell * self._n + c.var_node
        sub = T[h]
        unit = np.diff(sub.indptr) == 1
        unit[unit] = sub.data[sub.indptr[:-1][unit]] == 1.0
        lower = upper = None
        if unit.any():
            lower = np.full(n_cols, -np.inf)
            upper = np.full(n_cols, np.inf)
            col = sub.indices[sub.indptr[:-1][unit]]
            lower[col], upper[col] = c.var_lo[unit], c.var_hi[unit]
        blocks, lo, hi = [], [], []
        if c.rows.n_rows:
            blocks.append(c.rows.matrix(lambda node, cell: cell * self._n + node, self.n_cells) @ T)
            lo.append(c.rows.lo)
            hi.append(c.rows.hi)
        if (~unit).any():
            blocks.append(sub[np.flatnonzero(~unit)])
            lo.append(c.var_lo[~unit])
            hi.append(c.var_hi[~unit])
        if not blocks:
            return lower, upper, None, np.zeros(0), np.zeros(0)
        return lower, upper, vstack(blocks).tocsr(), np.concatenate(lo), np.concatenate(hi)

    def pose(self, build: Any, T: Any) -> Any:
        """``build(lower, upper)`` -> a Problem; the set's rows added to it (``name="constraints"``)."""
        lower, upper, matrix, lo, hi = self.columns(T)
        p = build(lower, upper)
        if matrix is not None:
            p.add_constraints(matrix, lo, hi, name="constraints")
        return p

    def check(self, by_size: np.ndarray) -> list[str]:
        """Every entry the released ``(K, n_regions)`` histograms violate (exact integers)."""
        return self.cells.check(np.asarray(by_size).T)
