"""The ``ortools`` plug-in: CP-SAT for integer linf/l1/l2, GLOP for continuous linf/l1 LPs.

CP-SAT only takes integer coefficients, while noisy targets are reals. The plug-in stays exact:

* **integer linf, any real targets (rank encoding).** Write ``x_i = f_i + r_i`` with
  ``f_i = floor(x_i)`` and ``r_i`` in [0, 1). For integer ``y_i`` both deviations are of the form
  ``k + s`` with ``k`` an integer and ``s`` in the finite set ``F_g`` = {0} ∪ {r_i} ∪ {1 - r_i : r_i > 0}
  of the group: ``y_i - x_i = (y_i - f_i - 1) + (1 - r_i)`` and ``x_i - y_i = (f_i - y_i) + r_i``. The map
  ``rank(k + s_j) = k |F_g| + j`` (``s_j`` the j-th smallest element of ``F_g``) is strictly
  increasing on these values and *linear in y_i*, so ``R_g >= rank(+-(y_i - x_i))`` with an integer
  ``R_g`` makes ``min R_g`` pick exactly the minimizer of ``max_i |y_i - x_i|``. Groups are
  independent (the plug-in refuses linear constraints that couple groups), so minimizing
  ``sum_g R_g`` minimizes every ``R_g`` and hence ``sum_g w_g alpha_g``. Weights must be constant
  within each group (then they only scale a group's term). Floating point: ``1 - r_i`` is
  computed in doubles, so two deviations equal in real arithmetic may be ordered by one ulp.
* **integer l1 (grid targets).** ``sum w_i |y_i - x_i|`` has real coefficients. The plug-in finds
  the smallest ``S`` in {1, 2, 4, ..., 2^20} ∪ {10, ..., 10^6} with ``x_i = m_i / S`` exactly
  (the double ``m_i / S`` equals ``x_i``; the same for weights with ``S_w``) and minimizes
  ``sum (S_w w_i) |S y_i - m_i|`` with integer coefficients: exact for the rational targets
  ``m_i / S``. Targets on no such grid (e.g. continuous Gaussian noise) are refused.
* **integer l2 (grid targets).** With the same grid, ``S^2 S_w sum w_i (y_i - x_i)^2 =
  sum (S_w w_i) g_i(y_i)`` with ``g_i(y) = (S y - m_i)^2``, modelled by its integer-coefficient
  chords ``t_i >= g_i(k) + (g_i(k+1) - g_i(k)) (y_i - k)`` for every integer ``k`` of the variable's
  domain (exact at integer points since ``g_i`` is convex). A multiplication equality
  ``t = d * d`` is also exact but its weak relaxation made 3 groups per model take minutes
  (measured); chords give CP-SAT a tight LP. Refused off the grid, when the domains need more than
  ``MAX_L2_CHORDS`` chords (large totals: use ``highs``, whose QP centre gives a proven small
  window), or when the scaled objective could exceed 2^53. Continuous l2 (a QP) is refused:
  GLOP solves LPs.
* **continuous linf/l1**: GLOP (simplex, exact to its feasibility tolerance ~1e-7, without
  GLOP's presolve, which fails on recentred models; PDLP is not used because its default
  tolerance gives ~1e-3 deviations).

Every variable needs a finite domain (CP-SAT): bounds, or non-negativity under a fixed ancestor.
User linear constraints need integer coefficients (their bounds are rounded inward exactly since
the left-hand side is an integer). CP-SAT runs with ``num_workers=1`` (measured faster here).

Recentring: every model is expressed in ``y - z`` for a consistent integer point ``z``
(:func:`~hierdp.models.arrays.consistent_point`): at counts near 1e9 CP-SAT otherwise reached its
time limit on 12 children (milliseconds at small counts), and GLOP returned 8x the L∞ optimum at
counts of 1e10. Magnitudes of 2^40 and beyond are refused (CP-SAT's integer arithmetic must hold
``|domain| * coefficient`` in int64 with room to spare). ``time_limit`` bounds the whole call; on
a time limit CP-SAT's best feasible point of the batch is kept.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial
from typing import Any
from collections.abc import Sequence

import numpy as np

from hierdp.models.arrays import (
    ModelArrays,
    ModelInfeasible,
    anchor_values,
    batch_components,
    consistent_point,
    model_arrays,
    recentred_magnitude,
)
from hierdp.models.problem import Problem
from hierdp.solvers._batching import ChunkResult, plan_batches, run_batches
from hierdp.solvers.base import Capabilities, Solution, Solver, Status, finish

#: groups per CP-SAT model (measured; small models keep CP-SAT's search local)
DEFAULT_BATCH_SIZE = 10
_GRIDS = sorted({2 ** k for k in range(21)} | {10 ** k for k in range(1, 7)})
#: refuse integer-l2 models needing more chord constraints than this
MAX_L2_CHORDS = 200_000
_INT_LIMIT = 2 ** 53  # keep every integer coefficient/bound exact in doubles and far from int64 overflow
#: largest magnitude accepted (see the module docstring)
MAX_MAGNITUDE = 2.0 ** 40


@dataclass(frozen=True)
class OrToolsOptions:
    """Options of ``solve(problem, solver="ortools", ...)``.

    Attributes:
        batch_size: groups per CP-SAT model (default 10).
        num_workers: CP-SAT workers (default 1).
        recentre: express models in ``y - z`` (default True; see the module docstring).
        executor: a :class:`concurrent.futures.Executor` over which batches are mapped (a process
            pool, or a Dask cluster's ``client.get_executor()``).
        progress: a progress bar over batches.
    """

    batch_size: int | None = None
    num_workers: int | None = None
    recentre: bool = True
    executor: Any = None
    progress: bool = False

    def __post_init__(self) -> None:
        for name in ("batch_size", "num_workers"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, (int, np.integer)) or v < 1):
                raise ValueError(f"ortools: {name} must be a positive integer, got {v!r}")


def grid_scale(values: np.ndarray) -> int | None:
    """Smallest ``S`` in {1, 2, 4, ..., 2^20, 10, ..., 10^6} with every value exactly ``m / S``, else None."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return 1
    for s in _GRIDS:
        m = np.rint(v * s)
        if np.all(m / s == v):
            return s
    return None


class OrToolsSolver(Solver):
    """OR-Tools: CP-SAT (integer linf exact for real targets; integer l1/l2 for grid targets) and GLOP (LPs).

    ``time_limit`` (seconds) bounds the whole call; options: :class:`OrToolsOptions`.
    """

    name = "ortools"
    Options = OrToolsOptions
    capabilities = Capabilities(
        objectives=frozenset({"l1", "l2", "linf"}),
        integer=True,
        continuous=True,
        structures=frozenset({"level", "tree"}),
        features=frozenset({"weights", "bounds", "linear_constraints", "cumulative", "free_sign", "missing_targets"}),
        limits={"max_magnitude": MAX_MAGNITUDE, "integer_l2_chords": MAX_L2_CHORDS,
                "targets (integer l1/l2)": "on a grid 1/S (S = 2^k <= 2^20 or 10^k <= 10^6)",
                "time_limit": "per call: CP-SAT's / GLOP's limit on the time left per batch (model building "
                              "is not interrupted)", "tolerance": "exact (CP-SAT); 1e-7 feasibility (GLOP)"},
        description="OR-Tools CP-SAT (integer linf/l1/l2, exact encodings) and GLOP (continuous linf/l1)",
    )

    requires = ("ortools.sat.python.cp_model",)

    def extra_checks(self, problem: Problem) -> list[str]:
        """Refusals beyond the flags: see the module docstring for why each keeps CP-SAT exact."""
        why: list[str] = []
        if not problem.integer:
            if problem.objective == "l2":
                why.append("continuous l2 is a QP; OR-Tools' GLOP solves LPs only (use highs or projection)")
            elif problem.magnitude() >= 1e7 and recentred_magnitude(problem) >= 1e7:
                why.append("targets differ from a consistent point by 1e7 or more: even recentred, GLOP's "
                           "absolute tolerances would not resolve the optimum")
            return why
        free = problem.is_free
        term = free & ~np.isnan(problem.target) & (problem.weights > 0)
        if problem.objective == "linf":
            g = problem.groups()[term]
            w = problem.weights[term]
            if g.size:
                wmin = np.full(g.max() + 1, np.inf)
                wmax = np.full(g.max() + 1, -np.inf)
                np.minimum.at(wmin, g, w)
                np.maximum.at(wmax, g, w)
                has_terms = np.bincount(g, minlength=g.max() + 1) > 0  # a group without terms has no weights
                if np.any(has_terms & (wmin != wmax)):
                    why.append("CP-SAT linf needs the same weight for all nodes of a group")
            if problem.n_constraints and np.any(np.bincount(batch_components(problem)) > 1):
                why.append("CP-SAT linf cannot honour a linear constraint coupling two groups exactly")
        else:
            if grid_scale(problem.target[term]) is None:
                why.append(f"CP-SAT {problem.objective} needs targets on a grid 1/S (S a power of 2 up to "
                           "2^20 or of 10 up to 10^6); these targets are arbitrary reals")
            if grid_scale(problem.weights[term]) is None:
                why.append(f"CP-SAT {problem.objective} needs weights on a grid 1/S")
        if problem.n_constraints:
            mat = problem.constraints.matrix
            bad = np.flatnonzero(mat.data != np.rint(mat.data))
            if bad.size:
                r = int(np.searchsorted(mat.indptr, bad[0], side="right") - 1)
                why.append(f"CP-SAT needs integer coefficients in linear constraint {problem.constraints.name(r)}")
        lo = problem.effective_lower[free]
        hi = problem.upper[free]
        if problem.nonnegative:
            anc = anchor_values(problem)[free]
            hi = np.where(np.isnan(anc), hi, np.minimum(hi, np.nan_to_num(anc)))
        bad = ~np.isfinite(lo) | ~np.isfinite(hi)
        if bad.any():
            i = int(np.flatnonzero(free)[np.flatnonzero(bad)[0]])
            why.append(f"CP-SAT needs finite domains: {problem._label(i)} has no finite lower and upper bound "
                       "(add bounds, or non-negativity under a fixed ancestor)")
        else:
            if problem.objective == "l2":
                chords = np.maximum(hi - lo, 1)[term[free]].sum()
                if chords > MAX_L2_CHORDS:
                    why.append(f"CP-SAT integer l2 would need {int(chords)} chords over the variable domains "
                               f"(> {MAX_L2_CHORDS}); use highs (proven window) or projection/costtable")
            if problem.objective in ("l1", "l2") and not why:
                x, w = problem.target[term], problem.weights[term]
                sx, sw = grid_scale(x), grid_scale(w)
                span = np.maximum(np.abs(hi[term[free]] - x), np.abs(lo[term[free]] - x)) * sx
                power = 2 if problem.objective == "l2" else 1
                if float(np.sum(span ** power * w * sw)) > _INT_LIMIT:
                    why.append(f"CP-SAT {problem.objective}: the scaled objective could exceed 2^53 over these "
                               "domains (exact integer arithmetic would overflow)")
        return why

    def solve_problem(self, problem: Problem, *, time_limit: float | None = None, **options: Any) -> Solution:
        """Solve a supported problem (CP-SAT for integer problems, GLOP for LPs)."""
        opts: OrToolsOptions = self.parse_options(options)
        batch_size = int(opts.batch_size or DEFAULT_BATCH_SIZE)
        workers = int(opts.num_workers or 1)
        t0 = time.perf_counter()
        deadline = None if time_limit is None else t0 + float(time_limit)
        values = np.where(problem.is_fixed, problem.fixed, np.nan)
        stats: dict[str, Any] = {"backend": "cp-sat" if problem.integer else "glop", "batches": 0,
                                 "recentred": bool(opts.recentre)}
        if not problem.is_free.any():
            return finish(problem, values, Status.OPTIMAL, self.name, t0, stats)
        batches: list[Any] = plan_batches(problem, batch_size) if problem.integer else [None]  # GLOP: one LP
        anchors = anchor_values(problem)
        shift = consistent_point(problem) if opts.recentre else None
        chunk = partial(_solve_chunk, deadline=deadline, workers=workers, anchors=anchors, shift=shift)
        out = run_batches(chunk, problem, batches, executor=opts.executor, progress=bool(opts.progress),
                          desc=f"ortools ({stats['backend']})")
        stats["batches"] = len(batches)
        for nodes, x in out.parts:
            values[nodes] = x
        if out.message:
            stats["message"] = out.message
        if out.status != Status.OPTIMAL:
            stats["failed_groups"] = out.failed
            if out.incumbent is not None and out.complete:
                values[out.incumbent[0]] = out.incumbent[1]
            return finish(problem, values, out.status, self.name, t0, stats)
        bound = float(np.sum(out.bounds)) if out.bounds and all(b is not None for b in out.bounds) else None
        return finish(problem, values, Status.OPTIMAL, self.name, t0, stats, bound=bound)


def _solve_chunk(problem: Problem, subsets: Sequence[np.ndarray | None], *, deadline: float | None,
                 workers: int, anchors: np.ndarray, shift: np.ndarray | None) -> ChunkResult:
    """Solve batches in order (CP-SAT for integer problems, GLOP for LPs)."""
    res = ChunkResult()
    for subset in subsets:
        failed = (np.arange(problem.n_groups, dtype=np.int64) if subset is None
                  else np.asarray(subset, dtype=np.int64))
        try:
            arr = model_arrays(problem, subset=subset, shift=shift)
        except ModelInfeasible as exc:
            res.status, res.message, res.failed = Status.INFEASIBLE, str(exc), failed
            return res
        left = None if deadline is None else deadline - time.perf_counter()
        if left is not None and left <= 0:
            res.status, res.message, res.failed = Status.TIME_LIMIT, "no time left for this batch", failed
            return res
        if problem.integer:
            status, x, incumbent, bound = _cpsat(problem, arr, left, workers, anchors)
        else:
            status, x, incumbent, bound = _glop(arr, left)
        if status != Status.OPTIMAL:
            res.status, res.failed = status, failed
            if incumbent is not None:
                res.incumbent = (arr.nodes, arr.unshift(incumbent))
            return res
        res.parts.append((arr.nodes, arr.unshift(x)))
        res.bounds.append(bound)
    return res


def _domains(problem: Problem, arr: ModelArrays, anchors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Integer domains of the (recentred) variables: bounds, and a fixed ancestor's value."""
    lo = arr.lower.copy()
    hi = arr.upper.copy()
    if problem.nonnegative:
        z = np.zeros(arr.n_vars) if arr.shift is None else arr.shift
        anc = anchors[arr.nodes]
        hi = np.where(np.isnan(anc), hi, np.minimum(hi, np.floor(np.nan_to_num(anc) + 1e-9) - z))
    return lo, hi


def _cpsat(problem: Problem, arr: ModelArrays, time_left: float | None, workers: int,
           anchors: np.ndarray) -> tuple[Status, np.ndarray | None, np.ndarray | None, float | None]:
    """One batch with CP-SAT (integer linf: rank encoding; integer l1/l2: grid scaling).

    Returns ``(status, optimal values, incumbent, bound)`` in the model's (recentred) space."""
    from ortools.sat.python import cp_model

    lo, hi = _domains(problem, arr, anchors)
    if np.any(lo > hi):
        return Status.INFEASIBLE, None, None, None
    m = cp_model.CpModel()
    y = [m.new_int_var(int(a), int(b), f"y{int(i)}") for a, b, i in zip(lo, hi, arr.nodes)]
    for r in range(arr.cons_node.size):
        s, e = arr.cons_ptr[r], arr.cons_ptr[r + 1]
        m.add(cp_model.LinearExpr.weighted_sum([y[j] for j in arr.cons_col[s:e]],
                                               [int(v) for v in arr.cons_coef[s:e]]) == int(round(arr.cons_rhs[r])))
    for r in range(arr.lin_lower.size):
        s, e = arr.lin_ptr[r], arr.lin_ptr[r + 1]
        expr = cp_model.LinearExpr.weighted_sum([y[j] for j in arr.lin_col[s:e]], [int(v) for v in arr.lin_coef[s:e]])
        lo_r, hi_r = arr.lin_lower[r], arr.lin_upper[r]
        # the left-hand side is an integer: real bounds round inward exactly
        if np.isfinite(lo_r):
            m.add(expr >= int(np.ceil(lo_r - 1e-9)))
        if np.isfinite(hi_r):
            m.add(expr <= int(np.floor(hi_r + 1e-9)))
    x = arr.obj_target
    v = arr.obj_var
    if arr.objective == "linf":
        _linf_ranks(m, y, arr, lo, hi)
    else:
        # scale the original targets (the grid property does not survive a float subtraction),
        # then recentre exactly in integers
        x_orig = problem.target[arr.nodes[v]]
        s = grid_scale(x_orig)
        sw = grid_scale(arr.obj_weight)
        z = np.zeros(arr.n_vars) if arr.shift is None else arr.shift
        mm = np.rint(x_orig * s).astype(np.int64) - s * np.rint(z[v]).astype(np.int64)
        ww = np.rint(arr.obj_weight * sw).astype(np.int64)
        span = np.maximum(np.abs(hi[v] * s - mm), np.abs(lo[v] * s - mm)) if v.size else np.zeros(0)
        power = 2 if arr.objective == "l2" else 1
        if v.size and float(np.sum(span.astype(float) ** power * ww)) > _INT_LIMIT:
            return Status.NUMERICAL, None, None, None
        t = []
        for q in range(v.size):
            d = int(span[q])
            if arr.objective == "l1":
                tq = m.new_int_var(0, d, f"t{q}")
                m.add(tq >= s * y[v[q]] - int(mm[q]))
                m.add(tq >= int(mm[q]) - s * y[v[q]])
            else:
                # exact epigraph of g(y) = (S y - m)^2 over the integer domain: the chord of g on
                # [k, k+1] for every k; at integer y the largest chord is g(y) (g convex)
                ks = np.arange(int(lo[v[q]]), max(int(hi[v[q]]), int(lo[v[q]]) + 1))
                gk = (s * ks - int(mm[q])) ** 2
                slope = s * (2 * (s * ks - int(mm[q])) + s)
                tq = m.new_int_var(0, d * d, f"sq{q}")
                for k, a, b in zip(ks.tolist(), slope.tolist(), gk.tolist()):
                    m.add(tq - a * y[v[q]] >= b - a * k)
            t.append(tq)
        m.minimize(cp_model.LinearExpr.weighted_sum(t, [int(a) for a in ww]))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = workers
    if time_left is not None:
        solver.parameters.max_time_in_seconds = float(time_left)
    st = solver.solve(m)
    if st == cp_model.OPTIMAL:
        return Status.OPTIMAL, np.array([solver.value(var) for var in y], dtype=float), None, None
    if st == cp_model.INFEASIBLE:
        return Status.INFEASIBLE, None, None, None
    if st in (cp_model.FEASIBLE, cp_model.UNKNOWN) and time_left is not None:
        incumbent = np.array([solver.value(var) for var in y], dtype=float) if st == cp_model.FEASIBLE else None
        return Status.TIME_LIMIT, None, incumbent, None
    return Status.ERROR, None, None, None


def _linf_ranks(m: Any, y: list[Any], arr: ModelArrays, lo: np.ndarray, hi: np.ndarray) -> None:
    """Add ``R_g >= rank(+-(y_i - x_i))`` and ``min sum R_g`` (see the module docstring)."""
    v = arr.obj_var
    x = arr.obj_target
    g = arr.obj_group
    f = np.floor(x)
    r = x - f
    # F_g per group: (group, fraction) pairs, deduplicated, rank j = position within the group
    pos = r > 0
    pairs = np.r_[np.c_[np.arange(arr.groups.size), np.zeros(arr.groups.size)],
                  np.c_[g, r], np.c_[g[pos], 1.0 - r[pos]]]
    uniq, inv = np.unique(pairs, axis=0, return_inverse=True)
    inv = inv.ravel()
    first = np.searchsorted(uniq[:, 0], np.arange(arr.groups.size), side="left")
    size = np.bincount(uniq[:, 0].astype(np.int64), minlength=arr.groups.size)
    nt = v.size
    j_r = inv[arr.groups.size: arr.groups.size + nt] - first[g]
    j_1mr = np.zeros(nt, np.int64)
    j_1mr[pos] = inv[arr.groups.size + nt:] - first[g[pos]]
    mg = size[g]
    # largest possible |deviation| in units of M_g bounds R_g's domain
    dev = np.maximum(np.abs(hi[v] - f) + 1, np.abs(f - lo[v]) + 1)
    rmax = np.zeros(arr.groups.size, np.int64)
    np.maximum.at(rmax, g, (mg * dev).astype(np.int64))
    R = [m.new_int_var(0, int(b) + int(s), f"R{k}") for k, (b, s) in enumerate(zip(rmax, size))]
    for q in range(nt):
        yq, Rq, M = y[v[q]], R[g[q]], int(mg[q])
        if pos[q]:
            m.add(Rq >= M * yq - M * int(f[q] + 1) + int(j_1mr[q]))
        else:
            m.add(Rq >= M * yq - M * int(f[q]))
        m.add(Rq >= M * int(f[q]) - M * yq + int(j_r[q]))
    m.minimize(sum(R) if R else 0)


def _glop(arr: ModelArrays, time_left: float | None
          ) -> tuple[Status, np.ndarray | None, np.ndarray | None, float | None]:
    """A continuous linf/l1 LP with GLOP (simplex), same model as the HiGHS LP."""
    from ortools.linear_solver import pywraplp

    s = pywraplp.Solver.CreateSolver("GLOP")
    # GLOP's presolve reports ABNORMAL (or, unrecentred at 1e10, a wrong optimum) when bounds are
    # far larger than the rest of the model, as recentring makes them (measured: bounds -1e9,
    # targets within 40): solve without it
    s.SetSolverSpecificParametersAsString("use_preprocessing:false")
    inf = s.infinity()

    def fin(a: float) -> float:
        return float(a) if np.isfinite(a) else (inf if a > 0 else -inf)

    y = [s.NumVar(fin(a), fin(b), f"y{int(i)}") for a, b, i in zip(arr.lower, arr.upper, arr.nodes)]

    def row(lo: float, hi: float, cols: np.ndarray, coefs: np.ndarray, extra: list[tuple[Any, float]] = ()) -> None:
        c = s.RowConstraint(fin(lo), fin(hi), "")
        for j, a in zip(cols, coefs):
            c.SetCoefficient(y[j], float(a))
        for var, a in extra:
            c.SetCoefficient(var, a)

    for r in range(arr.cons_node.size):
        a, b = arr.cons_ptr[r], arr.cons_ptr[r + 1]
        row(arr.cons_rhs[r], arr.cons_rhs[r], arr.cons_col[a:b], arr.cons_coef[a:b])
    for r in range(arr.lin_lower.size):
        a, b = arr.lin_ptr[r], arr.lin_ptr[r + 1]
        row(arr.lin_lower[r], arr.lin_upper[r], arr.lin_col[a:b], arr.lin_coef[a:b])
    nt = arr.obj_var.size
    if arr.objective == "linf":
        aux = [s.NumVar(0.0, inf, f"alpha{k}") for k in range(arr.groups.size)]
        aux_of = arr.obj_group
    else:
        aux = [s.NumVar(0.0, inf, f"t{k}") for k in range(nt)]
        aux_of = np.arange(nt)
    for q in range(nt):
        w, x, j = float(arr.obj_weight[q]), float(arr.obj_target[q]), int(arr.obj_var[q])
        row(-inf, w * x, np.array([j]), np.array([w]), [(aux[aux_of[q]], -1.0)])
        row(-inf, -w * x, np.array([j]), np.array([-w]), [(aux[aux_of[q]], -1.0)])
    obj = s.Objective()
    for a in aux:
        obj.SetCoefficient(a, 1.0)
    obj.SetMinimization()
    if time_left is not None:
        s.SetTimeLimit(max(1, int(time_left * 1000)))
    st = s.Solve()
    if st == pywraplp.Solver.OPTIMAL:
        return Status.OPTIMAL, np.array([var.solution_value() for var in y], dtype=float), None, obj.Value()
    return {
        pywraplp.Solver.INFEASIBLE: Status.INFEASIBLE,
        pywraplp.Solver.UNBOUNDED: Status.UNBOUNDED,
        pywraplp.Solver.NOT_SOLVED: Status.TIME_LIMIT if time_left is not None else Status.ERROR,
    }.get(st, Status.ERROR), None, None, None
