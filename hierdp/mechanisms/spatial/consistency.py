"""Consistency of a noisy spatial tree, posed as a hierdp :class:`~hierdp.models.Problem`.

Hay et al.'s "smoothing" (the post-processing the HTF paper applies to its tree baselines) is
weighted least squares over the tree: minimise ``Σ_v (x_v - y_v)^2 / σ_v^2`` over real ``x`` with
every parent equal to the sum of its children, ``σ_v^2`` the variance of node v's noise (nodes not
measured have no term). As a Problem it is ``objective="l2"``, weights ``1/σ^2``, continuous, no
sign constraint, and any registered solver that supports that shape solves it: the ``twopass``
closed form by default (exact, O(n)), ``highs`` (a QP) as the cross-check. ``nonnegative=True``
and ``integer=True`` pose the non-negative / integer variants (solved by ``costtable`` exactly, or
``highs``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hierdp.models.problem import Problem
from hierdp.solvers import registry as solver_registry

__all__ = ["check_consistency_solver", "consistent_tree", "tree_problem"]


def tree_problem(parent: np.ndarray, noisy: np.ndarray, variances: np.ndarray, *, integer: bool = False,
                 nonnegative: bool = False) -> Problem:
    """The consistency Problem of a tree: targets ``noisy`` (NaN: not measured), weights ``1/variances``."""
    y = np.asarray(noisy, dtype=np.float64)
    var = np.asarray(variances, dtype=np.float64)
    if var.shape != y.shape:
        raise ValueError(f"variances has shape {var.shape} for {y.shape} values")
    measured = ~np.isnan(y)
    if np.any(measured & ~(np.isfinite(var) & (var > 0))):
        raise ValueError("every measured node needs a finite variance > 0")
    w = np.where(measured, 1.0 / np.where(measured, var, 1.0), 0.0)
    return Problem(parent, y, weights=w, objective="l2", integer=integer, nonnegative=nonnegative)


def consistent_tree(parent: np.ndarray, noisy: np.ndarray, variances: np.ndarray, *, solver: str | Any = "twopass",
                    cross_check: str | None = None, integer: bool = False, nonnegative: bool = False,
                    **options: Any) -> tuple[np.ndarray, Any]:
    """``(values, solution)``: the consistent tree closest to the noisy one in weighted L2, solved by
    the registry (``solver``; ``cross_check`` re-solves with a second solver and compares optima)."""
    problem = tree_problem(parent, noisy, variances, integer=integer, nonnegative=nonnegative)
    if solver == "twopass" and (integer or nonnegative):
        solver = "auto"
    sol = solver_registry.solve(problem, solver, cross_check=cross_check, **options)
    return sol.values, sol


def check_consistency_solver(solver: Any, what: str = "consistency_solver", *, unmeasured_root: bool = False) -> None:
    """Refuse, before any data is seen, a solver that cannot solve the consistency Problem, through
    the registry's one door (:func:`hierdp.solvers.check_solver`) on a probe of its shape (continuous
    weighted L2 over a tree, signed values; ``unmeasured_root``: AG's root has no measurement).
    ``None`` (no consistency step) passes.

    Raises:
        UnsupportedProblem: an unknown name, or a plug-in that cannot solve the probe (its reasons).
    """
    if solver is None:
        return
    # a depth-2 tree with signed targets and unequal variances: the shape the releases pose
    probe = tree_problem(np.array([-1, 0, 0, 1, 1, 2, 2]),
                         np.array([np.nan if unmeasured_root else 4.0, 3.0, -1.0, 2.0, 0.5, -2.0, 1.0]),
                         np.array([1.0, 2.0, 2.0, 5.0, 5.0, 5.0, 5.0]))
    solver_registry.check_solver(solver, probe, task=f"solve the tree's consistency problem as {what} (continuous "
                                                    "weighted least squares, signed values)")
