"""Bypass (paper 003 §5, Theorem 2, Algorithm 3): move a geounit's budget down to its children.

**The operation** (the paper's form, which keeps every geolevel): a parent P at geolevel l with
children v_1..v_c is replaced by c new geounits at geolevel l, the i-th with the single child v_i
and proportion γ_P + γ_{v_i}; every v_i gets proportion 0 (unmeasured: TopDown copies its new
single-child parent down). Every root-to-block path sum is unchanged (Theorem 3), and S̃ᵀS̃ is the
same as "reallocate the parent's PLB to its children".

**When** (Algorithm 3, one bottom-up pass from the block-group geolevel to the root):

* zCDP (Gaussian noise): bypass single-child parents only - with two or more children some query's
  variance increases (§5, after Theorem 2).
* pure DP (Laplace noise): also bypass a parent with c >= 2 children when
  ``min_u γ_u >= (c - 1) γ_P / 2`` (``rule="paper"``: Theorem 2's condition with the smallest child;
  sufficient, not exact, for unequal children), or when ``γ_P Σ_u 1/(2γ_u + γ_P) <= 1``
  (``rule="exact"``: the exact PSD condition of the proof's matrix D' for unequal children, by
  Sherman-Morrison; it bypasses at least as often, with the same guarantee).
* production extras (defaults = the DAS code): a multi-child bypass only when the grandparent's
  resulting fanout ``siblings + c <= bypass_cutoff`` (150); geolevels in ``bypass_levels`` are
  always bypassed; ``scope="per_county"`` applies the multi-child rule only at the county geolevel
  and below (the production code optimizes each county separately and only bypasses single-child
  parents above it); ``scope="global"`` everywhere.
* The root is never replaced by several geounits (a spine keeps one root: its total is the
  invariant); a single-child root passes its child's proportion up as any single-child parent.
* A parent with proportion 0, or whose children all have proportion 0, moves nothing and is left
  as it is: so a second pass changes nothing (Algorithm 3 is idempotent).

Every comparison is exact (integer numerators over the spine's common denominator).
"""

from __future__ import annotations

from fractions import Fraction
from collections.abc import Iterable

import numpy as np

from hierdp.spines.core import Spine, SpineError

__all__ = ["bypass", "bypass_condition_exact", "bypass_condition_paper"]


def bypass_condition_paper(gamma_parent: Fraction, gamma_children: Iterable[Fraction]) -> bool:
    """Theorem 2 with the smallest child (Algorithm 3): ``min γ_u >= (c - 1) γ_P / 2``."""
    kids = list(gamma_children)
    return 2 * min(kids) >= (len(kids) - 1) * gamma_parent


def bypass_condition_exact(gamma_parent: Fraction, gamma_children: Iterable[Fraction]) -> bool:
    """The exact PSD condition for unequal children: ``γ_P Σ_u 1/(2γ_u + γ_P) <= 1``."""
    return sum((gamma_parent / (2 * g + gamma_parent) for g in gamma_children), Fraction(0)) <= 1


def bypass(spine: Spine, *, privacy: str = "zcdp", rule: str = "paper", scope: str = "per_county",
           county_level: str | int | None = None, bypass_cutoff: int | None = 150,
           bypass_levels: Iterable[str | int] = ()) -> Spine:
    """Algorithm 3 on ``spine`` (see the module docstring); returns the bypassed spine.

    Args:
        privacy: ``"pure"`` (Laplace / geometric noise) or ``"zcdp"`` (Gaussian: single-child rule
            only).
        rule: ``"paper"`` (Theorem 2 with the smallest child) or ``"exact"``.
        scope: ``"per_county"`` (production default) or ``"global"`` (the paper).
        county_level: geolevel where the per-county scope starts (default ``"county"``).
        bypass_cutoff: largest grandparent fanout a multi-child bypass may create (None: no limit).
        bypass_levels: geolevels whose geounits are always bypassed (production: tract groups
            when the user's spine has none).
    """
    if privacy not in ("pure", "zcdp"):
        raise SpineError(f"privacy must be 'pure' or 'zcdp', got {privacy!r}")
    if rule not in ("paper", "exact"):
        raise SpineError(f"rule must be 'paper' or 'exact', got {rule!r}")
    if scope not in ("per_county", "global"):
        raise SpineError(f"scope must be 'per_county' or 'global', got {scope!r}")
    if bypass_cutoff is not None and (isinstance(bypass_cutoff, bool) or int(bypass_cutoff) < 1):
        raise SpineError(f"bypass_cutoff must be a positive integer or None, got {bypass_cutoff!r}")
    if scope == "per_county":
        first_full = spine.level_index(county_level if county_level is not None else "county")
    else:
        first_full = 1
    always = {spine.level_index(lv) for lv in bypass_levels}
    if spine.block_level in always:
        raise SpineError("blocks have no children: the block geolevel cannot be bypassed")
    cond = bypass_condition_paper if rule == "paper" else bypass_condition_exact
    out = spine
    counts: list[int] = []
    for lev in range(spine.block_level - 1, -1, -1):
        chosen = _choose(out, lev, privacy, cond, multi_ok=(lev >= first_full and lev > 0),
                         cutoff=bypass_cutoff, always=lev in always and lev > 0)
        counts.append(int(chosen.size))
        if chosen.size:
            out = _apply(out, lev, chosen, f"bypass {chosen.size} at {out.level_names[lev]}")
    note = (f"bypass(privacy={privacy}, rule={rule}, scope={scope}, cutoff={bypass_cutoff}): "
            f"{sum(counts)} geounit(s) bypassed")
    return out.with_arrays(out.names, out.parent, out.level, out.gamma_num, note)


def _choose(spine: Spine, lev: int, privacy: str, cond, *, multi_ok: bool, cutoff: int | None,
            always: bool) -> np.ndarray:
    """Geounits of geolevel ``lev`` to bypass, in spine order (exact decisions)."""
    ptr, child = spine.children_csr()
    lp = spine.level_ptr
    units = np.arange(lp[lev], lp[lev + 1])
    g = spine.gamma_num
    nch = np.diff(ptr)[units]
    kid_sum = np.zeros(spine.n, np.int64)  # exact sum of the children's numerators
    has = spine.parent >= 0
    np.add.at(kid_sum, spine.parent[has], g[has])
    kid_pos = kid_sum[units]
    movable = (g[units] > 0) & (nch > 0) & (kid_pos > 0)
    single = movable & (nch == 1)
    chosen = single.copy()
    if always:
        chosen |= movable
    multi = movable & ~chosen & (nch >= 2)
    if privacy == "pure" and multi_ok and multi.any():
        den = spine.gamma_den
        live = np.diff(ptr).astype(np.int64)  # current fanout of every grandparent, updated as we go
        for u in units[multi]:  # only multi-child candidates: decisions depend on live fanouts
            kids = child[ptr[u]:ptr[u + 1]]
            c = kids.size
            if not cond(Fraction(int(g[u]), den), [Fraction(int(x), den) for x in g[kids]]):
                continue
            gp = spine.parent[u]
            if cutoff is not None and gp >= 0 and (live[gp] - 1) + c > cutoff:
                continue
            if gp >= 0:
                live[gp] += c - 1
            chosen[u - lp[lev]] = True
    return units[chosen]


def _apply(spine: Spine, lev: int, chosen: np.ndarray, note: str) -> Spine:
    """Replace every geounit in ``chosen`` (geolevel ``lev``) by one single-child geounit per child."""
    ptr, child = spine.children_csr()
    n = spine.n
    is_chosen = np.zeros(n, bool)
    is_chosen[chosen] = True
    nch = np.diff(ptr)
    kids = child[np.concatenate([np.arange(ptr[u], ptr[u + 1]) for u in chosen])] if chosen.size else \
        np.zeros(0, np.int64)
    owner = np.repeat(chosen, nch[chosen])
    m = kids.size
    # combined arrays: old geounits (chosen ones dropped below), then the new ones
    names = np.concatenate([spine.names, np.array([f"{spine.names[p]}>{spine.names[k]}" for p, k in zip(owner, kids, strict=False)],
                                                  dtype=object)])
    parent = np.concatenate([spine.parent, spine.parent[owner]])
    level = np.concatenate([spine.level, np.full(m, lev, np.int64)])
    gamma = np.concatenate([spine.gamma_num, spine.gamma_num[owner] + spine.gamma_num[kids]])
    new_idx = n + np.arange(m)
    parent[kids] = new_idx
    gamma[kids] = 0
    # order keys: a new geounit takes its old parent's place, then its child's order
    rank_a = np.concatenate([np.arange(n), owner]).astype(np.int64)
    rank_b = np.concatenate([np.full(n, -1, np.int64), kids])
    keep = np.concatenate([~is_chosen, np.ones(m, bool)])
    return _rebuild(spine, names, parent, level, gamma, rank_a, rank_b, keep, note)


def _rebuild(spine: Spine, names, parent, level, gamma, rank_a, rank_b, keep, note: str) -> Spine:
    """Level-ordered arrays from combined arrays (dropping ``~keep``), then a checked spine."""
    total = names.size
    newpos = np.full(total, -1, np.int64)
    order_parts = []
    placed = 0
    for lev in range(spine.n_levels):
        idx = np.flatnonzero(keep & (level == lev))
        ppos = np.where(parent[idx] >= 0, newpos[np.maximum(parent[idx], 0)], -1)
        if np.any((parent[idx] >= 0) & (ppos < 0)):
            raise SpineError("internal error: a geounit's parent was dropped")
        o = np.lexsort((rank_b[idx], rank_a[idx], ppos))
        idx = idx[o]
        newpos[idx] = placed + np.arange(idx.size)
        placed += idx.size
        order_parts.append(idx)
    order = np.concatenate(order_parts)
    par = np.where(parent[order] >= 0, newpos[np.maximum(parent[order], 0)], -1)
    return spine.with_arrays(names[order], par, level[order], gamma[order], note)
