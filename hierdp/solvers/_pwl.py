"""Convex integer cost tables of a tree, held implicitly by their unit-count functions.

Paper 001 (M_DP, §6–7) gives every node ``i`` a cost table ``C_i(v)``: the least cost of the
subtree of ``i`` when node ``i`` takes the value ``v``. With separable convex node costs
``f_i(v) = w_i (v - x_i)^2`` and the consistency constraint ``y_i = sum y_children``,

    C_leaf = f_leaf,        C_i = f_i + (infimal convolution of the children's C_c),

and every table is convex piecewise-linear on the integers (the paper's Lemma 5). A convex table
is a start point plus its sorted *marginal costs* ``dC(v) = C(v+1) - C(v)``; the infimal
convolution of convex tables is the sorted merge of their marginal sequences (Alg. 1).

Counts reach 10^6, so tables are never expanded. A table is represented by its *unit-count*
function (the conjugate view of the sorted marginal list)

    U_i(t) = a_i + #{v in [a_i, cap_i - 1] : dC_i(v) <= t},

the largest minimiser of ``C_i(v) - t v``. Merging sorted marginal lists becomes a sum:
``U_G(t) = sum_c U_c(t)`` for the children's convolution ``G``. A leaf's ``U`` is closed form (its
marginals ``w (2 (v - x) + 1)`` are an arithmetic progression); an internal node's ``U`` follows from
its children's by one monotone search over its value, because
``dC_i(v) <= t  <=>  dG(v) <= t - df_i(v)  <=>  U_G(t - df_i(v)) >= v + 1``.

Top-down (the paper's second phase), a node with value ``V`` hands its children the allocation
that minimises the sum of their tables: with the smallest price ``t*`` such that
``sum_c U_c(t*) >= V``, every child takes its units priced below ``t*`` plus, in child order, units
priced exactly ``t*`` until ``V`` is reached (deterministic tie-breaking; all such splits cost the
same). The price search stops early once the units left inside its bracket are all needed or all
belong to one child (see :meth:`CostTables.allocate`). A free root takes ``U_root(0)``, its
largest minimiser inside the window below. Every search is vectorised over all queried nodes of a
level.

Domains. Node ``i`` lives in ``[a_i, b_i]``: its bounds (non-negativity included; a fixed node is
one point) intersected with ``[sum a_c, sum b_c]``. An unbounded domain is made finite without
losing the optimum: the smallest minimiser of ``C_i`` is at most
``M_i = max(a_i, ceil(x_i) [if w_i > 0], sum_c M_c)`` (for ``v >= M_i`` the node's own marginal and
every child's merged marginal are ``>= 0``), so a free root is searched in ``[a, min(b, M)]``
and, values being non-negative, each child in ``[a_c, min(b_c, cap_parent - sum a_siblings)]``.

Prices are float64. When all weights and targets of costed nodes are integers, every marginal is
an integer and prices are searched over integers; otherwise over float64 (bisection steps over the
ordered bit patterns), exact for the float-evaluated marginals, i.e. up to rounding of near-ties.

Cost. Evaluating ``U`` of a node of height ``h`` nests ``h`` searches, so searches must take few
steps: both the value search and the price search use safeguarded interpolation (the staircases
are close to lines) with bisection fallback, and warm-start every child's search from the bracket
its earlier answers imply. Measured (2 cores): 3-level trees with 5,000 leaves and counts up to
10^6 in well under 0.1 s; 4 levels / 27,000 leaves ~1-3 s; 6 levels / 7,776 leaves ~12-20 s. The
work grows roughly like (steps per search)^height, so very deep trees are the weak spot.
"""

from __future__ import annotations

from hierdp.errors import HierdpError

from dataclasses import dataclass

import numpy as np

_SIGN = np.int64(-(2**63))
_MAGNITUDE = np.int64(2**63 - 1)
#: values beyond this are refused: prices and marginals must stay exact in float64
MAX_EXACT = 2**50
#: brackets at most this wide are bisected directly (probing both ends would cost more)
_NARROW = 8


class InfeasibleTree(HierdpError, ValueError):
    """No integer assignment satisfies the domains, fixed values and consistency."""


def float_to_key(t: np.ndarray) -> np.ndarray:
    """Order-preserving map of float64 to int64 (``-0.0`` and ``0.0`` share key 0)."""
    bits = np.ascontiguousarray(t, dtype=np.float64).view(np.int64)
    return np.where(bits < 0, -(bits & _MAGNITUDE), bits)


def key_to_float(k: np.ndarray) -> np.ndarray:
    """Inverse of :func:`float_to_key`."""
    k = np.asarray(k, dtype=np.int64)
    bits = np.where(k < 0, (-k) | _SIGN, k)
    return np.ascontiguousarray(bits).view(np.float64)


def _floor_average(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``floor((lo + hi) / 2)`` without int64 overflow."""
    return (lo >> 1) + (hi >> 1) + (lo & hi & 1)


def _segment_positions(seg: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions of the listed segments ``[seg, seg + counts)`` in a concatenated array, and the
    segments' starts and lengths inside the selection."""
    sub_seg = np.cumsum(counts) - counts
    pos = np.arange(int(counts.sum()), dtype=np.int64) + np.repeat(seg - sub_seg, counts)
    return pos, sub_seg, counts


@dataclass
class TreeArrays:
    """The compiled tree: CSR children, depth, and per-node cost and domain arrays."""

    child_ptr: np.ndarray
    child_idx: np.ndarray
    n_children: np.ndarray
    depth: np.ndarray
    weight: np.ndarray  # effective weight: 0 where the node has no cost term
    target: np.ndarray  # 0 where weight is 0
    lo: np.ndarray      # int64 lower end of the node's domain (a_i)
    cap: np.ndarray     # int64 upper end actually searched (finite, proven to keep an optimum)


def compile_tree(
    parent: np.ndarray,
    target: np.ndarray,
    weights: np.ndarray,
    fixed: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    depth: np.ndarray,
    child_ptr: np.ndarray,
    child_idx: np.ndarray,
) -> TreeArrays:
    """Domains and search caps of every node (bottom-up then top-down, one pass per level).

    ``fixed`` is NaN for free nodes; ``lower`` already includes non-negativity (>= 0).

    Raises:
        InfeasibleTree: a node's domain is empty (names the node and why).
        ValueError: values too large for exact float64 prices.
    """
    n = parent.size
    n_children = np.diff(child_ptr)
    is_fixed = ~np.isnan(fixed)
    costed = ~is_fixed & ~np.isnan(target) & (weights > 0)
    w = np.where(costed, weights, 0.0)
    x = np.where(costed, np.nan_to_num(target), 0.0)

    lo_own = np.ceil(lower - 1e-9)
    hi_own = np.floor(upper + 1e-9)
    fv = np.nan_to_num(fixed)
    bad = is_fixed & ((fv < lo_own) | (fv > hi_own))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InfeasibleTree(f"node {i} is fixed at {fv[i]:g} outside its bounds [{lower[i]:g}, {upper[i]:g}]")
    lo_own = np.where(is_fixed, fv, lo_own)
    hi_own = np.where(is_fixed, fv, hi_own)

    a = lo_own.copy()
    b = hi_own.copy()
    m = np.maximum(a, np.where(costed, np.ceil(x), -np.inf))  # smallest-minimiser bound M_i
    max_depth = int(depth.max()) if n else 0
    levels = [np.flatnonzero(depth == d) for d in range(max_depth + 1)]
    for d in range(max_depth, 0, -1):  # bottom-up: children of depth-(d-1) nodes are final
        kids = levels[d]
        par = parent[kids]
        sa = np.bincount(par, weights=a[kids], minlength=n)
        sb = np.bincount(par, weights=b[kids], minlength=n)
        sm = np.bincount(par, weights=m[kids], minlength=n)
        ps = levels[d - 1]
        ps = ps[n_children[ps] > 0]
        own_a, own_b = a[ps], b[ps]
        a[ps] = np.maximum(own_a, sa[ps])
        b[ps] = np.minimum(own_b, sb[ps])
        empty = a[ps] > b[ps]
        if empty.any():
            k = int(np.flatnonzero(empty)[0])
            i = int(ps[k])
            raise InfeasibleTree(
                f"node {i}: its own range [{own_a[k]:g}, {own_b[k]:g}] (bounds or fixed value) does not meet "
                f"the range its children can sum to [{sa[i]:g}, {sb[i]:g}]")
        m[ps] = np.maximum(np.maximum(m[ps], sm[ps]), a[ps])
    leaves_empty = (n_children == 0) & (a > b)
    if leaves_empty.any():
        i = int(np.flatnonzero(leaves_empty)[0])
        raise InfeasibleTree(f"node {i}: empty range [{a[i]:g}, {b[i]:g}]")

    cap = np.minimum(b, m)  # roots: a proven window for the smallest minimiser
    for d in range(1, max_depth + 1):  # top-down: a child never exceeds parent - siblings' minimum
        kids = levels[d]
        par = parent[kids]
        sa = np.bincount(par, weights=a[kids], minlength=n)
        cap[kids] = np.minimum(b[kids], cap[par] - (sa[par] - a[kids]))
    if np.any(np.abs(cap) > MAX_EXACT) or np.any(np.abs(a) > MAX_EXACT) or np.any(np.abs(x) > MAX_EXACT):
        raise ValueError(f"values beyond {MAX_EXACT:.3g}: too large for exact float64 cost tables")
    return TreeArrays(child_ptr, child_idx, n_children, depth, w, x,
                      a.astype(np.int64), cap.astype(np.int64))


class CostTables:
    """Evaluate unit-count functions and allocate values top-down over a compiled tree."""

    def __init__(self, tree: TreeArrays) -> None:
        self.t = tree
        w, x = tree.weight, tree.target
        costed = w > 0
        self.integral_prices = bool(np.all(w[costed] == np.round(w[costed]))
                                    and np.all(x[costed] == np.round(x[costed])))
        # bound on |marginal| of any table over its searched domain: own part + deepest child's bound
        own = w * (2.0 * np.maximum(np.abs(tree.lo - x), np.abs(tree.cap - x)) + 1.0)
        bound = own.copy()
        max_depth = int(tree.depth.max()) if tree.depth.size else 0
        parent_of = np.empty(tree.depth.size, np.int64)
        parent_of[tree.child_idx] = np.repeat(np.arange(tree.depth.size), tree.n_children)
        for d in range(max_depth, 0, -1):
            kids = np.flatnonzero(tree.depth == d)
            best = np.zeros(tree.depth.size)
            np.maximum.at(best, parent_of[kids], bound[kids])
            ps = np.unique(parent_of[kids])
            bound[ps] = own[ps] + best[ps]
        self.price_bound = float(bound.max()) + 1.0 if bound.size else 1.0
        self.evaluations = 0  # leaf evaluations (a work counter for stats)

    # ------------------------------------------------------------------ structure helpers
    def expand(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Children of ``nodes`` concatenated: ``(kids, seg_start, counts)`` per node."""
        counts = self.t.n_children[nodes]
        seg_start = np.cumsum(counts) - counts
        total = int(counts.sum())
        shift = np.repeat(self.t.child_ptr[nodes] - seg_start, counts)
        kids = self.t.child_idx[np.arange(total, dtype=np.int64) + shift]
        return kids, seg_start, counts

    def own_marginal(self, nodes: np.ndarray, v: np.ndarray) -> np.ndarray:
        """``f_i(v+1) - f_i(v) = w_i (2 (v - x_i) + 1)`` (0 for nodes without cost)."""
        return self.t.weight[nodes] * (2.0 * (v - self.t.target[nodes]) + 1.0)

    # ------------------------------------------------------------------ unit-count functions
    def units(self, nodes: np.ndarray, t: np.ndarray, lo_hint: np.ndarray | None = None,
              hi_hint: np.ndarray | None = None) -> np.ndarray:
        """``U_i(t)`` for each queried node ``i`` at its price ``t`` (int64).

        ``lo_hint`` / ``hi_hint``: bounds the caller already knows for the answers (from earlier
        evaluations at lower / higher prices); internal nodes search only inside them.
        """
        out = np.empty(nodes.size, np.int64)
        leaf = self.t.n_children[nodes] == 0
        if leaf.any():
            out[leaf] = self._leaf_units(nodes[leaf], t[leaf])
        if not leaf.all():
            inner = ~leaf
            lo = self.t.lo[nodes[inner]] if lo_hint is None else lo_hint[inner]
            hi = self.t.cap[nodes[inner]] if hi_hint is None else hi_hint[inner]
            out[inner] = self._internal_units(nodes[inner], t[inner], lo, hi)
        return out

    def _leaf_units(self, nodes: np.ndarray, t: np.ndarray) -> np.ndarray:
        self.evaluations += nodes.size
        a = self.t.lo[nodes]
        c = self.t.cap[nodes]
        w = self.t.weight[nodes]
        res = np.where(t >= 0, c, a)  # cost-free leaf: every marginal is 0
        pos = w > 0
        if pos.any():
            wp, xp, tp, ap, cp = w[pos], self.t.target[nodes[pos]], t[pos], a[pos], c[pos]
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                q = xp + (tp / wp - 1.0) * 0.5  # largest real v with marginal <= t
            q = np.clip(q, ap - 1, cp)
            k = np.floor(q).astype(np.int64)
            # agree exactly with the float-evaluated marginals w (2 (v - x) + 1)
            k += (wp * (2.0 * (k + 1 - xp) + 1.0) <= tp) & (k < cp)
            k -= (wp * (2.0 * (k - xp) + 1.0) > tp) & (k >= ap)
            res[pos] = np.clip(k + 1, ap, cp)
        return res

    def _internal_units(self, nodes: np.ndarray, t: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Smallest v in [lo, hi] with v == hi or g(v) < 0, where g(v) = U_G(t - df(v)) - (v + 1)
        is non-increasing in v (P(v): g(v) >= 0 means the marginal dC(v) <= t).

        The search is nested (children's U are searches too), so it must take few steps: g is a
        staircase close to a line, so safeguarded interpolation (regula falsi on the integer
        bracket, bisection whenever a step fails to halve the bracket) usually ends in 3-4 steps
        after g is known at both ends. Warm start: a child's answer at a later trial v is bounded
        by its answer at an earlier one (larger v -> lower child price -> fewer units).
        """
        lo = lo.copy()
        hi = hi.copy()
        kids, seg, counts = self.expand(nodes)
        kid_lo = self.t.lo[kids].copy()
        kid_hi = self.t.cap[kids].copy()
        g_lo = np.zeros(nodes.size, np.int64)   # g(lo - 1) once known (>= 0)
        g_hi = np.zeros(nodes.size, np.int64)   # g(hi) once known (< 0)
        # 0: probe lo - 1, 1: probe hi, 2: interpolate, 3: bisect (narrow brackets: bisect at once)
        phase = np.where(hi - lo <= _NARROW, 3, 0).astype(np.int8)
        active = np.flatnonzero(lo < hi)
        while active.size:
            ph = phase[active]
            l, h = lo[active], hi[active]
            width = h - l
            frac = g_lo[active] / np.maximum(g_lo[active] - g_hi[active], 1).astype(np.float64)
            guess = (l - 1) + np.floor(frac * (width + 1)).astype(np.int64) + 1
            trial = np.where(ph == 0, l - 1, np.where(ph == 1, h, np.where(
                ph == 2, np.clip(guess, l, h - 1), _floor_average(l, h - 1))))
            tau = t[active] - self.own_marginal(nodes[active], trial.astype(np.float64))
            pos, sub_seg, sub_counts = _segment_positions(seg[active], counts[active])
            got_kids = self.units(kids[pos], np.repeat(tau, sub_counts), kid_lo[pos], kid_hi[pos])
            g = np.add.reduceat(got_kids, sub_seg) - (trial + 1)
            ok = g >= 0
            ok_kids = np.repeat(ok, sub_counts)
            kid_hi[pos] = np.where(ok_kids, got_kids, kid_hi[pos])
            kid_lo[pos] = np.where(ok_kids, kid_lo[pos], got_kids)
            # ok at trial: the answer is above trial (or trial = hi is the answer itself)
            new_lo = np.where(ok, np.minimum(trial + 1, h), l)
            new_hi = np.where(ok, h, np.maximum(trial, l))
            lo[active] = new_lo
            hi[active] = new_hi
            g_lo[active] = np.where(ok, g, g_lo[active])
            g_hi[active] = np.where(ok, g_hi[active], g)
            halved = 2 * (new_hi - new_lo) <= width
            phase[active] = np.where(ph == 0, 1, np.where(ph == 1, 2, np.where(halved, 2, 3)))
            active = active[lo[active] < hi[active]]
        return lo

    # ------------------------------------------------------------------ top-down allocation
    def allocate(self, parents: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Optimal split of ``value[k]`` among the children of ``parents[k]``.

        Price search on a bracket ``t_lo < t* <= t_hi`` with ``S(t_lo) < V <= S(t_hi)``, where
        ``S(t) = sum_c U_c(t)``, keeping every child's ``U_c`` at both ends. The split is final
        as soon as the units priced inside the bracket are all needed (``S(t_hi) == V``), belong
        to one child, or the bracket has no price strictly inside (then they are all priced
        ``t_hi``): each child takes its units up to ``t_lo`` plus, in child order, those in the
        bracket until ``V`` is met. Steps are safeguarded interpolation (bisection when a step
        fails to halve the bracket), since every step re-solves the children's subtrees.

        Returns ``(kids, kid_values)`` with the children concatenated in CSR order.
        """
        kids, seg, counts = self.expand(parents)
        m = parents.size
        integral = self.integral_prices
        bound = float(np.ceil(self.price_bound))  # every marginal lies strictly inside (-bound, bound)
        t_lo = np.full(m, -bound)
        t_hi = np.full(m, bound)
        kid_lo = self.t.lo[kids].copy()   # U_c(t_lo)
        kid_hi = self.t.cap[kids].copy()  # U_c(t_hi)
        s_lo = np.add.reduceat(kid_lo, seg)
        s_hi = np.add.reduceat(kid_hi, seg)
        bisect = np.zeros(m, bool)

        def unfinished(idx: np.ndarray) -> np.ndarray:
            if integral:
                adjacent = t_hi[idx] - t_lo[idx] <= 1.0
            else:
                adjacent = np.nextafter(t_lo[idx], np.inf) >= t_hi[idx]
            pos, sub_seg, _ = _segment_positions(seg[idx], counts[idx])
            movers = np.add.reduceat((kid_hi[pos] > kid_lo[pos]).astype(np.int64), sub_seg)
            return idx[~adjacent & (s_hi[idx] > value[idx]) & (movers > 1)]

        active = unfinished(np.arange(m))
        while active.size:
            lo_t, hi_t = t_lo[active], t_hi[active]
            frac = (value[active] - s_lo[active]) / (s_hi[active] - s_lo[active]).astype(np.float64)
            guess = lo_t + frac * (hi_t - lo_t)
            if integral:
                trial = np.where(bisect[active], np.floor(0.5 * lo_t + 0.5 * hi_t), np.ceil(guess))
                trial = np.clip(trial, lo_t + 1.0, hi_t - 1.0)
            else:  # bisect over the ordered float64 bit patterns: at most 64 such steps
                half = key_to_float(_floor_average(float_to_key(lo_t), float_to_key(hi_t)))
                trial = np.where(bisect[active], half, guess)
                trial = np.clip(trial, np.nextafter(lo_t, np.inf), np.nextafter(hi_t, -np.inf))
            pos, sub_seg, sub_counts = _segment_positions(seg[active], counts[active])
            got_kids = self.units(kids[pos], np.repeat(trial, sub_counts), kid_lo[pos], kid_hi[pos])
            got = np.add.reduceat(got_kids, sub_seg)
            ok = got >= value[active]
            ok_kids = np.repeat(ok, sub_counts)
            kid_hi[pos] = np.where(ok_kids, got_kids, kid_hi[pos])
            kid_lo[pos] = np.where(ok_kids, kid_lo[pos], got_kids)
            t_hi[active] = np.where(ok, trial, hi_t)
            t_lo[active] = np.where(ok, lo_t, trial)
            s_hi[active] = np.where(ok, got, s_hi[active])
            s_lo[active] = np.where(ok, s_lo[active], got)
            if integral:
                bisect[active] = 2.0 * (t_hi[active] - t_lo[active]) > (hi_t - lo_t)
            else:
                new_width = float_to_key(t_hi[active]).astype(np.float64) - float_to_key(t_lo[active])
                old_width = float_to_key(hi_t).astype(np.float64) - float_to_key(lo_t)
                bisect[active] = 2.0 * new_width > old_width
            active = unfinished(active)
        # units inside the bracket: hand them out in child order until the parent's value is met
        gap = kid_hi - kid_lo
        remainder = value - s_lo
        csum = np.cumsum(gap)
        before = csum - gap - np.repeat(csum[seg] - gap[seg], counts)
        extra = np.clip(np.repeat(remainder, counts) - before, 0, gap)
        return kids, kid_lo + extra

    def solve(self) -> np.ndarray:
        """Optimal integer values of every node (roots: smallest minimiser within the cap window)."""
        depth = self.t.depth
        n = depth.size
        values = np.zeros(n, np.int64)
        roots = np.flatnonzero(depth == 0)
        values[roots] = self.units(roots, np.zeros(roots.size))
        for d in range(int(depth.max()) if n else 0):
            ps = np.flatnonzero((depth == d) & (self.t.n_children > 0))
            if ps.size == 0:
                continue
            kids, kid_values = self.allocate(ps, values[ps])
            values[kids] = kid_values
        return values
