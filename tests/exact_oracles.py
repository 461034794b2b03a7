"""Exact oracles for the solver fuzz and regression tests, written independently of hierdp.

They read only a problem's raw inputs (``parent``, ``target``, ``fixed``, ``weights``, ``lower``,
``upper``, ``integer``, ``nonnegative``, ``objective``, and the CSR matrices of user rows and query
terms) and never call hierdp's derived structure (``groups()``, ``depth()``, model arrays):

* :func:`groups_by_walk` - L∞ groups by walking parents in plain Python;
* :func:`enumerate_optimum` - brute force over every integer point of a box (tiny problems, any
  objective, rows and query terms included);
* :func:`tree_dp_optimum` - an exact dynamic program over subtree values for integer problems
  without rows or query terms (min-plus convolutions for l1/l2; per-group threshold feasibility
  for linf), for medium trees and deep ones;
* :func:`continuous_optimum` - scipy (linprog for l1/linf, SLSQP for l2) on a formulation written
  here.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np


def groups_by_walk(problem) -> list[int]:
    """Anchor node of every node's L∞ group (nearest fixed ancestor, else its root); -1 when fixed."""
    parent = [int(p) for p in problem.parent]
    fixed = ~np.isnan(problem.fixed)
    out = []
    for i in range(len(parent)):
        if fixed[i]:
            out.append(-1)
            continue
        a = i
        while parent[a] >= 0 and not fixed[parent[a]]:
            a = parent[a]
        out.append(parent[a] if parent[a] >= 0 else a)
    return out


def _bounds(problem) -> tuple[np.ndarray, np.ndarray]:
    lo = np.array(problem.lower, dtype=float)
    if problem.nonnegative:
        lo = np.maximum(lo, 0.0)
    return lo, np.array(problem.upper, dtype=float)


def objective_at(problem, values: np.ndarray, anchors: list[int] | None = None) -> float:
    """The objective at ``values`` computed from the raw inputs (groups by walking parents)."""
    values = np.asarray(values, dtype=float)
    anchors = groups_by_walk(problem) if anchors is None else anchors
    x, w = problem.target, problem.weights
    free = np.isnan(problem.fixed)
    term = free & ~np.isnan(x)
    dev = np.abs(values - np.nan_to_num(x)) * w
    total = 0.0
    if problem.objective == "l2":
        total = float(np.sum((w * (values - np.nan_to_num(x)) ** 2)[term]))
    elif problem.objective == "l1":
        total = float(np.sum(dev[term]))
    else:
        per: dict[int, float] = {}
        for i in np.flatnonzero(term):
            per[anchors[i]] = max(per.get(anchors[i], 0.0), float(dev[i]))
        total = sum(per.values())
    if problem.n_query_terms:
        q = problem.queries
        d = np.abs(q.matrix @ values - q.target)
        if problem.objective == "l2":
            total += float(np.sum(q.weight * d * d))
        elif problem.objective == "l1":
            total += float(np.sum(q.weight * d))
        else:
            for b in np.unique(q.block):
                total += float(np.max((q.weight * d)[q.block == b]))
    return total


def feasible(problem, values: np.ndarray, tol: float = 1e-9) -> bool:
    """Every constraint, checked from the raw inputs."""
    v = np.asarray(values, dtype=float)
    lo, hi = _bounds(problem)
    fx = ~np.isnan(problem.fixed)
    if np.any(np.abs(v[fx] - problem.fixed[fx]) > tol):
        return False
    if np.any(v < lo - tol) or np.any(v > hi + tol):
        return False
    if problem.integer and np.any(np.abs(v - np.round(v)) > tol):
        return False
    sums = np.zeros(v.size)
    has = np.zeros(v.size, bool)
    for i, p in enumerate(problem.parent):
        if p >= 0:
            sums[p] += v[i]
            has[p] = True
    if np.any(has & (np.abs(sums - v) > tol * np.maximum(1, np.abs(v)))):
        return False
    if problem.n_constraints:
        c = problem.constraints
        a = c.matrix @ v
        if np.any(a < c.lower - tol * np.maximum(1, np.abs(c.lower))) or \
                np.any(a > c.upper + tol * np.maximum(1, np.abs(c.upper))):
            return False
    return True


def enumerate_optimum(problem, lo: int, hi: int) -> float | None:
    """Optimal objective over every integer vector of the free nodes in ``[lo, hi]`` (None: infeasible)."""
    free = np.flatnonzero(np.isnan(problem.fixed))
    anchors = groups_by_walk(problem)
    best = None
    base = np.nan_to_num(problem.fixed).astype(float)
    for combo in itertools.product(range(lo, hi + 1), repeat=free.size):
        v = base.copy()
        v[free] = combo
        if not feasible(problem, v):
            continue
        obj = objective_at(problem, v, anchors)
        if best is None or obj < best:
            best = obj
    return best


# ---------------------------------------------------------------------------------- tree DP
def _children(problem) -> list[list[int]]:
    kids: list[list[int]] = [[] for _ in range(problem.n)]
    for i, p in enumerate(problem.parent):
        if p >= 0:
            kids[int(p)].append(i)
    return kids


def _minplus(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``c[s] = min_t a[t] + b[s - t]`` truncated to len(a) (values are offsets from 0)."""
    r = a.size
    m = a[:, None] + b[None, :]
    idx = np.add.outer(np.arange(r), np.arange(r)).ravel()
    c = np.full(2 * r - 1, np.inf)
    np.minimum.at(c, idx, m.ravel())
    return c[:r]


def tree_dp_optimum(problem, vmax: int) -> float | None:
    """Exact optimum of an integer, non-negative problem without rows or query terms, every value in
    ``[0, vmax]`` (None: infeasible). l1/l2: min-plus DP over subtree values; linf: per group, the
    smallest candidate threshold whose boxes admit a consistent point (boolean DP)."""
    assert problem.integer and problem.nonnegative and not problem.n_constraints and not problem.n_query_terms
    kids = _children(problem)
    n = problem.n
    order = _postorder(problem, kids)
    lo, hi = _bounds(problem)
    vals = np.arange(vmax + 1, dtype=float)
    fixed = problem.fixed
    x, w = problem.target, problem.weights
    free = np.isnan(fixed)

    def allowed(i: int) -> np.ndarray:
        ok = (vals >= lo[i] - 1e-9) & (vals <= hi[i] + 1e-9)
        if not free[i]:
            ok &= vals == fixed[i]
        return ok

    if problem.objective in ("l1", "l2"):
        f = [None] * n
        for i in order:
            cost = np.zeros(vmax + 1)
            if free[i] and not np.isnan(x[i]):
                d = vals - x[i]
                cost = w[i] * (d * d if problem.objective == "l2" else np.abs(d))
            cost = np.where(allowed(i), cost, np.inf)
            if kids[i]:
                g = f[kids[i][0]]
                for c in kids[i][1:]:
                    g = _minplus(g, f[c])
                cost = cost + g
            f[i] = cost
        total = 0.0
        for r in range(n):
            if problem.parent[r] < 0:
                m = float(np.min(f[r]))
                if not np.isfinite(m):
                    return None
                total += m
        return total
    # linf: groups are independent given the fixed values
    anchors = groups_by_walk(problem)
    total = 0.0
    for a in sorted(set(g for g in anchors if g >= 0)):
        members = [i for i in range(n) if anchors[i] == a]
        cands = {0.0}
        for i in members:
            if not np.isnan(x[i]):
                cands.update((w[i] * np.abs(vals - x[i])).tolist())
        cands = sorted(cands)

        def ok(t: float, a: Any = a) -> bool:
            return _group_feasible(problem, kids, a, anchors, allowed, t, vals)

        if not ok(cands[-1] + 1.0):
            return None
        lo_i, hi_i = 0, len(cands) - 1
        while lo_i < hi_i:
            mid = (lo_i + hi_i) // 2
            if ok(cands[mid] + 1e-9):
                hi_i = mid
            else:
                lo_i = mid + 1
        total += cands[lo_i]
    return total


def _group_feasible(problem, kids, anchor: int, anchors: list[int], allowed, t: float, vals) -> bool:
    """A consistent point of the group whose deviations are all <= t (boolean DP over values)."""
    x, w = problem.target, problem.weights

    def feas(i: int) -> np.ndarray:
        ok = allowed(i)
        if anchors[i] == anchor and not np.isnan(x[i]):
            ok &= w[i] * np.abs(vals - x[i]) <= t
        if anchors[i] != anchor:  # a fixed node bordering the group: a constant
            return ok
        if kids[i]:
            g = None
            for c in kids[i]:
                fc = np.where(feas(c), 0.0, np.inf)
                g = fc if g is None else _minplus(g, fc)
            ok &= np.isfinite(g)
        return ok

    root_ok = np.zeros(vals.size, bool)
    if np.isnan(problem.fixed[anchor]):  # a free root: the anchor is itself in the group
        root_ok = feas(anchor)
    else:
        g = None
        for c in kids[anchor]:
            fc = np.where(feas(c), 0.0, np.inf)
            g = fc if g is None else _minplus(g, fc)
        root_ok = allowed(anchor) & np.isfinite(g)
    return bool(root_ok.any())


def _postorder(problem, kids) -> list[int]:
    out = []
    for r in range(problem.n):
        if problem.parent[r] >= 0:
            continue
        stack = [(r, False)]
        while stack:
            i, done = stack.pop()
            if done:
                out.append(i)
                continue
            stack.append((i, True))
            stack.extend((c, False) for c in kids[i])
    return out


# ---------------------------------------------------------------------------------- continuous
def continuous_optimum(problem) -> float | None:
    """Optimum of a continuous problem (linf/l1: LP; l2: SLSQP), query terms and rows included."""
    from scipy.optimize import linprog

    free = np.flatnonzero(np.isnan(problem.fixed))
    nv = free.size
    col = {int(i): k for k, i in enumerate(free)}
    fixed0 = np.nan_to_num(problem.fixed)
    lo, hi = _bounds(problem)
    kids = _children(problem)
    eq_rows, eq_rhs = [], []
    for p in range(problem.n):
        if not kids[p]:
            continue
        row = np.zeros(nv)
        rhs = 0.0
        for c in kids[p]:
            if c in col:
                row[col[c]] += 1
            else:
                rhs -= fixed0[c]
        if p in col:
            row[col[p]] -= 1
        else:
            rhs += fixed0[p]
        if row.any():
            eq_rows.append(row)
            eq_rhs.append(rhs)
    ub_rows, ub_rhs = [], []
    if problem.n_constraints:
        c = problem.constraints
        dense = c.matrix.toarray()
        const = dense[:, np.isnan(problem.fixed) == False] @ fixed0[~np.isnan(problem.fixed)]
        a = dense[:, free]
        for r in range(dense.shape[0]):
            if np.isfinite(c.upper[r]):
                ub_rows.append(a[r])
                ub_rhs.append(c.upper[r] - const[r])
            if np.isfinite(c.lower[r]):
                ub_rows.append(-a[r])
                ub_rhs.append(-(c.lower[r] - const[r]))
    anchors = groups_by_walk(problem)
    bounds = [(lo[i] if np.isfinite(lo[i]) else None, hi[i] if np.isfinite(hi[i]) else None) for i in free]

    def f(y: np.ndarray) -> float:
        v = fixed0.copy()
        v[free] = y
        return objective_at(problem, v, anchors)

    if nv == 0:
        return objective_at(problem, fixed0, anchors) if feasible(problem, fixed0) else None
    if problem.objective == "l2":
        return _qp_optimum(problem, f, free, bounds, eq_rows, eq_rhs, ub_rows, ub_rhs, fixed0)
    # LP: y, then one aux per term (l1) or per group / query block (linf)
    x, w = problem.target, problem.weights
    terms = [i for i in free if not np.isnan(x[i]) and w[i] > 0]
    qn = problem.n_query_terms
    if problem.objective == "linf":
        keys = sorted(set(anchors[i] for i in terms))
        aux_of = {i: keys.index(anchors[i]) for i in terms}
        nq_aux = problem.queries.n_blocks if qn else 0
        naux = len(keys) + nq_aux
    else:
        aux_of = {i: k for k, i in enumerate(terms)}
        naux = len(terms) + qn
    rows, rhs = [], []
    for i in terms:
        for s in (1.0, -1.0):
            r = np.zeros(nv + naux)
            r[col[i]] = s * w[i]
            r[nv + aux_of[i]] = -1
            rows.append(r)
            rhs.append(s * w[i] * x[i])
    if qn:
        q = problem.queries
        dense = q.matrix.toarray()
        fixed_mask = ~np.isnan(problem.fixed)
        for k in range(dense.shape[0]):
            const = dense[k, fixed_mask] @ fixed0[fixed_mask]
            aux = nv + (len(keys) + int(q.block[k]) if problem.objective == "linf" else len(terms) + k)
            for s in (1.0, -1.0):
                r = np.zeros(nv + naux)
                r[:nv] = s * q.weight[k] * dense[k, free]
                r[aux] = -1
                rows.append(r)
                rhs.append(s * q.weight[k] * (q.target[k] - const))
    for r0, b in zip(ub_rows, ub_rhs, strict=False):
        rows.append(np.r_[r0, np.zeros(naux)])
        rhs.append(b)
    a_eq = np.array([np.r_[r, np.zeros(naux)] for r in eq_rows]) if eq_rows else None
    res = linprog(np.r_[np.zeros(nv), np.ones(naux)], A_ub=np.array(rows) if rows else None,
                  b_ub=np.array(rhs) if rhs else None, A_eq=a_eq, b_eq=np.array(eq_rhs) if eq_rows else None,
                  bounds=bounds + [(0, None)] * naux, method="highs")
    return float(res.fun) if res.status == 0 else None


def _qp_optimum(problem, f, free, bounds, eq_rows, eq_rhs, ub_rows, ub_rhs, fixed0) -> float | None:
    """A convex QP by two local solvers (SLSQP from an LP-feasible start, trust-constr): the best
    feasible answer (any feasible point bounds the optimum from above, so a failure of both shows
    as a mismatch, never as a false pass)."""
    from scipy.optimize import LinearConstraint, linprog, minimize

    nv = free.size
    a_eq = np.array(eq_rows) if eq_rows else np.zeros((0, nv))
    a_ub = np.array(ub_rows) if ub_rows else np.zeros((0, nv))
    start = linprog(np.zeros(nv), A_ub=a_ub if ub_rows else None, b_ub=np.array(ub_rhs) if ub_rows else None,
                    A_eq=a_eq if eq_rows else None, b_eq=np.array(eq_rhs) if eq_rows else None,
                    bounds=bounds, method="highs")
    if start.status != 0:
        return None
    best = None
    cons = [{"type": "eq", "fun": (lambda y, r=r, b=b: r @ y - b)} for r, b in zip(eq_rows, eq_rhs, strict=False)]
    cons += [{"type": "ineq", "fun": (lambda y, r=r, b=b: b - r @ y)} for r, b in zip(ub_rows, ub_rhs, strict=False)]
    lin = []
    if eq_rows:
        lin.append(LinearConstraint(a_eq, np.array(eq_rhs), np.array(eq_rhs)))
    if ub_rows:
        lin.append(LinearConstraint(a_ub, -np.inf, np.array(ub_rhs)))
    candidates = [start.x]
    import warnings

    for method, kw in (("SLSQP", {"constraints": cons, "options": {"ftol": 1e-15, "maxiter": 5000}}),
                       ("trust-constr", {"constraints": lin, "options": {"gtol": 1e-12, "xtol": 1e-14,
                                                                         "maxiter": 20000}})):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # quasi-Newton notes on flat directions
                res = minimize(f, start.x, method=method, bounds=bounds, **kw)
            candidates.append(res.x)
        except Exception:
            continue
    for y in candidates:
        v = fixed0.copy()
        v[free] = y
        if feasible_continuous(problem, v, 1e-7):
            val = f(y)
            best = val if best is None else min(best, val)
    return best


def feasible_continuous(problem, v: np.ndarray, tol: float) -> bool:
    """:func:`feasible` with a tolerance for continuous answers."""
    return feasible(problem, v, tol)


# ---------------------------------------------------------------------------------- exact arithmetic
def feasible_exact(problem, values) -> bool:
    """Every constraint of an *integer* problem at an integer point, in Python integers and
    fractions (no tolerance: the check a count at 10^12 needs)."""
    from fractions import Fraction

    raw = np.asarray(values)
    if raw.shape != (problem.n,):
        return False
    try:
        if raw.dtype == object or np.issubdtype(raw.dtype, np.integer):
            v = [int(x) for x in raw.tolist()]
        else:
            v = [int(x) if float(x).is_integer() else None for x in raw.astype(float).tolist()]
    except (OverflowError, ValueError):
        return False
    if any(x is None for x in v):
        return False
    lo, hi = _bounds(problem)
    for i, x in enumerate(v):
        if not np.isnan(problem.fixed[i]) and x != int(problem.fixed[i]):
            return False
        if np.isfinite(lo[i]) and Fraction(x) < Fraction(float(lo[i])):
            return False
        if np.isfinite(hi[i]) and Fraction(x) > Fraction(float(hi[i])):
            return False
    sums: dict[int, int] = {}
    for i, p in enumerate(problem.parent):
        if p >= 0:
            sums[int(p)] = sums.get(int(p), 0) + v[i]
    if any(s != v[p] for p, s in sums.items()):
        return False
    if problem.n_constraints:
        c = problem.constraints
        m = c.matrix
        for r in range(m.shape[0]):
            s, e = m.indptr[r], m.indptr[r + 1]
            act = sum((Fraction(float(a)) * v[j] for a, j in zip(m.data[s:e], m.indices[s:e], strict=True)),
                      Fraction(0))
            if (np.isfinite(c.lower[r]) and act < Fraction(float(c.lower[r]))) or \
                    (np.isfinite(c.upper[r]) and act > Fraction(float(c.upper[r]))):
                return False
    return True


def objective_exact(problem, values):
    """The objective at an integer point as an exact fraction (l2 and l1; no query terms)."""
    from fractions import Fraction

    total = Fraction(0)
    for i, x in enumerate(np.asarray(values).tolist()):
        t = problem.target[i]
        if not np.isnan(problem.fixed[i]) or np.isnan(t):
            continue
        d = int(x) - Fraction(float(t))
        w = Fraction(float(problem.weights[i]))
        total += w * (d * d if problem.objective == "l2" else abs(d))
    return total


def enumerate_exact(problem, lo: int, hi: int):
    """Exact optimum (a fraction) over every integer vector of the free nodes in ``[lo, hi]`` (None:
    infeasible there); objectives and constraints in exact arithmetic (``objective_exact``)."""
    free = np.flatnonzero(np.isnan(problem.fixed))
    base = [int(x) if not np.isnan(x) else 0 for x in problem.fixed.tolist()]
    best = None
    for combo in itertools.product(range(lo, hi + 1), repeat=free.size):
        v = list(base)
        for i, c in zip(free.tolist(), combo, strict=True):
            v[i] = c
        if not feasible_exact(problem, np.array(v, dtype=object)):
            continue
        obj = objective_exact(problem, v)
        if best is None or obj < best:
            best = obj
    return best


def kkt_l2_optimum(problem) -> float:
    """Optimum of a continuous weighted-L2 problem *without* sign constraints, bounds or rows (tree
    consistency, fixed nodes and query terms only): the KKT linear system of the equality-
    constrained least squares, solved by least squares (exact up to float round-off; a flat
    direction - a node no term reaches - leaves the optimum value unchanged)."""
    n = problem.n
    free = np.isnan(problem.fixed)
    w = np.where(free & ~np.isnan(problem.target), problem.weights, 0.0)
    t = np.nan_to_num(problem.target)
    rows_a, rows_t, rows_w = [np.eye(n)], [t], [w]
    if problem.n_query_terms:
        q = problem.queries
        rows_a.append(q.matrix.toarray())
        rows_t.append(q.target)
        rows_w.append(q.weight)
    a = np.vstack(rows_a)
    tt = np.concatenate(rows_t)
    ww = np.concatenate(rows_w)
    eq, rhs = [], []
    kids = _children(problem)
    for p in range(n):
        if kids[p]:
            r = np.zeros(n)
            r[kids[p]] = 1.0
            r[p] -= 1.0
            eq.append(r)
            rhs.append(0.0)
    for i in np.flatnonzero(~free):
        r = np.zeros(n)
        r[i] = 1.0
        eq.append(r)
        rhs.append(problem.fixed[i])
    c = np.array(eq) if eq else np.zeros((0, n))
    h = 2 * a.T @ (ww[:, None] * a)
    g = 2 * a.T @ (ww * tt)
    kkt = np.block([[h, c.T], [c, np.zeros((c.shape[0], c.shape[0]))]])
    sol = np.linalg.lstsq(kkt, np.concatenate([g, np.array(rhs)]), rcond=None)[0]
    y = sol[:n]
    return float(np.sum(ww * (a @ y - tt) ** 2))
