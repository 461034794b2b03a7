"""The ``costtable`` plug-in: paper 001's cost-table dynamic program (M_DP, §6–7) for exact
integer weighted L2 over a whole tree or forest.

Bottom-up, every node gets the convex cost table of its subtree; top-down, every node splits its
value among its children at least cost. Tables are never expanded over ``[0, N]``: they are held by
their unit-count functions (the sorted-marginal view of Alg. 1), see :mod:`hierdp.solvers._pwl`.

Supported: objective ``l2`` with non-negative weights (nodes with a NaN target or zero weight have
no cost), integer, non-negative values, consistency everywhere, any node fixed (a fixed root is an
invariant total), per-node bounds. A free root needs no upper bound: the targets bound the
optimum (the window is proven in :mod:`hierdp.solvers._pwl`). Refused: other objectives,
continuous problems, negative values allowed, user linear constraints, Pyomo hooks, and
infeasible fixed values / bounds (the refusal names the node).
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np

from hierdp.models.problem import Problem
from hierdp.solvers._pwl import CostTables, InfeasibleTree, compile_tree
from hierdp.solvers.base import Capabilities, Solution, Solver, SolverFailed

__all__ = ["CostTableSolver", "costtable_solve", "InfeasibleTree"]


def _tables(problem: Problem) -> CostTables:
    """Compile ``problem`` into cost tables (raises :class:`InfeasibleTree` or ``ValueError``)."""
    child_ptr, child_idx = problem.children_csr()
    tree = compile_tree(
        problem.parent, problem.target, problem.weights, problem.fixed,
        problem.effective_lower, problem.upper, problem.depth(), child_ptr, child_idx,
    )
    return CostTables(tree)


def _solve_problem(problem: Problem) -> tuple[np.ndarray, dict[str, Any]]:
    tables = _tables(problem)
    values = tables.solve()
    stats = {
        "nodes": problem.n,
        "levels": int(problem.depth().max()) + 1,
        "roots": int(np.sum(problem.parent < 0)),
        "leaves": int(np.sum(problem.n_children == 0)),
        "price_search": "integer" if tables.integral_prices else "float64",
        "leaf_evaluations": int(tables.evaluations),
    }
    return values, stats


def costtable_solve(
    parent: Sequence[int] | np.ndarray,
    target: Sequence[float] | np.ndarray,
    *,
    weights: Sequence[float] | np.ndarray | None = None,
    fixed: Sequence[float] | np.ndarray | None = None,
    lower: Sequence[float] | np.ndarray | None = None,
    upper: Sequence[float] | np.ndarray | None = None,
) -> np.ndarray:
    """Exact integer minimiser of ``sum w_i (y_i - target_i)^2`` over a forest.

    Constraints: ``y`` integer and ``>= 0``, every node with children equals the sum of its
    children, ``y_i == fixed_i`` where ``fixed_i`` is not NaN, ``lower <= y <= upper``.
    Nodes with a NaN target (or weight 0) have no cost; fixed nodes have no cost.

    Args:
        parent: parent index per node, -1 for a root.
        target: noisy value per node (NaN: no cost term).
        weights: non-negative weight per node (default 1).
        fixed: fixed value per node, NaN for free nodes (default: all free).
        lower, upper: per-node bounds (default 0 and unbounded).

    Returns:
        int64 array of optimal values, one per node. Ties are broken deterministically (free roots
        take their largest minimiser within the proven window; equal-cost units go to the
        earlier children).

    Raises:
        hierdp.models.problem.ProblemError: malformed input (shapes, cycles, bad weights).
        InfeasibleTree: no feasible integer assignment (the message names a node).
    """
    problem = Problem(parent, target, fixed=fixed, weights=weights, lower=lower, upper=upper,
                      objective="l2", integer=True, nonnegative=True)
    return _solve_problem(problem)[0]


class CostTableSolver(Solver):
    """Cost-table dynamic program with convex piecewise-linear merges (paper 001, Alg. 1, Thm 4)."""

    name = "costtable"
    capabilities = Capabilities(
        objectives=frozenset({"l2"}),
        integer=True,
        continuous=False,
        structures=frozenset({"level", "tree"}),
        weights=True,
        bounds=True,
        linear_constraints=False,
        pyomo_hooks=False,
        free_sign=False,
        description="paper 001 cost-table DP: exact integer weighted L2 over a whole tree",
    )

    def extra_checks(self, problem: Problem) -> list[str]:
        """Refuse infeasible fixed values / bounds, and values too large for exact prices."""
        if problem.objective != "l2" or not problem.integer or not problem.nonnegative:
            return []  # already refused by the capability flags
        try:
            _tables(problem)
        except InfeasibleTree as exc:
            return [f"infeasible: {exc}"]
        except ValueError as exc:
            return [str(exc)]
        return []

    def _solve(self, problem: Problem, *, time_limit: float | None = None, **options: Any) -> Solution:
        """Solve a supported problem exactly (``time_limit`` is ignored: the DP always finishes)."""
        if options:
            raise TypeError(f"costtable takes no options, got {sorted(options)}")
        t0 = time.perf_counter()
        try:
            values, stats = _solve_problem(problem)
        except InfeasibleTree as exc:
            raise SolverFailed(self.name, "infeasible", str(exc)) from exc
        wall = time.perf_counter() - t0
        return Solution(values=values, objective=problem.objective_value(values), status="optimal",
                        solver=self.name, wall_time=wall, stats=stats)
