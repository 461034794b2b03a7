"""The continuous relaxations of the OP baselines (M̃_H, M̃_HC) at census scale: OR-Tools PDLP.

HiGHS's QP solver (the only QP in the ``highs`` wheel is active-set) does not finish relaxations
of millions of tree nodes (the cost-table benchmark measured 565 s for one size of the census
shape, 3,198 nodes). PDLP, OR-Tools' first-order primal-dual method, solves convex QPs with a
diagonal objective - exactly these relaxations - to a relative tolerance (default 1e-8 here),
so it is what the relaxed baselines use at scale (``solver="pdlp"``). It is not a registered
plug-in: it is not exact, only within its tolerance, which is irrelevant here because the
baselines round the relaxation anyway.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

__all__ = ["solve_relaxation"]


def solve_relaxation(problem: Any, *, time_limit: float | None = None, tolerance: float = 1e-8,
                     threads: int = 1) -> tuple[np.ndarray, dict[str, Any]]:
    """Minimise ``sum w (y - t)^2`` over the continuous feasible set of ``problem`` (tree
    consistency, fixed nodes, bounds, non-negativity, user rows) with PDLP.

    Raises:
        RuntimeError: PDLP stopped without meeting its tolerance (time limit, numerical trouble).
    """
    import scipy.sparse as sp
    from ortools.pdlp import solve_log_pb2, solvers_pb2
    from ortools.pdlp.python import pdlp

    t0 = time.perf_counter()
    n = problem.n
    par = problem.parent
    has = par >= 0
    nch = np.bincount(par[has], minlength=n)
    internal = np.flatnonzero(nch > 0)
    ridx = np.full(n, -1, np.int64)
    ridx[internal] = np.arange(internal.size)
    kids = np.flatnonzero(has)
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
    w = np.where(free & ~np.isnan(problem.target), problem.weights, 0.0)
    t = np.nan_to_num(problem.target)
    qp = pdlp.QuadraticProgram()
    qp.resize_and_initialize(n, cons.shape[0])
    qp.objective_vector = -2.0 * w * t
    qp.set_objective_matrix_diagonal(2.0 * w)
    qp.objective_offset = float((w * t * t).sum())
    qp.constraint_matrix = cons
    qp.constraint_lower_bounds = lo_rows
    qp.constraint_upper_bounds = hi_rows
    lb = np.array(problem.effective_lower, dtype=float)
    ub = np.array(problem.upper, dtype=float)
    lb[~free] = problem.fixed[~free]
    ub[~free] = problem.fixed[~free]
    qp.variable_lower_bounds = lb
    qp.variable_upper_bounds = ub
    params = solvers_pb2.PrimalDualHybridGradientParams()
    crit = params.termination_criteria.simple_optimality_criteria
    crit.eps_optimal_relative = tolerance
    crit.eps_optimal_absolute = tolerance
    if time_limit is not None:
        params.termination_criteria.time_sec_limit = float(time_limit)
    params.num_threads = int(threads)
    res = pdlp.primal_dual_hybrid_gradient(qp, params)
    reason = res.solve_log.termination_reason
    if reason != solve_log_pb2.TERMINATION_REASON_OPTIMAL:
        raise RuntimeError(f"PDLP stopped without an optimum: {solve_log_pb2.TerminationReason.Name(reason)} after "
                           f"{res.solve_log.iteration_count} iterations")
    x = np.asarray(res.primal_solution, dtype=float)
    x = np.clip(x, lb, ub)  # within the tolerance; the bounds are exact
    return x, {"solver": "pdlp", "iterations": int(res.solve_log.iteration_count),
               "seconds": time.perf_counter() - t0, "tolerance": tolerance,
               "max_row_violation": float(np.abs(np.clip(cons @ x, lo_rows, hi_rows) - cons @ x).max())
               if cons.shape[0] else 0.0}
