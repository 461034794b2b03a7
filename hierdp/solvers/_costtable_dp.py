"""Exact integer weighted L2 over a forest: paper 001's cost-table DP, linear in depth.

Problem. Nodes ``i`` of a forest, ``y_i`` integer, every node with children equal to the sum of
its children, ``a_i <= y_i <= b_i`` (non-negativity, bounds, a fixed node is one point);
minimise ``sum_i w_i (y_i - x_i)^2`` over the *costed* nodes (free, finite target, ``w_i > 0``).

Why a flow problem. Give every internal node a vertex, every node ``i`` an arc carrying ``y_i``
from its own vertex (a leaf: from a super vertex ``s``) to its parent's vertex (a root: to
``s``). Conservation at an internal vertex is ``sum(children) = y_i``; at ``s`` it holds
automatically. So the feasible set is the set of integer circulations with arc bounds, and the
cost is separable convex: a *convex-cost circulation*. Its classic optimality condition (e.g.
Ahuja, Magnanti & Orlin, *Network Flows*, ch. 14): an integer circulation is optimal iff no cycle
of the residual network has negative cost when one unit is pushed round it. A simple cycle
changes every variable by at most one unit.

Certified windows (the exactness argument). Restrict every node to a window
``[lo_i, hi_i]`` inside its domain that contains a common feasible point, and solve the restricted
problem exactly (below). Call a window edge *artificial* when it lies strictly inside the node's
domain. If the restricted optimum ``y`` sits on no artificial edge, every unit cycle of the
unrestricted residual network is also one of the restricted network (each variable moves by at
most one unit and stays inside its window), and none has negative cost (``y`` is optimal there):
so ``y`` is optimal for the whole problem. Otherwise the touched windows (with their subtrees and
ancestors) are doubled and re-centred on ``y``, and the restricted problem is solved again; the
objective never rises and windows end at the domain, so this terminates. No answer is returned
from a window it touches.

Domains. ``a_i = max(own lower, sum a_c)``, ``b_i = min(own upper, sum b_c)`` bottom-up (exact
feasibility ranges; an empty one names the node). Unbounded ranges are made finite without losing
an optimum: the smallest minimiser of a subtree's cost table ``C_i`` is at most
``M_i = max(a_i, ceil(x_i) [w_i > 0], sum_c M_c)`` (beyond it the node's own marginal and, by the
merge, its children's are >= 0), so a free root needs only ``[a, min(b, M)]``; below, a child
never exceeds its parent minus its siblings' lower ends. These *caps* are implied bounds.

Step 1, the centre (continuous relaxation, Alg. 1 on breakpoints). For a convex cost table ``C``
let ``U(t)`` be its largest minimiser of ``C(v) - t v`` over the reals (the inverse of the
derivative): for the infimal convolution of the children, ``U_G = sum_c U_c`` (merge); for
``C_i = f_i + G``, the point ``(tau, v)`` of ``U_G`` moves to ``(tau + 2 w_i (v - x_i), v)``
(own term), and the domain clips ``v``. Every ``U`` is piecewise linear in ``t``: a start value
and a sorted list of *events* (time, jump, slope after, value after). A merge concatenates the
children's events and sorts each parent's list (one segmented sort per level); the own term maps
events one-to-one (a jump of a cost-free child becomes a ramp of slope ``1/(2 w)``). A node's list
is as long as its subtree's number of leaves, whatever the counts, so the work is
``O(sum over levels of events log events)`` = ``O(leaves * depth * log)``, never
``(search steps)^depth``. Top-down, a free root takes ``U(0)``; a node of value ``Y`` finds the
price ``tau`` with ``U_G(tau) = Y`` and its children take ``U_c(tau)`` (cost-free children share
any jump), rounded to integers that sum to ``Y`` inside their domains: an integer feasible point.
Floating-point error here only moves the centre, never the answer.

Step 2, the exact integer DP inside windows (Alg. 1 on sorted marginals). Inside its window a
node's table is held by its marginal costs ``C(v+1) - C(v)``, sorted ascending (convexity). A
leaf's are ``w (2 (v - x) + 1)`` (closed form). An internal node concatenates its children's
marginals, sorts them per parent (segmented sort, one per level), keeps the ranks that fall in
its own window and adds its own marginal: ``dC_i(v) = df_i(v) + dG(v)``. Top-down, a node of
value ``y`` gives child ``c`` its window start plus the number of its marginals among the
``y - sum(starts)`` smallest (stable sort: equal marginals go to earlier children). A free root
takes its smallest minimiser. Work ``O(sum of window widths * log)``.

Arithmetic. Marginals are float64. With integer weights and targets every marginal is an integer
below ``2^53`` in magnitude (checked: :data:`MAX_EXACT`), so sorts and sums are exact; otherwise
the result is optimal for the float-evaluated marginals, i.e. up to the rounding of near-ties
(relative ``~1e-15`` of a marginal).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hierdp.errors import exact_number
from hierdp.errors import HierdpError
from hierdp.solvers._costtable_segments import (
    gather_runs,
    positions_in_segment,
    segment_argsort,
    segment_cumsum,
    segment_ids,
    segment_reduce,
    segment_search,
    starts_of,
)

#: values (domains, caps, targets) beyond this are refused: marginals must stay exact in float64
MAX_EXACT = 2**50
#: positive weights outside [2^-100, 2^100] are refused (prices would overflow or vanish)
MIN_WEIGHT, MAX_WEIGHT = 2.0**-100, 2.0**100
#: initial window radius around the centre (units) of leaves and of internal nodes; touched
#: windows double. Measured: the centre is within 1 unit of the optimum at most leaves and within
#: 2 at internal nodes (rounding errors add up the tree), and internal windows are cheap (their
#: children's windows, not theirs, make the sorts), so one round usually certifies.
INITIAL_RADIUS = 2
INTERNAL_RADIUS = 4


class InfeasibleTree(HierdpError, ValueError):
    """No integer assignment satisfies the domains, fixed values and consistency."""


class TreeTooLarge(HierdpError, ValueError):
    """Values or weights outside the range where the DP's float64 marginals are exact."""


class TimeLimitReached(HierdpError, RuntimeError):
    """The time limit passed; ``values`` holds the best feasible point found (not proven optimal),
    or None when there is none yet."""

    def __init__(self, values: np.ndarray | None, stats: dict[str, Any]) -> None:
        self.values = values
        self.stats = stats
        super().__init__("time limit reached before optimality was certified")


# ====================================================================== forest layout
@dataclass
class Forest:
    """A forest renumbered in breadth-first order: level ``d`` is the position range
    ``level_ptr[d]:level_ptr[d+1]`` and the children of every node are consecutive positions of
    the next level, in the order of their parents (so every per-parent operation is a segment
    operation over the next level).

    Attributes:
        order: original node index of every position.
        parent: parent position (-1 for roots).
        n_children: number of children per position.
        level_ptr: level boundaries.
    """

    order: np.ndarray
    parent: np.ndarray
    n_children: np.ndarray
    level_ptr: np.ndarray

    @property
    def n(self) -> int:
        return int(self.order.size)

    @property
    def n_levels(self) -> int:
        return int(self.level_ptr.size - 1)

    def level(self, d: int) -> slice:
        return slice(int(self.level_ptr[d]), int(self.level_ptr[d + 1]))

    @classmethod
    def from_parent(cls, parent: np.ndarray) -> Forest:
        """Breadth-first layout of a parent array (``-1`` = root). O(n) plus one stable sort."""
        parent = np.asarray(parent, dtype=np.int64)
        n = parent.size
        has_parent = parent >= 0
        kids = np.flatnonzero(has_parent)
        child_idx = kids[np.argsort(parent[kids], kind="stable")]
        nch = np.bincount(parent[kids], minlength=n).astype(np.int64)
        child_ptr = np.zeros(n + 1, np.int64)
        np.cumsum(nch, out=child_ptr[1:])
        level = np.flatnonzero(~has_parent)
        levels = [level]
        while True:
            counts = nch[level]
            if not counts.any():
                break
            level = child_idx[gather_runs(child_ptr[level], counts)]
            levels.append(level)
        order = np.concatenate(levels)
        if order.size != n:
            raise ValueError("the parent array has a cycle")
        rank = np.empty(n, np.int64)
        rank[order] = np.arange(n, dtype=np.int64)
        par = parent[order]
        par_pos = np.where(par >= 0, rank[np.maximum(par, 0)], -1)
        level_ptr = np.zeros(len(levels) + 1, np.int64)
        np.cumsum([lv.size for lv in levels], out=level_ptr[1:])
        return cls(order, par_pos, nch[order], level_ptr)

    @classmethod
    def from_groups(cls, sizes: np.ndarray) -> Forest:
        """``G`` roots, root ``g`` with ``sizes[g]`` leaf children; positions = the
        :meth:`Problem.from_groups` layout (roots first, then the children group by group)."""
        sizes = np.asarray(sizes, dtype=np.int64)
        g = sizes.size
        n = g + int(sizes.sum())
        parent = np.concatenate([np.full(g, -1, np.int64), segment_ids(sizes)])
        n_children = np.concatenate([sizes, np.zeros(n - g, np.int64)])
        level_ptr = np.array([0, g, n] if n > g else [0, g], dtype=np.int64)
        return cls(np.arange(n, dtype=np.int64), parent, n_children, level_ptr)


# ====================================================================== domains
@dataclass
class Domains:
    """Per-position data after compilation (breadth-first positions).

    ``w``/``x``: weight and target of costed nodes (0 elsewhere); ``a``: lower end of the exact
    feasibility range; ``b``: its upper end (may be inf); ``cap``: finite upper end that keeps an
    optimum; ``hi_center``: upper end used by the continuous centre (``b``, or ``cap`` for
    cost-free leaves, which would otherwise jump to infinity)."""

    w: np.ndarray
    x: np.ndarray
    costed: np.ndarray
    is_fixed: np.ndarray
    a: np.ndarray
    b: np.ndarray
    cap: np.ndarray
    hi_center: np.ndarray
    integral: bool


def compile_domains(forest: Forest, target: np.ndarray, weights: np.ndarray, fixed: np.ndarray,
                    lower: np.ndarray, upper: np.ndarray) -> Domains:
    """Domains and caps of every position (arrays given in original node order).

    ``lower`` already includes non-negativity. Raises :class:`InfeasibleTree` (names the node),
    :class:`TreeTooLarge` (magnitudes), ``ValueError`` (NaN bounds).
    """
    o = forest.order
    target, weights, fixed, lower, upper = (np.asarray(v, dtype=float)[o] for v in (target, weights, fixed, lower, upper))
    bad = np.isnan(lower) | np.isnan(upper)
    if bad.any():
        i = int(o[np.flatnonzero(bad)[0]])
        raise ValueError(f"node {i} has a NaN bound")
    is_fixed = ~np.isnan(fixed)
    costed = ~is_fixed & ~np.isnan(target) & (weights > 0)
    w = np.where(costed, weights, 0.0)
    x = np.where(costed, np.nan_to_num(target), 0.0)
    lo_own = np.ceil(lower - 1e-9)
    hi_own = np.floor(upper + 1e-9)
    fv = np.nan_to_num(fixed)
    bad = is_fixed & ((fv < lo_own) | (fv > hi_own))
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise InfeasibleTree(f"node {int(o[k])} is fixed at {exact_number(fv[k])} outside its bounds "
                             f"[{exact_number(lower[k])}, {exact_number(upper[k])}]")
    a = np.where(is_fixed, fv, lo_own)
    b = np.where(is_fixed, fv, hi_own)
    m = np.maximum(a, np.where(costed, np.ceil(x), -np.inf))  # bound on the smallest minimiser
    nch = forest.n_children
    sum_a_children = np.zeros(forest.n)
    for d in range(forest.n_levels - 2, -1, -1):
        sl, nx = forest.level(d), forest.level(d + 1)
        cnt = nch[sl]
        sa = segment_reduce(np.add, a[nx], cnt, 0.0)
        sb = segment_reduce(np.add, b[nx], cnt, 0.0)
        sm = segment_reduce(np.add, m[nx], cnt, 0.0)
        sum_a_children[sl] = sa
        inner = cnt > 0
        own_a, own_b = a[sl], b[sl]
        na = np.where(inner, np.maximum(own_a, sa), own_a)
        nb = np.where(inner, np.minimum(own_b, sb), own_b)
        empty = na > nb
        if empty.any():
            k = int(np.flatnonzero(empty)[0])
            raise InfeasibleTree(
                f"node {int(o[sl.start + k])}: its own range [{exact_number(own_a[k])}, {exact_number(own_b[k])}] "
                f"(bounds or fixed value) "
                f"does not meet the range its children can sum to [{exact_number(sa[k])}, {exact_number(sb[k])}]")
        a[sl], b[sl] = na, nb
        m[sl] = np.where(inner, np.maximum(np.maximum(m[sl], sm), na), m[sl])
    empty = a > b
    if empty.any():
        k = int(np.flatnonzero(empty)[0])
        raise InfeasibleTree(f"node {int(o[k])}: empty range [{exact_number(a[k])}, {exact_number(b[k])}]")
    cap = np.minimum(b, m)
    for d in range(1, forest.n_levels):
        nx = forest.level(d)
        par = forest.parent[nx]
        cap[nx] = np.minimum(b[nx], cap[par] - (sum_a_children[par] - a[nx]))
    biggest = max(float(np.abs(cap).max(initial=0.0)), float(np.abs(a).max(initial=0.0)),
                  float(np.abs(x).max(initial=0.0)))
    if biggest > MAX_EXACT:
        raise TreeTooLarge(f"values up to {exact_number(biggest)} exceed the DP's exact range {exact_number(MAX_EXACT)} "
                           "(2^50)")
    wc = weights[costed]
    if wc.size and (wc.min() < MIN_WEIGHT or wc.max() > MAX_WEIGHT):
        raise TreeTooLarge("positive weights must lie in [2^-100, 2^100]")
    a_i = a.astype(np.int64)
    cap_i = cap.astype(np.int64)
    leaf_free = (nch == 0) & ~costed
    hi_center = np.where(leaf_free, cap, b)
    integral = bool(np.all(w == np.round(w)) and np.all(x == np.round(x)))
    return Domains(w, x, costed, is_fixed, a_i, b, cap_i, hi_center, integral)


# ====================================================================== step 1: the centre
@dataclass
class Curves:
    """Piecewise-linear non-decreasing functions ``U(t)``, one per node of a level (runs of
    events). ``U(t) = start`` before the first event; at event ``e`` the value jumps by
    ``jump[e]`` to ``value[e]`` and then grows with ``slope[e]`` until the next event."""

    start: np.ndarray
    counts: np.ndarray
    t: np.ndarray
    jump: np.ndarray
    slope: np.ndarray
    value: np.ndarray

    @classmethod
    def constant(cls, start: np.ndarray) -> Curves:
        e = np.zeros(0)
        return cls(start.astype(float), np.zeros(start.size, np.int64), e, e, e, e)


def _leaf_curves(lo: np.ndarray, hi: np.ndarray, w: np.ndarray, x: np.ndarray, costed: np.ndarray,
                 is_fixed: np.ndarray) -> Curves:
    """Closed-form ``U`` of leaves: ``clip(x + t / (2w), lo, hi)`` for a costed leaf, a jump at 0
    from ``lo`` to ``hi`` for a cost-free one, a constant for a fixed one (or a one-point range)."""
    lo = lo.astype(float)
    open_ = hi > lo
    ramp = costed & open_
    jumpy = ~costed & ~is_fixed & open_
    closes = ramp & np.isfinite(hi)
    counts = ramp.astype(np.int64) + closes + jumpy
    k = int(counts.sum())
    t = np.empty(k)
    jump = np.zeros(k)
    slope = np.zeros(k)
    value = np.empty(k)
    first = starts_of(counts)
    r = first[ramp]
    wr = w[ramp]
    t[r] = 2.0 * wr * (lo[ramp] - x[ramp])
    slope[r] = 0.5 / wr
    value[r] = lo[ramp]
    c = first[closes] + 1
    t[c] = 2.0 * w[closes] * (hi[closes] - x[closes])
    value[c] = hi[closes]
    j = first[jumpy]
    t[j] = 0.0
    jump[j] = hi[jumpy] - lo[jumpy]
    value[j] = hi[jumpy]
    return Curves(lo, counts, t, jump, slope, value)


def _merge(children: Curves, n_children: np.ndarray) -> Curves:
    """``U_G = sum of the children's U`` for every node of a level (runs of children given by
    ``n_children``; nodes without children get a constant 0)."""
    cnt = segment_reduce(np.add, children.counts, n_children, 0)
    start = segment_reduce(np.add, children.start, n_children, 0.0)
    if children.t.size == 0:
        return Curves(start, np.zeros(n_children.size, np.int64), *(np.zeros(0),) * 4)
    # slope change at every event (a child's run restarts from slope 0)
    ds = children.slope.copy()
    ds[1:] -= children.slope[:-1]
    firsts = starts_of(children.counts)[children.counts > 0]
    ds[firsts] = children.slope[firsts]
    seg = segment_ids(cnt)
    # stable: equal times are summed below in child order, the same on every machine
    order = segment_argsort(children.t, cnt)
    t = children.t[order]
    ds = ds[order]
    jump = children.jump[order]
    # events at the same time of the same node become one
    new = np.ones(t.size, bool)
    new[1:] = (t[1:] != t[:-1]) | (seg[order][1:] != seg[order][:-1])
    if not new.all():
        idx = np.flatnonzero(new)
        t = t[idx]
        ds = np.add.reduceat(ds, idx)
        jump = np.add.reduceat(jump, idx)
        cnt = np.bincount(seg[order][idx], minlength=n_children.size).astype(np.int64)
    slope = np.maximum(segment_cumsum(ds, cnt), 0.0)
    dt = np.zeros(t.size)
    dt[:-1] = t[1:] - t[:-1]
    last = starts_of(cnt)[cnt > 0] + cnt[cnt > 0] - 1
    dt[last] = 0.0
    inc = jump + slope * dt
    value = np.repeat(start, cnt) + segment_cumsum(inc, cnt, exclusive=True) + jump
    return Curves(start, cnt, t, jump, slope, value)


def _own_term(g: Curves, w: np.ndarray, x: np.ndarray) -> Curves:
    """``U`` of ``f + G`` from ``U_G`` for nodes with ``w > 0`` (others: unchanged): every point
    ``(tau, v)`` moves to ``(tau + 2 w (v - x), v)``; a jump becomes a ramp of slope ``1/(2w)``."""
    we = np.repeat(w, g.counts)
    xe = np.repeat(x, g.counts)
    costed = we > 0
    split = costed & (g.jump > 0)
    if not split.any():
        t = g.t + 2.0 * we * (g.value - xe)
        slope = np.where(costed, g.slope / (1.0 + 2.0 * we * g.slope), g.slope)
        jump = np.where(costed, 0.0, g.jump)
        return Curves(g.start, g.counts, t, jump, slope, g.value)
    left = g.value - g.jump
    reps = 1 + split.astype(np.int64)
    src = np.repeat(np.arange(g.t.size), reps)
    pos = np.cumsum(reps) - 1
    first_of_split = np.zeros(src.size, bool)
    first_of_split[pos[split] - 1] = True
    wv, xv = we[src], xe[src]
    v_after = np.where(first_of_split, left[src], g.value[src])
    t = g.t[src] + 2.0 * wv * (v_after - xv)
    s = g.slope[src]
    slope = np.where(wv > 0, s / (1.0 + 2.0 * wv * s), s)
    slope = np.where(first_of_split, 0.5 / np.where(wv > 0, wv, 1.0), slope)
    jump = np.where(wv > 0, 0.0, g.jump[src])
    counts = g.counts + segment_reduce(np.add, split.astype(np.int64), g.counts, 0)
    return Curves(g.start, counts, t, jump, slope, v_after)


def _clip(h: Curves, lo: np.ndarray, hi: np.ndarray) -> Curves:
    """``clip(U, lo, hi)`` for every node (``start <= lo <= hi``; ``hi`` may be inf).

    ``U`` is non-decreasing, so it crosses ``lo`` once and ``hi`` once: inside a jump (the event
    is kept with a shorter jump), on a ramp between events or on the tail after the last event
    (a new event at the crossing time). Events before the lower crossing and after the upper one
    are dropped."""
    n = h.counts.size
    point = hi <= lo
    if not point.any() and not np.any(lo > h.start) and not np.isfinite(hi).any():
        return h  # nothing to clip (the common case: lower end = sum of the children's)
    first = starts_of(h.counts)
    end = first + h.counts
    left = h.value - h.jump
    has_ev = h.counts > 0
    last = np.maximum(end - 1, 0)
    tail_slope = np.where(has_ev, h.slope[last] if h.t.size else 0.0, 0.0)

    # ---- lower crossing: k = first event whose value exceeds lo
    k = end.copy()
    q = np.flatnonzero((lo > h.start) & ~point)
    if q.size:
        k[q] = segment_search(first[q], end[q], lambda i, e: h.value[e] <= lo[q[i]])
    need_lo = np.zeros(n, bool)
    need_lo[q] = True
    lo_jump = need_lo & (k < end) & (left[np.minimum(k, max(h.t.size - 1, 0))] <= lo) if h.t.size else np.zeros(n, bool)
    lo_ramp = need_lo & (k < end) & ~lo_jump & (k > first)
    lo_tail = need_lo & (k == end) & (tail_slope > 0)
    lo_never = need_lo & ~lo_jump & ~lo_ramp & ~lo_tail
    p = np.maximum(k - 1, 0)
    lo_base = np.where(lo_tail, last, p)
    lo_s = h.slope[lo_base] if h.t.size else np.zeros(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_lo = np.where(lo_ramp | lo_tail, h.t[lo_base] + (lo - h.value[lo_base]) / lo_s, np.nan) if h.t.size else np.full(n, np.nan)
    if h.t.size:
        t_lo = np.where(lo_ramp, np.minimum(t_lo, h.t[np.minimum(k, h.t.size - 1)]), t_lo)
    keep_from = np.where(need_lo, k, first)

    # ---- upper crossing: m = first event whose value reaches hi
    m = end.copy()
    q = np.flatnonzero(np.isfinite(hi) & ~point)
    if q.size:
        m[q] = segment_search(first[q], end[q], lambda i, e: h.value[e] < hi[q[i]])
    need_hi = np.zeros(n, bool)
    need_hi[q] = True
    mm = np.minimum(m, max(h.t.size - 1, 0))
    hi_jump = need_hi & (m < end) & (left[mm] < hi) if h.t.size else np.zeros(n, bool)
    hi_ramp = need_hi & (m < end) & ~hi_jump & (m > first)
    hi_tail = need_hi & (m == end) & (tail_slope > 0)
    hi_base = np.where(hi_tail, last, np.maximum(m - 1, 0))
    hi_s = h.slope[hi_base] if h.t.size else np.zeros(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_hi = np.where(hi_ramp | hi_tail, h.t[hi_base] + (hi - h.value[hi_base]) / hi_s, np.nan) if h.t.size else np.full(n, np.nan)
    if h.t.size:
        t_hi = np.where(hi_ramp, np.minimum(t_hi, h.t[mm]), t_hi)
        t_hi = np.where(hi_ramp | hi_tail, np.maximum(t_hi, np.where(lo_ramp | lo_tail, t_lo, -np.inf)), t_hi)
    keep_to = np.where(hi_jump, m + 1, np.where(hi_ramp, m, end))
    # a node whose start already reaches hi, that never reaches lo, or with a one-point range: constant
    constant = point | lo_never | (h.start >= hi)
    keep_to = np.where(constant, keep_from, np.maximum(keep_to, keep_from))
    add_lo = (lo_ramp | lo_tail) & ~constant
    add_hi = (hi_ramp | hi_tail) & ~constant
    kept = keep_to - keep_from
    counts = add_lo + kept + add_hi
    out_first = starts_of(counts)
    total = int(counts.sum())
    t = np.empty(total)
    jump = np.zeros(total)
    slope = np.zeros(total)
    value = np.empty(total)
    src = gather_runs(keep_from, kept)
    dst = gather_runs(out_first + add_lo, kept)
    t[dst], jump[dst], slope[dst], value[dst] = h.t[src], h.jump[src], h.slope[src], h.value[src]
    # lower crossing on a ramp or the tail: a new first event
    i = np.flatnonzero(add_lo)
    f = out_first[i]
    t[f], jump[f], slope[f], value[f] = t_lo[i], 0.0, lo_s[i], lo[i]
    # lower crossing inside a jump: the first kept event starts at lo
    i = np.flatnonzero(lo_jump & ~constant & (kept > 0))
    f = out_first[i]
    jump[f] = value[f] - lo[i]
    # upper crossing inside a jump: the last kept event stops at hi
    i = np.flatnonzero(hi_jump & ~constant & (kept > 0))
    f = out_first[i] + add_lo[i] + kept[i] - 1
    jump[f] = hi[i] - np.maximum(left[m[i]], lo[i])
    slope[f] = 0.0
    value[f] = hi[i]
    # upper crossing on a ramp or the tail: a new last event
    i = np.flatnonzero(add_hi)
    f = out_first[i] + counts[i] - 1
    t[f], jump[f], slope[f], value[f] = t_hi[i], 0.0, 0.0, hi[i]
    start = np.where(constant, np.where(point | lo_never, lo, hi), np.maximum(h.start, lo))
    return Curves(start, counts, t, jump, slope, value)


def _eval_g(g: Curves, first: np.ndarray, nodes: np.ndarray, tau: np.ndarray, right: bool) -> np.ndarray:
    """``U_G(tau)`` (right or left limit) of the listed nodes of a level's curves."""
    lo, hi = first[nodes], first[nodes] + g.counts[nodes]
    if right:
        k = segment_search(lo, hi, lambda i, e: g.t[e] <= tau[i])
    else:
        k = segment_search(lo, hi, lambda i, e: g.t[e] < tau[i])
    e = np.maximum(k - 1, 0)
    if g.t.size == 0:
        return g.start[nodes].astype(float)
    return np.where(k > lo, g.value[e] + g.slope[e] * (tau - g.t[e]), g.start[nodes])


def _eval_h(g: Curves, first: np.ndarray, nodes: np.ndarray, tau: np.ndarray, w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``U(tau)`` of ``f + G`` (``w > 0``) of the listed nodes, from their ``U_G``: the events of
    ``U`` are those of ``U_G`` moved to ``T = t + 2 w (v - x)``, computed during the search."""
    lo, hi = first[nodes], first[nodes] + g.counts[nodes]
    if g.t.size == 0:
        return g.start[nodes].astype(float)
    left = g.value - g.jump

    def below(i: np.ndarray, e: np.ndarray) -> np.ndarray:
        return g.t[e] + 2.0 * w[i] * (left[e] - x[i]) <= tau[i]

    k = segment_search(lo, hi, below)
    e = np.maximum(k - 1, 0)
    t_left = g.t[e] + 2.0 * w * (left[e] - x)
    t_right = g.t[e] + 2.0 * w * (g.value[e] - x)
    s = g.slope[e]
    on_jump = tau <= t_right
    v = np.where(on_jump, left[e] + (tau - t_left) / (2.0 * w),
                 g.value[e] + s / (1.0 + 2.0 * w * s) * (tau - t_right))
    return np.where(k > lo, v, g.start[nodes])


def _invert_g(g: Curves, first: np.ndarray, nodes: np.ndarray, y: np.ndarray) -> np.ndarray:
    """A price ``tau`` with ``U_G(tau-) <= y <= U_G(tau+)`` for each listed node (exact event
    times when ``y`` falls in a jump, so the children holding that jump see it)."""
    lo, hi = first[nodes], first[nodes] + g.counts[nodes]
    if g.t.size == 0:
        return np.zeros(nodes.size)
    k = segment_search(lo, hi, lambda i, e: g.value[e] < y[i])
    kk = np.minimum(k, g.t.size - 1)
    has_k = k < hi
    in_jump = has_k & (g.value[kk] - g.jump[kk] <= y)
    base = np.where(has_k, k - 1, hi - 1)
    ok = base >= lo
    b = np.maximum(base, 0)
    s = g.slope[b]
    with np.errstate(divide="ignore", invalid="ignore"):
        ramp = np.where(s > 0, g.t[b] + (y - g.value[b]) / s, g.t[b])
    if has_k.any():
        ramp = np.where(has_k, np.minimum(ramp, g.t[kk]), ramp)
    tau = np.where(in_jump, g.t[kk], np.where(ok, ramp, np.where(has_k, g.t[kk], 0.0)))
    return tau


def _round_to_sum(z: np.ndarray, total: np.ndarray, counts: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Integers in ``[lo, hi]`` near ``z`` whose runs sum to ``total`` (``sum lo <= total <= sum hi``).

    Systematic rounding: within a run, ``floor(z)`` plus the unit steps of the running sum of
    the fractional parts (offset 1/2), so every value is ``floor(z)`` or ``ceil(z)`` and the run
    sums to ``sum floor(z) + round(sum of fractions)`` = ``total`` when ``z`` sums to it. Runs
    that still miss their total (``z`` off by float error or clipping) are repaired unit by
    unit, spreading the missing units over the children with room."""
    z = np.clip(np.nan_to_num(z, nan=0.0), lo, hi)
    base = np.floor(z)
    frac = z - base
    run = segment_cumsum(frac, counts)  # fractions are < 1: the running sum stays precise
    prev = np.zeros(run.size)
    prev[1:] = run[:-1]
    prev[starts_of(counts)[counts > 0]] = 0.0
    step = np.floor(run + 0.5) - np.floor(prev + 0.5)
    y = np.minimum(base + step, hi).astype(np.int64)
    seg = segment_ids(counts)
    for _ in range(200):
        gap = total - segment_reduce(np.add, y, counts, 0)
        if not gap.any():
            return y
        gi = gap[seg]
        up = gi > 0
        room = np.where(up, hi - y, y - lo)
        cand = (gi != 0) & (room > 0)
        ncand = np.maximum(segment_reduce(np.add, cand.astype(np.int64), counts, 0), 1)[seg]
        # spread: every candidate takes |gap| // ncand, the first |gap| % ncand one more
        rank = segment_cumsum(cand.astype(np.int64), counts, exclusive=True)
        share = np.abs(gi) // ncand + (rank < np.abs(gi) % ncand)
        move = np.where(cand, np.minimum(room, share), 0)
        y = y + np.where(up, move, -move)
    raise RuntimeError("internal error: could not round the centre to a feasible point")


def _center(forest: Forest, dom: Domains, deadline: float | None = None) -> tuple[np.ndarray, dict[str, Any]]:
    """A feasible integer point near the continuous optimum (step 1 of the module docstring)."""
    n_levels = forest.n_levels
    nch = forest.n_children
    g_curves: list[Curves | None] = [None] * n_levels
    below: Curves | None = None
    events = 0
    for d in range(n_levels - 1, -1, -1):
        _check(deadline)
        sl = forest.level(d)
        cnt = nch[sl]
        inner = np.flatnonzero(cnt > 0)
        leaf = np.flatnonzero(cnt == 0)
        lo, hi = dom.a[sl].astype(float), dom.hi_center[sl]
        w, x, costed, fixed = dom.w[sl], dom.x[sl], dom.costed[sl], dom.is_fixed[sl]
        leaves = _leaf_curves(lo[leaf], hi[leaf], w[leaf], x[leaf], costed[leaf], fixed[leaf])
        if inner.size:
            assert below is not None  # a level with internal nodes has a level below it
            g = _merge(below, cnt)  # all nodes of the level; leaves get empty runs
            g_curves[d] = g
            events += int(g.t.size)
            sub = _subset(g, inner)
            h = _own_term(sub, w[inner], x[inner])
            u_inner = _clip(h, lo[inner], np.where(fixed[inner], lo[inner], hi[inner]))
        else:
            u_inner = Curves.constant(np.zeros(0))
        below = _combine(cnt.size, leaf, leaves, inner, u_inner)
    # top-down: roots at price 0, then every node's children at its price
    y = np.zeros(forest.n, np.int64)
    sl = forest.level(0)
    z_root = _children_values(forest, dom, g_curves, 0, np.zeros(sl.stop - sl.start), np.arange(sl.stop - sl.start),
                              left_only=True)
    roots = np.arange(sl.start, sl.stop)
    y[roots] = np.where(dom.is_fixed[roots], dom.a[roots],
                        np.clip(np.round(z_root), dom.a[roots], dom.cap[roots]).astype(np.int64))
    for d in range(n_levels - 1):
        sl, nx = forest.level(d), forest.level(d + 1)
        cnt = nch[sl]
        inner = np.flatnonzero(cnt > 0)
        if inner.size == 0:
            continue
        g_d = g_curves[d]
        assert g_d is not None  # stored by the bottom-up pass for every level with internal nodes
        first = starts_of(g_d.counts)
        yy = y[sl][inner].astype(float)
        tau = _invert_g(g_d, first, inner, yy)
        tau_all = np.zeros(cnt.size)
        tau_all[inner] = tau
        child_tau = np.repeat(tau_all, cnt)
        kids = np.arange(nx.stop - nx.start)
        lo_v = _children_values(forest, dom, g_curves, d + 1, child_tau, kids, left_only=True)
        hi_v = _children_values(forest, dom, g_curves, d + 1, child_tau, kids, left_only=False)
        gap = np.maximum(hi_v - lo_v, 0.0)
        slack = np.repeat(y[sl].astype(float) - segment_reduce(np.add, lo_v, cnt, 0.0), cnt)
        before = segment_cumsum(gap, cnt, exclusive=True)
        z = lo_v + np.clip(slack - before, 0.0, gap)
        y[nx] = _round_to_sum(z, np.where(cnt > 0, y[sl], 0), cnt, dom.a[nx], dom.cap[nx])
    return y, {"center_events": events}


def _subset(c: Curves, nodes: np.ndarray) -> Curves:
    first = starts_of(c.counts)
    idx = gather_runs(first[nodes], c.counts[nodes])
    return Curves(c.start[nodes], c.counts[nodes], c.t[idx], c.jump[idx], c.slope[idx], c.value[idx])


def _combine(size: int, leaf: np.ndarray, leaves: Curves, inner: np.ndarray, u_inner: Curves) -> Curves:
    """One level's curves in node order from its leaves' and its internal nodes' curves."""
    counts = np.zeros(size, np.int64)
    counts[leaf] = leaves.counts
    counts[inner] = u_inner.counts
    start = np.zeros(size)
    start[leaf] = leaves.start
    start[inner] = u_inner.start
    first = starts_of(counts)
    total = int(counts.sum())
    arrays = [np.empty(total) for _ in range(4)]
    for nodes, part in ((leaf, leaves), (inner, u_inner)):
        dst = gather_runs(first[nodes], part.counts)
        for arr, src in zip(arrays, (part.t, part.jump, part.slope, part.value), strict=True):
            arr[dst] = src
    return Curves(start, counts, *arrays)


def _children_values(forest: Forest, dom: Domains, g_curves: list[Curves | None], d: int, tau: np.ndarray,
                     nodes: np.ndarray, *, left_only: bool) -> np.ndarray:
    """``U(tau)`` of the listed nodes of level ``d`` (left limit, or right limit), clipped to
    their centre ranges: closed form for leaves, from the stored ``U_G`` for internal nodes."""
    sl = forest.level(d)
    pos = sl.start + nodes
    lo, hi = dom.a[pos].astype(float), dom.hi_center[pos]
    w, x = dom.w[pos], dom.x[pos]
    out = lo.copy()
    leaf = forest.n_children[pos] == 0
    fixed = dom.is_fixed[pos]
    ramp = leaf & dom.costed[pos]
    if ramp.any():
        out[ramp] = x[ramp] + tau[ramp] / (2.0 * w[ramp])
    free_leaf = leaf & ~dom.costed[pos] & ~fixed
    out[free_leaf] = np.where(tau[free_leaf] > 0, hi[free_leaf],
                              np.where((tau[free_leaf] == 0) & ~left_only, hi[free_leaf], lo[free_leaf]))
    inner = ~leaf & ~fixed
    if inner.any():
        g = g_curves[d]
        assert g is not None  # stored by the bottom-up pass for every level with internal nodes
        first = starts_of(g.counts)
        local = nodes[inner]
        wi = w[inner]
        has_w = wi > 0
        vals = np.empty(local.size)
        if has_w.any():
            vals[has_w] = _eval_h(g, first, local[has_w], tau[inner][has_w], wi[has_w], x[inner][has_w])
        if (~has_w).any():
            vals[~has_w] = _eval_g(g, first, local[~has_w], tau[inner][~has_w], right=not left_only)
        out[inner] = vals
    return np.where(fixed, lo, np.clip(out, lo, hi))


# ====================================================================== step 2: windows
@dataclass
class _Level:
    """What the top-down pass needs of one level after the bottom-up pass."""

    start: np.ndarray        # window start L of every node of the level
    child_start_sum: np.ndarray  # sum of the children's L (internal nodes)
    prefix_counts: np.ndarray    # per node: how many of its merged marginals are kept
    prefix_child: np.ndarray     # child (local position in the next level) of each kept marginal
    negatives: np.ndarray        # per node: number of negative own-table marginals (roots)


def _window_dp(forest: Forest, dom: Domains, lo_w: np.ndarray, hi_w: np.ndarray,
               deadline: float | None) -> tuple[np.ndarray, int]:
    """Exact optimum of the problem restricted to ``lo_w <= y <= hi_w`` (which must contain a
    consistent point). Returns the values and the number of marginals handled."""
    n_levels = forest.n_levels
    nch = forest.n_children
    levels: list[_Level] = []
    # the level below (the deepest level has no internal node, so these start empty and unused)
    m_counts = np.zeros(0, np.int64)
    m_vals = np.zeros(0)
    start_next = np.zeros(0, np.int64)
    work = 0
    for d in range(n_levels - 1, -1, -1):
        _check(deadline)
        sl = forest.level(d)
        cnt = nch[sl]
        lo, hi = lo_w[sl].copy(), hi_w[sl].copy()
        x = dom.x[sl]
        inner = np.flatnonzero(cnt > 0)
        sum_start = np.zeros(cnt.size, np.int64)
        pre_counts = np.zeros(cnt.size, np.int64)
        pre_child = np.zeros(0, np.int64)
        g_sorted = np.zeros(0)
        g_first = np.zeros(0, np.int64)
        if inner.size:
            sum_start = segment_reduce(np.add, start_next, cnt, 0)
            sum_end = segment_reduce(np.add, start_next + m_counts, cnt, 0)
            lo[inner] = np.maximum(lo[inner], sum_start[inner])
            hi[inner] = np.minimum(hi[inner], sum_end[inner])
            if np.any(lo > hi):
                raise RuntimeError("internal error: windows without a common feasible point")
            per_node = segment_reduce(np.add, m_counts, cnt, 0)
            order = segment_argsort(m_vals, per_node)
            g_sorted = m_vals[order]
            owner = segment_ids(m_counts)[order]  # child (local, next level) of every sorted marginal
            g_first = starts_of(per_node)
            pre_counts = np.where(cnt > 0, hi - sum_start, 0)
            pre_child = owner[gather_runs(g_first, pre_counts)].astype(np.int32 if m_counts.size < 2**31 else np.int64)
            work += int(m_vals.size)
        counts = hi - lo
        total = int(counts.sum())
        v = np.repeat(lo, counts) + positions_in_segment(counts)
        node = segment_ids(counts)
        own = dom.w[sl][node] * (2.0 * (v - x[node]) + 1.0) if total else np.zeros(0)
        vals = own
        if inner.size and total:
            is_inner = (cnt > 0)[node]
            rank = (v - sum_start[node])[is_inner]
            vals = own.copy()
            vals[is_inner] += g_sorted[g_first[node[is_inner]] + rank]
        negatives = segment_reduce(np.add, (vals < 0).astype(np.int64), counts, 0) if d == 0 else np.zeros(0, np.int64)
        levels.append(_Level(lo, sum_start, pre_counts, pre_child, negatives))
        m_counts, m_vals, start_next = counts, vals, lo
    levels.reverse()  # built deepest first
    # top-down
    y = np.zeros(forest.n, np.int64)
    sl = forest.level(0)
    lv0 = levels[0]
    y[sl] = lv0.start + lv0.negatives  # fixed roots: a one-point window; free roots: smallest minimiser
    for d in range(n_levels - 1):
        sl, nx = forest.level(d), forest.level(d + 1)
        lv, lv_next = levels[d], levels[d + 1]
        take = y[sl] - lv.child_start_sum
        rank = positions_in_segment(lv.prefix_counts)
        chosen = rank < np.repeat(take, lv.prefix_counts)
        got = np.bincount(lv.prefix_child[chosen], minlength=nx.stop - nx.start)
        y[nx] = lv_next.start + got
    return y, work


def _check(deadline: float | None) -> None:
    if deadline is not None and time.perf_counter() > deadline:
        raise _Deadline


class _Deadline(Exception):
    pass


def _anchor_components(forest: Forest, dom: Domains) -> np.ndarray:
    """Independent sub-problem of every node: its nearest fixed proper ancestor, or its root
    (fixed nodes separate sub-problems: below one, nothing depends on the rest of the tree)."""
    comp = np.arange(forest.n, dtype=np.int64)
    for d in range(1, forest.n_levels):
        nx = forest.level(d)
        par = forest.parent[nx]
        comp[nx] = np.where(dom.is_fixed[par], par, comp[par])
    return comp


def _spread(forest: Forest, marked: np.ndarray) -> np.ndarray:
    """The marked nodes with all their ancestors and descendants."""
    up = marked.copy()
    for d in range(forest.n_levels - 1, 0, -1):
        nx = forest.level(d)
        up[forest.parent[nx][up[nx]]] = True
    down = marked.copy()
    for d in range(1, forest.n_levels):
        nx = forest.level(d)
        down[nx] |= down[forest.parent[nx]]
    return up | down


@dataclass
class DPResult:
    """Values in original node order and statistics."""

    values: np.ndarray
    stats: dict[str, Any] = field(default_factory=dict)


def solve_compiled(forest: Forest, dom: Domains, *, deadline: float | None = None,
                   radius: int = INITIAL_RADIUS, internal_radius: int = INTERNAL_RADIUS,
                   start: np.ndarray | None = None) -> DPResult:
    """Exact optimum of a compiled forest (module docstring).

    Args:
        forest, dom: from :meth:`Forest.from_parent` / :func:`compile_domains`.
        deadline: ``time.perf_counter()`` time after which :class:`TimeLimitReached` is raised
            (with the best feasible point found, if any).
        radius, internal_radius: initial window radii (leaves, internal nodes); any value >= 0
            gives the same optimum (windows grow until certified), only the work changes.
        start: a feasible integer point (original node order) to centre the first windows on,
            instead of the continuous centre (for tests of the certification).
    """
    stats: dict[str, Any] = {"nodes": forest.n, "levels": forest.n_levels,
                             "arithmetic": "exact (integer marginals)" if dom.integral else "float64"}
    t0 = time.perf_counter()
    y: np.ndarray | None = None
    try:
        if start is None:
            y, cstats = _center(forest, dom, deadline)
            stats.update(cstats)
        else:
            y = np.asarray(start, dtype=np.int64)[forest.order]
        stats["center_seconds"] = time.perf_counter() - t0
        _check(deadline)
        comp = _anchor_components(forest, dom)
        r = np.where(forest.n_children > 0, int(internal_radius), int(radius)).astype(np.int64)
        open_ = np.ones(forest.n, bool)  # nodes of sub-problems not yet certified optimal
        rounds = 0
        work = 0
        while True:
            rounds += 1
            lo_w = np.where(open_, np.maximum(dom.a, y - r), y)
            hi_w = np.where(open_, np.minimum(dom.cap, y + r), y)
            y, wk = _window_dp(forest, dom, lo_w, hi_w, deadline)
            work += wk
            touched = open_ & (((y == lo_w) & (lo_w > dom.a)) | ((y == hi_w) & (hi_w < dom.cap)))
            if not touched.any():
                break
            bad_comp = np.zeros(forest.n, bool)
            bad_comp[comp[touched]] = True
            open_ = bad_comp[comp] & ~dom.is_fixed
            grow = _spread(forest, touched)
            # domains are below 2^50, so 2^52 covers any window (and r never overflows)
            r = np.where(grow, np.minimum(np.maximum(2 * r, 1), 2**52), r)
            _check(deadline)
        stats.update(rounds=rounds, marginals=work, final_radius=int(r.max(initial=0)))
    except _Deadline:
        values = None
        if y is not None:
            values = np.empty(forest.n, np.int64)
            values[forest.order] = y
        raise TimeLimitReached(values, stats) from None
    values = np.empty(forest.n, np.int64)
    values[forest.order] = y
    stats["seconds"] = time.perf_counter() - t0
    return DPResult(values, stats)
