"""Independent checks of a solver's answer (``hierdp.solve(..., verify=True)``).

Nothing here reuses the solvers' formulations (:mod:`hierdp.models.arrays`) or the problem's
derived group structure, so a defect there cannot hide itself:

* :func:`independent_groups` recomputes the L∞ groups as connected components (scipy) of the
  graph "free node - its parent", and :func:`structure_mismatch` compares them with
  :meth:`Problem.groups` (the deep-chain defect, where ``groups()`` stopped after 64 steps, would
  have been caught here);
* :func:`linf_objective` recomputes the L∞ objective on those groups;
* :func:`integer_linf_uncertified` is the optimality certificate of integer L∞ problems whose
  constraint matrix is totally unimodular (consistency, bounds and fixed values only): a group
  with optimum ``a`` is optimal iff no integer point lies in its *strict* box
  ``w_i |y_i - x_i| < a`` (the box only changes at values ``w_i |k - x_i|``, so "just below a" is
  the strict box). The strict box, rounded inward to integers, is an integral polytope with the
  consistency rows (a network matrix), so it is empty iff its LP is infeasible: a closed form per
  group on TopDown levels (``sum L <= c <= sum H``), one LP (scipy) on trees;
* :func:`continuous_linf_gap` compares a continuous L∞ objective with an independent LP optimum
  (scipy's HiGHS on a formulation written here).
"""

from __future__ import annotations

import numpy as np

from hierdp._segments import ulp_tolerance
from hierdp.models.problem import Problem


def independent_groups(problem: Problem) -> np.ndarray:
    """Group label per node (-1 for fixed nodes): components of "free node - parent" edges."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n = problem.n
    free = np.isnan(problem.fixed)
    child = np.flatnonzero(free & (problem.parent >= 0))
    graph = coo_matrix((np.ones(child.size), (child, problem.parent[child])), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    return np.where(free, labels, -1).astype(np.int64)


def structure_mismatch(problem: Problem, labels: np.ndarray) -> str | None:
    """Why ``problem.groups()`` is not the partition ``labels``, or None when they agree."""
    grp = problem.groups()
    free = np.isnan(problem.fixed)
    if not np.array_equal(grp < 0, ~free):
        return "Problem.groups() marks fixed and free nodes differently from the problem's fixed values"
    a, b = grp[free], labels[free]
    pairs = np.unique(np.stack([a, b], 1), axis=0) if a.size else np.zeros((0, 2))
    na, nb = np.unique(a).size, np.unique(b).size
    if not (pairs.shape[0] == na == nb):
        return (f"Problem.groups() has {na} group(s) where the tree has {nb} independent component(s) "
                "of free nodes")
    return None


def linf_objective(problem: Problem, values: np.ndarray, labels: np.ndarray) -> float:
    """The L∞ objective on the independent groups (query blocks included)."""
    values = np.asarray(values, dtype=float)
    m = (labels >= 0) & ~np.isnan(problem.target)
    total = 0.0
    if m.any():
        dev = np.abs(values[m] - problem.target[m]) * problem.weights[m]
        _, inv = np.unique(labels[m], return_inverse=True)
        per = np.zeros(int(inv.max()) + 1)
        np.maximum.at(per, inv.ravel(), dev)
        total = float(per.sum())
    if problem.n_query_terms:
        q = problem.queries
        per_block = np.zeros(q.n_blocks)
        np.maximum.at(per_block, q.block, q.weight * np.abs(q.matrix @ values - q.target))
        total += float(per_block.sum())
    return total


def certificate_applies(problem: Problem) -> bool:
    """Integer L∞ over consistency, bounds and fixed values only (a totally unimodular system)."""
    return (problem.objective == "linf" and problem.integer and not problem.n_constraints
            and not problem.n_query_terms and not problem.pyomo_hooks)


def _strict_box(problem: Problem, values: np.ndarray, labels: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(L, H, alpha per label, label ids)``: the integer strict box of every free node."""
    free = labels >= 0
    x = problem.target
    w = problem.weights
    term = free & ~np.isnan(x) & (w > 0)
    uniq, inv = np.unique(labels[free], return_inverse=True)
    lab = np.full(problem.n, -1, np.int64)
    lab[free] = inv.ravel()
    alpha = np.zeros(uniq.size)
    dev = np.abs(values[term] - x[term]) * w[term]
    np.maximum.at(alpha, lab[term], dev)
    lo = np.ceil(problem.effective_lower - 1e-9)
    hi = np.floor(problem.upper + 1e-9)
    a = alpha[lab[term]] / w[term]
    v, u = x[term] - a, x[term] + a
    tol = 4 * ulp_tolerance(np.maximum(np.abs(x[term]), a))
    v_int = np.abs(v - np.rint(v)) <= tol
    u_int = np.abs(u - np.rint(u)) <= tol
    strict_lo = np.where(v_int, np.rint(v) + 1, np.ceil(v))
    strict_hi = np.where(u_int, np.rint(u) - 1, np.floor(u))
    lo[term] = np.maximum(lo[term], strict_lo)
    hi[term] = np.minimum(hi[term], strict_hi)
    return lo, hi, alpha, lab


def integer_linf_uncertified(problem: Problem, values: np.ndarray, labels: np.ndarray,
                             time_limit: float | None = None) -> np.ndarray | None:
    """Labels (positions in ``np.unique(labels[labels >= 0])``) of groups whose optimality the
    certificate does not confirm (empty array: every group is certified optimal).

    Requires :func:`certificate_applies`. None when the tree LP did not finish in ``time_limit``.
    """
    values = np.asarray(values, dtype=float)
    lo, hi, alpha, lab = _strict_box(problem, values, labels)
    free = lab >= 0
    ng = alpha.size
    if ng == 0:
        return np.zeros(0, np.int64)
    check = alpha > 0
    empty_box = np.zeros(ng, bool)
    crossed = free & (lo > hi)
    empty_box[lab[crossed]] = True
    todo = check & ~empty_box
    if not todo.any():
        return np.zeros(0, np.int64)
    if problem.structure == "level":
        # one sum constraint per group: the box holds an integer point iff sum L <= c <= sum H
        par = problem.parent
        kids = np.flatnonzero(free)
        g = lab[kids]
        total = np.zeros(ng)
        total[g] = problem.fixed[par[kids]]
        sum_lo = np.bincount(g, weights=lo[kids], minlength=ng)
        sum_hi = np.bincount(g, weights=hi[kids], minlength=ng)
        feasible = (sum_lo <= total) & (total <= sum_hi)
        return np.flatnonzero(todo & feasible)
    return _tree_box_feasible(problem, lo, hi, lab, todo, time_limit, np.rint(values))


def _tree_box_feasible(problem: Problem, lo: np.ndarray, hi: np.ndarray, lab: np.ndarray, todo: np.ndarray,
                       time_limit: float | None = None, center: np.ndarray | None = None) -> np.ndarray | None:
    """Groups in ``todo`` whose box holds a consistent point: min sum s_g with the box widened by s_g.

    The LP is written in ``d = y - center`` (``center``: integers, e.g. the checked answer; every
    shift is exact below 2^53): with counts near 10^12 an LP in ``y`` cannot resolve units with
    its absolute tolerances and found points in boxes that hold none (the fuzz suite's large
    family, integer L∞ trees around 5e12).
    """
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix, vstack

    n = problem.n
    free = lab >= 0
    nodes = np.flatnonzero(free & todo[np.maximum(lab, 0)])
    col = np.full(n, -1, np.int64)
    col[nodes] = np.arange(nodes.size)
    gpos = np.full(todo.size, -1, np.int64)
    groups = np.flatnonzero(todo)
    gpos[groups] = np.arange(groups.size)
    nv, ns = nodes.size, groups.size
    fixed0 = np.nan_to_num(problem.fixed)
    par = problem.parent
    kids = np.flatnonzero(par >= 0)
    rows_touch = np.zeros(n, bool)
    rows_touch[par[kids[col[kids] >= 0]]] = True
    rows_touch |= col >= 0
    has_kids = np.bincount(par[kids], minlength=n) > 0
    row_nodes = np.flatnonzero(rows_touch & has_kids)
    rpos = np.full(n, -1, np.int64)
    rpos[row_nodes] = np.arange(row_nodes.size)
    # consistency: sum(children) - node = 0, constants to the right-hand side
    k_in = kids[rpos[par[kids]] >= 0]
    r_idx = np.r_[rpos[par[k_in]], rpos[row_nodes]]
    e_node = np.r_[k_in, row_nodes]
    e_coef = np.r_[np.ones(k_in.size), -np.ones(row_nodes.size)]
    var = col[e_node] >= 0
    z = np.zeros(nv) if center is None else np.asarray(center, dtype=float)[nodes]
    if not np.all(np.isfinite(z)):
        z = np.zeros(nv)
    # y = z + d: the constants (fixed nodes, and z of the variables) go to the right-hand side;
    # integer sums, exact in float64
    # (astype: bincount of an empty selection is int64 even with weights)
    b_eq = -np.bincount(r_idx[~var], weights=e_coef[~var] * fixed0[e_node[~var]],
                        minlength=row_nodes.size).astype(float)
    b_eq -= np.bincount(r_idx[var], weights=e_coef[var] * z[col[e_node[var]]], minlength=row_nodes.size)
    a_eq = coo_matrix((e_coef[var], (r_idx[var], col[e_node[var]])), shape=(row_nodes.size, nv + ns))
    # widened box: -d - s <= -(L - z) and d - s <= H - z (finite sides only)
    s_of = nv + gpos[lab[nodes]]
    parts, rhs = [], []
    for sign, bound in ((-1.0, lo[nodes] - z), (1.0, hi[nodes] - z)):
        fin = np.flatnonzero(np.isfinite(bound))
        r = np.arange(fin.size)
        parts.append(coo_matrix((np.r_[np.full(fin.size, sign), -np.ones(fin.size)],
                                 (np.r_[r, r], np.r_[fin, s_of[fin]])), shape=(fin.size, nv + ns)))
        rhs.append(sign * bound[fin])
    cost = np.r_[np.zeros(nv), np.ones(ns)]
    res = linprog(cost, A_ub=vstack(parts).tocsr(), b_ub=np.concatenate(rhs), A_eq=a_eq.tocsr(), b_eq=b_eq,
                  bounds=[(None, None)] * nv + [(0, None)] * ns, method="highs",
                  options={} if time_limit is None else {"time_limit": max(time_limit, 0.01)})
    if res.status == 1:  # time or iteration limit: nothing certified, nothing refuted
        return None
    if res.status != 0:
        return groups  # the certificate could not be computed: nothing is confirmed
    s = res.x[nv:]
    return groups[s <= 1e-7]


def continuous_linf_gap(problem: Problem, objective: float, time_limit: float | None = None) -> float | None:
    """``objective`` minus an independent optimum of a continuous L∞ problem (None when it could
    not be computed, e.g. within ``time_limit``).

    TopDown levels without rows or query terms: per-group bisection on the box feasibility
    ``sum L(t) <= c <= sum H(t)``; otherwise an LP written here, solved by scipy's own HiGHS.
    """
    if problem.structure == "level" and not problem.n_constraints and not problem.n_query_terms:
        return float(objective - _level_continuous_linf(problem).sum())
    return _continuous_linf_lp_gap(problem, objective, time_limit)


def _level_continuous_linf(problem: Problem) -> np.ndarray:
    """Continuous L∞ optimum of every group of a level problem, by bisection (no solver)."""
    _, offsets, child_index, totals = problem.level_groups()
    x = problem.target[child_index]
    w = problem.weights[child_index]
    lo_b = problem.effective_lower[child_index]
    hi_b = problem.upper[child_index]
    term = ~np.isnan(x) & (w > 0)
    xs = np.where(term, x, 0.0)
    ws = np.where(term, w, 1.0)
    ng = totals.size
    gid = np.repeat(np.arange(ng), np.diff(offsets))

    def feasible(t: np.ndarray) -> np.ndarray:
        tt = t[gid] / ws
        lo = np.where(term, np.maximum(lo_b, xs - tt), lo_b)
        hi = np.where(term, np.minimum(hi_b, xs + tt), hi_b)
        box = np.ones(ng, bool)
        np.logical_and.at(box, gid, lo <= hi)
        slo = np.bincount(gid, weights=lo, minlength=ng)
        shi = np.bincount(gid, weights=hi, minlength=ng)
        return box & (slo <= totals) & (totals <= shi)

    high = np.ones(ng)
    for _ in range(2100):  # doubling reaches any finite optimum long before float64 overflows
        ok = feasible(high)
        if ok.all():
            break
        high = np.where(ok, high, high * 2)
    low = np.zeros(ng)
    zero_ok = feasible(low)
    for _ in range(200):
        mid = (low + high) / 2
        done = (mid <= low) | (mid >= high)
        if done.all():
            break
        ok = feasible(mid)
        high = np.where(ok, mid, high)
        low = np.where(ok, low, mid)
    return np.where(zero_ok, 0.0, high)


def _continuous_linf_lp_gap(problem: Problem, objective: float, time_limit: float | None) -> float | None:
    """``objective`` minus the optimum of an independent LP (scipy's HiGHS)."""
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix, vstack

    labels = independent_groups(problem)
    n = problem.n
    free = labels >= 0
    nodes = np.flatnonzero(free)
    col = np.full(n, -1, np.int64)
    col[nodes] = np.arange(nodes.size)
    uniq, inv = np.unique(labels[free], return_inverse=True)
    lab = np.full(n, -1, np.int64)
    lab[free] = inv.ravel()
    nv, ng = nodes.size, uniq.size
    if nv == 0:  # every node fixed: the objective is a constant, already checked independently
        return 0.0
    nq_blocks = problem.queries.n_blocks if problem.n_query_terms else 0
    ncol = nv + ng + nq_blocks
    fixed0 = np.nan_to_num(problem.fixed)
    par = problem.parent
    kids = np.flatnonzero(par >= 0)
    has_kids = np.bincount(par[kids], minlength=n) > 0
    row_nodes = np.flatnonzero(has_kids)
    rpos = np.full(n, -1, np.int64)
    rpos[row_nodes] = np.arange(row_nodes.size)
    r_idx = np.r_[rpos[par[kids]], rpos[row_nodes]]
    e_node = np.r_[kids, row_nodes]
    e_coef = np.r_[np.ones(kids.size), -np.ones(row_nodes.size)]
    var = col[e_node] >= 0
    b_eq = -np.bincount(r_idx[~var], weights=e_coef[~var] * fixed0[e_node[~var]], minlength=row_nodes.size)
    a_eq = coo_matrix((e_coef[var], (r_idx[var], col[e_node[var]])), shape=(row_nodes.size, ncol))
    ub_parts, ub_rhs = [], []
    term = np.flatnonzero(free & ~np.isnan(problem.target) & (problem.weights > 0))
    w, x = problem.weights[term], problem.target[term]
    r = np.arange(term.size)
    for sign in (1.0, -1.0):  # sign * w (y - x) - alpha <= 0
        ub_parts.append(coo_matrix((np.r_[sign * w, -np.ones(term.size)], (np.r_[r, r], np.r_[col[term], nv + lab[term]])),
                                   shape=(term.size, ncol)))
        ub_rhs.append(sign * w * x)
    fixed_vec = np.where(free, 0.0, fixed0)
    if problem.n_query_terms:
        q = problem.queries
        mat = q.matrix.tocoo()
        const = q.matrix @ fixed_vec
        keep = free[mat.col]
        rq = np.arange(len(q))
        for sign in (1.0, -1.0):
            ub_parts.append(coo_matrix(
                (np.r_[sign * q.weight[mat.row[keep]] * mat.data[keep], -np.ones(len(q))],
                 (np.r_[mat.row[keep], rq], np.r_[col[mat.col[keep]], nv + ng + q.block])), shape=(len(q), ncol)))
            ub_rhs.append(sign * q.weight * (q.target - const))
    if problem.n_constraints:
        rows = problem.constraints
        mat = rows.matrix.tocoo()
        const = rows.matrix @ fixed_vec
        keep = free[mat.col]
        a = coo_matrix((mat.data[keep], (mat.row[keep], col[mat.col[keep]])), shape=(len(rows), ncol))
        for sign, bound in ((1.0, rows.upper), (-1.0, rows.lower)):
            fin = np.isfinite(bound)
            ub_parts.append((sign * a).tocsr()[fin])
            ub_rhs.append(sign * (bound[fin] - const[fin]))
    lo = problem.effective_lower[nodes]
    hi = problem.upper[nodes]
    bounds = [(None if not np.isfinite(a_) else a_, None if not np.isfinite(b_) else b_) for a_, b_ in zip(lo, hi, strict=True)]
    bounds += [(0, None)] * (ng + nq_blocks)
    cost = np.r_[np.zeros(nv), np.ones(ng + nq_blocks)]
    res = linprog(cost, A_ub=vstack(ub_parts).tocsr() if ub_parts else None,
                  b_ub=np.concatenate(ub_rhs) if ub_rhs else None, A_eq=a_eq.tocsr() if row_nodes.size else None,
                  b_eq=b_eq if row_nodes.size else None, bounds=bounds, method="highs",
                  options={} if time_limit is None else {"time_limit": max(time_limit, 0.01)})
    if res.status != 0:
        return None
    return float(objective - res.fun)
