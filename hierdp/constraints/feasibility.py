"""Feasibility of constraint sets, through the solver layer: decide, explain, relax.

* :func:`decide` - is a :class:`~hierdp.models.Problem` feasible? Its objective is dropped (every
  target NaN, L1): a pure integer feasibility MIP, solved by an exact plug-in (``auto`` walks the
  exact plug-ins; the fast paths refuse rows, so a general solver answers).
* :func:`irreducible_subset` - a *deletion filter* (Chinneck): drop the items (constraint entries,
  or rows) one by one, keeping an item out whenever the rest stays infeasible. What is left is
  irreducible: infeasible, and feasible without any one of its items. HiGHS 1.14 offers an IIS for
  LPs only (``Highs.getIis`` explains the LP relaxation, and the ``highs`` plug-in quotes it), while
  integer rows can be infeasible with a feasible relaxation (``2y = 1``), so the filter decides
  each subset as an integer program.
* :func:`minimal_relaxation` - the failsafe: the smallest total L1 widening of given rows' bounds
  that makes a problem feasible (one non-negative slack per side of every row, minimized as an L1
  objective by an exact plug-in).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hierdp.constraints.errors import ConstraintError

__all__ = ["MAX_FILTER_ITEMS", "clone_problem", "decide", "irreducible_subset", "is_infeasible", "minimal_relaxation"]

log = logging.getLogger(__name__)

#: largest number of items a deletion filter runs over (one integer program per item)
MAX_FILTER_ITEMS = 200


def decide(problem: Any, *, solver: Any = "auto", time_limit: float | None = None) -> bool | None:
    """True (feasible), False (infeasible) or None (undecided: a time limit, or no plug-in fits).

    ``problem``'s objective is ignored: its copy without targets is solved.
    """
    from hierdp.models import ProblemError
    from hierdp.solvers import SolverFailed, UnsupportedProblem, solve

    try:
        p = problem if _no_objective(problem) else clone_problem(problem)
    except ProblemError:  # the bounds or fixed values contradict each other already
        return False
    try:
        solve(p, solver=solver, time_limit=time_limit)
        return True
    except SolverFailed as exc:
        if is_infeasible(exc):
            return False
        log.info("feasibility undecided: %s", exc)
        return None
    except UnsupportedProblem as exc:
        log.info("feasibility undecided: %s", exc)
        return None


def is_infeasible(exc: BaseException) -> bool:
    """True when a solver failure says the problem has no feasible point (not a failed check of a
    returned point, not a time limit)."""
    termination = getattr(exc, "termination", None)
    return str(getattr(termination, "value", termination)) == "infeasible" and getattr(exc, "refuted_by", None) is None


def _no_objective(problem: Any) -> bool:
    return bool(np.all(np.isnan(problem.target))) and problem.n_query_terms == 0


def clone_problem(problem: Any, rows: np.ndarray | None = None, *, lower: np.ndarray | None = None,
                  upper: np.ndarray | None = None, feasibility: bool = True) -> Any:
    """A copy of ``problem`` with only the given user ``rows`` (all when None), optionally other
    row bounds, and (``feasibility``) no objective."""
    from hierdp.models import Problem

    n = problem.n
    target = np.full(n, np.nan) if feasibility else np.asarray(problem.target)
    p = Problem(problem.parent, target, fixed=problem.fixed, objective="l1" if feasibility else problem.objective,
                weights=None if feasibility else problem.weights, integer=problem.integer,
                nonnegative=problem.nonnegative, lower=problem.lower, upper=problem.upper)
    if problem.n_constraints:
        cons = problem.constraints
        sel = np.arange(len(cons)) if rows is None else np.asarray(rows, dtype=np.int64)
        if sel.size:
            lo = cons.lower if lower is None else lower
            hi = cons.upper if upper is None else upper
            p.add_constraints(cons.matrix[sel], lo[sel], hi[sel], name="rows")
    return p


def irreducible_subset(items: Sequence[int], feasible: Callable[[list[int]], bool | None]) -> list[int] | None:
    """Deletion filter over ``items`` (``feasible(subset)`` decides a subset; the whole set must be
    infeasible). Returns an irreducible infeasible subset, or None when a subset could not be
    decided or there are more than :data:`MAX_FILTER_ITEMS` items."""
    kept = list(items)
    if len(kept) > MAX_FILTER_ITEMS:
        return None
    for item in list(kept):
        trial = [x for x in kept if x != item]
        verdict = feasible(trial)
        if verdict is None:
            return None
        if verdict is False:  # still infeasible without it: it is not needed
            kept = trial
    return kept


def minimal_relaxation(problem: Any, relaxable: np.ndarray, *, solver: Any = "auto",
                       time_limit: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The smallest total widening of the relaxable rows' bounds that makes ``problem`` feasible.

    Returns ``(lower_by, upper_by)`` per row of ``problem.constraints``: lower bounds move down by
    ``lower_by``, upper bounds up by ``upper_by`` (0 for rows left as they are; never both > 0).

    Raises:
        ConstraintError: no relaxation of these rows helps (the rest is infeasible), or the
            relaxation problem could not be solved.
    """
    from hierdp.models import Problem
    from hierdp.solvers import SolverFailed, UnsupportedProblem, solve
    from scipy import sparse

    cons = problem.constraints
    m = len(cons)
    rel = np.flatnonzero(np.asarray(relaxable, dtype=bool))
    n, k = problem.n, rel.size
    # slack nodes: 2k free roots with target 0 (their L1 distance is their value), after the nodes
    parent = np.concatenate([problem.parent, np.full(2 * k, -1, np.int64)])
    target = np.concatenate([np.full(n, np.nan), np.zeros(2 * k)])
    fixed = np.concatenate([problem.fixed, np.full(2 * k, np.nan)])
    lower = np.concatenate([problem.lower, np.zeros(2 * k)])
    upper = np.concatenate([problem.upper, np.full(2 * k, np.inf)])
    p = Problem(parent, target, fixed=fixed, objective="l1", integer=problem.integer,
                nonnegative=problem.nonnegative, lower=lower, upper=upper)
    # row r:  a_r . y + s_plus - s_minus  within its bounds (s_plus lifts a row below its lower bound)
    pos = np.full(m, -1, np.int64)
    pos[rel] = np.arange(k)
    r_idx = np.flatnonzero(pos >= 0)
    extra = sparse.csr_matrix((np.concatenate([np.ones(k), -np.ones(k)]),
                               (np.concatenate([r_idx, r_idx]), np.concatenate([n + pos[r_idx], n + k + pos[r_idx]]))),
                              shape=(m, n + 2 * k))
    base = sparse.csr_matrix((cons.matrix.data, cons.matrix.indices, cons.matrix.indptr), shape=(m, n + 2 * k))
    p.add_constraints(base + extra, cons.lower, cons.upper, name="relaxed")
    try:
        sol = solve(p, solver=solver, time_limit=time_limit)
    except (SolverFailed, UnsupportedProblem) as exc:
        raise ConstraintError(f"the minimal relaxation of the rows could not be found: {exc}") from exc
    v = np.asarray(sol.values, dtype=float)
    lower_by, upper_by = np.zeros(m), np.zeros(m)
    s_plus, s_minus = v[n:n + k], v[n + k:]
    if problem.integer:
        s_plus, s_minus = np.rint(s_plus), np.rint(s_minus)
    lower_by[rel], upper_by[rel] = s_plus, s_minus
    return lower_by, upper_by
