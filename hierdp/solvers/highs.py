"""The ``highs`` plug-in: HiGHS (LP, MIP, convex QP) through highspy matrices or through Pyomo.

Two paths, same model (:mod:`hierdp.models.arrays`):

* ``direct`` (default when the problem has no Pyomo hooks): the arrays of
  :func:`~hierdp.models.arrays.model_arrays` become sparse matrices passed to ONE reused
  ``highspy.Highs`` object per thread, batch after batch. No Pyomo expression is ever built.
* ``pyomo`` (whenever the problem has Pyomo hooks, or ``path="pyomo"``): the indexed Pyomo model of
  :func:`~hierdp.models.pyomo.build_pyomo_model` solved by ``pyomo.contrib.solver``'s ``highs``
  (the newer interface, which accepts quadratic objectives). With hooks the whole problem is one
  model, since a hook may touch any node.

Batching: HiGHS does not exploit block-diagonal structure, so a huge batched MIP grows
superlinearly. Independent components (groups not coupled by a user row or query term) are solved
in batches of ``batch_size`` groups (MIP/LP) or ``qp_batch_size`` groups (QP: the wheel's
active-set QP solver fails on large QPs). Batches may be mapped over an executor
(:mod:`hierdp.solvers._batching`).

Exactness:

* ``mip_rel_gap = 0`` and ``qp_regularization_value = 0``; anything but a proven optimum of every
  batch is a non-optimal :class:`~hierdp.solvers.base.Status` (the registry raises
  :class:`~hierdp.solvers.base.SolverFailed`, with the best feasible point when HiGHS has one).
* Recentring: every model is expressed in ``y - z`` for a consistent integer point ``z``
  (:func:`~hierdp.models.arrays.consistent_point`), so HiGHS sees small numbers whatever the counts:
  at counts near 2^40 HiGHS otherwise ignores its own time limit (measured: no answer after 100 s
  with a limit of 20 s) and at ~1e12 reports ``kUnknown`` on LPs. Models with Pyomo hooks are not
  recentred (hooks are written in the original variables), so their magnitude is limited.
* MIP presolve: HiGHS 1.14's MIP presolve returns sub-optimal points as "optimal" on some small
  models (found by our property tests; upstream ERGO-Code/HiGHS #3043, #3073, #3094), and highspy
  is pinned to 1.14 (OR-Tools clash). So MIP presolve is off, except on integer L∞ problems with
  a totally unimodular matrix (consistency, bounds, fixed values: TopDown levels and trees without
  user rows), where presolve shortens the slowest solves (measured, CPU seconds of one 20-group
  level with groups of 2-60 children: 44 s instead of 159 s; on easier levels it ranges from 0.5x
  to 1.1x the speed of presolve off) and every batch's answer is checked by an independent
  certificate (:mod:`hierdp.solvers._verify`: no integer point in the strict box
  below each group's optimum; a closed form on levels, an LP on trees); a batch that fails it is
  solved again with presolve off, and an "infeasible" from presolve is always re-checked without.
* Integer L2 (direct path) is solved by lazy chord cuts (:mod:`hierdp.solvers._chords`, HiGHS
  back end :mod:`hierdp.solvers._highs_chords`): a MIP over the chords near the answer only, grown
  round by round in one ``Highs`` object, warm-started; no domain or proven window is needed, so
  bounds are optional and user rows and query terms (integer coefficients) are honoured. The
  certificate is the last round's MIP bound, equal to the objective. Through Pyomo (hooks) the
  epigraph is enumerated over the proven window around the continuous optimum (QP first).
* Integer L∞ on a grid (integer targets from integer noise, or binary/decimal fractions) gets an
  integer objective variable per group (:func:`alpha_unit`; measured on a county level with rows:
  0.4 s instead of a time-out at 30-600 s with a continuous one).
* Magnitude: far bounds (beyond :data:`hierdp.solvers._magnitude.FAR` of the recentring point)
  are dropped and checked after the solve (HiGHS ignored its time limit on 5-variable MIPs with
  bounds of 1e11); consistency right-hand sides within rounding of the magnitude are zero (HiGHS's
  QP said "solve error" on a rounding residue of 1e-7 at 1e9); QP answers pass a KKT check with
  HiGHS's multipliers (its unregularized active-set QP returned a wrong "optimal" on a singular
  Hessian: free-sign query terms), else are solved again with regularization 1e-7.
* Bounds: every optimal answer carries ``Solution.bound`` (MIP dual bound, LP objective, the
  Wolfe dual of the QP at HiGHS's multipliers, the chord loop's bound) and ``gap``.
* ``time_limit`` is per call: HiGHS compares its limit with the run time accumulated by a reused
  ``Highs`` object, so every run sets ``time_limit = run time so far + time left``; HiGHS's
  interrupt callbacks also stop a solve in this process at the deadline (``hard_time_limit=False``,
  ``executor=``), and ``run_batches`` stops waiting for an executor at the deadline.
* An infeasible batch is explained by HiGHS's IIS (the consistency rows, user rows and node
  bounds involved), when HiGHS finds one.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, replace
from functools import partial
from typing import Any
from collections.abc import Callable, Sequence

import numpy as np

from hierdp.models.arrays import (
    MAX_PWL_PIECES,
    ModelArrays,
    ModelInfeasible,
    ModelTooLarge,
    anchor_values,
    consistent_point,
    model_arrays,
    pwl_rows,
    query_ranges,
    recentred_magnitude,
)
from hierdp.models.problem import Problem
from hierdp.solvers import _verify
from hierdp.solvers._batching import ChunkResult, plan_batches, run_batches
from hierdp.solvers._grid import grid_scale
from hierdp.solvers._chords import first_windows, l2_centre, solve_lazily
from hierdp.solvers._highs_chords import HighsChordModel, l2_terms
from hierdp.solvers._magnitude import dropped_violated, relax_far_bounds, snap_rounding
from hierdp.solvers.base import Capabilities, Solution, Solver, Status, UnsupportedProblem, finish

#: groups per MIP batch. Measured on 2,000 integer linf groups (b in [2, 10], real targets, 2 cores,
#: presolve off): batch 5: 10.5 s, 20: 9.3 s, 50: 11.4 s, 100: 15.3 s (branch and bound closes the
#: gaps of all groups of a batch at once, so the tree grows with the batch).
DEFAULT_BATCH_SIZE = 20
#: groups per LP batch (LPs scale well: 2,000 linf groups in one LP take 0.2 s)
DEFAULT_LP_BATCH_SIZE = 5000
#: groups per continuous QP batch (the wheel's active-set QP solver breaks on large QPs)
DEFAULT_QP_BATCH_SIZE = 25
#: largest magnitude accepted: integers stay exact in float64 (values are rebuilt as z + d)
MAX_MAGNITUDE = 2.0 ** 52
#: largest magnitude of a model that cannot be recentred (Pyomo hooks): HiGHS's absolute
#: tolerances (1e-6 integrality, 1e-7 feasibility) must still resolve units
MAX_MAGNITUDE_UNSHIFTED = 1e7
#: HiGHS's QP regularization for a second try when an unregularized answer fails the KKT check
QP_RETRY_REGULARIZATION = 1e-7
#: seconds past the deadline before HiGHS's interrupt callbacks stop a solve (HiGHS's own limit
#: normally stops it first)
INTERRUPT_GRACE = 0.2
#: seconds past ``time_limit`` before a hard-limited worker is killed (HiGHS normally stops by
#: itself; this only bounds the phases where it does not look at the clock)
HARD_LIMIT_GRACE = 0.5


@dataclass(frozen=True)
class HighsOptions:
    """Options of ``solve(problem, solver="highs", ...)``.

    Attributes:
        path: ``"direct"`` or ``"pyomo"`` (default: pyomo iff the problem has hooks).
        batch_size: groups per MIP/LP batch (default 20 for MIPs, 5000 for LPs; integer L2 solves
            its relaxation QP and its MIP on the same batches).
        qp_batch_size: groups per continuous QP batch (default 25).
        mip_rel_gap: default 0 (proven optimum).
        qp_regularization_value: default 0.
        presolve: HiGHS MIP presolve (``"on"``, ``"off"``, ``"choose"``); default: ``"on"`` for
            certified integer L∞ problems (TopDown levels, trees without user rows), ``"off"`` for
            other MIPs (see module docstring).
            LPs and QPs always use HiGHS's default.
        recentre: express models in ``y - z`` (default True when the problem has no hooks).
        threads: HiGHS threads (default HiGHS's choice).
        executor: a :class:`concurrent.futures.Executor` (e.g. ``ProcessPoolExecutor(2)``, or a
            Dask cluster's ``client.get_executor()``) over which batches are mapped; Pyomo hooks
            must then be picklable (module-level functions).
        progress: show a progress bar over batches.
        integer_linf_objective: integer L∞ on a grid gets one integer objective variable per group
            (:func:`alpha_unit`; default True); False keeps the continuous ``alpha`` (the encoding
            before issue 19, for comparisons: ``experiments/bench/exact_general.py``).
        hard_time_limit: with a ``time_limit``, solve in a worker process that is killed at
            ``time_limit + HARD_LIMIT_GRACE`` if HiGHS has not stopped by then (default True;
            needs a picklable problem, i.e. module-level hook functions, and no executor: else
            HiGHS's own limit applies, which some phases overrun).
    """

    path: str | None = None
    batch_size: int | None = None
    qp_batch_size: int | None = None
    mip_rel_gap: float = 0.0
    qp_regularization_value: float = 0.0
    presolve: str | None = None
    recentre: bool | None = None
    threads: int | None = None
    executor: Any = None
    progress: bool = False
    hard_time_limit: bool = True
    integer_linf_objective: bool = True

    def __post_init__(self) -> None:
        if self.path not in (None, "direct", "pyomo"):
            raise ValueError(f"highs: path must be 'direct' or 'pyomo', got {self.path!r}")
        for name in ("batch_size", "qp_batch_size"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, (int, np.integer)) or v < 1):
                raise ValueError(f"highs: {name} must be a positive integer, got {v!r}")
        if self.presolve not in (None, "on", "off", "choose"):
            raise ValueError(f"highs: presolve must be 'on', 'off' or 'choose', got {self.presolve!r}")
        if not (0 <= float(self.mip_rel_gap) < 1):
            raise ValueError(f"highs: mip_rel_gap must be in [0, 1), got {self.mip_rel_gap!r}")


class HighsSolver(Solver):
    """HiGHS through direct highspy matrices (default) or Pyomo (hooks, ``path="pyomo"``).

    ``time_limit`` (seconds) bounds the whole call; options: :class:`HighsOptions`.
    """

    name = "highs"
    Options = HighsOptions
    capabilities = Capabilities(
        objectives=frozenset({"l2", "l1", "linf"}),
        integer=True,
        continuous=True,
        structures=frozenset({"level", "tree"}),
        features=frozenset({"weights", "bounds", "linear_constraints", "cumulative", "query_terms", "pyomo_hooks",
                            "free_sign", "missing_targets"}),
        limits={"max_magnitude": MAX_MAGNITUDE, "max_magnitude_with_hooks": MAX_MAGNITUDE_UNSHIFTED,
                "integer_l2_pwl_rows_with_hooks": MAX_PWL_PIECES, "time_limit": f"per call: HiGHS's limit, and its worker process killed at T + {HARD_LIMIT_GRACE:g} s "
                              "(the worker starts once per thread, not charged to T)",
                "tolerance": "integers exact (L2: lower bound within HiGHS's MIP gap 1e-6 of the objective); "
                             "continuous: 1e-7 feasibility, QP answers KKT-checked"},
        description="HiGHS LP/MIP/QP via highspy matrices or Pyomo (batched, recentred; integer L2 by lazy chord cuts)",
    )

    requires = ("highspy",)

    def extra_checks(self, problem: Problem) -> list[str]:
        """Refusals the capability sets cannot express (each would otherwise stop ``solve`` late)."""
        why: list[str] = []
        if problem.magnitude() >= MAX_MAGNITUDE_UNSHIFTED:
            if problem.pyomo_hooks:
                why.append(f"magnitude {problem.magnitude():.4g} with Pyomo hooks: hooked models are not recentred "
                           f"and HiGHS's absolute tolerances do not resolve units beyond {MAX_MAGNITUDE_UNSHIFTED:g}")
            else:
                spread = recentred_magnitude(problem)
                if spread >= MAX_MAGNITUDE_UNSHIFTED:
                    why.append(f"targets differ from a consistent point by up to {spread:.4g}: even recentred, the "
                               f"model holds numbers beyond {MAX_MAGNITUDE_UNSHIFTED:g}, where HiGHS's absolute "
                               "tolerances do not resolve units")
        if problem.objective == "l2" and problem.integer:
            if problem.pyomo_hooks:
                why.extend(_integer_l2_refusals(problem))  # the Pyomo model enumerates its window
            elif problem.n_query_terms and np.any(problem.queries.matrix.data != np.rint(problem.queries.matrix.data)):
                why.append("integer L2 query terms need integer coefficients (their value must be an integer)")
        return why

    def solve_problem(self, problem: Problem, *, time_limit: float | None = None, **options: Any) -> Solution:
        """Solve a supported problem; see the module docstring for the guarantees.

        With ``time_limit`` the call returns within ``time_limit + HARD_LIMIT_GRACE`` seconds plus
        the pickling of the problem, plus, on a thread's first time-limited call, the start of the
        worker process (an interpreter and the solver imports, about a second); unless
        ``hard_time_limit=False``.
        """
        opts: HighsOptions = self.parse_options(options)
        if time_limit is not None and opts.hard_time_limit and opts.executor is None and _picklable(problem):
            return _solve_with_deadline(self, problem, float(time_limit), options)
        return self._solve_here(problem, time_limit, opts)

    def _solve_here(self, problem: Problem, time_limit: float | None, opts: HighsOptions) -> Solution:
        """The solve itself, in this process."""
        path = opts.path or ("pyomo" if problem.pyomo_hooks else "direct")
        if problem.pyomo_hooks and path != "pyomo":
            raise UnsupportedProblem("highs: the direct path cannot run Pyomo hooks; use path='pyomo'")
        default_batch = DEFAULT_BATCH_SIZE if problem.integer else DEFAULT_LP_BATCH_SIZE
        batch_size = int(opts.batch_size or default_batch)
        qp_batch_size = int(opts.qp_batch_size or DEFAULT_QP_BATCH_SIZE)
        t0 = time.perf_counter()
        deadline = None if time_limit is None else t0 + float(time_limit)
        values = np.where(problem.is_fixed, problem.fixed, np.nan)
        stats: dict[str, Any] = {"path": path, "batches": 0}
        if not problem.is_free.any():
            return finish(problem, values, Status.OPTIMAL, self.name, t0, stats)

        recentre = (not problem.pyomo_hooks) if opts.recentre is None else bool(opts.recentre)
        if recentre and problem.pyomo_hooks:
            raise UnsupportedProblem("highs: a model with Pyomo hooks cannot be recentred (hooks use the original "
                                     "variables); pass recentre=False")
        is_qp = problem.objective == "l2" and not problem.integer
        batches: list[Any] = [None] if problem.pyomo_hooks else plan_batches(problem,
                                                                              qp_batch_size if is_qp else batch_size)
        certified = _verify.certificate_applies(problem)
        presolve = opts.presolve or ("on" if certified else "off")
        settings = {"mip_rel_gap": float(opts.mip_rel_gap),
                    "qp_regularization_value": float(opts.qp_regularization_value),
                    "presolve": presolve, "integer_linf_objective": bool(opts.integer_linf_objective)}
        job = _Job(
            path=path, settings=settings, threads=opts.threads, deadline=deadline,
            # the proximity window around the continuous optimum holds without user rows and query
            # terms only (models.arrays); with them the window is the bounds, and no QP is solved
            needs_center=(path == "pyomo" and problem.objective == "l2" and problem.integer
                          and not problem.n_constraints and not problem.n_query_terms),
            anchors=anchor_values(problem) if problem.objective == "l2" and problem.integer else None,
            shift=consistent_point(problem) if recentre else None,
            certify=certified and presolve != "off",
            l2_centre=l2_centre(problem) if problem.objective == "l2" and problem.integer and path == "direct" else None,
        )
        stats["recentred"] = recentre
        stats["presolve"] = presolve
        out = run_batches(partial(_chunk, job=job), problem, batches, executor=opts.executor,
                          progress=bool(opts.progress), desc=f"highs ({path})", deadline=deadline)
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
        if problem.integer:
            values = np.rint(values)
        known = [b for b in out.bounds if b is not None]
        bound = float(np.sum(known)) if known and len(known) == len(out.bounds) else None
        return finish(problem, values, Status.OPTIMAL, self.name, t0, stats, bound=bound)


def _picklable(problem: Problem) -> bool:
    if not problem.pyomo_hooks:
        return True
    import pickle

    try:
        pickle.dumps(problem.pyomo_hooks)
    except Exception:
        return False
    return True


def _solve_in_worker(problem: Problem, time_limit: float, options: dict[str, Any]) -> Solution:
    """Runs in the worker process."""
    solver = HighsSolver()
    return solver._solve_here(problem, time_limit, solver.parse_options(options))


def _solve_with_deadline(solver: HighsSolver, problem: Problem, time_limit: float, options: dict[str, Any]
                         ) -> Solution:
    """The solve in this thread's worker process, killed at ``time_limit + HARD_LIMIT_GRACE``."""
    from hierdp.solvers._deadline import DeadlineExceeded, worker

    t0 = time.perf_counter()
    w = worker()
    started = time.perf_counter()
    w.start()  # an interpreter start on a thread's first time-limited call: overhead, not solve time
    left = time_limit - (started - t0)
    opts = {k: v for k, v in options.items() if k != "hard_time_limit"}
    try:
        sol = w.call(_solve_in_worker, (problem, max(left, 0.0), opts), timeout=max(left, 0.0) + HARD_LIMIT_GRACE)
    except DeadlineExceeded:
        values = np.where(problem.is_fixed, problem.fixed, np.nan)
        stats = {"message": f"HiGHS did not stop at its time limit; its worker was stopped after "
                            f"{time.perf_counter() - t0:.2f} s", "hard_time_limit": True}
        return finish(problem, values, Status.TIME_LIMIT, solver.name, t0, stats)
    sol.wall_time = time.perf_counter() - t0
    sol.stats["hard_time_limit"] = True
    return sol


@dataclass(frozen=True)
class _Job:
    """Everything a worker needs to solve batches (picklable)."""

    path: str
    settings: dict[str, Any]
    threads: int | None
    deadline: float | None
    needs_center: bool
    anchors: np.ndarray | None
    shift: np.ndarray | None
    certify: bool
    l2_centre: np.ndarray | None = None


@dataclass
class _RunResult:
    status: Status
    x: np.ndarray | None = None  # optimal values of the batch's variables (original space)
    d: np.ndarray | None = None  # the same in the model's (recentred) space
    incumbent: np.ndarray | None = None  # a feasible point when not optimal
    bound: float | None = None
    message: str = ""


def _chunk(problem: Problem, subsets: Sequence[np.ndarray | None], *, job: _Job) -> ChunkResult:
    """Solve batches in order (runs in a worker with an executor)."""
    res = ChunkResult()
    runner = _runner(job.threads)
    for subset in subsets:
        failed = (np.arange(problem.n_groups, dtype=np.int64) if subset is None
                  else np.asarray(subset, dtype=np.int64))
        try:
            out, nodes = _solve_batch(problem, subset, job, runner)
        except ModelInfeasible as exc:
            res.status, res.message, res.failed = Status.INFEASIBLE, str(exc), failed
            return res
        except ModelTooLarge as exc:  # unsupported() predicts these; keep the true reason if not
            res.status, res.message, res.failed = Status.ERROR, f"model too large: {exc}", failed
            return res
        if out.status != Status.OPTIMAL or out.x is None:
            res.status, res.message, res.failed = Status.coerce(out.status), out.message, failed
            if out.incumbent is not None:
                res.incumbent = (nodes, out.incumbent)
            return res
        res.parts.append((nodes, out.x))
        res.bounds.append(out.bound)
    return res


def _solve_batch(problem: Problem, subset: np.ndarray | None, job: _Job, runner: _DirectRunner
                 ) -> tuple[_RunResult, np.ndarray]:
    """One batch: the lazy-chord loop (integer L2, direct path), else QP centre (integer L2 through
    Pyomo), the model, the certificate and its fallback."""
    if job.path == "direct" and problem.objective == "l2" and problem.integer:
        return _solve_l2_lazy(problem, subset, job, runner)
    center = None
    if job.needs_center:
        relaxed = model_arrays(problem, subset=subset, relax=True, shift=job.shift)
        out = runner.run(problem, relaxed, job.settings, job.deadline)
        if out.status != Status.OPTIMAL:
            return _RunResult(out.status, message=out.message), relaxed.nodes
        center = np.full(problem.n, np.nan)
        center[relaxed.nodes] = out.x
    solve = _direct_solver(problem, subset, center, job, runner) if job.path == "direct" else \
        _pyomo_solver(problem, subset, center, job)
    out, nodes = solve(job.settings)
    if out.status == Status.OPTIMAL and job.certify and out.x is not None:
        full = np.where(problem.is_fixed, problem.fixed, np.nan)
        full[nodes] = np.rint(out.x)
        if not _batch_certified(problem, full, subset):
            out, nodes = solve({**job.settings, "presolve": "off"})
    elif out.status == Status.INFEASIBLE and job.settings.get("presolve") != "off":
        # never trust an "infeasible" from presolve alone
        out, nodes = solve({**job.settings, "presolve": "off"})
    return out, nodes


def _solve_l2_lazy(problem: Problem, subset: np.ndarray | None, job: _Job, runner: _DirectRunner
                   ) -> tuple[_RunResult, np.ndarray]:
    """Integer L2 of one batch by lazy chord cuts (:mod:`hierdp.solvers._chords`): no window
    proof and no domain enumeration, so bounds are optional and rows and query terms are allowed.

    Far bounds are dropped as in every recentred model; a converged answer that breaks one is
    solved again with that bound restored."""
    arr = replace(model_arrays(problem, subset=subset, relax=True, anchors=job.anchors, shift=job.shift),
                  integer=True)
    lower, upper = np.asarray(arr.lower, dtype=float), np.asarray(arr.upper, dtype=float)
    if arr.shift is not None:
        lo, hi, drop_lo, drop_hi = relax_far_bounds(lower, upper)
    else:
        lo, hi, drop_lo, drop_hi = lower, upper, np.zeros(arr.n_vars, bool), np.zeros(arr.n_vars, bool)
    while True:
        terms = l2_terms(arr, lo, hi)
        model = HighsChordModel(runner, arr, terms, lo, hi, job.settings)
        centre = None
        if job.l2_centre is not None:
            z = np.zeros(arr.n_vars) if arr.shift is None else arr.shift
            centre = np.r_[job.l2_centre[arr.nodes[arr.obj_var]] - z[arr.obj_var], np.full(arr.n_queries, np.nan)]
        a, b = first_windows(terms, centre)
        res = solve_lazily(model, terms, a, b, deadline=job.deadline)
        if res.status == Status.OPTIMAL and res.y is not None:
            bad = dropped_violated(res.y, lower, upper, drop_lo, drop_hi)
            if bad.any():
                lo, hi = np.where(bad, lower, lo), np.where(bad, upper, hi)
                drop_lo, drop_hi = drop_lo & ~bad, drop_hi & ~bad
                continue
        break
    if res.status == Status.OPTIMAL and res.y is not None:
        return _RunResult(Status.OPTIMAL, x=arr.unshift(res.y), d=res.y, bound=res.bound), arr.nodes
    out = _RunResult(res.status, bound=res.bound, message=res.message)
    if res.y is not None:
        out.incumbent = arr.unshift(res.y)
        out.message = (f"best feasible objective of the batch {res.objective:.6g}, proven lower bound "
                       f"{res.bound if res.bound is not None else float('nan'):.6g} after {res.rounds} chord rounds")
    return out, arr.nodes


def _batch_certified(problem: Problem, full: np.ndarray, subset: np.ndarray | None) -> bool:
    """The strict-box certificate on the groups of one batch (values outside it are NaN)."""
    labels = problem.groups().copy()
    if subset is not None:
        keep = np.isin(labels, subset)
        labels[~keep] = -1
    vals = np.where(labels >= 0, full, np.nan_to_num(problem.fixed))
    failing = _verify.integer_linf_uncertified(problem, vals, labels)
    return failing is not None and failing.size == 0


def _direct_solver(problem: Problem, subset: np.ndarray | None, center: np.ndarray | None, job: _Job,
                   runner: _DirectRunner) -> Callable[[dict[str, Any]], tuple[_RunResult, np.ndarray]]:
    arr = model_arrays(problem, subset=subset, l2_center=center, anchors=job.anchors, shift=job.shift)

    def solve(settings: dict[str, Any]) -> tuple[_RunResult, np.ndarray]:
        return runner.run(problem, arr, settings, job.deadline), arr.nodes

    return solve


def _pyomo_solver(problem: Problem, subset: np.ndarray | None, center: np.ndarray | None, job: _Job
                  ) -> Callable[[dict[str, Any]], tuple[_RunResult, np.ndarray]]:
    from hierdp.models.pyomo import build_pyomo_model, values_from_model

    model = build_pyomo_model(problem, subset=subset, l2_center=center, shift=job.shift)
    nodes = np.asarray([int(i) for i in model.free], dtype=np.int64)

    def solve(settings: dict[str, Any]) -> tuple[_RunResult, np.ndarray]:
        status, ok, bound = _solve_pyomo(model, problem, settings, job.threads, job.deadline)
        if not ok:
            return _RunResult(status), nodes
        v = values_from_model(model, problem)
        return _RunResult(Status.OPTIMAL, x=v[nodes], bound=bound), nodes

    return solve


def _integer_l2_refusals(problem: Problem) -> list[str]:
    """What ``model_arrays`` would refuse for an integer-L2 problem, predicted before solving
    (the same windows: :mod:`hierdp.models.arrays`)."""
    free = problem.is_free
    term = free & ~np.isnan(problem.target) & (problem.weights > 0)
    lo = np.ceil(problem.effective_lower - 1e-9)
    hi = np.floor(problem.upper + 1e-9)
    if problem.nonnegative:
        anc = anchor_values(problem)
        hi = np.where(np.isnan(anc), hi, np.minimum(hi, np.floor(np.nan_to_num(anc) + 1e-9)))
    width = hi - lo
    grp = problem.groups()
    ng = max(problem.n_groups, 1)
    gid = np.maximum(grp, 0)
    why: list[str] = []
    if not (problem.n_constraints or problem.n_query_terms or problem.pyomo_hooks):
        # the proven window around the continuous optimum: radius 1 on simple level groups
        # (every variable has a term, equal weights), else the group's size
        size = np.bincount(grp[free], minlength=ng).astype(float)
        terms = np.bincount(grp[term], minlength=ng)
        wmin = np.full(ng, np.inf)
        wmax = np.full(ng, -np.inf)
        np.minimum.at(wmin, grp[term], problem.weights[term])
        np.maximum.at(wmax, grp[term], problem.weights[term])
        simple = (problem.structure == "level") & (terms == size) & (wmin == wmax)
        radius = np.where(simple, 1.0, size)[gid] + 1e-4
        pieces = np.minimum(width, 2 * np.floor(radius))
    else:
        bad = term & ~np.isfinite(width)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            why.append(f"integer L2 epigraph needs a bounded domain: {problem._label(i)} is unbounded "
                       "(with user rows, query terms or hooks the proven window does not apply: give bounds or "
                       "fix an ancestor)")
            return why
        pieces = width
    per_group = np.bincount(gid[term], weights=np.maximum(pieces[term], 1), minlength=ng)
    if per_group.size and per_group.max() > MAX_PWL_PIECES:
        g = int(np.argmax(per_group))
        why.append(f"integer L2 epigraph of group {g} would need {int(per_group[g]):,} chord rows "
                   f"(> {MAX_PWL_PIECES:,}): too large for an exact MIP (use projection or costtable)")
    if problem.n_query_terms:
        q = problem.queries
        if np.any(q.matrix.data != np.rint(q.matrix.data)):
            why.append("integer L2 query terms need integer coefficients (their value must be an integer)")
        else:
            arr = model_arrays(problem, relax=True)
            qlo, qhi = query_ranges(problem, arr)
            if np.any(~np.isfinite(qlo) | ~np.isfinite(qhi)):
                why.append("integer L2 query terms need a bounded range (bound their nodes)")
            elif np.maximum(np.floor(qhi + 1e-9) - np.ceil(qlo - 1e-9), 1).sum() > MAX_PWL_PIECES:
                why.append(f"integer L2 query terms would need more than {MAX_PWL_PIECES:,} chord rows")
    return why


def _status_of(model_status: Any) -> Status:
    text = str(model_status).split(".")[-1]
    return {
        "kOptimal": Status.OPTIMAL,
        "kTimeLimit": Status.TIME_LIMIT,
        "kInfeasible": Status.INFEASIBLE,
        "kUnboundedOrInfeasible": Status.INFEASIBLE_OR_UNBOUNDED,
        "kUnbounded": Status.UNBOUNDED,
        "kIterationLimit": Status.ITERATION_LIMIT,
        "kSolutionLimit": Status.ITERATION_LIMIT,
        "kInterrupt": Status.INTERRUPTED,
        "kMemoryLimit": Status.ERROR,
        "kObjectiveBound": Status.ITERATION_LIMIT,
        "kObjectiveTarget": Status.ITERATION_LIMIT,
    }.get(text, Status.ERROR)


_LOCAL = threading.local()


def _runner(threads: int | None) -> _DirectRunner:
    """This thread's reused ``Highs`` object: creating one per batch costs ~2x on small batches,
    and one object must not be shared between threads (executors)."""
    r = getattr(_LOCAL, "runner", None)
    if r is None or r.threads != threads:
        r = _LOCAL.runner = _DirectRunner(threads)
    return r


class _DirectRunner:
    """One reused ``highspy.Highs`` object fed with sparse matrices, batch after batch.

    Besides HiGHS's own ``time_limit``, its interrupt callbacks (simplex, IPM, MIP) check the
    clock: a solve in this process (``hard_time_limit=False``, ``executor=``) stops at its
    deadline even in a phase that overruns HiGHS's limit (the interrupted solve is reported as a
    time limit, with HiGHS's feasible point when it has one)."""

    def __init__(self, threads: int | None) -> None:
        import highspy
        from highspy import cb

        self.threads = threads
        self.hs = highspy
        self.deadline: float | None = None
        self.h = highspy.Highs()
        self.h.setOptionValue("output_flag", False)
        if threads:
            self.h.setOptionValue("threads", int(threads))
        self.h.setCallback(self._interrupt, None)
        for kind in (cb.HighsCallbackType.kCallbackSimplexInterrupt, cb.HighsCallbackType.kCallbackIpmInterrupt,
                     cb.HighsCallbackType.kCallbackMipInterrupt):
            self.h.startCallback(kind)

    def _interrupt(self, kind: Any, message: Any, data_out: Any, data_in: Any, user_data: Any) -> None:
        # set both ways: HiGHS keeps the flag of an earlier interrupted run
        data_in.user_interrupt = self.deadline is not None and time.perf_counter() > self.deadline + INTERRUPT_GRACE

    def status(self) -> Status:
        """This object's last model status; an interrupt by the deadline is a time limit."""
        status = _status_of(self.h.getModelStatus())
        if status == Status.INTERRUPTED and self.deadline is not None and time.perf_counter() > self.deadline:
            return Status.TIME_LIMIT
        return status

    def run(self, problem: Problem, arr: ModelArrays, settings: dict[str, Any], deadline: float | None
            ) -> _RunResult:
        """Solve one batch; values are returned in the original space (shift added back).

        Recentred models drop their far bounds (:mod:`hierdp.solvers._magnitude`) and restore the
        ones the answer breaks; a QP answer must pass :func:`qp_kkt` (else it is solved again with
        HiGHS's QP regularization, then reported as numerical trouble)."""
        if arr.shift is not None and not arr.integer:
            arr = replace(arr, cons_rhs=snap_rounding(arr.cons_rhs, problem.magnitude()))
        lp, hessian = matrices(arr, alpha_unit(arr) if settings.get("integer_linf_objective", True) else None)
        nv = arr.n_vars
        lower, upper = np.asarray(arr.lower, dtype=float), np.asarray(arr.upper, dtype=float)
        if arr.shift is not None:
            lo, hi, drop_lo, drop_hi = relax_far_bounds(lower, upper)
        else:
            lo, hi, drop_lo, drop_hi = lower, upper, np.zeros(nv, bool), np.zeros(nv, bool)
        col_lower = np.asarray(lp.col_lower_, dtype=float)
        col_upper = np.asarray(lp.col_upper_, dtype=float)
        while True:
            lp.col_lower_ = np.r_[lo, col_lower[nv:]]
            lp.col_upper_ = np.r_[hi, col_upper[nv:]]
            out = self._run_once(problem, arr, lp, hessian, settings, deadline)
            if out.status != Status.OPTIMAL or out.d is None:
                return out
            bad = dropped_violated(out.d, lower, upper, drop_lo, drop_hi)
            if not bad.any():
                return out
            # the relaxation's answer breaks a dropped bound: restore it and solve again
            lo, hi = np.where(bad, lower, lo), np.where(bad, upper, hi)
            drop_lo, drop_hi = drop_lo & ~bad, drop_hi & ~bad

    def _run_once(self, problem: Problem, arr: ModelArrays, lp: Any, hessian: Any, settings: dict[str, Any],
                  deadline: float | None) -> _RunResult:
        hs = self.hs
        h = self.h
        h.clearModel()
        h.setOptionValue("mip_rel_gap", float(settings["mip_rel_gap"]))
        h.setOptionValue("qp_regularization_value", float(settings["qp_regularization_value"]))
        h.setOptionValue("presolve", settings["presolve"] if arr.integer else "choose")
        if not self._set_time_limit(deadline):
            return _RunResult(Status.TIME_LIMIT, message="no time left for this batch")
        if hessian is not None:
            model = hs.HighsModel()
            model.lp_ = lp
            model.hessian_ = hessian
            h.passModel(model)
        else:
            h.passModel(lp)
        h.run()
        status = self.status()
        info = h.getInfo()
        if status == Status.OPTIMAL:
            sol = h.getSolution()
            x = np.asarray(sol.col_value, dtype=float)
            bound = float(info.mip_dual_bound) if arr.integer else float(info.objective_function_value)
            if hessian is not None:
                ok, kkt_bound, why = qp_kkt(lp, hessian, sol)
                if not ok:
                    if float(settings["qp_regularization_value"]) == 0.0:
                        # HiGHS 1.14's active-set QP returns wrong "optimal" points on singular
                        # Hessians (free-sign query terms) without regularization
                        retry = {**settings, "qp_regularization_value": QP_RETRY_REGULARIZATION}
                        return self._run_once(problem, arr, lp, hessian, retry, deadline)
                    return _RunResult(Status.NUMERICAL, message=f"HiGHS's QP answer fails its KKT check: {why}")
                bound = kkt_bound
            d = x[: arr.n_vars]
            return _RunResult(Status.OPTIMAL, x=arr.unshift(d), d=d, bound=bound if math.isfinite(bound) else None)
        out = _RunResult(status)
        if status == Status.TIME_LIMIT and int(info.primal_solution_status) == 2:  # kSolutionStatusFeasible
            x = np.asarray(h.getSolution().col_value, dtype=float)[: arr.n_vars]
            out.incumbent = arr.unshift(np.rint(x) if arr.integer else x)
            out.message = f"best feasible objective of the batch {info.objective_function_value:.6g}"
            if math.isfinite(float(info.mip_dual_bound)):
                out.bound = float(info.mip_dual_bound)
        if status == Status.INFEASIBLE:
            out.message = self._explain(problem, arr)
        return out

    def _set_time_limit(self, deadline: float | None) -> bool:
        """HiGHS compares ``time_limit`` with the run time this object accumulated over every
        earlier solve: the limit of this solve is "time so far + time left". False: no time left."""
        self.deadline = deadline
        if deadline is None:
            self.h.setOptionValue("time_limit", math.inf)
            return True
        left = deadline - time.perf_counter()
        if left <= 0:
            return False
        self.h.setOptionValue("time_limit", float(self.h.getRunTime() + left))
        return True

    def _explain(self, problem: Problem, arr: ModelArrays) -> str:
        """The constraints and bounds of HiGHS's IIS, named (empty when HiGHS finds none)."""
        try:
            self.h.setOptionValue("iis_strategy", 2)
            _, iis = self.h.getIis()
            self.h.setOptionValue("iis_strategy", 0)
            if not iis.valid_:
                return ""
            rows = [int(r) for r in iis.row_index_]
            cols = [int(c) for c in iis.col_index_ if int(c) < arr.n_vars]
        except Exception:  # an explanation is a courtesy; never fail the solve for it
            return ""
        nc, nl = arr.cons_node.size, arr.lin_ids.size
        names = []
        cons = problem.constraints if problem.n_constraints else None
        for r in rows[:6]:
            if r < nc:
                names.append(f"consistency of {problem._label(int(arr.cons_node[r]))}")
            elif r < nc + nl and cons is not None:
                names.append(f"linear constraint {cons.name(int(arr.lin_ids[r - nc]))}")
        if cols:
            names.append("bounds of " + ", ".join(problem._label(int(arr.nodes[c])) for c in cols[:6]))
        return ("irreducible infeasible set: " + "; ".join(names)) if names else ""


def qp_kkt(lp: Any, hessian: Any, sol: Any, tol: float = 1e-6) -> tuple[bool, float, str]:
    """Check HiGHS's QP answer against the KKT conditions of ``min 1/2 y'Hy + c'y`` over its rows
    and bounds, with HiGHS's multipliers (``Hy + c = A' row_dual + col_dual``).

    Returns ``(ok, bound, why)``: ``bound`` is the Wolfe dual objective at those multipliers (a
    lower bound of the optimum up to the stationarity residual checked here), ``why`` what failed.
    Tolerances: stationarity ``tol * max(1, |Hy|, |c|)`` per column, complementarity within HiGHS's
    feasibility tolerance ``1e-7`` (scaled by the bound's size)."""
    from scipy.sparse import csc_matrix

    n, m = int(lp.num_col_), int(lp.num_row_)
    y = np.asarray(sol.col_value, dtype=float)
    lam = np.asarray(sol.row_dual, dtype=float)
    mu = np.asarray(sol.col_dual, dtype=float)
    if not sol.dual_valid or y.size != n or lam.size != m or mu.size != n:
        return False, -math.inf, "no valid dual values"
    a = csc_matrix((np.asarray(lp.a_matrix_.value_, dtype=float), np.asarray(lp.a_matrix_.index_),
                    np.asarray(lp.a_matrix_.start_)), shape=(m, n))
    low = csc_matrix((np.asarray(hessian.value_, dtype=float), np.asarray(hessian.index_),
                      np.asarray(hessian.start_)), shape=(n, n))
    hmat = low + low.T - csc_matrix((low.diagonal(), (np.arange(n), np.arange(n))), shape=(n, n))
    hy = hmat @ y
    c = np.asarray(lp.col_cost_, dtype=float)
    resid = hy + c - a.T @ lam - mu
    scale = tol * np.maximum(1.0, np.maximum(np.abs(hy), np.abs(c)))
    if np.any(np.abs(resid) > scale):
        j = int(np.argmax(np.abs(resid) / scale))
        return False, -math.inf, f"stationarity residual {resid[j]:.3g} at column {j}"
    col_lo, col_hi = np.asarray(lp.col_lower_, dtype=float), np.asarray(lp.col_upper_, dtype=float)
    row_lo, row_hi = np.asarray(lp.row_lower_, dtype=float), np.asarray(lp.row_upper_, dtype=float)
    act = a @ y
    feas = 1e-7
    dual_tol = tol * max(1.0, float(np.abs(c).max(initial=0.0)), float(np.abs(hy).max(initial=0.0)))

    def away(v: np.ndarray, b: np.ndarray) -> np.ndarray:
        """A multiplier pushes against a bound only when the value sits at that bound."""
        fb = np.nan_to_num(b)
        return ~np.isfinite(b) | (np.abs(v - fb) > feas * np.maximum(1.0, np.abs(fb)))

    bad_col = ((mu > dual_tol) & away(y, col_lo)) | ((mu < -dual_tol) & away(y, col_hi))
    bad_row = ((lam > dual_tol) & away(act, row_lo)) | ((lam < -dual_tol) & away(act, row_hi))
    if bad_col.any() or bad_row.any():
        return False, -math.inf, "complementarity fails (a multiplier on a bound the answer does not reach)"
    # multipliers below the tolerance are zero (their bound may be infinite)
    mu_c = np.where(np.abs(mu) > dual_tol, mu, 0.0)
    lam_c = np.where(np.abs(lam) > dual_tol, lam, 0.0)
    side_col = np.where(mu_c > 0, col_lo, np.where(mu_c < 0, col_hi, 0.0))
    side_row = np.where(lam_c > 0, row_lo, np.where(lam_c < 0, row_hi, 0.0))
    dual = -0.5 * float(y @ hy) + float(lam_c @ side_row) + float(mu_c @ side_col) + float(lp.offset_)
    primal = 0.5 * float(y @ hy) + float(c @ y) + float(lp.offset_)
    return True, min(dual, primal), ""


def alpha_unit(arr: ModelArrays) -> int | None:
    """``S S_w`` when an integer L∞ batch (without query terms) has targets and weights on a grid
    (:mod:`hierdp.solvers._grid`), else None: then every group's optimum is a multiple of
    ``1 / (S S_w)`` and :func:`matrices` makes ``alpha_g = A_g / (S S_w)`` with an integer ``A_g``.

    Measured on a real county level (437 counties, counts to 5.1 M, integer targets, a within-state
    cap, a cross-state cap and a lower bound): continuous ``alpha`` reached the 30 s limit with
    the bound 3571.6 below the optimum 3573; integer ``A_g`` proved 3573 in 0.4 s (the LP bound
    rounds up, and branching on ``A_g`` closes the gap that the L∞ symmetry leaves open)."""
    if not (arr.integer and arr.objective == "linf") or arr.n_queries:
        return None
    s = grid_scale(arr.obj_target)
    sw = grid_scale(arr.obj_weight)
    return None if s is None or sw is None else s * sw


def matrices(arr: ModelArrays, unit: int | None = None) -> tuple[Any, Any]:
    """``(HighsLp, HighsHessian | None)`` of a batch.

    Columns: ``y`` (node variables), then ``alpha`` (linf: node groups, then query blocks) or ``t``
    (l1 / integer l2: node terms, then query terms). Rows: consistency, user rows, objective rows.
    With ``unit`` (:func:`alpha_unit`), L∞'s ``alpha`` columns are integers in units of
    ``1 / unit`` and their rows are scaled by ``unit`` (integer coefficients).
    """
    import highspy as hs
    from scipy.sparse import coo_matrix, csc_matrix, diags

    nv = arr.n_vars
    obj = arr.objective
    nt = arr.obj_var.size
    nq = arr.n_queries
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    rlo: list[np.ndarray] = []
    rhi: list[np.ndarray] = []
    nrow = 0

    def add(r: np.ndarray, c: np.ndarray, v: np.ndarray, lo: np.ndarray, hi: np.ndarray, count: int) -> None:
        nonlocal nrow
        rows.append(r + nrow)
        cols.append(c)
        vals.append(v)
        rlo.append(lo)
        rhi.append(hi)
        nrow += count

    def csr_rows(ptr: np.ndarray) -> np.ndarray:
        return np.repeat(np.arange(ptr.size - 1), np.diff(ptr))

    nc = arr.cons_node.size
    add(csr_rows(arr.cons_ptr), arr.cons_col, arr.cons_coef, arr.cons_rhs, arr.cons_rhs, nc)
    nl = arr.lin_lower.size
    add(csr_rows(arr.lin_ptr), arr.lin_col, arr.lin_coef, arr.lin_lower, arr.lin_upper, nl)
    q_row = csr_rows(arr.q_ptr)

    cost = np.zeros(nv)
    aux_lo = np.zeros(0)
    hessian = None
    offset = 0.0
    x, w = arr.obj_target, arr.obj_weight
    if obj in ("linf", "l1"):
        naux = arr.n_linf_groups if obj == "linf" else nt + nq
        aux_of_term = nv + (arr.obj_group if obj == "linf" else np.arange(nt))
        aux_of_q = nv + (arr.q_group if obj == "linf" else nt + np.arange(nq))
        term = np.arange(nt)
        q = np.arange(nq)
        # w y - aux <= w x  and  -w y - aux <= -w x (the same for query values a . y)
        scale = float(unit) if unit is not None and obj == "linf" else 1.0
        for sign in (1.0, -1.0):
            add(np.r_[term, term], np.r_[arr.obj_var, aux_of_term], np.r_[sign * scale * w, -np.ones(nt)],
                np.full(nt, -np.inf), np.rint(sign * scale * w * x) if scale != 1.0 else sign * w * x, nt)
            if nq:
                add(np.r_[q_row, q], np.r_[arr.q_col, aux_of_q], np.r_[sign * arr.q_weight[q_row] * arr.q_coef,
                                                                      -np.ones(nq)],
                    np.full(nq, -np.inf), sign * arr.q_weight * arr.q_target, nq)
        cost = np.r_[cost, np.full(naux, 1.0 / scale)]
        aux_lo = np.zeros(naux)
    elif not arr.integer:
        naux = 0
        cost[arr.obj_var] = -2.0 * w * x
        offset = float(np.sum(w * x * x))
        diag = np.zeros(nv)
        diag[arr.obj_var] = 2.0 * w
        hmat = diags(diag).tocsc()
        if nq:
            a = csc_matrix((arr.q_coef, (q_row, arr.q_col)), shape=(nq, nv))
            hmat = (hmat + 2.0 * (a.T @ diags(arr.q_weight) @ a)).tocsc()
            cost += -2.0 * (a.T @ (arr.q_weight * arr.q_target))
            offset += float(np.sum(arr.q_weight * arr.q_target ** 2))
        from scipy.sparse import tril

        low = tril(hmat, format="csc")
        low.sum_duplicates()
        low.eliminate_zeros()
        hessian = hs.HighsHessian()
        hessian.dim_ = nv
        hessian.format_ = hs.HessianFormat.kTriangular
        hessian.start_ = low.indptr.astype(np.int32)
        hessian.index_ = low.indices.astype(np.int32)
        hessian.value_ = low.data.astype(float)
    else:
        naux = nt + nq
        term, _, slope, intercept = pwl_rows(arr)
        npc = term.size
        r = np.arange(npc)
        # t - slope * y >= intercept
        add(np.r_[r, r], np.r_[nv + term, arr.obj_var[term]], np.r_[np.ones(npc), -slope],
            intercept, np.full(npc, np.inf), npc)
        if nq:
            qterm, _, qslope, qint = pwl_rows(arr, queries=True)
            nqp = qterm.size
            # rows of qterm: t_q - slope * (a_q . y) >= intercept; expand a_q's entries
            counts = np.diff(arr.q_ptr)[qterm]
            r_rep = np.repeat(np.arange(nqp), counts)
            start = np.repeat(arr.q_ptr[qterm], counts)
            within = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
            e = start + within
            add(np.r_[np.arange(nqp), r_rep], np.r_[nv + nt + qterm, arr.q_col[e]],
                np.r_[np.ones(nqp), -qslope[r_rep] * arr.q_coef[e]], qint, np.full(nqp, np.inf), nqp)
        cost = np.r_[cost, np.ones(naux)]
        aux_lo = np.zeros(naux)

    ncol = nv + naux
    a = coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(nrow, ncol)).tocsc()
    a.sum_duplicates()
    lp = hs.HighsLp()
    lp.num_col_ = ncol
    lp.num_row_ = nrow
    lp.col_cost_ = cost
    lp.col_lower_ = np.r_[arr.lower, aux_lo]
    lp.col_upper_ = np.r_[arr.upper, np.full(naux, np.inf)]
    lp.row_lower_ = np.concatenate(rlo)
    lp.row_upper_ = np.concatenate(rhi)
    lp.offset_ = offset
    lp.a_matrix_.format_ = hs.MatrixFormat.kColwise
    lp.a_matrix_.start_ = a.indptr.astype(np.int32)
    lp.a_matrix_.index_ = a.indices.astype(np.int32)
    lp.a_matrix_.value_ = a.data
    lp.a_matrix_.num_col_ = ncol
    lp.a_matrix_.num_row_ = nrow
    # an LP wants an integrality array of zeros (continuous), not an empty one
    integrality = np.zeros(ncol, dtype=np.uint8)
    if arr.integer:
        integrality[:nv] = 1
        if unit is not None and obj == "linf":
            integrality[nv:] = 1
    lp.integrality_ = [hs.HighsVarType.kInteger if v else hs.HighsVarType.kContinuous for v in integrality]
    return lp, hessian


def _solve_pyomo(model: Any, problem: Problem, settings: dict[str, Any], threads: int | None,
                 deadline: float | None) -> tuple[Status, bool, float | None]:
    """One batch model through Pyomo's ``pyomo.contrib.solver`` HiGHS interface."""
    from pyomo.contrib.solver.common.factory import SolverFactory
    from pyomo.contrib.solver.common.results import SolutionStatus, TerminationCondition

    opt = SolverFactory("highs")
    solver_options = {k: v for k, v in settings.items() if k != "integer_linf_objective"}  # ours, not HiGHS's
    kwargs: dict[str, Any] = {
        "load_solutions": False,
        "raise_exception_on_nonoptimal_result": False,
        "solver_options": solver_options,
    }
    if threads:
        kwargs["threads"] = int(threads)
    if deadline is not None:
        left = deadline - time.perf_counter()
        if left <= 0:
            return Status.TIME_LIMIT, False, None
        kwargs["time_limit"] = float(left)
    if not (problem.objective == "l2" and not problem.integer):
        solver_options.pop("qp_regularization_value", None)
    if not problem.integer:
        solver_options.pop("presolve", None)
    res = opt.solve(model, **kwargs)
    tc = res.termination_condition
    if tc == TerminationCondition.convergenceCriteriaSatisfied and res.solution_status == SolutionStatus.optimal:
        res.solution_loader.load_vars()
        bound = getattr(res, "objective_bound", None)
        bound = float(bound) if bound is not None and math.isfinite(float(bound)) else None
        return Status.OPTIMAL, True, bound
    return {
        TerminationCondition.maxTimeLimit: Status.TIME_LIMIT,
        TerminationCondition.provenInfeasible: Status.INFEASIBLE,
        TerminationCondition.infeasibleOrUnbounded: Status.INFEASIBLE_OR_UNBOUNDED,
        TerminationCondition.unbounded: Status.UNBOUNDED,
        TerminationCondition.iterationLimit: Status.ITERATION_LIMIT,
    }.get(tc, Status.ERROR), False, None


# older private name (the ortools plug-in imported it before the planner moved to _batching)
_batches = plan_batches
