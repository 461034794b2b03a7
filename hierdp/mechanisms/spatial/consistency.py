"""Consistency of a noisy spatial tree, posed as a hierdp :class:`~hierdp.models.Problem`.

Hay et al.'s "smoothing" (the post-processing the HTF paper applies to its tree baselines) is
weighted least squares over the tree: minimise ``Σ_v (x_v - y_v)^2 / σ_v^2`` over real ``x`` with
every parent equal to the sum of its children, ``σ_v^2`` the variance of node v's noise (nodes not
measured have no term). As a Problem it is ``objective="l2"``, weights ``1/σ^2``, continuous, no
sign constraint, and any registered solver that supports that shape solves it: the ``twopass``
closed form by default (exact, O(n)), ``highs`` (a QP) as the cross-check. ``nonnegative=True``
and ``integer=True`` pose the non-negative / integer variants (solved by ``costtable`` exactly, or
``highs``).

**Public constraints** (:func:`constrained_tree`, :mod:`.constraints`): zeros and single-node
invariants are fixed nodes, which ``twopass`` honours. Rows (bounds, invariants and rows over
several nodes) make it a QP with linear constraints. A general solver (``consistency_solver=
"highs"``) takes that QP as a whole; by default (``"twopass"``) it is solved exactly through the
closed form: the constrained optimum is ``x0 - X mu``, ``x0`` the optimum without rows and the
columns of ``X`` the closed form's answers to one row each (``m`` more ``twopass`` solves), and
``mu`` solves an ``m``-variable QP (``min mu' G mu`` over the rows' bounds, ``G = A X``) that a
general solver handles at any tree size; the active rows are then re-solved as a linear system
(the KKT conditions, checked) so that they hold to rounding.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from hierdp.models.problem import Problem
from hierdp.solvers import registry as solver_registry
from hierdp.solvers.twopass import two_pass_wls

__all__ = ["check_consistency_solver", "consistent_tree", "constrained_tree", "tree_problem"]


def tree_problem(parent: np.ndarray, noisy: np.ndarray, variances: np.ndarray, *, integer: bool = False,
                 nonnegative: bool = False, fixed: np.ndarray | None = None) -> Problem:
    """The consistency Problem of a tree: targets ``noisy`` (NaN: not measured), weights ``1/variances``
    (``fixed``: per node the value it is fixed at, NaN for free nodes)."""
    y = np.asarray(noisy, dtype=np.float64)
    var = np.asarray(variances, dtype=np.float64)
    if var.shape != y.shape:
        raise ValueError(f"variances has shape {var.shape} for {y.shape} values")
    measured = ~np.isnan(y)
    if np.any(measured & ~(np.isfinite(var) & (var > 0))):
        raise ValueError("every measured node needs a finite variance > 0")
    w = np.where(measured, 1.0 / np.where(measured, var, 1.0), 0.0)
    return Problem(parent, y, weights=w, objective="l2", integer=integer, nonnegative=nonnegative, fixed=fixed)


def consistent_tree(parent: np.ndarray, noisy: np.ndarray, variances: np.ndarray, *, solver: str | Any = "twopass",
                    cross_check: str | None = None, integer: bool = False, nonnegative: bool = False,
                    **options: Any) -> tuple[np.ndarray, Any]:
    """``(values, solution)``: the consistent tree closest to the noisy one in weighted L2, solved by
    the registry (``solver``; ``cross_check`` re-solves with a second solver and compares optima)."""
    problem = tree_problem(parent, noisy, variances, integer=integer, nonnegative=nonnegative)
    if solver == "twopass" and (integer or nonnegative):
        solver = "auto"
    sol = solver_registry.solve(problem, solver, cross_check=cross_check, **options)
    return sol.values, sol


def check_consistency_solver(solver: Any, what: str = "consistency_solver", *, unmeasured_root: bool = False) -> None:
    """Refuse, before any data is seen, a solver that cannot solve the consistency Problem: an
    unknown name, or a plug-in whose capabilities exclude its shape (continuous weighted L2 over a
    tree, signed values; ``unmeasured_root``: AG's root has no measurement). ``"auto"`` and solver
    objects are left to the registry."""
    from hierdp.mechanisms.base import MechanismParameterError

    if solver is None or solver == "auto" or not isinstance(solver, str):
        return
    try:
        plugin = solver_registry.get(solver)
    except KeyError as exc:
        raise MechanismParameterError(f"{what}: {exc.args[0]}") from None
    # a depth-2 tree with signed targets and unequal variances: the shape the releases pose
    probe = tree_problem(np.array([-1, 0, 0, 1, 1, 2, 2]),
                         np.array([np.nan if unmeasured_root else 4.0, 3.0, -1.0, 2.0, 0.5, -2.0, 1.0]),
                         np.array([1.0, 2.0, 2.0, 5.0, 5.0, 5.0, 5.0]))
    why = plugin.unsupported(probe)
    if why:
        raise MechanismParameterError(f"{what} {solver!r} cannot solve the tree's consistency problem (continuous "
                                      f"weighted least squares, signed values): {'; '.join(why)}")


#: the plug-ins whose consistency step is the closed form (rows: the correction of :func:`constrained_tree`)
CLOSED_FORM = ("twopass", "auto")


def constrained_tree(parent: np.ndarray, noisy: np.ndarray, variances: np.ndarray, tc: Any, *,
                     solver: str | Any = "twopass", cross_check: str | None = None, time_limit: float | None = None,
                     **options: Any) -> tuple[np.ndarray, Any]:
    """``(values, solution)``: the consistency step under a tree's public constraints (``tc``, a
    :class:`~hierdp.mechanisms.spatial.constraints.TreeConstraints`): fixed nodes and rows.

    ``solver`` ``"twopass"`` / ``"auto"``: the closed form, corrected for the rows (module
    docstring); any other plug-in gets the whole QP. ``cross_check`` re-solves the whole QP with a
    second solver and requires the same objective (relative 1e-6).

    Raises:
        SolverFailed: a solve failed, or the rows do not hold at the answer (never returned).
        UnsupportedProblem: the named solver cannot solve the QP.
    """
    from hierdp.solvers.base import Solution, SolverFailed, Status

    full = tree_problem(parent, noisy, variances, fixed=tc.fixed)
    if tc.n_rows:
        full.add_constraints(tc.matrix, tc.lower, tc.upper, name="constraints")
    t0 = time.perf_counter()
    if isinstance(solver, str) and solver in CLOSED_FORM:
        values, stats = _closed_form_with_rows(full, tc, time_limit=time_limit)
        name = "twopass"
    else:
        sol = solver_registry.solve(full, solver, time_limit=time_limit, **options)
        values, stats, name = np.asarray(sol.values, dtype=float), dict(sol.stats or {}), sol.solver
    bad = _row_violations(full, tc, values)
    if bad:
        raise SolverFailed(name, Status.INFEASIBLE_RESULT, "; ".join(bad[:5]))
    sol = Solution(values=values, objective=full.objective_value(values), status=Status.OPTIMAL, solver=name,
                   wall_time=time.perf_counter() - t0, stats=stats)
    if cross_check is not None:
        other = solver_registry.solve(full, cross_check, time_limit=time_limit)
        scale = max(1.0, abs(sol.objective))
        if abs(other.objective - sol.objective) > 1e-6 * scale:
            raise SolverFailed(name, Status.CROSS_CHECK_MISMATCH,
                               f"objective {sol.objective!r}, {other.solver} found {other.objective!r}")
        sol.stats["cross_check"] = {"solver": other.solver, "objective": float(other.objective)}
    return values, sol


def _closed_form_with_rows(full: Problem, tc: Any, *, time_limit: float | None) -> tuple[np.ndarray, dict[str, Any]]:
    """The QP ``full`` (tree, fixed nodes, rows) solved through the closed form (module docstring)."""
    from hierdp.solvers.base import UnsupportedProblem

    # the closed form's kernel (its answer is checked by the caller: fixed nodes, parent sums, rows)
    x0 = two_pass_wls(tree_problem_like(full, target=full.target))
    stats: dict[str, Any] = {"rows": tc.n_rows, "row_solves": 0}
    if not tc.n_rows or not _row_violations(full, tc, x0):
        return x0, stats  # the rows hold at the optimum without them: it is the optimum with them
    A = tc.matrix.tocsr()
    m, n = A.shape
    free = ~full.is_fixed
    w = np.where(np.isnan(full.target), 0.0, full.weights)
    leaf = full.n_children == 0
    if np.any(leaf & free & (w <= 0)):
        raise UnsupportedProblem("a free leaf without a measurement: the closed form's correction needs every free leaf "
                                 "measured; pass consistency_solver='highs'")
    depth = full.depth()
    order = np.argsort(depth, kind="stable")
    starts = np.searchsorted(depth[order], np.arange(int(depth.max()) + 2))
    par = full.parent
    X = np.empty((n, m))
    zero_fixed = np.where(full.is_fixed, 0.0, np.nan)
    for j in range(m):
        a = np.zeros(n)
        row = A.getrow(j)
        a[row.indices] = row.data
        a[~free] = 0.0  # a fixed node's term is a constant (moved to the row's bounds below)
        for d in range(1, starts.size - 1):  # leaf coefficient: the row's terms on the leaf and its ancestors
            idx = order[starts[d]:starts[d + 1]]
            a[idx] += a[par[idx]]
        y = np.where(np.isnan(full.target), np.nan, 0.0)
        sel = leaf & free
        y[sel] = a[sel] / w[sel]
        # the closed form's kernel directly: these are directions, not answers; the answer is checked below
        X[:, j] = two_pass_wls(tree_problem_like(full, target=y, fixed=zero_fixed))
    stats["row_solves"] = m
    G = np.asarray(A @ X)
    G = (G + G.T) / 2
    r = np.asarray(A @ x0).ravel()
    mu, small = _small_qp(G, r, tc.lower, tc.upper, time_limit=time_limit)
    stats.update(small)
    x = x0 - X @ mu
    polished = _polish(G, r, tc.lower, tc.upper, A @ x)
    if polished is not None:
        x_p = x0 - X @ polished
        if not _row_violations(full, tc, x_p):
            x, stats["polished"] = x_p, True
    return x, stats


def tree_problem_like(p: Problem, *, target: np.ndarray, fixed: np.ndarray | None = None) -> Problem:
    """``p``'s tree, weights and fixed nodes (or ``fixed``) with other targets and no rows."""
    return Problem(p.parent, target, weights=p.weights, fixed=p.fixed if fixed is None else fixed, objective="l2",
                   integer=False, nonnegative=False)


def _small_qp(G: np.ndarray, r: np.ndarray, lo: np.ndarray, hi: np.ndarray, *,
              time_limit: float | None) -> tuple[np.ndarray, dict[str, Any]]:
    """``mu`` minimising ``mu' G mu`` with ``lo <= r - G mu <= hi`` (G symmetric PSD), through a
    general solver: with ``G = M M'`` (eigen-decomposition, rank k), ``t = M' mu`` gives
    ``min |t|^2`` subject to ``lo - r <= -M t <= hi - r``."""
    from scipy.sparse import csr_matrix

    lam, Q = np.linalg.eigh(G)
    keep = lam > max(float(lam.max(initial=0.0)), 0.0) * 1e-12
    M = Q[:, keep] * np.sqrt(lam[keep])
    k = int(keep.sum())
    p = Problem(np.full(k, -1, np.int64), np.zeros(k), objective="l2", integer=False, nonnegative=False)
    p.add_constraints(csr_matrix(-M), lo - r, hi - r, name="rows")
    sol = solver_registry.solve(p, "auto", time_limit=time_limit)
    t = np.asarray(sol.values, dtype=float)
    mu = Q[:, keep] @ (t / np.sqrt(lam[keep]))
    return mu, {"row_solver": sol.solver, "row_qp_variables": k}


def _polish(G: np.ndarray, r: np.ndarray, lo: np.ndarray, hi: np.ndarray, act: np.ndarray) -> np.ndarray | None:
    """The multipliers of the rows active at ``act`` solved as a linear system (their KKT
    conditions), or None when the signs say another active set."""
    act = np.asarray(act).ravel()
    scale = 1e-7 * np.maximum(1.0, np.abs(np.where(np.isfinite(hi), hi, np.where(np.isfinite(lo), lo, 0.0))))
    at_lo = np.isfinite(lo) & (act <= lo + scale)
    at_hi = np.isfinite(hi) & (act >= hi - scale)
    S = np.flatnonzero(at_lo | at_hi)
    if not S.size:
        return None
    b = np.where(at_hi, hi, lo)[S]
    mu_S = np.linalg.lstsq(G[np.ix_(S, S)], r[S] - b, rcond=None)[0]
    equal = (lo == hi)[S]
    tol = 1e-9 * max(1.0, float(np.abs(mu_S).max(initial=0.0)))
    if np.any(~equal & at_hi[S] & (mu_S < -tol)) or np.any(~equal & at_lo[S] & ~at_hi[S] & (mu_S > tol)):
        return None
    mu = np.zeros(r.size)
    mu[S] = mu_S
    return mu


def _row_violations(full: Problem, tc: Any, x: np.ndarray) -> list[str]:
    """Rows, fixed nodes and parent sums that ``x`` breaks, with a tolerance of 1e-9 of each
    sum's magnitude."""
    out = []
    fx = full.is_fixed
    if np.any(x[fx] != full.fixed[fx]):
        out.append(f"{int(np.sum(x[fx] != full.fixed[fx]))} fixed node(s) moved")
    par = full.parent
    kids = par >= 0
    n = par.size
    sums = np.bincount(par[kids], weights=x[kids], minlength=n)
    mag = np.bincount(par[kids], weights=np.abs(x[kids]), minlength=n)
    inner = full.n_children > 0
    off = inner & (np.abs(sums - x) > 1e-9 * np.maximum(1.0, mag + np.abs(x)))
    if off.any():
        out.append(f"{int(off.sum())} parent(s) differ from the sum of their children")
    if tc.n_rows:
        A = tc.matrix.tocsr()
        act = np.asarray(A @ x).ravel()
        mag = np.asarray(abs(A) @ np.abs(x)).ravel()
        bound = np.abs(np.where(np.isfinite(tc.lower), tc.lower, 0.0)) + np.abs(np.where(np.isfinite(tc.upper),
                                                                                        tc.upper, 0.0))
        tol = 1e-9 * np.maximum(1.0, mag + bound)
        bad = (act < tc.lower - tol) | (act > tc.upper + tol)
        out += [f"row {tc.names[i]!r}: {act[i]:.12g} not in [{tc.lower[i]:.12g}, {tc.upper[i]:.12g}]"
                for i in np.flatnonzero(bad)]
    return out
