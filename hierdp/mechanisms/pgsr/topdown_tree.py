"""The dynamic-programming hierarchy of a :class:`CountOfCounts` as a
:class:`~hierdp.hierarchy.topdown_tree.TopDownTree`.

Keys are node indices (``0`` the dummy root, ``1 + (k-1) * n_regions + r`` for size ``k`` in
region ``r``); children are generated from the region tree's ``child_ptr`` on demand, so TopDown
never materializes the ``1 + K * n_regions`` nodes it drops (zero counts released as zero).

It is also a tree of histogram cells for constraint sets (:mod:`hierdp.constraints`): entries name
regions and sizes (:meth:`DynProgTopDownTree.cell_space`), each (region, size) is one node
(:meth:`DynProgTopDownTree.cell_keys`), and with ``region_totals=True`` the feasibility check
imposes the public group totals of the regions it involves (:meth:`DynProgTopDownTree.public_rows`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hierdp.hierarchy.count_of_counts import CountOfCounts
from hierdp._segments import gather_ranges

__all__ = ["DynProgTopDownTree"]


class _Namer:
    def __init__(self, data: CountOfCounts) -> None:
        self._names = np.asarray(data.regions.names, dtype=object)
        self._n = data.n_regions

    def key_names(self, level: int, keys: np.ndarray) -> np.ndarray:
        keys = np.asarray(keys, dtype=np.int64)
        if level == 0:
            return np.array(["(all groups)"] * keys.size, dtype=object)
        k, r = np.divmod(keys - 1, self._n)
        return np.array([f"{self._names[ri]}|size {ki + 1}" for ki, ri in zip(k, r, strict=False)], dtype=object)

    def key_columns(self, level: int, keys: np.ndarray) -> dict[str, np.ndarray]:
        keys = np.asarray(keys, dtype=np.int64)
        if level == 0:
            return {"region": np.array([""] * keys.size, dtype=object), "size": np.zeros(keys.size, np.int64)}
        k, r = np.divmod(keys - 1, self._n)
        return {"region": self._names[r], "size": k + 1}


class DynProgTopDownTree:
    """TopDown view of the dynamic-programming hierarchy (see the module docstring)."""

    #: how a refusal names the rows of :meth:`public_rows`
    public_rows_text = "the public group totals of the regions"

    def __init__(self, data: CountOfCounts, *, region_totals: bool = False) -> None:
        self.data = data
        self.region_totals = bool(region_totals)
        regions = data.regions
        self._n = data.n_regions
        self._child_ptr = np.asarray(regions.child_ptr, dtype=np.int64)
        self._rparent = np.asarray(regions.parent, dtype=np.int64)
        self._flat = data.by_size.ravel()
        self.n_levels = int(regions.n_levels) + 1
        self.level_names = ["(all groups)"] + [str(x) for x in regions.level_names]
        self.root_key = 0
        self.root_count = int(data.G)
        self.namer = _Namer(data)
        self.domain_source = data.domain_source
        self.domain_assumption = data.domain_assumption

    def expand(self, level: int, parent_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        pk = np.asarray(parent_keys, dtype=np.int64)
        K, n = self.data.K, self._n
        if level == 0:
            kids = 1 + np.arange(K, dtype=np.int64) * n  # national node of every size (region 0 = root)
            offsets = np.array([0, K] if pk.size == 1 else np.arange(pk.size + 1) * K, dtype=np.int64)
            kids = np.tile(kids, pk.size)
        else:
            k0, r = np.divmod(pk - 1, n)
            starts = self._child_ptr[r]
            sizes = self._child_ptr[r + 1] - starts
            regions_, offsets = gather_ranges(starts, sizes)
            kids = 1 + np.repeat(k0, sizes) * n + regions_
        return kids, offsets, self._flat[kids - 1]

    def counts(self, level: int, keys: np.ndarray) -> np.ndarray:
        keys = np.asarray(keys, dtype=np.int64)
        return np.where(keys == 0, self.root_count, self._flat[np.maximum(keys - 1, 0)])

    def nonzero(self, level: int) -> tuple[np.ndarray, np.ndarray]:
        if level == 0:
            return np.array([0], np.int64), np.array([self.root_count], np.int64)
        lp = self.data.regions.level_ptr
        regs = np.arange(lp[level - 1], lp[level], dtype=np.int64)
        keys = (1 + np.arange(self.data.K, dtype=np.int64)[:, None] * self._n + regs[None, :]).ravel()
        keys.sort()
        c = self._flat[keys - 1]
        m = c != 0
        return keys[m], c[m]

    def parent_of(self, level: int, keys: np.ndarray) -> np.ndarray:
        keys = np.asarray(keys, dtype=np.int64)
        if level <= 1:
            return np.zeros(keys.size, np.int64)
        k0, r = np.divmod(keys - 1, self._n)
        return 1 + k0 * self._n + self._rparent[r]

    def level_size(self, level: int) -> int:
        if level == 0:
            return 1
        lp = self.data.regions.level_ptr
        return int(self.data.K * (lp[level] - lp[level - 1]))

    def key_names(self, level: int, keys: np.ndarray) -> np.ndarray:
        return self.namer.key_names(level, keys)

    # -- constraint sets over (region, size) cells (hierdp.constraints) ----------------------------
    def cell_space(self) -> Any:
        """The regions (as the region tree names them) and the sizes ``1..K``."""
        from hierdp.constraints.cells import CellSpace

        return CellSpace.of_hierarchy(self.data.regions, self.data.sizes.tolist(), cell_name="size")

    def cell_keys(self, region: np.ndarray, cell: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(level, key)`` of the nodes of (region, size index) pairs."""
        region = np.asarray(region, dtype=np.int64)
        level = np.asarray(self.data.regions.level, dtype=np.int64)[region] + 1
        return level, 1 + np.asarray(cell, dtype=np.int64) * self._n + region

    def public_rows(self, levels: np.ndarray, keys: np.ndarray) -> Any:
        """With ``region_totals``: ``sum_k (k, r) = G_r`` for every region of the given nodes and for
        their ancestor regions (the closure a reduced feasibility model needs), else None."""
        if not self.region_totals:
            return None
        from hierdp.constraints.bound import BoundRows

        keys = np.asarray(keys, dtype=np.int64)
        regions = np.unique((keys[keys > 0] - 1) % self._n)
        seen = regions
        while regions.size:  # ancestors, level by level
            par = self._rparent[regions]
            regions = np.setdiff1d(np.unique(par[par >= 0]), seen)
            seen = np.union1d(seen, regions)
        K = self.data.K
        level, key = self.cell_keys(np.repeat(seen, K), np.tile(np.arange(K, dtype=np.int64), seen.size))
        g = self.data.group_totals[seen].astype(float)
        m = seen.size
        return BoundRows(np.arange(m + 1, dtype=np.int64) * K, level, key, np.ones(m * K, np.int64), g, g.copy(),
                         np.array([f"group total of {self.data.regions.names[r]}" for r in seen], dtype=object),
                         np.full(m, -1, np.int64), np.zeros(m, np.int64))
