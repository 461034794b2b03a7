"""Carry constraints up to every coarser level where they aggregate exactly (public structure only).

TopDown fixes a level before it solves the next, so a constraint on fine nodes must already be
reflected when the coarser levels are solved, or a finer level may have no feasible point. The
Census DAS aggregates its block-level constraints to every geolevel; here, with vectorized passes
over whole levels (deepest first):

* **rows**: a row whose deepest-level nodes form *complete* sibling sets (every child of each of
  their parents) with one coefficient per set becomes, by consistency (children sum to the parent),
  the same row with each set replaced by its parent: exactly equivalent, one level up. It is carried
  again while that holds. A carried row over a single node becomes an interval of that node.
* **intervals** (bounds, structural zeros, invariants): a node's children must fit in it, so its
  interval is intersected with ``[sum of the children's lower bounds, sum of their upper bounds]``
  (the upper sum only when every child has one; lower bounds below 0 count as 0, counts being
  non-negative). This is the exact projection of the children's boxes, so a parent released inside
  its interval always leaves its children a feasible box.

Nothing here reads a count.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hierdp.constraints.bound import BoundRows, Intervals, merge_duplicate_terms

__all__ = ["carry_intervals", "carry_rows", "child_counts", "single_node_intervals"]


def child_counts(tree: Any, level: int, keys: np.ndarray) -> np.ndarray:
    """Number of children (at ``level + 1``) of each key of ``level``, from the tree's structure."""
    if not keys.size:
        return np.zeros(0, np.int64)
    _, offsets, _ = tree.expand(level, np.asarray(keys, dtype=np.int64))  # the counts it returns are not read
    return np.diff(np.asarray(offsets, dtype=np.int64))


def carry_rows(rows: BoundRows, tree: Any, level_names: list[str], base_names: np.ndarray) -> BoundRows:
    """Every row carried up as far as it aggregates exactly (the user's rows are not included).

    Returns the carried rows only; each keeps its user row's ``origin`` and bounds, is named
    ``"name (carried to LEVEL)"`` (``base_names[origin]`` is the user's name) and counts in
    ``carried`` how many levels it climbed.
    """
    out: list[BoundRows] = []
    pool = rows
    top = int(pool.level.max()) if pool.level.size else 0
    for D in range(top, 0, -1):
        if pool.n_rows == 0:
            break
        deepest = pool.deepest()
        cand = np.flatnonzero(deepest == D)
        if not cand.size:
            continue
        sub = pool.take(cand)
        r = sub.row_of_term
        at_d = sub.level == D
        p = np.asarray(tree.parent_of(D, sub.key[at_d]), dtype=np.int64)
        rd, cd = r[at_d], sub.coef[at_d]
        # groups of (row, parent): their size, smallest and largest coefficient
        order = np.lexsort((p, rd))
        rd, p, cd = rd[order], p[order], cd[order]
        new = np.concatenate([[True], (rd[1:] != rd[:-1]) | (p[1:] != p[:-1])])
        starts = np.flatnonzero(new)
        g_row, g_par = rd[starts], p[starts]
        g_size = np.diff(np.append(starts, rd.size))
        g_min = np.minimum.reduceat(cd, starts)
        g_max = np.maximum.reduceat(cd, starts)
        uniq, inv = np.unique(g_par, return_inverse=True)
        nch = child_counts(tree, D - 1, uniq)[inv.ravel()]
        complete = (g_size == nch) & (g_min == g_max)
        bad_rows = np.bincount(g_row[~complete], minlength=sub.n_rows) > 0
        ok = np.flatnonzero(~bad_rows)
        if not ok.size:
            continue
        # the carried rows: terms above D unchanged, one term per (row, parent) group
        keep_g = np.isin(g_row, ok)
        ok_pos = np.full(sub.n_rows, -1, np.int64)
        ok_pos[ok] = np.arange(ok.size)
        keep_t = ~at_d & np.isin(r, ok)
        t_row = np.concatenate([ok_pos[r[keep_t]], ok_pos[g_row[keep_g]]])
        t_lvl = np.concatenate([sub.level[keep_t], np.full(int(keep_g.sum()), D - 1, np.int64)])
        t_key = np.concatenate([sub.key[keep_t], g_par[keep_g]])
        t_coef = np.concatenate([sub.coef[keep_t], g_min[keep_g]])
        ptr, lvl, key, coef = merge_duplicate_terms(t_row, t_lvl, t_key, t_coef, ok.size)
        names = np.array([f"{base_names[o]} (carried to {level_names[D - 1]})" for o in sub.origin[ok]],
                         dtype=object)
        carried = BoundRows(ptr, lvl, key, coef, sub.lo[ok], sub.hi[ok], names, sub.origin[ok], sub.carried[ok] + 1)
        # a row whose terms cancel once carried reads 0 and says nothing more (were 0 outside its
        # bounds, the user's row could not hold: the feasibility check refuses that set)
        carried = carried.take(np.flatnonzero(np.diff(carried.ptr) > 0))
        out.append(carried)
        pool = BoundRows.concat([pool.take(np.flatnonzero(deepest != D)), carried])
    return BoundRows.concat(out)


def single_node_intervals(rows: BoundRows) -> tuple[BoundRows, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                                     np.ndarray]:
    """Split off rows over one node: ``c * y in [lo, hi]`` is the interval ``[ceil(lo/c), floor(hi/c)]``
    (sides swapped for c < 0), exact on integers.

    Returns ``(other_rows, level, key, lo, hi, empty_rows)``; ``empty_rows`` are rows without any
    term left (their terms cancelled), kept out of both.
    """
    sizes = np.diff(rows.ptr)
    single = np.flatnonzero(sizes == 1)
    empty = np.flatnonzero(sizes == 0)
    others = np.flatnonzero(sizes > 1)
    t = rows.ptr[:-1][single]
    c = rows.coef[t].astype(float)
    lo_r, hi_r = rows.lo[single], rows.hi[single]
    a = np.where(c > 0, lo_r, hi_r) / c
    b = np.where(c > 0, hi_r, lo_r) / c
    with np.errstate(invalid="ignore"):
        lo = np.where(np.isfinite(a), np.ceil(a), -np.inf)
        hi = np.where(np.isfinite(b), np.floor(b), np.inf)
    return rows.take(others), rows.level[t], rows.key[t], lo, hi, empty


def carry_intervals(intervals: Intervals, tree: Any) -> Intervals:
    """The intervals intersected, bottom-up, with the sums of their children's intervals."""
    out = intervals.copy()
    levels = out.levels()
    if not levels:
        return out
    for D in range(max(levels), 0, -1):
        keys = out.keys.get(D)
        if keys is None or not keys.size:
            continue
        lo, hi = out.lo[D], out.hi[D]
        p = np.asarray(tree.parent_of(D, keys), dtype=np.int64)
        uniq, inv = np.unique(p, return_inverse=True)
        inv = inv.ravel()
        sum_lo = np.bincount(inv, weights=np.maximum(lo, 0.0), minlength=uniq.size)
        fin = np.isfinite(hi)
        n_fin = np.bincount(inv, weights=fin.astype(float), minlength=uniq.size)
        sum_hi = np.bincount(inv, weights=np.where(fin, hi, 0.0), minlength=uniq.size)
        nch = child_counts(tree, D - 1, uniq)
        up = np.where(n_fin == nch, sum_hi, np.inf)
        tells = (sum_lo > 0) | np.isfinite(up)  # [0, inf) says nothing beyond non-negativity
        out.intersect(D - 1, uniq[tells], sum_lo[tells], up[tells])
    return out
