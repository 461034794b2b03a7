"""The ``ortools`` plug-in: CP-SAT for integer linf/l1/l2, GLOP for continuous linf/l1 LPs.

CP-SAT only takes integer coefficients, while noisy targets are reals. The plug-in stays exact:

* **integer linf, any real targets (rank encoding).** Write ``x_i = f_i + r_i`` with
  ``f_i = floor(x_i)`` and ``r_i`` in [0, 1). For integer ``y_i`` both deviations are of the form
  ``k + s`` with ``k`` an integer and ``s`` in the finite set ``F_g`` = {0} ∪ {r_i} ∪ {1 - r_i : r_i > 0}
  of the group: ``y_i - x_i = (y_i - f_i - 1) + (1 - r_i)`` and ``x_i - y_i = (f_i - y_i) + r_i``. The map
  ``rank(k + s_j) = k |F_g| + j`` (``s_j`` the j-th smallest element of ``F_g``) is strictly
  increasing on these values and *linear in y_i*, so ``R_g >= rank(+-(y_i - x_i))`` with an integer
  ``R_g`` makes ``min R_g`` pick exactly the minimizer of ``max_i |y_i - x_i|``. Ranks are used
  for the groups that no row couples to another and whose weights are equal (then they only
  scale a group's term): such groups are independent, so minimizing ``sum_g R_g`` minimizes every
  ``R_g``. Floating point: ``1 - r_i`` is computed in doubles, so two deviations equal in real
  arithmetic may be ordered by one ulp.
* **integer linf over groups coupled by rows, or with unequal weights (grid targets).** Ranks of
  different groups are not comparable, so these groups get ``A_g >= omega_i |S y_i - m_i|`` on
  the grid below (``A_g = S S_w alpha_g``, exact). Every coupled component is independent of the
  ranked groups, so one model minimizes both parts. Refused off the grid.
* **integer l1 (grid targets).** ``sum w_i |y_i - x_i|`` has real coefficients. The plug-in finds
  the smallest ``S`` in {1, 2, 4, ..., 2^20} ∪ {10, ..., 10^6} with ``x_i = m_i / S`` exactly
  (the double ``m_i / S`` equals ``x_i``; the same for weights with ``S_w``) and minimizes
  ``sum (S_w w_i) |S y_i - m_i|`` with integer coefficients: exact for the rational targets
  ``m_i / S``. Targets on no such grid (e.g. continuous Gaussian noise) are refused.
* **integer l2 (grid targets), lazy chord cuts.** With the same grid, ``S^2 S_w sum w_i (y_i - x_i)^2
  = sum (S_w w_i) g_i(y_i)`` with ``g_i(y) = (S y - m_i)^2``, cut by integer-coefficient chords
  ``t_i >= g_i(k) + (g_i(k+1) - g_i(k)) (y_i - k)`` added lazily around the answer
  (:mod:`hierdp.solvers._chords`; a multiplication equality ``t = d * d`` is exact too but its weak
  relaxation made 3 groups per model take minutes, measured). GLOP solves the chord model's
  continuous relaxation until its answer lies in the windows; the Lagrangian of its row
  multipliers, evaluated with the exact parabolas, is a proven lower bound whatever GLOP's
  tolerances; an integral vertex, or CP-SAT's optimum with every variable held in its window,
  that meets the bound (the scaled objective is an integer) is optimal; otherwise CP-SAT runs the
  lazy-chord loop on the MIP. Domains shrink to ``|y_i - x_i| <= sqrt(F(z) / w_i)`` when the
  recentring point ``z`` is feasible (:func:`incumbent_window`). Refused off the grid, or when the
  scaled objective could leave int64 (2^61) over the domains. Continuous l2 (a QP) is refused:
  GLOP solves LPs.
* **continuous linf/l1**: GLOP (simplex, exact to its feasibility tolerance ~1e-7, without
  GLOP's presolve, which fails on recentred models, and again without scaling when it says
  ABNORMAL; PDLP is not used because its default tolerance gives ~1e-3 deviations).

Every variable needs a finite domain (CP-SAT): bounds, or non-negativity under a fixed ancestor.
User linear constraints need integer coefficients (their bounds are rounded inward exactly since
the left-hand side is an integer). CP-SAT runs with ``num_workers=1`` (measured faster here).

Recentring: every model is expressed in ``y - z`` for a consistent integer point ``z``
(:func:`~hierdp.models.arrays.consistent_point`): at counts near 1e9 CP-SAT otherwise reached its
time limit on 12 children (milliseconds at small counts), and GLOP returned 8x the L∞ optimum at
counts of 1e10. Magnitudes up to 2^52 are accepted (values are rebuilt as ``z + d`` in doubles);
each model's own integers (ranks, scaled objective) are checked against int64 before solving.
``time_limit`` bounds the whole call; on a time limit CP-SAT's best feasible point of the batch is
kept. Bounds: CP-SAT proves its optimum in integers (``bound == objective``); integer L2 reports
the chord loop's proven bound, GLOP its LP optimum.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
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
from hierdp.solvers._grid import grid_scale
from hierdp.solvers._chords import ChordWindows, ConvexTerms, first_windows, l2_centre, solve_lazily
from hierdp.solvers._ortools_chords import CpSatChordModel, GlopChordLP, base_model, status_of
from hierdp.solvers.base import Capabilities, Solution, Solver, Status, finish

#: groups per CP-SAT model (measured; small models keep CP-SAT's search local)
DEFAULT_BATCH_SIZE = 10
#: largest integer a CP-SAT model may reach (objective, ranks, row activities): far from int64
#: overflow, and its objective exact in doubles
_INT_LIMIT = 2.0 ** 61
#: largest magnitude accepted: integers stay exact in float64 (values are rebuilt as z + d); the
#: models' own integers are checked against int64 per objective (``_overflow_refusals``)
MAX_MAGNITUDE = 2.0 ** 52


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
        limits={"max_magnitude": MAX_MAGNITUDE,
                "targets (integer l1/l2)": "on a grid 1/S (S = 2^k <= 2^20 or 10^k <= 10^6)",
                "time_limit": "per call: CP-SAT's / GLOP's limit on the time left per batch (model building "
                              "is not interrupted)", "tolerance": "exact (CP-SAT); 1e-7 feasibility (GLOP)"},
        description="OR-Tools CP-SAT (integer linf/l1/l2, exact encodings; l2 by lazy chord cuts with GLOP bounds) "
                    "and GLOP (continuous linf/l1)",
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
        grp = problem.groups()
        comp = batch_components(problem)
        coupled_group = (np.bincount(comp)[comp] > 1) if comp.size else np.zeros(0, bool)
        if problem.objective == "linf":
            # groups coupled by a row, or with unequal weights, use scaled deviations (exact on a
            # grid); the others ranks (exact for any real targets)
            grid = term & _scaled_groups(problem, coupled_group)[np.maximum(grp, 0)]
        else:
            grid = term
        if grid.any():
            if grid_scale(problem.target[grid]) is None:
                what = ("linf over groups coupled by a row or with unequal weights" if problem.objective == "linf"
                        else problem.objective)
                why.append(f"CP-SAT {what} needs targets on a grid 1/S (S a power of 2 up to 2^20 or of 10 up to "
                           "10^6); these targets are arbitrary reals")
            if grid_scale(problem.weights[grid]) is None:
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
        elif not why:
            if problem.objective == "l2":
                l2_lo, l2_hi = incumbent_window(problem)
                lo, hi = np.maximum(lo, l2_lo[free]), np.minimum(hi, l2_hi[free])
            why.extend(_overflow_refusals(problem, term[free], lo, hi, grid[free]))
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
        comp = batch_components(problem)
        coupled = np.bincount(comp)[comp] > 1 if comp.size else np.zeros(0, bool)
        if problem.objective == "linf":
            coupled = _scaled_groups(problem, coupled)
        centre = window = None
        if problem.integer and problem.objective == "l2":
            centre, window = l2_centre(problem), incumbent_window(problem)
        chunk = partial(_solve_chunk, deadline=deadline, workers=workers, anchors=anchors, shift=shift,
                        coupled=coupled, centre=centre, window=window)
        out = run_batches(chunk, problem, batches, executor=opts.executor, progress=bool(opts.progress),
                          desc=f"ortools ({stats['backend']})", deadline=deadline)
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
        bounds = [b for b in out.bounds if b is not None]
        exact = problem.integer and problem.objective != "l2"
        bound = float(np.sum(bounds)) if len(bounds) == len(out.bounds) and not exact else None
        sol = finish(problem, values, Status.OPTIMAL, self.name, t0, stats, bound=bound)
        if exact:
            # CP-SAT proves its optimum in exact integer arithmetic: the bound is the optimum
            sol.bound, sol.gap = sol.objective, 0.0
        return sol


def incumbent_window(problem: Problem) -> tuple[np.ndarray, np.ndarray]:
    """Per node, an integer range that holds every point at least as good as a known feasible one.

    The recentring point ``z`` (:func:`~hierdp.models.arrays.consistent_point`) is integral and
    consistent; when it also meets the bounds and rows it is feasible, and every point with an
    integer-L2 objective ``<= F(z)`` has ``w_i (y_i - x_i)^2 <= F(z)`` for each term. So each
    term's node lies within ``sqrt(F(z) / w_i)`` of its target: CP-SAT's domains (and its integers)
    stay small at any magnitude. ``(-inf, inf)`` where nothing is known."""
    lo = np.full(problem.n, -np.inf)
    hi = np.full(problem.n, np.inf)
    z = consistent_point(problem)
    if not np.all(np.isfinite(z)) or problem.violations(z):
        return lo, hi
    u = problem.objective_value(z)
    term = problem.is_free & ~np.isnan(problem.target) & (problem.weights > 0)
    r = np.sqrt(u / problem.weights[term]) * (1 + 1e-12) + 1e-9
    lo[term] = np.ceil(problem.target[term] - r)
    hi[term] = np.floor(problem.target[term] + r)
    return lo, hi


def _scaled_groups(problem: Problem, coupled_group: np.ndarray) -> np.ndarray:
    """Per group: True when CP-SAT's L∞ model uses scaled deviations (the group is coupled to
    another by a row, or its terms' weights differ), False for the rank encoding."""
    ng = max(problem.n_groups, 1)
    grp = problem.groups()
    term = problem.is_free & ~np.isnan(problem.target) & (problem.weights > 0)
    g = grp[term]
    w = problem.weights[term]
    wmin = np.full(ng, np.inf)
    wmax = np.full(ng, -np.inf)
    np.minimum.at(wmin, g, w)
    np.maximum.at(wmax, g, w)
    unequal = np.isfinite(wmin) & (wmin != wmax)
    out = unequal.copy()
    out[: coupled_group.size] |= coupled_group
    return out


def _overflow_refusals(problem: Problem, term: np.ndarray, lo: np.ndarray, hi: np.ndarray, grid: np.ndarray
                       ) -> list[str]:
    """CP-SAT computes in int64: refuse models whose objective or rows could leave it (over the
    variables' domains, in the recentred space the plug-in solves in).

    ``term``, ``lo``, ``hi``, ``grid`` are over the free nodes."""
    z = consistent_point(problem)[problem.is_free]
    span = np.maximum(np.abs(hi - z), np.abs(z - lo)) + 1
    if problem.objective == "linf" and not grid.all():
        # ranks: R_g <= M_g * (largest deviation + 1), M_g <= 2 (group size) + 1
        size = np.bincount(problem.groups()[problem.is_free])
        m_g = 2.0 * size[problem.groups()[problem.is_free]] + 1
        if float(np.max(m_g * span)) > _INT_LIMIT:
            return [f"CP-SAT linf: ranks over these domains could exceed 2^{np.log2(_INT_LIMIT):.0f} "
                    "(exact integer arithmetic would overflow)"]
    if not grid.any():
        return []
    x = problem.target[problem.is_free][grid]
    w = problem.weights[problem.is_free][grid]
    sx, sw = grid_scale(x) or 1, grid_scale(w) or 1
    dev = (span[grid] + np.abs(x - z[grid])) * sx
    power = 2 if problem.objective == "l2" else 1
    if float(np.sum(dev ** power * w * sw)) > _INT_LIMIT:
        return [f"CP-SAT {problem.objective}: the scaled objective could exceed 2^{np.log2(_INT_LIMIT):.0f} "
                "over these domains (exact integer arithmetic would overflow)"]
    return []


def _solve_chunk(problem: Problem, subsets: Sequence[np.ndarray | None], *, deadline: float | None,
                 workers: int, anchors: np.ndarray, shift: np.ndarray | None, coupled: np.ndarray,
                 centre: np.ndarray | None = None, window: tuple[np.ndarray, np.ndarray] | None = None
                 ) -> ChunkResult:
    """Solve batches in order (CP-SAT for integer problems, GLOP for LPs)."""
    res = ChunkResult()
    for subset in subsets:
        failed = (np.arange(problem.n_groups, dtype=np.int64) if subset is None
                  else np.asarray(subset, dtype=np.int64))
        try:
            if problem.integer and problem.objective == "l2":  # lazy chords: no enumerated window
                arr = replace(model_arrays(problem, subset=subset, shift=shift, relax=True, anchors=anchors),
                              integer=True)
            else:
                arr = model_arrays(problem, subset=subset, shift=shift)
        except ModelInfeasible as exc:
            res.status, res.message, res.failed = Status.INFEASIBLE, str(exc), failed
            return res
        left = None if deadline is None else deadline - time.perf_counter()
        if left is not None and left <= 0:
            res.status, res.message, res.failed = Status.TIME_LIMIT, "no time left for this batch", failed
            return res
        if problem.integer:
            status, x, incumbent, bound, message = _cpsat(problem, arr, deadline, workers, anchors, coupled, centre, window)
        else:
            status, x, incumbent, bound = _glop(arr, left)
            message = ""
        if status != Status.OPTIMAL or x is None:
            res.status, res.failed, res.message = status if status != Status.OPTIMAL else Status.ERROR, failed, message
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


def _cpsat(problem: Problem, arr: ModelArrays, deadline: float | None, workers: int, anchors: np.ndarray,
           coupled: np.ndarray, centre: np.ndarray | None = None,
           window: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[Status, np.ndarray | None, np.ndarray | None, float | None, str]:
    """One batch with CP-SAT (integer linf: rank encoding per uncoupled group, scaled deviations
    over groups coupled by rows; integer l1: grid scaling; integer l2: lazy chord cuts).

    Returns ``(status, optimal values, incumbent, bound, message)`` in the model's (recentred)
    space; ``bound`` is in the problem's objective units."""
    from ortools.sat.python import cp_model

    lo, hi = _domains(problem, arr, anchors)
    if window is not None:  # integer L2: no better point lies outside (see incumbent_window)
        z = np.zeros(arr.n_vars) if arr.shift is None else arr.shift
        lo = np.maximum(lo, window[0][arr.nodes] - z)
        hi = np.minimum(hi, window[1][arr.nodes] - z)
    if np.any(lo > hi):
        return Status.INFEASIBLE, None, None, None, "a variable has an empty integer domain"
    if arr.objective == "l2":
        return _cpsat_l2(problem, arr, lo, hi, deadline, workers, centre)
    m, y = base_model(arr, lo, hi)
    v = arr.obj_var
    if arr.objective == "linf":
        in_coupled = coupled[arr.groups[arr.obj_group]] if v.size else np.zeros(0, bool)
        objective = _linf_ranks(m, y, arr, lo, hi, ~in_coupled)
        if in_coupled.any():
            objective = objective + _linf_scaled(m, y, problem, arr, lo, hi, in_coupled)
        m.minimize(objective)
    else:
        grid = _grid_terms(problem, arr)
        if grid is None:
            return Status.ERROR, None, None, None, "targets or weights off the grid (unsupported() refuses these)"
        s, _, mm, ww = grid
        span = np.maximum(np.abs(hi[v] * s - mm), np.abs(lo[v] * s - mm)) if v.size else np.zeros(0)
        t = []
        for q in range(v.size):
            tq = m.new_int_var(0, int(span[q]), f"t{q}")
            m.add(tq >= s * y[v[q]] - int(mm[q]))
            m.add(tq >= int(mm[q]) - s * y[v[q]])
            t.append(tq)
        m.minimize(cp_model.LinearExpr.weighted_sum(t, [int(a) for a in ww]))
    time_left = None if deadline is None else deadline - time.perf_counter()
    if time_left is not None and time_left <= 0:
        return Status.TIME_LIMIT, None, None, None, "no time left for this batch"
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = workers
    if time_left is not None:
        solver.parameters.max_time_in_seconds = float(time_left)
    st = solver.solve(m)
    status = status_of(st, time_left is not None)
    if status == Status.OPTIMAL:
        return Status.OPTIMAL, np.asarray(solver.values(y).to_numpy(), dtype=float), None, None, ""
    incumbent = np.asarray(solver.values(y).to_numpy(), dtype=float) if st == cp_model.FEASIBLE else None
    return status, None, incumbent, None, f"CP-SAT status {solver.status_name(st)}"


def _cpsat_l2(problem: Problem, arr: ModelArrays, lo: np.ndarray, hi: np.ndarray, deadline: float | None,
              workers: int, l2_centre_all: np.ndarray | None = None) -> tuple[Status, np.ndarray | None, np.ndarray | None, float | None, str]:
    """Integer L2 of one batch by lazy chord cuts (grid targets and weights), in three steps:

    1. GLOP solves the continuous relaxation of the chord model, the windows growing until its
       answer lies inside them: its optimum ``LB`` bounds the integer optimum from below. On a
       totally unimodular batch (no rows) the optimal vertex is integral: that point is optimal.
    2. Otherwise CP-SAT solves the model with every variable held in its window (small domains,
       where chords are exact): a feasible point with objective ``UB``. The scaled objective
       ``S^2 S_w F`` is an integer, so ``S^2 S_w (UB - LB) < 1`` proves it optimal.
    3. Otherwise the lazy-chord loop runs on CP-SAT's MIP (:func:`~hierdp.solvers._chords.solve_lazily`)
       from these windows and this point.

    Measured (3,744-node count-of-counts tree): CP-SAT alone needed 11 s for the first relaxation
    round and did not finish the second in 60 s; GLOP's relaxation rounds take well under a second.
    """
    v = arr.obj_var
    grid = _grid_terms(problem, arr)
    if grid is None:
        return Status.ERROR, None, None, None, "targets or weights off the grid (unsupported() refuses these)"
    s, sw, mm, omega = grid
    unit = s * s * sw
    terms = ConvexTerms(target=arr.obj_target.astype(float), weight=arr.obj_weight.astype(float),
                        lower=lo[v].astype(float), upper=hi[v].astype(float))
    z = np.zeros(arr.n_vars) if arr.shift is None else arr.shift
    centre = None if l2_centre_all is None else l2_centre_all[arr.nodes[v]] - z[v]
    win = ChordWindows(terms, *first_windows(terms, centre))
    lp = GlopChordLP(arr, lo, hi, terms)
    lp.add_chords(*win.initial())
    lower_bound = None
    yc = None
    best: np.ndarray | None = None
    rounds = 0

    def proven(obj: float) -> float | None:
        """The bound that proves ``obj`` optimal (the scaled objective is an integer), or None."""
        if lower_bound is None:
            return None
        lb = float(np.ceil(unit * lower_bound - 1e-9)) / unit
        return min(lb, obj) if obj <= lb + 0.5 / unit else None

    while True:
        left = None if deadline is None else deadline - time.perf_counter()
        if left is not None and left <= 0:
            return Status.TIME_LIMIT, None, best, lower_bound, "no time left for the next relaxation round"
        st, yc, _ = lp.solve(left)
        rounds += 1
        if st != Status.OPTIMAL or yc is None:
            break
        # GLOP's optimum is exact to its tolerances only: the bound is the Lagrangian of its
        # multipliers, valid for any multipliers (a margin of rounding in the sum)
        q = lp.lagrangian_bound()
        q -= 1e-12 * max(1.0, abs(q)) * max(1, arr.n_vars)
        lower_bound = q if lower_bound is None else max(lower_bound, q)
        yi = np.rint(yc)
        if np.abs(yc - yi).max(initial=0.0) <= 1e-6 and _feasible(arr, yi, lo, hi):
            obj = float(terms.values(yi[v]).sum())
            if best is None or obj < float(terms.values(best[v]).sum()):
                best = yi
            bound = proven(obj)
            if bound is not None:
                return Status.OPTIMAL, yi, None, bound, f"{rounds} LP rounds (integral vertex)"
        outside = win.outside(yc[v], tol=1e-6)
        if not outside.any():
            break
        lp.add_chords(*win.grow(yc[v]))
    if yc is not None and lower_bound is not None:
        left = None if deadline is None else deadline - time.perf_counter()
        model = CpSatChordModel(arr, lo, hi, terms, s, mm, omega, unit, workers)
        inner = model.solve_restricted(win.a, win.b, left, best)
        if inner.y is not None:
            obj = float(terms.values(inner.y[v]).sum())
            if best is None or obj < float(terms.values(best[v]).sum()):
                best = inner.y
            bound = proven(obj)
            if bound is not None:
                return Status.OPTIMAL, inner.y, None, bound, f"{rounds} LP rounds, CP-SAT in the windows"
    model = CpSatChordModel(arr, lo, hi, terms, s, mm, omega, unit, workers)
    res = solve_lazily(model, terms, win.a, win.b, deadline=deadline, start=best)
    bound = res.bound if lower_bound is None or res.bound is None else max(res.bound, lower_bound)
    if res.status == Status.OPTIMAL:
        return Status.OPTIMAL, res.y, None, bound, f"{res.rounds} CP-SAT chord rounds, {res.chords} chords"
    return res.status, None, res.y, bound, res.message


def _feasible(arr: ModelArrays, y: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> bool:
    """Whether integer ``y`` meets the batch's bounds, consistency and rows exactly (model space)."""
    if np.any(y < lo) or np.any(y > hi):
        return False
    cons = np.bincount(np.repeat(np.arange(arr.cons_node.size), np.diff(arr.cons_ptr)),
                       weights=arr.cons_coef * y[arr.cons_col], minlength=arr.cons_node.size)
    if np.any(cons != arr.cons_rhs):
        return False
    if arr.lin_lower.size:
        act = np.bincount(np.repeat(np.arange(arr.lin_lower.size), np.diff(arr.lin_ptr)),
                          weights=arr.lin_coef * y[arr.lin_col], minlength=arr.lin_lower.size)
        if np.any(act < np.ceil(arr.lin_lower - 1e-9)) or np.any(act > np.floor(arr.lin_upper + 1e-9)):
            return False
    return True


def _linf_scaled(m: Any, y: list[Any], problem: Problem, arr: ModelArrays, lo: np.ndarray, hi: np.ndarray,
                 take: np.ndarray) -> Any:
    """``A_g >= omega_i |S y_i - m_i|`` for the objective terms ``take`` (groups coupled by rows):
    the objective ``sum A_g`` is ``S S_w`` times the L∞ objective of those groups, exactly, for
    targets ``m / S`` and weights ``omega / S_w`` on a grid (``unsupported()`` refuses others)."""
    from ortools.sat.python import cp_model

    v = arr.obj_var[take]
    g = arr.obj_group[take]
    x_orig = problem.target[arr.nodes[v]]
    s = grid_scale(x_orig) or 1
    sw = grid_scale(arr.obj_weight[take]) or 1
    z = np.zeros(arr.n_vars) if arr.shift is None else arr.shift
    mm = np.rint(x_orig * s).astype(np.int64) - s * np.rint(z[v]).astype(np.int64)
    om = np.rint(arr.obj_weight[take] * sw).astype(np.int64)
    dev = np.maximum(np.abs(hi[v] * s - mm), np.abs(lo[v] * s - mm)) * om
    top = np.zeros(arr.groups.size, np.int64)
    np.maximum.at(top, g, dev.astype(np.int64))
    alpha = {int(k): m.new_int_var(0, int(top[k]), f"A{int(k)}") for k in np.unique(g)}
    for q in range(v.size):
        a_q, w_q, s_y = alpha[int(g[q])], int(om[q]), s * y[v[q]]
        m.add(a_q >= w_q * s_y - w_q * int(mm[q]))
        m.add(a_q >= w_q * int(mm[q]) - w_q * s_y)
    return cp_model.LinearExpr.sum(list(alpha.values()))


def _linf_ranks(m: Any, y: list[Any], arr: ModelArrays, lo: np.ndarray, hi: np.ndarray, take: np.ndarray) -> Any:
    """``R_g >= rank(+-(y_i - x_i))`` for the objective terms ``take`` (groups not coupled to another
    by a row); returns ``sum R_g`` (see the module docstring)."""
    from ortools.sat.python import cp_model

    v = arr.obj_var[take]
    x = arr.obj_target[take]
    g_all = arr.obj_group[take]
    groups, g = np.unique(g_all, return_inverse=True)
    g = g.ravel()
    ng = groups.size
    if ng == 0:
        return cp_model.LinearExpr.sum([])
    f = np.floor(x)
    r = x - f
    # F_g per group: (group, fraction) pairs, deduplicated, rank j = position within the group
    pos = r > 0
    pairs = np.r_[np.c_[np.arange(ng), np.zeros(ng)], np.c_[g, r], np.c_[g[pos], 1.0 - r[pos]]]
    uniq, inv = np.unique(pairs, axis=0, return_inverse=True)
    inv = inv.ravel()
    first = np.searchsorted(uniq[:, 0], np.arange(ng), side="left")
    size = np.bincount(uniq[:, 0].astype(np.int64), minlength=ng)
    nt = v.size
    j_r = inv[ng: ng + nt] - first[g]
    j_1mr = np.zeros(nt, np.int64)
    j_1mr[pos] = inv[ng + nt:] - first[g[pos]]
    mg = size[g]
    # largest possible |deviation| in units of M_g bounds R_g's domain
    dev = np.maximum(np.abs(hi[v] - f) + 1, np.abs(f - lo[v]) + 1)
    rmax = np.zeros(ng, np.int64)
    np.maximum.at(rmax, g, (mg * dev).astype(np.int64))
    R = [m.new_int_var(0, int(b) + int(c), f"R{int(groups[k])}") for k, (b, c) in enumerate(zip(rmax, size, strict=True))]
    for q in range(nt):
        yq, Rq, M = y[v[q]], R[g[q]], int(mg[q])
        if pos[q]:
            m.add(Rq >= M * yq - M * int(f[q] + 1) + int(j_1mr[q]))
        else:
            m.add(Rq >= M * yq - M * int(f[q]))
        m.add(Rq >= M * int(f[q]) - M * yq + int(j_r[q]))
    return cp_model.LinearExpr.sum(R)


def _grid_terms(problem: Problem, arr: ModelArrays) -> tuple[int, int, np.ndarray, np.ndarray] | None:
    """The objective terms on their grids: ``(S, S_w, m, omega)`` with targets ``m / S``
    (recentred: minus ``S`` times the integer shift) and weights ``omega / S_w``, all integers;
    None when targets or weights are off every grid."""
    v = arr.obj_var
    x_orig = problem.target[arr.nodes[v]]
    s = grid_scale(x_orig)
    sw = grid_scale(arr.obj_weight)
    if s is None or sw is None:
        return None
    z = np.zeros(arr.n_vars) if arr.shift is None else arr.shift
    mm = np.rint(x_orig * s).astype(np.int64) - s * np.rint(z[v]).astype(np.int64)
    return s, sw, mm, np.rint(arr.obj_weight * sw).astype(np.int64)


def _glop(arr: ModelArrays, time_left: float | None
          ) -> tuple[Status, np.ndarray | None, np.ndarray | None, float | None]:
    """A continuous linf/l1 LP with GLOP (simplex), same model as the HiGHS LP.

    GLOP's presolve reports ABNORMAL (or, unrecentred at 1e10, a wrong optimum) when bounds are
    far larger than the rest of the model, as recentring makes them (measured: bounds -1e9,
    targets within 40): it runs without. With its scaling, GLOP also says ABNORMAL on infeasible
    LPs whose bounds reach 1e9 (measured on a 3-node level with a row: "infeasible" at 1e6,
    ABNORMAL at 1e9 and 1e12); without scaling it says "infeasible". So an ABNORMAL answer is
    solved again without scaling, and a second one is reported as numerical trouble."""
    t0 = time.perf_counter()
    out: tuple[Status, np.ndarray | None, np.ndarray | None, float | None] = (Status.ERROR, None, None, None)
    for params in ("use_preprocessing:false", "use_preprocessing:false use_scaling:false"):
        left = None if time_left is None else time_left - (time.perf_counter() - t0)
        if left is not None and left <= 0:
            return Status.TIME_LIMIT, None, None, None
        out = _glop_once(arr, left, params)
        if out[0] != Status.NUMERICAL:
            return out
    return out


def _glop_once(arr: ModelArrays, time_left: float | None, params: str
               ) -> tuple[Status, np.ndarray | None, np.ndarray | None, float | None]:
    from ortools.linear_solver import pywraplp

    s = pywraplp.Solver.CreateSolver("GLOP")
    s.SetSolverSpecificParametersAsString(params)
    inf = s.infinity()

    def fin(a: float) -> float:
        return float(a) if np.isfinite(a) else (inf if a > 0 else -inf)

    y = [s.NumVar(fin(a), fin(b), f"y{int(i)}") for a, b, i in zip(arr.lower, arr.upper, arr.nodes, strict=True)]

    def row(lo: float, hi: float, cols: np.ndarray, coefs: np.ndarray, extra: Sequence[tuple[Any, float]] = ()
            ) -> None:
        c = s.RowConstraint(fin(lo), fin(hi), "")
        for j, a in zip(cols, coefs, strict=True):
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
        pywraplp.Solver.ABNORMAL: Status.NUMERICAL,
        pywraplp.Solver.NOT_SOLVED: Status.TIME_LIMIT if time_left is not None else Status.ERROR,
    }.get(st, Status.ERROR), None, None, None
