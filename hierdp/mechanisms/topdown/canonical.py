"""A deterministic tie-break among the optima of a TopDown level: the same answer however it was batched.

A general solver (``highs``, ``ortools``) answers a batch of independent groups ("children sum to
their parent, non-negative integers") with *one* of its optima, and which one may change with what
else is in the batch - so the same seeded level cut into other chunks (another engine, a resume)
could come back different while every answer is optimal. :func:`canonical_optimum` moves every group
to one optimum fixed by the group alone: among the integer points of the same objective value, the
one closest in L2 to the noisy values (to 0 for children without a measurement), ties going to the
earlier child. The level's objective does not change; the release no longer depends on batching.

The optima of a group (integer noisy values ``y``, parent total ``P``, measured children ``M``,
unmeasured ``U``) form a box intersected with ``sum x = P``:

* **L∞** with optimal value ``t`` (read off the solver's answer): ``max(0, y - t) <= x <= y + t``
  on M, ``0 <= x <= P`` on U;
* **L1**: with ``z = max(y, 0)`` and ``S = sum_M z``: if ``S <= P``, ``x >= z`` on M (``x = z``
  when some child is unmeasured: they absorb the rest at no cost); else ``x <= z`` on M and
  ``x = 0`` on U;
* **L2**: the integer L2 optimum, whose ties are exactly the box of its last unit of "water":
  the box is ``0 <= x <= P`` (``x = z`` on M when U takes the rest, as for L1).

Within the box, the L2-closest point is found by integer water-filling: ``x_i = clip(a_i + λ, lo_i,
hi_i)`` for the largest integer ``λ`` whose sum stays at most ``P``, then one more unit to the
first children (in order) that can still rise by one. Everything is int64 and vectorized over the
level (a bisection on ``λ`` per group, all groups at once). The result is checked exactly in
integers against the solver's objective, group by group; a group whose check fails (it cannot,
for an exact solver) keeps the solver's answer.
"""

from __future__ import annotations

import numpy as np

__all__ = ["canonical_optimum", "water_fill"]

#: sums of a group stay exact in int64 below this (children x magnitude)
_INT64_SAFE = 2.0 ** 62


def _segment_sum(v: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Per group sums of an int64 (or object) array; empty groups sum to 0."""
    sizes = np.diff(offsets)
    out = np.zeros(sizes.size, dtype=v.dtype)
    has = sizes > 0
    if has.any():
        out[has] = np.add.reduceat(v, offsets[:-1][has])
    return out


def water_fill(anchor: np.ndarray, lo: np.ndarray, hi: np.ndarray, offsets: np.ndarray,
               totals: np.ndarray) -> np.ndarray:
    """The integer point of ``lo <= x <= hi``, ``sum x = totals[g]`` per group, closest in L2 to
    ``anchor``, ties to the earlier child (see the module docstring). Requires ``sum lo <= total <=
    sum hi`` in every group; all arrays int64."""
    offsets = np.asarray(offsets, dtype=np.int64)
    sizes = np.diff(offsets)
    group = np.repeat(np.arange(sizes.size), sizes)
    P = np.asarray(totals, dtype=np.int64)
    a, lo, hi = (np.asarray(v, dtype=np.int64) for v in (anchor, lo, hi))
    full = _segment_sum(hi, offsets) == P  # every child at its top: nothing to choose
    # bisection on lambda per group: f(low) <= P < f(high)
    d_lo, d_hi = lo - a, hi - a
    big = np.iinfo(np.int64).max
    low = np.full(sizes.size, big, np.int64)
    np.minimum.at(low, group, d_lo)
    low -= 1
    high = np.full(sizes.size, -big, np.int64)
    np.maximum.at(high, group, d_hi)
    high = np.where(full, low + 1, high)
    while True:
        open_ = high - low > 1
        if not open_.any():
            break
        mid = low + (high - low) // 2
        f = _segment_sum(np.clip(a + mid[group], lo, hi), offsets)
        ok = f <= P
        low = np.where(open_ & ok, mid, low)
        high = np.where(open_ & ~ok, mid, high)
    lam = low[group]
    x = np.clip(a + lam, lo, hi)
    rest = P - _segment_sum(x, offsets)
    can = (a + lam >= lo) & (a + lam < hi)
    rank = np.cumsum(can) - np.repeat(np.cumsum(can)[offsets[:-1] - 1] * (offsets[:-1] > 0), sizes)  # 1-based
    x = x + (can & (rank <= rest[group])).astype(np.int64)
    return np.where(full[group], hi, x)


def canonical_optimum(values: np.ndarray, noisy: np.ndarray, offsets: np.ndarray, totals: np.ndarray,
                      objective: str) -> tuple[np.ndarray, int]:
    """Every group moved to its canonical optimum (see the module docstring).

    Args:
        values: the solver's integer answer (one per child).
        noisy: the noisy values (NaN: a child without a measurement); integers where finite.
        offsets, totals: the groups (children ``offsets[g]:offsets[g+1]`` sum to ``totals[g]``).
        objective: ``"linf"``, ``"l1"`` or ``"l2"``.

    Returns:
        ``(values, kept)``: the canonical answer, and how many groups kept the solver's answer
        because the canonical one could not be computed exactly (non-integer noisy values, sums
        beyond int64) or did not check.
    """
    x = np.asarray(values, dtype=np.int64)
    y = np.asarray(noisy, dtype=float)
    offsets = np.asarray(offsets, dtype=np.int64)
    P = np.asarray(totals, dtype=np.int64)
    sizes = np.diff(offsets)
    G = sizes.size
    if not G or not x.size:
        return x, 0
    measured = np.isfinite(y)
    if np.any(y[measured] != np.round(y[measured])) or \
            float(sizes.max()) * max(float(np.abs(y[measured]).max(initial=0)), float(np.abs(P).max()), 1.0) \
            * 4 >= _INT64_SAFE:
        return x, G
    group = np.repeat(np.arange(G), sizes)
    yi = np.where(measured, y, 0).astype(np.int64)
    n_unmeasured = np.bincount(group[~measured], minlength=G)
    some_u = n_unmeasured[group] > 0
    PP = P[group]
    zero = np.zeros_like(x)
    if objective == "linf":
        t = np.zeros(G, np.int64)
        np.maximum.at(t, group[measured], np.abs(x - yi)[measured])
        tt = t[group]
        lo = np.where(measured, np.maximum(yi - tt, 0), 0)
        hi = np.where(measured, yi + tt, PP)
        anchor = yi
    else:
        z = np.maximum(yi, 0)
        S = _segment_sum(np.where(measured, z, 0), offsets)
        under = (S <= P)[group]
        if objective == "l1":
            lo = np.where(measured, np.where(under, z, 0), 0)
            hi = np.where(measured, np.where(under, np.where(some_u, z, PP), z), np.where(under, PP, 0))
        else:  # l2
            lo = np.where(measured & some_u & under, z, 0)
            hi = np.where(measured, np.where(some_u, z, PP), np.where(under, PP, 0))
        anchor = np.where(measured, yi, 0)
    hi = np.minimum(hi, PP)
    lo = np.maximum(lo, zero)
    feasible = (_segment_sum(lo, offsets) <= P) & (_segment_sum(hi, offsets) >= P)
    bad_box = np.bincount(group[lo > hi], minlength=G) > 0
    feasible &= ~bad_box
    out = x.copy()
    if feasible.any():
        keep_g = feasible[group]
        sub_off = np.concatenate([[0], np.cumsum(sizes[feasible])]).astype(np.int64)
        out[keep_g] = water_fill(anchor[keep_g], lo[keep_g], hi[keep_g], sub_off, P[feasible])
    # check, group by group, exactly: the canonical answer is no worse than the solver's
    worse = ~feasible | (_group_objective(out, yi, measured, offsets, objective)
                         > _group_objective(x, yi, measured, offsets, objective))
    if worse.any():
        back = worse[group]
        out[back] = x[back]
    return out, int(worse.sum())


def _group_objective(x: np.ndarray, y: np.ndarray, measured: np.ndarray, offsets: np.ndarray,
                     objective: str) -> np.ndarray:
    """Per group objective over the measured children, exactly (Python integers where int64
    could wrap: squares of deviations beyond 2^31)."""
    d = np.where(measured, np.abs(x - y), 0)
    if objective == "linf":
        sizes = np.diff(offsets)
        out = np.zeros(sizes.size, np.int64)
        np.maximum.at(out, np.repeat(np.arange(sizes.size), sizes), d)
        return out
    if objective == "l1":
        return _segment_sum(d, offsets)
    if float(d.max(initial=0)) ** 2 * float(np.diff(offsets).max(initial=1)) < _INT64_SAFE:
        return _segment_sum(d * d, offsets)
    obj = d.astype(object)
    return _segment_sum(obj * obj, offsets)
