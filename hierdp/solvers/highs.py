"""The ``highs`` plug-in: HiGHS (LP, MIP, convex QP) through highspy matrices or through Pyomo.

Two paths, same model (:mod:`hierdp.models.pyomo_model`):

* ``direct`` (default when the problem has no Pyomo hooks): the arrays of
  :func:`~hierdp.models.pyomo_model.model_arrays` become sparse matrices passed to ONE reused
  ``highspy.Highs`` object, batch after batch. No Pyomo expression is ever built.
* ``pyomo`` (whenever the problem has Pyomo hooks, or ``path="pyomo"``): the indexed Pyomo model of
  :func:`~hierdp.models.pyomo_model.build_pyomo_model` solved by ``pyomo.contrib.solver``'s
  ``highs`` (the newer interface, which accepts quadratic objectives). With hooks the whole
  problem is one model, since a hook may touch any node.

Batching: HiGHS does not exploit block-diagonal structure, so a huge batched MIP grows
superlinearly. Independent components (groups not coupled by a user linear constraint) are solved
in batches of ``batch_size`` groups (MIP/LP) or ``qp_batch_size`` groups (QP: the wheel's
active-set QP solver fails on large QPs). Defaults come from measurement on integer linf groups.
Batches may be mapped over an executor (:mod:`hierdp.solvers._batching`).

Exactness: ``mip_rel_gap = 0`` and ``qp_regularization_value = 0`` by default; anything but a
proven optimum of every batch returns a non-optimal status (the registry raises SolverFailed).
Integer L2 is a MIP over the exact piecewise-linear epigraph, restricted to the proven window
around the continuous optimum (solved first as a QP on the same batch).
"""

from __future__ import annotations

import threading
import time
from functools import partial
from typing import Any, Sequence

import numpy as np

from hierdp.models.problem import Problem
from hierdp.models.pyomo_model import (
    ModelArrays,
    ModelInfeasible,
    ModelTooLarge,
    anchor_values,
    batch_components,
    build_pyomo_model,
    model_arrays,
    pwl_rows,
    values_from_model,
)
from hierdp.solvers._batching import run_batches
from hierdp.solvers.base import Capabilities, Solution, Solver, UnsupportedProblem, finish

#: groups per MIP batch. Measured on 2,000 integer linf groups (b in [2, 10], real targets, 2 cores,
#: presolve off): batch 5: 10.5 s, 20: 9.3 s, 50: 11.4 s, 100: 15.3 s; with presolve on: 20: 12.8 s,
#: 200: 21.2 s, 500: > 240 s (branch and bound closes the gaps of all groups of a batch at once, so
#: the tree grows with the batch).
DEFAULT_BATCH_SIZE = 20
#: groups per LP batch (LPs scale well: 2,000 linf groups in one LP take 0.2 s)
DEFAULT_LP_BATCH_SIZE = 5000
#: groups per continuous QP batch. Measured on 2,000 l2 groups: 10-25: 0.2 s, 50: 0.4 s, 100: 1.7 s,
#: 200: 6.9 s, 1,000: fails after 180 s (the wheel's active-set QP solver breaks on large QPs).
DEFAULT_QP_BATCH_SIZE = 25

_OPTIONS = {"path", "batch_size", "qp_batch_size", "mip_rel_gap", "qp_regularization_value", "threads", "presolve",
            "executor", "progress"}


class HighsSolver(Solver):
    """HiGHS through direct highspy matrices (default) or Pyomo (hooks, ``path="pyomo"``).

    Options of ``solve(problem, solver="highs", ...)``:
        time_limit: seconds for the whole problem (all batches).
        path: ``"direct"`` or ``"pyomo"`` (default: pyomo iff the problem has hooks).
        batch_size: groups per MIP/LP batch (default 20 for MIPs, 5000 for LPs; integer L2 solves
            its relaxation QP and its MIP on the same batches); qp_batch_size: groups per
            continuous QP batch (default 25).
        mip_rel_gap: default 0 (proven optimum). qp_regularization_value: default 0.
        presolve: HiGHS presolve for MIPs, default ``"off"`` (HiGHS 1.14 MIP presolve bugs, see
            ``_solve``); LPs and QPs always use HiGHS's default.
        threads: HiGHS threads (default HiGHS's choice).
        executor: a :class:`concurrent.futures.Executor` (e.g. ``ProcessPoolExecutor(2)``, or a
            Dask cluster's ``client.get_executor()``) over which batches are mapped; Pyomo hooks
            must then be picklable (module-level functions).
        progress: show a progress bar over batches.
    """

    name = "highs"
    capabilities = Capabilities(
        objectives=frozenset({"l2", "l1", "linf"}),
        integer=True,
        continuous=True,
        structures=frozenset({"level", "tree"}),
        weights=True,
        bounds=True,
        linear_constraints=True,
        pyomo_hooks=True,
        free_sign=True,
        description="HiGHS LP/MIP/QP via highspy matrices or Pyomo (batched; integer L2 as exact PWL MIP)",
    )

    requires = ("highspy",)

    def _solve(self, problem: Problem, *, time_limit: float | None = None, **options: Any) -> Solution:
        unknown = set(options) - _OPTIONS
        if unknown:
            raise TypeError(f"highs: unknown option(s) {sorted(unknown)}; known: {sorted(_OPTIONS)}")
        path = options.get("path") or ("pyomo" if problem.pyomo_hooks else "direct")
        if path not in ("direct", "pyomo"):
            raise ValueError(f"highs: path must be 'direct' or 'pyomo', got {path!r}")
        if problem.pyomo_hooks and path != "pyomo":
            raise UnsupportedProblem("highs: the direct path cannot run Pyomo hooks; use path='pyomo'")
        default_batch = DEFAULT_BATCH_SIZE if problem.integer else DEFAULT_LP_BATCH_SIZE
        batch_size = int(options.get("batch_size") or default_batch)
        qp_batch_size = int(options.get("qp_batch_size") or DEFAULT_QP_BATCH_SIZE)
        if batch_size < 1 or qp_batch_size < 1:
            raise ValueError("highs: batch sizes must be positive")
        settings: dict[str, Any] = {
            "mip_rel_gap": float(options.get("mip_rel_gap", 0.0)),
            "qp_regularization_value": float(options.get("qp_regularization_value", 0.0)),
            # HiGHS 1.14 MIP presolve returns sub-optimal points as "optimal" on small models
            # (found by our property test; upstream ERGO-Code/HiGHS #3043, #3073, #3094), and
            # highspy is pinned to 1.14 (ortools clash): MIP presolve is off unless asked for.
            # Measured against the costtable DP / CP-SAT / brute force on random trees: integer
            # L2 wrong 1 in 700 with presolve, L1 1 in 466 (9.0 "optimal" vs 5.0), none with it
            # off. The price: ~2.7x on TopDown L-inf levels (3.2 s vs 1.2 s, 3,000 groups).
            "presolve": str(options.get("presolve", "off" if problem.integer else "choose")),
        }
        threads = options.get("threads")
        t0 = time.perf_counter()
        deadline = None if time_limit is None else t0 + float(time_limit)
        values = np.where(problem.is_fixed, problem.fixed, np.nan)
        stats: dict[str, Any] = {"path": path, "batches": 0}
        if not problem.is_free.any():
            return finish(problem, values, "optimal", self.name, t0, stats)

        is_qp = problem.objective == "l2" and not problem.integer
        if problem.pyomo_hooks:
            batches = [None]  # a hook may touch any node: one model
        else:
            batches = _batches(problem, qp_batch_size if is_qp else batch_size)
        needs_center = problem.objective == "l2" and problem.integer and not problem.pyomo_hooks
        anchors = anchor_values(problem) if problem.objective == "l2" and problem.integer else None
        chunk = partial(_direct_chunk if path == "direct" else _pyomo_chunk, settings=settings, threads=threads,
                        deadline=deadline, needs_center=needs_center, anchors=anchors)
        try:
            status, parts, message = run_batches(chunk, problem, batches, executor=options.get("executor"),
                                                 progress=bool(options.get("progress")), desc=f"highs ({path})")
        except ModelTooLarge as exc:
            raise UnsupportedProblem(f"highs: {exc}") from None
        stats["batches"] = len(batches)
        for nodes, x in parts:
            values[nodes] = x
        if message:
            stats["message"] = message
        if status != "optimal":
            return finish(problem, values, status, self.name, t0, stats)
        if problem.integer:
            values = np.rint(values)
        return finish(problem, values, "optimal", self.name, t0, stats)


def _direct_chunk(problem: Problem, subsets: Sequence[np.ndarray | None], *, settings: dict[str, Any],
                  threads: int | None, deadline: float | None, needs_center: bool,
                  anchors: np.ndarray | None) -> tuple[str, list[tuple[np.ndarray, np.ndarray]], str]:
    """Solve batches in order with one reused ``Highs`` object (runs in a worker with an executor)."""
    runner = _runner(threads)
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    try:
        for subset in subsets:
            center = _relaxed_center(problem, subset, runner, settings, deadline) if needs_center else None
            if isinstance(center, str):
                return center, parts, ""
            arr = model_arrays(problem, subset=subset, l2_center=center, anchors=anchors)
            status, x = runner.run(arr, settings, deadline)
            if status != "optimal":
                return status, parts, ""
            parts.append((arr.nodes, x))
    except ModelInfeasible as exc:
        return "infeasible", parts, str(exc)
    return "optimal", parts, ""


def _pyomo_chunk(problem: Problem, subsets: Sequence[np.ndarray | None], *, settings: dict[str, Any],
                 threads: int | None, deadline: float | None, needs_center: bool,
                 anchors: np.ndarray | None) -> tuple[str, list[tuple[np.ndarray, np.ndarray]], str]:
    """Solve batches in order through Pyomo (hooks run on every model)."""
    runner = _runner(threads) if needs_center else None
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    try:
        for subset in subsets:
            center = _relaxed_center(problem, subset, runner, settings, deadline) if needs_center else None
            if isinstance(center, str):
                return center, parts, ""
            status, v = _solve_pyomo(problem, subset, center, settings, threads, deadline)
            if status != "optimal":
                return status, parts, ""
            nodes = np.flatnonzero(~np.isnan(v) & problem.is_free)
            parts.append((nodes, v[nodes]))
    except ModelInfeasible as exc:
        return "infeasible", parts, str(exc)
    return "optimal", parts, ""


def _relaxed_center(problem: Problem, subset: np.ndarray | None, runner: "_DirectRunner",
                    settings: dict[str, Any], deadline: float | None) -> np.ndarray | str:
    """Continuous optimum of a batch (the centre of the proven integer-L2 window), or a status."""
    relaxed = model_arrays(problem, subset=subset, relax=True)
    status, x = runner.run(relaxed, settings, deadline)
    if status != "optimal":
        return status
    center = np.full(problem.n, np.nan)
    center[relaxed.nodes] = x
    return center


def _batches(problem: Problem, size: int) -> list[np.ndarray]:
    """Lists of group ids, each at most ``size`` groups unless one coupled component is larger."""
    ng = problem.n_groups
    if not problem.linear:
        return [np.arange(s, min(s + size, ng), dtype=np.int64) for s in range(0, ng, size)]
    comp = batch_components(problem)
    order = np.argsort(comp, kind="stable")
    _, starts, counts = np.unique(comp[order], return_index=True, return_counts=True)
    out: list[np.ndarray] = []
    cur: list[np.ndarray] = []
    cur_n = 0
    for s, c in zip(starts, counts):  # loop over components (not nodes): greedy packing
        if cur and cur_n + c > size:
            out.append(np.concatenate(cur))
            cur, cur_n = [], 0
        cur.append(order[s:s + c])
        cur_n += int(c)
    if cur:
        out.append(np.concatenate(cur))
    return out


def _status_name(model_status: Any) -> str:
    text = str(model_status).split(".")[-1]
    return {
        "kOptimal": "optimal",
        "kTimeLimit": "time limit",
        "kInfeasible": "infeasible",
        "kUnboundedOrInfeasible": "unbounded or infeasible",
        "kUnbounded": "unbounded",
        "kIterationLimit": "iteration limit",
        "kSolutionLimit": "solution limit",
        "kInterrupt": "interrupted",
        "kMemoryLimit": "memory limit",
    }.get(text, f"error ({text})")


_LOCAL = threading.local()


def _runner(threads: int | None) -> "_DirectRunner":
    """This thread's reused ``Highs`` object: creating one per batch costs ~2x on small batches,
    and one object must not be shared between threads (executors)."""
    r = getattr(_LOCAL, "runner", None)
    if r is None or r.threads != threads:
        r = _LOCAL.runner = _DirectRunner(threads)
    return r


class _DirectRunner:
    """One reused ``highspy.Highs`` object fed with sparse matrices, batch after batch."""

    def __init__(self, threads: int | None) -> None:
        import highspy

        self.threads = threads
        self.hs = highspy
        self.h = highspy.Highs()
        self.h.setOptionValue("output_flag", False)
        if threads:
            self.h.setOptionValue("threads", int(threads))

    def run(self, arr: ModelArrays, settings: dict[str, float], deadline: float | None) -> tuple[str, np.ndarray]:
        """Solve one batch; returns ``(status, values of arr.nodes)``."""
        hs = self.hs
        h = self.h
        lp, hessian = matrices(arr)
        h.clearModel()
        h.setOptionValue("mip_rel_gap", settings["mip_rel_gap"])
        h.setOptionValue("qp_regularization_value", settings["qp_regularization_value"])
        h.setOptionValue("presolve", settings["presolve"] if arr.integer else "choose")
        if deadline is not None:
            left = deadline - time.perf_counter()
            if left <= 0:
                return "time limit", np.zeros(0)
            h.setOptionValue("time_limit", float(left))
        if hessian is not None:
            model = hs.HighsModel()
            model.lp_ = lp
            model.hessian_ = hessian
            h.passModel(model)
        else:
            h.passModel(lp)
        h.run()
        status = _status_name(h.getModelStatus())
        if status != "optimal":
            return status, np.zeros(0)
        x = np.asarray(h.getSolution().col_value, dtype=float)[: arr.n_vars]
        return "optimal", x


def matrices(arr: ModelArrays) -> tuple[Any, Any]:
    """``(HighsLp, HighsHessian | None)`` of a batch: columns ``y`` then ``alpha`` or ``t``."""
    import highspy as hs

    nv = arr.n_vars
    obj = arr.objective
    nt = arr.obj_var.size
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

    nc = arr.cons_node.size
    add(np.repeat(np.arange(nc), np.diff(arr.cons_ptr)), arr.cons_col, arr.cons_coef, arr.cons_rhs, arr.cons_rhs, nc)
    nl = arr.lin_lower.size
    add(np.repeat(np.arange(nl), np.diff(arr.lin_ptr)), arr.lin_col, arr.lin_coef, arr.lin_lower, arr.lin_upper, nl)

    cost = np.zeros(nv)
    aux_lo = np.zeros(0)
    hessian = None
    offset = 0.0
    x, w = arr.obj_target, arr.obj_weight
    if obj in ("linf", "l1"):
        naux = arr.groups.size if obj == "linf" else nt
        aux_of_term = nv + (arr.obj_group if obj == "linf" else np.arange(nt))
        term = np.arange(nt)
        # w y - aux <= w x  and  -w y - aux <= -w x
        for sign in (1.0, -1.0):
            add(np.r_[term, term], np.r_[arr.obj_var, aux_of_term], np.r_[sign * w, -np.ones(nt)],
                np.full(nt, -np.inf), sign * w * x, nt)
        cost = np.r_[cost, np.ones(naux)]
        aux_lo = np.zeros(naux)
    elif not arr.integer:
        naux = 0
        cost[arr.obj_var] = -2.0 * w * x
        offset = float(np.sum(w * x * x))
        hessian = hs.HighsHessian()
        hessian.dim_ = nv
        hessian.format_ = hs.HessianFormat.kTriangular
        diag = np.zeros(nv)
        diag[arr.obj_var] = 2.0 * w
        nz = np.flatnonzero(diag)
        start = np.zeros(nv + 1, np.int32)
        start[1:] = np.cumsum(diag != 0)
        hessian.start_ = start
        hessian.index_ = nz.astype(np.int32)
        hessian.value_ = diag[nz]
    else:
        naux = nt
        term, _, slope, intercept = pwl_rows(arr)
        npc = term.size
        r = np.arange(npc)
        # t - slope * y >= intercept
        add(np.r_[r, r], np.r_[nv + term, arr.obj_var[term]], np.r_[np.ones(npc), -slope],
            intercept, np.full(npc, np.inf), npc)
        cost = np.r_[cost, np.ones(nt)]
        aux_lo = np.zeros(nt)

    from scipy.sparse import coo_matrix

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
    lp.integrality_ = [hs.HighsVarType.kInteger if v else hs.HighsVarType.kContinuous for v in integrality]
    return lp, hessian


def _solve_pyomo(problem: Problem, subset: np.ndarray | None, center: np.ndarray | None,
                 settings: dict[str, float], threads: int | None, deadline: float | None) -> tuple[str, np.ndarray]:
    """One batch through Pyomo's ``pyomo.contrib.solver`` HiGHS interface."""
    from pyomo.contrib.solver.common.factory import SolverFactory
    from pyomo.contrib.solver.common.results import SolutionStatus, TerminationCondition

    model = build_pyomo_model(problem, subset=subset, l2_center=center)
    opt = SolverFactory("highs")
    kwargs: dict[str, Any] = {
        "load_solutions": False,
        "raise_exception_on_nonoptimal_result": False,
        "solver_options": dict(settings),
    }
    if threads:
        kwargs["threads"] = int(threads)
    if deadline is not None:
        left = deadline - time.perf_counter()
        if left <= 0:
            return "time limit", np.zeros(0)
        kwargs["time_limit"] = float(left)
    if not (problem.objective == "l2" and not problem.integer):
        kwargs["solver_options"].pop("qp_regularization_value", None)
    if not problem.integer:
        kwargs["solver_options"].pop("presolve", None)
    res = opt.solve(model, **kwargs)
    tc = res.termination_condition
    if tc == TerminationCondition.convergenceCriteriaSatisfied and res.solution_status == SolutionStatus.optimal:
        res.solution_loader.load_vars()
        return "optimal", values_from_model(model, problem)
    return {
        TerminationCondition.maxTimeLimit: "time limit",
        TerminationCondition.provenInfeasible: "infeasible",
        TerminationCondition.infeasibleOrUnbounded: "unbounded or infeasible",
        TerminationCondition.unbounded: "unbounded",
        TerminationCondition.iterationLimit: "iteration limit",
    }.get(tc, f"error ({tc.name}, {res.solution_status.name})"), np.zeros(0)
