"""Stage 1 of spine optimization (paper 003 §4, Algorithm 2): redefine block groups and tract groups
to bring off-spine entities closer to the spine, without changing any proportion.

**Optimized block groups** (:func:`optimize_block_groups`): within each tract, blocks that lie in
exactly the same entities form classes; each class is chunked, in spine (GEOID) order, into block
groups of at most ``max_size`` blocks, with n = blocks in the tract:

* ``size_rule="production"`` (default): ``floor(sqrt(n) + fanout_cutoff) + 1`` - both production
  versions of the DAS code allow one block more than the paper's text (notes A2);
* ``size_rule="paper"``: ``floor(sqrt(n) + fanout_cutoff)`` ("up to sqrt(n) + fanout_cutoff");
* ``group_type="orig"`` chunks greedily; ``"even"`` makes the same number of near-equal chunks.

**Tract groups** (:func:`optimize_tract_groups`, Algorithm 2): each county starts with one tract
group per tract; a pass tries every pair (u, v) of sibling tract groups whose union has at most
``floor(sqrt(#tracts) + fanout_cutoff)`` tracts and merges it when the descending-sorted OSED vector
does not get lexicographically worse (equality accepted); passes repeat until one changes nothing.
Production options (defaults as in the DAS code, notes A3): ``premerge_identical`` first merges
tracts touched by exactly the same entities (chunked by the cutoff); ``entity_threshold`` ignores
entities whose county-level OSED with the tract-group level removed is at most the threshold; when
no entity is left, tract groups are simply chunked by the cutoff. ``scope="per_county"`` (default)
scores OSEDs of entities restricted to the county (as production does); ``scope="global"`` scores
the entities' OSEDs at the root (the paper).

Incremental scoring: merging two tract groups changes only their county's values, so a test costs
O(#relevant entities), not a recursion over the spine. A descending-sorted vector changes, when
some entries change, at the largest value whose count changes: so comparing only the changed
entries is the same lexicographic test as comparing the whole sorted vectors.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hierdp.spines.core import Spine, SpineError
from hierdp.spines.entities import Entities
from hierdp.spines.osed import osed_table

__all__ = ["block_group_max_size", "lex_not_worse", "optimize_block_groups", "optimize_tract_groups"]


def block_group_max_size(n_blocks: np.ndarray, fanout_cutoff: int, size_rule: str = "production") -> np.ndarray:
    """Largest optimized block group in a tract of ``n_blocks`` blocks."""
    base = np.floor(np.sqrt(np.asarray(n_blocks, dtype=float)) + fanout_cutoff).astype(np.int64)
    if size_rule == "production":
        return base + 1
    if size_rule == "paper":
        return np.maximum(base, 1)
    raise SpineError(f"size_rule must be 'production' or 'paper', got {size_rule!r}")


def lex_not_worse(old: np.ndarray, new: np.ndarray) -> bool:
    """Whether the descending-sorted ``new`` is lexicographically <= the descending-sorted ``old``
    (both over the same entities; only entries that differ matter)."""
    diff = old != new
    if not diff.any():
        return True
    removed, added = old[diff], new[diff]
    vals = np.union1d(removed, added)[::-1]
    for v in vals:  # largest value first
        a, r = int(np.sum(added == v)), int(np.sum(removed == v))
        if a != r:
            return a < r
    return True


def _check_fresh(spine: Spine, levels: list[int], what: str) -> None:
    if not spine.is_unoptimized(levels):
        raise SpineError(f"{what}: proportions at these geolevels were already changed (bypass); regroup before "
                         "bypassing")


def optimize_block_groups(spine: Spine, entities: Entities | Any, *, fanout_cutoff: int = 12,
                          size_rule: str = "production", group_type: str = "orig") -> Spine:
    """Optimized block groups (see the module docstring): the geolevel just above the blocks is
    rebuilt inside each geounit of the geolevel above it (the tracts)."""
    ents = Entities.coerce(spine, entities)
    if spine.n_levels < 3:
        raise SpineError("optimized block groups need a block-group geolevel between a parent geolevel and blocks")
    bg, tract = spine.block_level - 1, spine.block_level - 2
    _check_fresh(spine, [tract, bg, spine.block_level], "optimize_block_groups")
    if group_type not in ("orig", "even"):
        raise SpineError(f"group_type must be 'orig' or 'even', got {group_type!r}")
    anc = spine.block_of_geounit()
    t = anc[:, tract]  # tract of every block (blocks in spine order)
    key = ents.block_keys()
    nb = spine.n_blocks
    border = np.arange(nb)
    # classes (tract, key) ordered by their first block
    cls_key = t * (int(key.max()) + 1 if key.size else 1) + key
    _uk, first, inv = np.unique(cls_key, return_index=True, return_inverse=True)
    inv = inv.ravel()
    cls_first = first[inv]
    order = np.lexsort((border, cls_first, t))
    inv_sorted = inv[order]
    starts = np.r_[0, np.flatnonzero(np.diff(inv_sorted)) + 1]
    sizes = np.diff(np.r_[starts, nb])
    rank = np.arange(nb) - np.repeat(starts, sizes)
    m = np.repeat(sizes, sizes)
    n_tract = np.bincount(t, minlength=spine.n)[t[order]]
    cap = block_group_max_size(n_tract, fanout_cutoff, size_rule)
    if group_type == "orig":
        chunk = rank // cap
    else:
        g = -(-m // cap)  # ceil
        chunk = (rank * g) // m
    # block group = (class, chunk) in this order
    bg_key = np.repeat(np.arange(starts.size), sizes) * (int(chunk.max()) + 1) + chunk
    new_bg, bg_of_sorted = np.unique(bg_key, return_inverse=True)  # increasing = spine order already
    bg_of_sorted = bg_of_sorted.ravel()
    bg_tract = np.zeros(new_bg.size, np.int64)
    bg_tract[bg_of_sorted] = t[order]
    lp = spine.level_ptr
    # names: tract name + running index within the tract
    within = np.arange(new_bg.size) - np.searchsorted(bg_tract, bg_tract)
    width = len(str(int(within.max()) + 1)) if within.size else 1
    bg_names = np.array([f"{spine.names[a]}:{i:0{width}d}" for a, i in zip(bg_tract, within, strict=False)], dtype=object)
    # assemble level-ordered arrays: levels above bg unchanged
    upper = np.arange(lp[bg])
    block_nodes = spine.blocks[order]
    names = np.concatenate([spine.names[upper], bg_names, spine.names[block_nodes]])
    parent = np.concatenate([spine.parent[upper], bg_tract, lp[bg] + bg_of_sorted])
    level = np.concatenate([spine.level[upper], np.full(new_bg.size, bg), np.full(nb, spine.block_level)])
    p_bg, p_b = spine.proportions[bg], spine.proportions[-1]
    den = spine.gamma_den
    gamma = np.concatenate([spine.gamma_num[upper], np.full(new_bg.size, p_bg.numerator * (den // p_bg.denominator)),
                            np.full(nb, p_b.numerator * (den // p_b.denominator))])
    note = (f"optimize_block_groups(fanout_cutoff={fanout_cutoff}, size_rule={size_rule}, group_type={group_type}): "
            f"{int((spine.level == bg).sum())} -> {new_bg.size} {spine.level_names[bg]}")
    return spine.with_arrays(names, parent, level, gamma.astype(np.int64), note)


def optimize_tract_groups(spine: Spine, entities: Entities | Any, *, county_level: str | int = "county",
                          fanout_cutoff: int = 12, entity_threshold: int | None = 9, premerge_identical: bool = True,
                          scope: str = "per_county", progress: bool = False) -> Spine:
    """Algorithm 2's tract groups (see the module docstring). The geolevel just below
    ``county_level`` holds the tract groups and the one below it the tracts."""
    ents = Entities.coerce(spine, entities)
    if scope not in ("per_county", "global"):
        raise SpineError(f"scope must be 'per_county' or 'global', got {scope!r}")
    cl = spine.level_index(county_level)
    tg, tr = cl + 1, cl + 2
    if tr >= spine.block_level + 1 or tr > spine.block_level:
        raise SpineError("tract groups need a tract-group geolevel and a tract geolevel below the county geolevel")
    _check_fresh(spine, [cl, tg, tr], "optimize_tract_groups")
    table = osed_table(spine, ents)
    _ptr, _child = spine.children_csr()
    lp = spine.level_ptr
    tracts = np.arange(lp[tr], lp[tr + 1])
    tract_county = spine.parent[spine.parent[tracts]]
    e_t, u_t, c_t, cc_t = table.at_level(tr)
    # global scope: the values above the county, kept up to date as counties change
    up = _Ancestors(spine, table, cl) if scope == "global" else None
    new_groups: dict[int, list[list[int]]] = {}
    counties = np.arange(lp[cl], lp[cl + 1])
    it = counties
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(counties, desc="tract groups", unit="county")
    # the touched (entity, tract) pairs, sorted by county so each county reads one slice
    pair_county = spine.parent[spine.parent[u_t]]
    po = np.argsort(pair_county, kind="stable")
    e_t, u_t, c_t, cc_t, pair_county = e_t[po], u_t[po], c_t[po], cc_t[po], pair_county[po]
    t_order = np.argsort(tract_county, kind="stable")
    t_sorted = tract_county[t_order]
    for county in it:
        a, b = np.searchsorted(pair_county, [county, county + 1])
        ta, tb = np.searchsorted(t_sorted, [county, county + 1])
        mine = np.sort(tracts[t_order[ta:tb]])
        new_groups[int(county)] = _group_county(county, mine, e_t[a:b], u_t[a:b], c_t[a:b], cc_t[a:b],
                                                fanout_cutoff, entity_threshold, premerge_identical, up)
    # rebuild: tract groups in county order, tracts in their group order
    names, parent, level, gamma = [], [], [], []
    upper = np.arange(lp[tg])
    den = spine.gamma_den
    g_tg = spine.proportions[tg].numerator * (den // spine.proportions[tg].denominator)
    tg_names: list[str] = []
    tg_parent: list[int] = []
    tract_list: list[int] = []
    tract_parent_local: list[int] = []
    for county in counties:
        for j, grp in enumerate(new_groups[int(county)]):
            tg_names.append(f"{spine.names[county]}/tg{j}")
            tg_parent.append(int(county))
            tract_list.extend(grp)
            tract_parent_local.extend([len(tg_names) - 1] * len(grp))
    tract_order = np.asarray(tract_list, np.int64)
    n_tg = len(tg_names)
    names = [spine.names[upper], np.asarray(tg_names, object), spine.names[tract_order]]
    parent = [spine.parent[upper], np.asarray(tg_parent, np.int64), lp[tg] + np.asarray(tract_parent_local, np.int64)]
    level = [spine.level[upper], np.full(n_tg, tg), np.full(tract_order.size, tr)]
    gamma = [spine.gamma_num[upper], np.full(n_tg, g_tg, np.int64), spine.gamma_num[tract_order]]
    # levels below the tracts follow their parents' new order
    pos = np.full(spine.n, -1, np.int64)
    pos[tract_order] = lp[tg] + n_tg + np.arange(tract_order.size)
    placed = lp[tg] + n_tg + tract_order.size
    for lev in range(tr + 1, spine.n_levels):
        idx = np.arange(lp[lev], lp[lev + 1])
        idx = idx[np.argsort(pos[spine.parent[idx]], kind="stable")]
        names.append(spine.names[idx])
        parent.append(pos[spine.parent[idx]])
        level.append(np.full(idx.size, lev))
        gamma.append(spine.gamma_num[idx])
        pos[idx] = placed + np.arange(idx.size)
        placed += idx.size
    note = (f"optimize_tract_groups(fanout_cutoff={fanout_cutoff}, entity_threshold={entity_threshold}, "
            f"premerge_identical={premerge_identical}, scope={scope}): {int((spine.level == tg).sum())} -> {n_tg} "
            f"{spine.level_names[tg]}")
    return spine.with_arrays(np.concatenate(names), np.concatenate(parent), np.concatenate(level),
                             np.concatenate(gamma), note)


def _group_county(county: int, tracts: np.ndarray, e_t: np.ndarray, u_t: np.ndarray, c_t: np.ndarray,
                  cc_t: np.ndarray, fanout_cutoff: int, threshold: int | None, premerge: bool,
                  up: _Ancestors | None) -> list[list[int]]:
    """Tract groups of one county (lists of tract geounit indices)."""
    T = tracts.size
    cutoff = max(math.floor(math.sqrt(T) + fanout_cutoff), 1)
    sel = np.arange(u_t.size)  # the touched (entity, tract) pairs of this county
    ents = np.unique(e_t[sel])
    E = ents.size
    col = np.searchsorted(tracts, u_t[sel])
    row = np.searchsorted(ents, e_t[sel])
    C = np.zeros((E, T), np.int64)
    CC = np.ones((E, T), np.int64)
    C[row, col] = c_t[sel]
    CC[row, col] = cc_t[sel]
    groups: list[list[int]] = [[j] for j in range(T)]
    if premerge and T > 1:
        touched = C + (1 - CC) > 0  # tract touched by the entity (contains any of its blocks)
        sig = [touched[:, j].tobytes() for j in range(T)]
        by_sig: dict[bytes, list[int]] = {}
        for j in range(T):
            by_sig.setdefault(sig[j], []).append(j)
        groups = []
        for members in by_sig.values():
            for s in range(0, len(members), cutoff):
                groups.append(members[s:s + cutoff])
        groups.sort(key=min)
    keep = np.ones(E, bool)
    if threshold is not None and E:
        X, Y = C.sum(1), CC.sum(1)
        keep = np.minimum(X, Y + 1) > threshold
    C, CC, ents = C[keep], CC[keep], ents[keep]
    if ents.size == 0:
        # chunk the current groups (not the tracts) so premerged groups stay whole
        merged: list[Any] = []
        cur: list[Any] = []
        for g in groups:
            if cur and len(cur) + len(g) > cutoff:
                merged.append(cur)
                cur = []
            cur = cur + g
        if cur:
            merged.append(cur)
        return [[int(tracts[j]) for j in g] for g in merged]
    xs = [C[:, g].sum(1) for g in groups]
    ys = [CC[:, g].sum(1) for g in groups]
    cT = [np.minimum(x, y + 1) for x, y in zip(xs, ys, strict=False)]
    cTT = [np.minimum(y, x + 1) for x, y in zip(xs, ys, strict=False)]
    X = np.sum(cT, axis=0)
    Y = np.sum(cTT, axis=0)

    def score(Xv: np.ndarray, Yv: np.ndarray) -> np.ndarray:
        c, cc = np.minimum(Xv, Yv + 1), np.minimum(Yv, Xv + 1)
        return c if up is None else up.root_values(ents, county, c, cc)

    current = score(X, Y)
    changed = True
    while changed:
        changed = False
        i = 0
        while i < len(groups):
            j = i + 1
            while j < len(groups):
                if len(groups[i]) + len(groups[j]) <= cutoff:
                    xw, yw = xs[i] + xs[j], ys[i] + ys[j]
                    cw, ccw = np.minimum(xw, yw + 1), np.minimum(yw, xw + 1)
                    X2 = X - cT[i] - cT[j] + cw
                    Y2 = Y - cTT[i] - cTT[j] + ccw
                    test = score(X2, Y2)
                    if lex_not_worse(current, test):
                        groups[i] = groups[i] + groups[j]
                        xs[i], ys[i], cT[i], cTT[i] = xw, yw, cw, ccw
                        for lst in (groups, xs, ys, cT, cTT):
                            del lst[j]
                        X, Y, current = X2, Y2, test
                        changed = True
                        continue
                j += 1
            i += 1
    if up is not None:
        up.commit(ents, county, np.minimum(X, Y + 1), np.minimum(Y, X + 1))
    return [[int(tracts[j]) for j in g] for g in groups]


class _Ancestors:
    """Per (entity, geounit) sums above the county geolevel, for the global scope: the root value
    of an entity after its county values change, and committing the change."""

    def __init__(self, spine: Spine, table: Any, county_level: int) -> None:
        self.spine = spine
        self.n = spine.n
        self.cl = county_level
        nch = spine.n_children
        self.key: list[np.ndarray] = []
        self.c: list[np.ndarray] = []
        self.cc: list[np.ndarray] = []
        self.xs: list[np.ndarray] = []
        self.ys: list[np.ndarray] = []
        self.nch = nch
        for lev in range(county_level + 1):
            e, u, c, cc = table.at_level(lev)
            self.key.append(e * self.n + u)
            self.c.append(c.copy())
            self.cc.append(cc.copy())
        for lev in range(county_level):  # sums of children values (touched children; untouched add c'=1)
            e, u, c, cc = table.at_level(lev + 1)
            pk = e * self.n + self.spine.parent[u]
            idx = np.searchsorted(self.key[lev], pk)
            xs = np.zeros(self.key[lev].size, np.int64)
            ys = np.zeros(self.key[lev].size, np.int64)
            np.add.at(xs, idx, c)
            np.add.at(ys, idx, cc - 1)  # store y minus the untouched baseline: y = ys + nch
            self.xs.append(xs)
            self.ys.append(ys)

    def _walk(self, ents: np.ndarray, county: int, c: np.ndarray, cc: np.ndarray, write: bool) -> np.ndarray:
        n = self.n
        node = np.full(ents.size, county, np.int64)
        k = np.searchsorted(self.key[self.cl], ents * n + node)
        old_c, old_cc = self.c[self.cl][k], self.cc[self.cl][k]
        if write:
            self.c[self.cl][k], self.cc[self.cl][k] = c, cc
        for lev in range(self.cl - 1, -1, -1):
            node = self.spine.parent[node]
            k = np.searchsorted(self.key[lev], ents * n + node)
            xs = self.xs[lev][k] + (c - old_c)
            ys = self.ys[lev][k] + (cc - old_cc)
            y = ys + self.nch[node]
            new_c, new_cc = np.minimum(xs, y + 1), np.minimum(y, xs + 1)
            prev_c, prev_cc = self.c[lev][k], self.cc[lev][k]
            if write:
                self.xs[lev][k], self.ys[lev][k] = xs, ys
                self.c[lev][k], self.cc[lev][k] = new_c, new_cc
            c, cc, old_c, old_cc = new_c, new_cc, prev_c, prev_cc
        return c

    def root_values(self, ents: np.ndarray, county: int, c: np.ndarray, cc: np.ndarray) -> np.ndarray:
        """Root OSED of ``ents`` if their values at ``county`` were ``c, cc``."""
        return self._walk(ents, county, c, cc, write=False)

    def commit(self, ents: np.ndarray, county: int, c: np.ndarray, cc: np.ndarray) -> None:
        """Record the county's final values."""
        self._walk(ents, county, c, cc, write=True)
