"""The per-parent solve of the Census-style TopDown under public constraints (DAS-style).

A constraint set over a spine's histograms (:mod:`hierdp.constraints.cells`: edit constraints in
every geounit of some geolevels, structural zeros of cells, invariants of a geounit's cells,
bounds and rows over (geounit, cell) quantities) reaches a chunk of parents as a
:class:`~hierdp.constraints.LevelRows` over the chunk's ``(child, cell)`` variables, in the
order of the :class:`~.problems.LevelChunk` (child-major): a CSR block of rows with their bounds
(contributions of released coarser geolevels already moved in) and per-variable intervals.

The parents those rows or intervals reach are solved here, one coupled component (parents joined
by a row) per pair of :class:`~hierdp.models.Problem` s, both stages of the DAS with the rows:

1. the weighted least squares of :func:`~.problems.continuous_problem` with the rows and the
   intervals added (a convex QP: its optimum satisfies them);
2. the integer rounder of :func:`~.problems.rounding_problem` (L1 around the continuous point over
   ``floor + {0, 1}`` per cell) with the rows and the intervals; when the rows leave no integer
   point in that box, the rounder over every non-negative integer (same objective, intervals and
   rows) - a MIP that has a solution whenever the rows can hold under the released parent.

The answer is checked exactly in integers against every row and interval. Parents no row reaches
keep the fast path (:class:`~.level_solver.CensusLevelSolver`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import sparse

from hierdp.mechanisms.census.level_solver import ParentSolveFailed
from hierdp.mechanisms.census.problems import LevelChunk, continuous_problem, rounding_problem

__all__ = ["query_block", "solve_constrained"]


def query_block(mat: np.ndarray, rows: np.ndarray, C: int) -> Any:
    """``kron(I_C, mat)`` restricted to children ``rows`` (CSR over the children's cell columns)."""
    block = sparse.kron(sparse.identity(C, format="csr"), sparse.csr_matrix(mat), format="csr")
    keep = (np.asarray(rows, np.int64)[:, None] * mat.shape[0] + np.arange(mat.shape[0])[None, :]).ravel()
    return block[keep]


def _with_rows(p: Any, rows: Any, nodes: np.ndarray) -> Any:
    """``p`` with the chunk's rows and variable intervals added (intervals tighten the bounds)."""
    if rows.n_rows:
        p.add_constraints(rows.matrix, rows.lower, rows.upper, nodes=nodes, name="constraints")
    if rows.child_lower is not None and rows.child_upper is not None:
        lo, hi = np.asarray(rows.child_lower, float), np.asarray(rows.child_upper, float)
        for j in np.flatnonzero((lo > 0) | np.isfinite(hi)).tolist():  # the bounded variables only
            p.add_bounds(int(nodes[j]), lower=max(float(lo[j]), 0.0),
                         upper=float(hi[j]) if np.isfinite(hi[j]) else None)
    return p


def _wide_rounding(chunk: LevelChunk, xhat: np.ndarray, queries: bool) -> Any:
    """The rounder's objective over every non-negative integer (no floor box)."""
    from hierdp.models import Problem

    _, C, K = chunk.shape
    kp = chunk.parent_values.shape[1]
    npn = chunk.n_parent_nodes
    parent = np.concatenate([np.full(npn, -1, np.int64),
                             (chunk.child_parent[:, None] * kp + chunk.cell_map[None, :]).ravel()])
    fixed = np.concatenate([chunk.parent_values.astype(float).ravel(), np.full(C * K, np.nan)])
    target = np.concatenate([np.full(npn, np.nan), xhat.ravel()])
    p = Problem(parent, target, fixed=fixed, objective="l1", integer=True, nonnegative=True)
    nodes = npn + np.arange(C * K, dtype=np.int64)
    for q, mat in enumerate(chunk.query_mats if queries else []):
        p.add_query_terms(query_block(mat, np.arange(C), C), (xhat @ mat.T).ravel(), 1.0, nodes=nodes,
                          name=f"query group {q}")
    if chunk.totals is not None:
        mat = sparse.kron(sparse.identity(C, format="csr"), sparse.csr_matrix(np.ones((1, K))), format="csr")
        p.add_constraints(mat, chunk.totals.astype(float), chunk.totals.astype(float), nodes=nodes,
                          name="invariant total")
    return p


def solve_constrained(chunk: LevelChunk, rows: Any, parent_ids: np.ndarray, *, solver: Any, rounder: Any,
                      rounding: str, solver_options: dict[str, Any], time_limit: float | None,
                      stats: dict[str, Any]) -> np.ndarray:
    """Both stages of one coupled component under its rows (see the module docstring); returns the
    ``(C, K)`` integer histograms.

    Raises:
        ParentSolveFailed: a stage failed (``stage`` ``"constrained continuous"`` /
            ``"constrained rounding"``); when the rows cannot hold under the released parents its
            cause is a :class:`~hierdp.constraints.ConstraintsInfeasible` naming them.
    """
    from hierdp.constraints.errors import ConstraintsInfeasible
    from hierdp.constraints.feasibility import is_infeasible
    from hierdp.models.problem import ProblemError
    from hierdp.solvers import solve
    from hierdp.solvers.base import SolverError, SolverFailed

    _, C, K = chunk.shape
    npn = chunk.n_parent_nodes
    nodes = npn + np.arange(C * K, dtype=np.int64)
    names = ", ".join(repr(str(n)) for n in list(rows.names)[:5]) + (" ..." if rows.n_rows > 5 else "")

    def infeasible(stage: str, cause: BaseException) -> ParentSolveFailed:
        exc = ConstraintsInfeasible(f"the public constraints cannot hold under the released parent(s) at geolevel "
                                    f"{rows.level - 1} ({stage}): rows {names or '(variable intervals only)'}; "
                                    f"{cause}", entries=[str(n) for n in rows.names])
        return ParentSolveFailed(exc, parent_ids, f"constrained {stage}")

    try:
        p = _with_rows(continuous_problem(chunk), rows, nodes)
        xhat = np.asarray(solve(p, solver, time_limit=time_limit, **solver_options).values, float)[npn:]
    except ProblemError as exc:  # intervals that contradict the released parents
        raise infeasible("continuous", exc) from exc
    except SolverFailed as exc:
        if is_infeasible(exc):
            raise infeasible("continuous", exc) from exc
        raise ParentSolveFailed(exc, parent_ids, "constrained continuous") from exc
    except SolverError as exc:
        raise ParentSolveFailed(exc, parent_ids, "constrained continuous") from exc
    xhat = np.maximum(xhat.reshape(C, K), 0.0)
    queries = rounding == "queries"
    y = None
    try:
        q = _with_rows(rounding_problem(chunk, xhat, queries=queries), rows, nodes)
        y = solve(q, rounder, time_limit=time_limit, **solver_options).values
    except (ProblemError, SolverFailed):  # no integer point in the floor box: round over every integer
        stats["constrained_wide_rounding"] = stats.get("constrained_wide_rounding", 0) + 1
    except SolverError as exc:
        raise ParentSolveFailed(exc, parent_ids, "constrained rounding") from exc
    if y is None:
        try:
            w = _with_rows(_wide_rounding(chunk, xhat, queries), rows, nodes)
            y = solve(w, rounder, time_limit=time_limit, **solver_options).values
        except ProblemError as exc:
            raise infeasible("rounding", exc) from exc
        except SolverFailed as exc:
            if is_infeasible(exc):
                raise infeasible("rounding", exc) from exc
            raise ParentSolveFailed(exc, parent_ids, "constrained rounding") from exc
    out = np.rint(np.asarray(y, float)[npn:]).astype(np.int64).reshape(C, K)
    offsets = np.concatenate([[0], np.cumsum(np.bincount(chunk.child_parent, minlength=chunk.shape[0]))]) * K
    if rows.violated_groups(out.ravel(), offsets).any():  # never returned unchecked
        raise infeasible("check", RuntimeError("the solver's integer answer breaks a row"))
    stats["constrained_parents"] = stats.get("constrained_parents", 0) + int(chunk.shape[0])
    return out
