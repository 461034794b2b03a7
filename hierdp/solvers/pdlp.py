"""The ``pdlp`` plug-in: OR-Tools' PDLP (first-order primal-dual method) for continuous weighted L2.

HiGHS's QP solver (the only QP in the ``highs`` wheel is active-set) does not finish the
continuous relaxations of millions of tree nodes (the cost-table benchmark measured 565 s for one
size of the census shape, 3,198 nodes). PDLP solves convex QPs with a diagonal objective - exactly
these problems - to a relative tolerance, so it is what paper 001's relaxed OP baselines (M̃_H,
M̃_HC) use at scale. As a registered plug-in it is listed by ``hierdp solvers``, refuses what it
cannot do in ``unsupported()``, and its answers go through ``verify`` and ``cross_check`` like any
other.

Exactness: within its tolerance. PDLP stops when the relative primal and dual residuals and the
duality gap are below ``tolerance`` (default 1e-8); the returned point is clipped to the variable
bounds (exact), rows hold to the residual. The model is written in ``d = y - z`` for a consistent
point ``z`` near the targets (:func:`~hierdp.models.arrays.consistent_point`), as ``highs`` does:
at counts of 10^9 and beyond PDLP otherwise declared feasible problems infeasible (the fuzz
suite's ``free_sign_big`` family). The dual objective is the :attr:`Solution.bound`, so
``verify`` checks ``bound <= objective``. The stated tolerance of continuous answers (what
``verify`` applies to every row, sum and bound, scaled to its own magnitude) is 1e-6.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from hierdp.models.arrays import consistent_point
from hierdp.models.problem import Problem
from hierdp.solvers.base import Capabilities, Solution, Solver, Termination, finish

__all__ = ["PdlpOptions", "PdlpSolver"]


@dataclass(frozen=True)
class PdlpOptions:
    """Options of the ``pdlp`` plug-in.

    Attributes:
        tolerance: PDLP's relative and absolute optimality tolerance (residuals and gap).
        threads: PDLP's threads.
    """

    tolerance: float = 1e-8
    threads: int = 1

    def __post_init__(self) -> None:
        if not (0 < float(self.tolerance) < 1e-2):
            raise ValueError(f"pdlp: tolerance must be in (0, 0.01), got {self.tolerance!r}")
        if not isinstance(self.threads, (int, np.integer)) or self.threads < 1:
            raise ValueError(f"pdlp: threads must be a positive integer, got {self.threads!r}")


class PdlpSolver(Solver):
    """Plug-in ``"pdlp"``: continuous weighted L2 over trees and rows with OR-Tools' PDLP."""

    name = "pdlp"
    Options = PdlpOptions
    requires = ("ortools.pdlp.python.pdlp",)
    capabilities = Capabilities(
        objectives=frozenset({"l2"}),
        integer=False,
        continuous=True,
        structures=frozenset({"level", "tree"}),
        features=frozenset({"weights", "bounds", "linear_constraints", "cumulative", "free_sign", "missing_targets"}),
        limits={"time_limit": "PDLP's own limit (time_sec_limit) on the time left",
                "optimality": "first-order method: residuals and duality gap within its option tolerance "
                              "(default 1e-8, relative to the problem's norms)"},
        tolerance=1e-6,
        description="OR-Tools PDLP: continuous weighted L2 at census scale (first-order QP; relaxed baselines)",
    )

    def extra_checks(self, problem: Problem) -> list[str]:
        """Free-sign nodes without a target: the objective is flat along rays there, which PDLP reports
        as dual infeasibility instead of an optimum (the fuzz suite's free_sign_big family)."""
        if not problem.nonnegative and np.any(problem.is_free & np.isnan(problem.target)):
            return ["free-sign nodes without a target leave the optimum unbounded in flat directions, which PDLP "
                    "reports as dual infeasible (give targets, or non-negativity, or use highs / twopass)"]
        return []

    def solve_problem(self, problem: Problem, *, time_limit: float | None = None, **options: Any) -> Solution:
        """Minimise ``sum w (y - t)^2`` over the problem's continuous feasible set (tree consistency,
        fixed nodes, bounds, sign, user rows)."""
        import scipy.sparse as sp
        from ortools.pdlp import solve_log_pb2, solvers_pb2
        from ortools.pdlp.python import pdlp

        opts: PdlpOptions = self.parse_options(options)
        t0 = time.perf_counter()
        n = problem.n
        par = problem.parent
        kids = np.flatnonzero(par >= 0)
        nch = np.bincount(par[kids], minlength=n)
        internal = np.flatnonzero(nch > 0)
        ridx = np.full(n, -1, np.int64)
        ridx[internal] = np.arange(internal.size)
        cons = sp.csr_matrix((np.concatenate([np.ones(internal.size), -np.ones(kids.size)]),
                              (np.concatenate([ridx[internal], ridx[par[kids]]]), np.concatenate([internal, kids]))),
                             shape=(internal.size, n))
        lo_rows, hi_rows = np.zeros(internal.size), np.zeros(internal.size)
        if problem.n_constraints:
            rows = problem.constraints
            cons = sp.vstack([cons, rows.matrix]).tocsr()
            lo_rows = np.concatenate([lo_rows, rows.lower])
            hi_rows = np.concatenate([hi_rows, rows.upper])
        free = problem.is_free
        z = consistent_point(problem)  # the model in d = y - z: small numbers whatever the counts
        z = np.where(np.isfinite(z), z, 0.0)
        w = np.where(free & ~np.isnan(problem.target), problem.weights, 0.0)
        t = np.nan_to_num(problem.target) - z
        act = cons @ z
        lo_d, hi_d = lo_rows - act, hi_rows - act
        if internal.size:  # z is consistent: its consistency residuals are round-off; the rows stay = 0
            lo_d[:internal.size] = 0.0
            hi_d[:internal.size] = 0.0
        qp = pdlp.QuadraticProgram()
        qp.resize_and_initialize(n, cons.shape[0])
        qp.objective_vector = -2.0 * w * t
        qp.set_objective_matrix_diagonal(2.0 * w)
        qp.objective_offset = float((w * t * t).sum())
        qp.constraint_matrix = cons
        qp.constraint_lower_bounds = lo_d
        qp.constraint_upper_bounds = hi_d
        lb = np.array(problem.effective_lower, dtype=float)
        ub = np.array(problem.upper, dtype=float)
        lb[~free] = problem.fixed[~free]
        ub[~free] = problem.fixed[~free]
        qp.variable_lower_bounds = lb - z
        qp.variable_upper_bounds = ub - z
        params = solvers_pb2.PrimalDualHybridGradientParams()
        crit = params.termination_criteria.simple_optimality_criteria
        crit.eps_optimal_relative = float(opts.tolerance)
        crit.eps_optimal_absolute = float(opts.tolerance)
        if time_limit is not None:
            params.termination_criteria.time_sec_limit = max(float(time_limit), 1e-3)
        params.num_threads = int(opts.threads)
        res = pdlp.primal_dual_hybrid_gradient(qp, params)
        log = res.solve_log
        reason = log.termination_reason
        x = np.clip(np.asarray(res.primal_solution, dtype=float) + z, lb, ub)  # bounds exact; rows to the residual
        stats: dict[str, Any] = {
            "iterations": int(log.iteration_count), "tolerance": float(opts.tolerance),
            "termination_reason": solve_log_pb2.TerminationReason.Name(reason),
            "max_row_violation": float(np.abs(np.clip(cons @ x, lo_rows, hi_rows) - cons @ x).max())
            if cons.shape[0] else 0.0}
        bound = None
        for info in log.solution_stats.convergence_information:
            if info.candidate_type == log.solution_type:
                bound = float(info.dual_objective)
        # PDLP's infeasibility and unboundedness verdicts come from approximate rays of a first-order
        # method: it called a sum of squares (bounded below) "dual infeasible" (the fuzz suite's
        # free_sign_big family), so neither is taken as a proof here - auto tries the next plug-in
        termination = {
            solve_log_pb2.TERMINATION_REASON_OPTIMAL: Termination.OPTIMAL,
            solve_log_pb2.TERMINATION_REASON_TIME_LIMIT: Termination.TIME_LIMIT,
            solve_log_pb2.TERMINATION_REASON_ITERATION_LIMIT: Termination.ITERATION_LIMIT,
            solve_log_pb2.TERMINATION_REASON_INTERRUPTED_BY_USER: Termination.INTERRUPTED,
        }.get(reason, Termination.NUMERICAL)
        if termination != Termination.OPTIMAL:
            stats["message"] = f"PDLP stopped: {stats['termination_reason']} after {stats['iterations']} iterations"
            if termination == Termination.NUMERICAL:
                stats["message"] += " (a first-order method's verdict, not a proof)"
        values = x if termination != Termination.NUMERICAL else None
        return finish(problem, values, termination, self.name, t0, stats,
                      bound=bound if termination == Termination.OPTIMAL else None,
                      tolerance=self.capabilities.tolerance)
