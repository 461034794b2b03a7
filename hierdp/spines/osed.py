"""Off-spine entity distance (OSED, paper 003 §4, eq. 20-23, Algorithm 1).

OSED(k) is the fewest on-spine geounits that, added or subtracted, compose entity k (1 when k is a
geounit, 0 when k is empty). The recursion keeps, per geounit u, two numbers: ``c[k, u]`` for the
part of k inside u and ``c'[k, u]`` for the part of its complement inside u::

    blocks:     c = 1{b in k},            c' = 1 - c
    above:      c[k, u]  = min( sum_v c[k, v],  1 + sum_v c'[k, v] )    (v: children of u)
                c'[k, u] = min( sum_v c'[k, v], 1 + sum_v c[k, v] )
    OSED(k) = c[k, root]

("build the part inside u from the children, or take u and subtract the complement"; eq. 20-23
print ``c[k, l, v]`` where geolevel l+1 is meant.) The 0/1-state recursion is exact: it equals the
minimum number of nonzero a_u in {-1, 0, 1} with sum_{u above b} a_u = 1{b in k} for every block b
(checked against exhaustive search in the tests).

Vectorized and sparse: a geounit that holds no block of k has c = 0 and c' = 1 (the geounit
itself), so only the (entity, geounit) pairs on the paths of k's blocks are computed: the cost is
the number of memberships times the depth, not entities times geounits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from hierdp.spines.core import Spine
from hierdp.spines.entities import Entities

__all__ = ["OsedTable", "osed", "osed_table"]


@dataclass(frozen=True)
class OsedTable:
    """The recursion's values at every touched (entity, geounit) pair, per geolevel.

    ``entity[l], node[l], c[l], cc[l]`` are aligned arrays for geolevel ``l`` (sorted by entity then
    geounit). Untouched pairs have c = 0, c' = 1.
    """

    entity: list[np.ndarray]
    node: list[np.ndarray]
    c: list[np.ndarray]
    cc: list[np.ndarray]
    n_entities: int

    def at_level(self, level: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(entity, geounit, c, c')`` of the touched pairs at ``level``."""
        return self.entity[level], self.node[level], self.c[level], self.cc[level]

    def root_osed(self) -> np.ndarray:
        """OSED of every entity at the root (0 for an empty entity)."""
        out = np.zeros(self.n_entities, np.int64)
        out[self.entity[0]] = self.c[0]
        return out


def osed_table(spine: Spine, entities: Entities | Any) -> OsedTable:
    """Run the recursion (eq. 20-23) for every entity; see :class:`OsedTable`."""
    ents = Entities.coerce(spine, entities)
    n = spine.n
    nch = spine.n_children
    L = spine.block_level
    ent, pos = ents.pairs()
    node = spine.blocks[pos]
    key = np.unique(ent * n + node)
    entity_l = [np.zeros(0, np.int64)] * spine.n_levels
    node_l = [np.zeros(0, np.int64)] * spine.n_levels
    c_l = [np.zeros(0, np.int64)] * spine.n_levels
    cc_l = [np.zeros(0, np.int64)] * spine.n_levels
    e, u = key // n, key % n
    c = np.ones(key.size, np.int64)
    cc = np.zeros(key.size, np.int64)
    entity_l[L], node_l[L], c_l[L], cc_l[L] = e, u, c, cc
    for lev in range(L - 1, -1, -1):
        pkey = e * n + spine.parent[u]
        uk, inv = np.unique(pkey, return_inverse=True)
        inv = inv.ravel()
        x = np.bincount(inv, weights=c, minlength=uk.size).astype(np.int64)
        ysum = np.bincount(inv, weights=cc, minlength=uk.size).astype(np.int64)
        touched = np.bincount(inv, minlength=uk.size).astype(np.int64)
        e, u = uk // n, uk % n
        y = ysum + (nch[u] - touched)  # every untouched child contributes c' = 1
        c = np.minimum(x, y + 1)
        cc = np.minimum(y, x + 1)
        entity_l[lev], node_l[lev], c_l[lev], cc_l[lev] = e, u, c, cc
    return OsedTable(entity_l, node_l, c_l, cc_l, ents.n)


def osed(spine: Spine, entities: Entities | Any, *, scope: str = "global", county_level: str | int | None = None
         ) -> Any:
    """OSED of every entity.

    Args:
        spine: the spine.
        entities: :class:`Entities` or a mapping name -> block ids.
        scope: ``"global"`` (the paper: OSED at the root) or ``"per_county"`` (the production code:
            each entity restricted to each county it touches, one row per (entity, county)).
        county_level: the geolevel of the per-county scope (default ``"county"``).

    Returns:
        ``global``: a ``pandas.Series`` of OSED indexed by entity name. ``per_county``: a
        DataFrame ``entity, county, osed``.
    """
    import pandas as pd

    ents = Entities.coerce(spine, entities)
    table = osed_table(spine, ents)
    if scope == "global":
        return pd.Series(table.root_osed(), index=pd.Index(ents.names, name="entity"), name="osed")
    if scope != "per_county":
        raise ValueError(f"scope must be 'global' or 'per_county', got {scope!r}")
    lev = spine.level_index(county_level if county_level is not None else "county")
    e, u, c, _ = table.at_level(lev)
    return pd.DataFrame({"entity": ents.names[e], "county": spine.names[u], "osed": c})
