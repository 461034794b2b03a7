"""CP-SAT models of a batch: the shared base (variables, consistency, user rows) and CP-SAT as the
back end of the lazy-chord loop (:mod:`hierdp.solvers._chords`) for exact integer L2.

CP-SAT takes integer coefficients only. Targets on a grid ``x = m / S`` and weights on a grid
``w = omega / S_w`` (see :func:`hierdp.solvers.ortools.grid_scale`) give the integer objective
``S^2 S_w sum w_j (v_j - x_j)^2 = sum omega_j G_j(v_j)`` with ``G_j(v) = (S v - m_j)^2``; each
``t_j >= G_j`` is cut by the integer chords ``t_j >= G_j(k) + (G_j(k + 1) - G_j(k)) (v_j - k)``.
CP-SAT has no incremental solve: every round solves the model with its chords so far from scratch,
hinted with the best point so far (``t_j = G_j(v_j)``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hierdp.models.arrays import ModelArrays
from hierdp.solvers._chords import ChordRound, ConvexTerms
from hierdp.solvers.base import Status

__all__ = ["CpSatChordModel", "base_model", "status_of"]


def base_model(arr: ModelArrays, lo: np.ndarray, hi: np.ndarray) -> tuple[Any, list[Any]]:
    """``(CpModel, y)``: integer variables in ``[lo, hi]``, the consistency rows and the user rows
    (their integer left-hand sides make real bounds round inward exactly)."""
    from ortools.sat.python import cp_model

    m = cp_model.CpModel()
    y = [m.new_int_var(int(a), int(b), f"y{int(i)}") for a, b, i in zip(lo, hi, arr.nodes, strict=True)]
    for r in range(arr.cons_node.size):
        s, e = arr.cons_ptr[r], arr.cons_ptr[r + 1]
        m.add(cp_model.LinearExpr.weighted_sum([y[j] for j in arr.cons_col[s:e]],
                                               [int(v) for v in arr.cons_coef[s:e]]) == round(arr.cons_rhs[r]))
    for r in range(arr.lin_lower.size):
        s, e = arr.lin_ptr[r], arr.lin_ptr[r + 1]
        expr = cp_model.LinearExpr.weighted_sum([y[j] for j in arr.lin_col[s:e]], [int(v) for v in arr.lin_coef[s:e]])
        lo_r, hi_r = arr.lin_lower[r], arr.lin_upper[r]
        if np.isfinite(lo_r):
            m.add(expr >= int(np.ceil(lo_r - 1e-9)))
        if np.isfinite(hi_r):
            m.add(expr <= int(np.floor(hi_r + 1e-9)))
    return m, y


def status_of(st: Any, time_limited: bool) -> Status:
    """A :class:`Status` from a CP-SAT status (no proof within a time limit is a time limit)."""
    from ortools.sat.python import cp_model

    if st == cp_model.OPTIMAL:
        return Status.OPTIMAL
    if st == cp_model.INFEASIBLE:
        return Status.INFEASIBLE
    if st == cp_model.MODEL_INVALID:
        return Status.ERROR
    if time_limited and st in (cp_model.FEASIBLE, cp_model.UNKNOWN):
        return Status.TIME_LIMIT
    return Status.ERROR


class CpSatChordModel:
    """The MIP ``min sum omega_j t_j`` of one batch in CP-SAT (see the module docstring).

    ``scale`` (``S``), ``m`` (``S x`` as exact integers, recentred), ``omega`` (integer weights) and
    ``unit`` (``S^2 S_w``: CP-SAT's objective per unit of the true objective) come from the caller.
    """

    def __init__(self, arr: ModelArrays, lo: np.ndarray, hi: np.ndarray, terms: ConvexTerms, scale: int,
                 m: np.ndarray, omega: np.ndarray, unit: int, workers: int) -> None:
        from ortools.sat.python import cp_model

        self.arr = arr
        self.terms = terms
        self.scale = int(scale)
        self.m = [int(v) for v in m]
        self.omega = [int(v) for v in omega]
        self.unit = int(unit)
        self.workers = workers
        self.model, self.y = base_model(arr, lo, hi)
        v = arr.obj_var
        self.t = []
        for j in range(v.size):
            a, b = int(lo[v[j]]), int(hi[v[j]])
            top = max(self._g(j, a), self._g(j, b))
            self.t.append(self.model.new_int_var(0, top, f"t{j}"))
        self.model.minimize(cp_model.LinearExpr.weighted_sum(self.t, self.omega))

    def _g(self, j: int, v: int) -> int:
        d = self.scale * v - self.m[j]
        return d * d

    def add_chords(self, term: np.ndarray, k: np.ndarray) -> None:
        """``t_j - slope y >= G_j(k) - slope k`` with ``slope = G_j(k + 1) - G_j(k)`` (exact integers)."""
        v = self.arr.obj_var
        s = self.scale
        for j, kk in zip(term.tolist(), k.tolist(), strict=True):
            kk = int(kk)
            slope = s * (2 * (s * kk - self.m[j]) + s)
            self.model.add(self.t[j] - slope * self.y[v[j]] >= self._g(j, kk) - slope * kk)

    def term_values(self, y: np.ndarray) -> np.ndarray:
        """Node terms' values (this back end has no query terms)."""
        return np.asarray(y, dtype=float)[self.arr.obj_var]

    def _hint(self, start: np.ndarray | None) -> None:
        self.model.clear_hints()
        if start is None:
            return
        v = self.arr.obj_var
        for var, val in zip(self.y, start.tolist(), strict=True):
            self.model.add_hint(var, int(val))
        for j, tj in enumerate(self.t):
            self.model.add_hint(tj, self._g(j, int(start[v[j]])))

    def solve(self, time_left: float | None, start: np.ndarray | None) -> ChordRound:
        """One round from scratch, hinted with ``start``."""
        from ortools.sat.python import cp_model

        self._hint(start)
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = self.workers
        if time_left is not None:
            solver.parameters.max_time_in_seconds = max(float(time_left), 0.001)
        st = solver.solve(self.model)
        status = status_of(st, time_left is not None)
        y = None
        if st in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            y = np.asarray(solver.values(self.y).to_numpy(), dtype=float)
        bound = float(solver.best_objective_bound) / self.unit if st in (cp_model.OPTIMAL, cp_model.FEASIBLE) else None
        return ChordRound(status, y, bound, "" if status == Status.OPTIMAL else f"CP-SAT status {solver.status_name(st)}")

    def solve_restricted(self, a: np.ndarray, b: np.ndarray, time_left: float | None,
                         start: np.ndarray | None) -> ChordRound:
        """The same model with every node term held in its window (on a copy: CP-SAT domains
        cannot be relaxed back)."""
        from ortools.sat.python import cp_model

        inner = self.model.clone()
        v = self.arr.obj_var
        for j in range(v.size):
            var = inner.get_int_var_from_proto_index(self.y[v[j]].index)
            inner.add(var >= int(a[j]))
            inner.add(var <= int(b[j]))
        inside = start is not None and bool(np.all((start[v] >= a) & (start[v] <= b)))
        inner.clear_hints()
        if inside and start is not None:
            for var, val in zip(self.y, start.tolist(), strict=True):
                inner.add_hint(inner.get_int_var_from_proto_index(var.index), int(val))
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = self.workers
        if time_left is not None:
            solver.parameters.max_time_in_seconds = max(float(time_left), 0.001)
        st = solver.solve(inner)
        status = status_of(st, time_left is not None)
        y = None
        if st in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            y = np.asarray([solver.value(inner.get_int_var_from_proto_index(var.index)) for var in self.y], dtype=float)
        return ChordRound(status, y, None)


class GlopChordLP:
    """The continuous relaxation of the chord model in GLOP (real coefficients, incremental): its
    optimum is a lower bound of the integer optimum, and on a totally unimodular problem (a tree
    or level without rows) with integral breakpoints its optimal vertex is integral."""

    def __init__(self, arr: ModelArrays, lo: np.ndarray, hi: np.ndarray, terms: ConvexTerms) -> None:
        from ortools.linear_solver import pywraplp

        s = pywraplp.Solver.CreateSolver("GLOP")
        # rows are added between solves: the dual simplex restarts from a dual feasible basis
        s.SetSolverSpecificParametersAsString("use_preprocessing:false use_dual_simplex:true")
        self.s = s
        self.arr = arr
        self.terms = terms
        inf = s.infinity()
        self.lo, self.hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
        self.cons_rows: list[Any] = []
        self.lin_rows: list[Any] = []
        self.y = [s.NumVar(float(a), float(b), "") for a, b in zip(lo, hi, strict=True)]
        self.t = [s.NumVar(0.0, inf, "") for _ in range(terms.size)]
        for r in range(arr.cons_node.size):
            c = s.RowConstraint(float(arr.cons_rhs[r]), float(arr.cons_rhs[r]), "")
            self.cons_rows.append(c)
            for j, a in zip(arr.cons_col[arr.cons_ptr[r]:arr.cons_ptr[r + 1]],
                            arr.cons_coef[arr.cons_ptr[r]:arr.cons_ptr[r + 1]], strict=True):
                c.SetCoefficient(self.y[j], float(a))
        for r in range(arr.lin_lower.size):
            lo_r = float(np.ceil(arr.lin_lower[r] - 1e-9)) if np.isfinite(arr.lin_lower[r]) else -inf
            hi_r = float(np.floor(arr.lin_upper[r] + 1e-9)) if np.isfinite(arr.lin_upper[r]) else inf
            c = s.RowConstraint(lo_r, hi_r, "")
            self.lin_rows.append(c)
            for j, a in zip(arr.lin_col[arr.lin_ptr[r]:arr.lin_ptr[r + 1]],
                            arr.lin_coef[arr.lin_ptr[r]:arr.lin_ptr[r + 1]], strict=True):
                c.SetCoefficient(self.y[j], float(a))
        obj = s.Objective()
        for tj in self.t:
            obj.SetCoefficient(tj, 1.0)
        obj.SetMinimization()

    def add_chords(self, term: np.ndarray, k: np.ndarray) -> None:
        """Rows ``t_j - slope y >= intercept`` (real coefficients)."""
        from hierdp.solvers._chords import chord_coefficients

        slope, intercept = chord_coefficients(self.terms, term, k)
        inf = self.s.infinity()
        v = self.arr.obj_var
        for j, a, b in zip(term.tolist(), slope.tolist(), intercept.tolist(), strict=True):
            c = self.s.RowConstraint(float(b), inf, "")
            c.SetCoefficient(self.t[j], 1.0)
            c.SetCoefficient(self.y[v[j]], -float(a))

    def solve(self, time_left: float | None) -> tuple[Status, np.ndarray | None, float]:
        """``(status, y, optimum)`` of the LP."""
        from ortools.linear_solver import pywraplp

        if time_left is not None:
            self.s.SetTimeLimit(max(1, int(time_left * 1000)))
        st = self.s.Solve()
        if st != pywraplp.Solver.OPTIMAL:
            return (Status.TIME_LIMIT if st == pywraplp.Solver.NOT_SOLVED and time_left is not None
                    else Status.INFEASIBLE if st == pywraplp.Solver.INFEASIBLE else Status.ERROR), None, float("nan")
        return Status.OPTIMAL, np.array([var.solution_value() for var in self.y]), float(self.s.Objective().Value())

    def lagrangian_bound(self) -> float:
        """A proven lower bound of the integer optimum from the LP's row multipliers (any
        multipliers give one, so the LP's tolerances cannot make it wrong): with ``c = A' lambda``,
        ``q = sum_j min_{v in Z, lo <= v <= hi} [f_j(v) - c_j v] + lambda' side``, each minimum in
        closed form (the nearest integers to ``x_j + c_j / (2 w_j)``). ``-inf`` when a variable
        without a term has a multiplier pushing it to an infinite bound."""
        arr = self.arr
        lam_c = np.array([c.dual_value() for c in self.cons_rows], dtype=float)
        lam_l = np.array([c.dual_value() for c in self.lin_rows], dtype=float)
        lo_r = np.ceil(arr.lin_lower - 1e-9)
        hi_r = np.floor(arr.lin_upper + 1e-9)
        # a multiplier may only push against a finite side of its row
        lam_l = np.where((lam_l > 0) & np.isfinite(lo_r), lam_l, np.where((lam_l < 0) & np.isfinite(hi_r), lam_l, 0.0))
        nv = arr.n_vars
        c = np.bincount(arr.cons_col, weights=arr.cons_coef * np.repeat(lam_c, np.diff(arr.cons_ptr)),
                        minlength=nv).astype(float)
        if lam_l.size:
            c += np.bincount(arr.lin_col, weights=arr.lin_coef * np.repeat(lam_l, np.diff(arr.lin_ptr)), minlength=nv)
        pos, neg = lam_l > 0, lam_l < 0
        side = float(lam_c @ arr.cons_rhs) + float(lam_l[pos] @ lo_r[pos]) + float(lam_l[neg] @ hi_r[neg])
        total = side
        v = arr.obj_var
        has = np.zeros(nv, bool)
        has[v] = True
        # variables without a term: min of -c v over [lo, hi]
        free = ~has
        cf = c[free]
        push_hi = cf > 0
        push_lo = cf < 0
        if np.any(push_hi & ~np.isfinite(self.hi[free])) or np.any(push_lo & ~np.isfinite(self.lo[free])):
            return -np.inf
        total -= float(cf[push_hi] @ self.hi[free][push_hi]) + float(cf[push_lo] @ self.lo[free][push_lo])
        # terms: min over integers of w (u - x)^2 - c u
        w, x, cj = self.terms.weight, self.terms.target, c[v]
        centre = x + cj / (2 * w)
        best = np.full(v.size, np.inf)
        for u in (np.floor(centre), np.ceil(centre)):
            u = np.clip(u, self.lo[v], self.hi[v])
            best = np.minimum(best, w * (u - x) ** 2 - cj * u)
        return total + float(best.sum())
