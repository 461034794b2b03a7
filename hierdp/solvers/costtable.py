"""The ``costtable`` plug-in: paper 001's cost-table dynamic program (M_DP, §6–7) for exact
integer weighted L2 over a whole tree or forest, linear in depth.

Method (details and the exactness proof in :mod:`hierdp.solvers._costtable_dp` and
``docs/costtable.md``): a continuous cost-table DP over breakpoints (Alg. 1 with sorted event
lists, one segmented sort per level) gives a centre; the exact integer DP over sorted marginals
then runs inside windows around it, and a window edge touched by the answer is widened and the
problem solved again, so the answer is certified optimal by the convex-cost-flow optimality
condition, never a boundary artefact. Work grows with leaves x depth (breakpoints) plus the
windows' widths, not with the counts.

Supported: objective ``l2`` with non-negative weights (nodes with a NaN target or zero weight
have no cost), integer, non-negative values, consistency everywhere, any node fixed (a fixed
root is an invariant total), per-node bounds, forests, any depth. A free root needs no upper
bound (the targets bound the optimum). Refused in :meth:`CostTableSolver.unsupported` before any
solving: other objectives, continuous problems, negative values allowed, user linear constraints,
Pyomo hooks, NaN bounds, infeasible fixed values / bounds (the refusal names the node), values
beyond 2^50 (~1.1e15) and positive weights outside [2^-100, 2^100].

``time_limit`` is honoured between the DP's levels and rounds (overhead: the work of one level
of one pass, milliseconds on small trees, up to 1-2 s on the 3.2 M-node census tree); when it
passes, the best feasible point found is returned with termination ``time_limit`` (the registry then
raises ``SolverFailed``).
"""

from __future__ import annotations

import hashlib
import time
import weakref
from typing import Any
from collections.abc import Sequence

import numpy as np

from hierdp.errors import exact_number
from hierdp.models.problem import Problem, ProblemError
from hierdp.solvers._costtable_dp import (
    MAX_EXACT,
    Domains,
    Forest,
    InfeasibleTree,
    TimeLimitReached,
    TreeTooLarge,
    compile_domains,
    solve_compiled,
)
from hierdp.solvers.base import (
    Capabilities,
    GroupSolution,
    Solution,
    SolutionStatus,
    Solver,
    SolverFailed,
    Termination,
    UnsupportedProblem,
    finish,
)

__all__ = ["CostTableSolver", "InfeasibleTree", "costtable_solve"]


def _fingerprint(problem: Problem) -> bytes:
    """Digest of everything the compiled tree depends on (a Problem may be edited in place)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(b"nonnegative" if problem.nonnegative else b"free sign")
    for arr in (problem.parent, problem.target, problem.fixed, problem.weights, problem.lower, problem.upper):
        h.update(np.ascontiguousarray(arr).data)  # hashed in place, no copy
    return h.digest()


def _compile(problem: Problem) -> tuple[Forest, Domains]:
    """Breadth-first layout and domains (raises InfeasibleTree, TreeTooLarge, ValueError)."""
    lower = np.asarray(problem.lower, dtype=float)
    if problem.nonnegative:
        lower = np.maximum(lower, 0.0)  # NaN stays NaN (refused by compile_domains)
    forest = Forest.from_parent(problem.parent)
    dom = compile_domains(forest, problem.target, problem.weights, problem.fixed, lower, problem.upper)
    return forest, dom


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
        int64 array of optimal values, one per node. Ties are broken deterministically (a free
        root takes its smallest minimiser; equal marginal costs go to the earlier children).

    Raises:
        hierdp.models.problem.ProblemError: malformed input (shapes, cycles, bad weights, NaN bounds).
        InfeasibleTree: no feasible integer assignment (the message names a node).
        TreeTooLarge: values beyond 2^50 or weights outside [2^-100, 2^100].
    """
    problem = Problem(parent, target, fixed=fixed, weights=weights, lower=lower, upper=upper,
                      objective="l2", integer=True, nonnegative=True)
    try:
        forest, dom = _compile(problem)
    except (InfeasibleTree, TreeTooLarge):
        raise
    except ValueError as exc:  # NaN bounds: a malformed problem
        raise ProblemError(str(exc)) from None
    return solve_compiled(forest, dom).values


class CostTableSolver(Solver):
    """Cost-table dynamic program (paper 001, Alg. 1) with certified windows, linear in depth."""

    name = "costtable"
    capabilities = Capabilities(
        objectives=frozenset({"l2"}),
        integer=True,
        continuous=False,
        structures=frozenset({"level", "tree"}),
        features=frozenset({"weights", "bounds", "missing_targets"}),
        # text, not a number: the plug-in checks the values the tree can reach itself (finer than
        # the base class's check of Problem.magnitude())
        limits={"max_magnitude": "2^50 (values the tree can reach; checked by the plug-in)",
                "time_limit": "honoured between DP levels and rounds (overhead: one level's work, "
                              "up to 1-2 s on a 3.2 M-node tree)",
                "optimality": "exact"},
        description="paper 001 cost-table DP: exact integer weighted L2 over a whole tree (any depth, counts < 2^50)",
    )

    def __init__(self) -> None:
        # the last compiled problem, so unsupported() then solve() compile once
        self._last: tuple[Any, bytes, Forest, Domains] | None = None

    def _compiled(self, problem: Problem) -> tuple[Forest, Domains]:
        fp = _fingerprint(problem)
        if self._last is not None and self._last[0]() is problem and self._last[1] == fp:
            return self._last[2], self._last[3]
        forest, dom = _compile(problem)
        self._last = (weakref.ref(problem), fp, forest, dom)
        return forest, dom

    def extra_checks(self, problem: Problem) -> list[str]:
        """Refuse NaN bounds, infeasible fixed values / bounds, and values too large for exact marginals."""
        if problem.objective != "l2" or not problem.integer or not problem.nonnegative:
            return []  # already refused by the capability flags
        try:
            self._compiled(problem)
        except InfeasibleTree as exc:
            return [f"infeasible: {exc}"]
        except TreeTooLarge as exc:
            return [str(exc)]
        except ValueError as exc:
            return [str(exc)]
        return []

    def solve_problem(self, problem: Problem, *, time_limit: float | None = None, **options: Any) -> Solution:
        """Solve a supported problem exactly (see the module docstring for ``time_limit``)."""
        if options:
            raise TypeError(f"costtable takes no options, got {sorted(options)}")
        t0 = time.perf_counter()
        deadline = None if time_limit is None else t0 + float(time_limit)
        try:
            forest, dom = self._compiled(problem)
        except InfeasibleTree as exc:
            raise SolverFailed(self.name, Termination.INFEASIBLE, str(exc)) from exc
        finally:
            self._last = None  # do not keep a large compiled tree alive after the solve
        try:
            result = solve_compiled(forest, dom, deadline=deadline)
        except TimeLimitReached as exc:
            if exc.values is None:
                raise SolverFailed(self.name, Termination.TIME_LIMIT, "no feasible point yet") from None
            return finish(problem, exc.values, Termination.TIME_LIMIT, self.name, t0, dict(exc.stats))
        return finish(problem, result.values, Termination.OPTIMAL, self.name, t0, result.stats)

    def solve_groups(self, values: np.ndarray, offsets: np.ndarray, totals: np.ndarray, *,
                     objective: str, integer: bool = True, weights: np.ndarray | None = None,
                     time_limit: float | None = None, **options: Any) -> GroupSolution:
        """A TopDown level (independent groups under fixed totals) without building a Problem.

        Integer L2 only (anything else goes through the default path, which refuses it); the
        input is checked as :meth:`Problem.from_groups` would, and the output (sums, signs,
        integrality) is checked before it is returned.
        """
        if objective != "l2" or not integer or options:
            return super().solve_groups(values, offsets, totals, objective=objective, integer=integer,
                                        weights=weights, time_limit=time_limit, **options)
        t0 = time.perf_counter()
        x, offsets, totals, w = _check_groups(values, offsets, totals, weights)
        sizes = np.diff(offsets)
        g = totals.size
        if np.any((sizes == 0) & (totals != 0)):
            k = int(np.flatnonzero((sizes == 0) & (totals != 0))[0])
            raise UnsupportedProblem(f"solver 'costtable' cannot solve this problem exactly: infeasible: group {k} "
                                     f"has no children but total {exact_number(totals[k])}")
        if totals.size and totals.max() > MAX_EXACT:
            raise UnsupportedProblem(f"solver 'costtable' cannot solve this problem exactly: totals up to "
                                     f"{exact_number(totals.max())} exceed the DP's exact range (2^50)")
        n = g + x.size
        forest = Forest.from_groups(sizes)
        fixed = np.concatenate([totals, np.full(x.size, np.nan)])
        target = np.concatenate([np.full(g, np.nan), x])
        wts = np.concatenate([np.ones(g), w])
        try:
            dom = compile_domains(forest, target, wts, fixed, np.zeros(n), np.full(n, np.inf))
        except (InfeasibleTree, TreeTooLarge) as exc:
            raise UnsupportedProblem(f"solver 'costtable' cannot solve this problem exactly: {exc}") from None
        deadline = None if time_limit is None else t0 + float(time_limit)
        try:
            result = solve_compiled(forest, dom, deadline=deadline)
        except TimeLimitReached:
            raise SolverFailed(self.name, Termination.TIME_LIMIT) from None
        kids = result.values[g:]
        sums = np.zeros(g, np.int64)
        np.add.at(sums, np.repeat(np.arange(g), sizes), kids)
        if np.any(kids < 0) or not np.array_equal(sums, totals.astype(np.int64)):
            raise SolverFailed(self.name, Termination.OPTIMAL, "group sums or signs violated",
                               solution_status=SolutionStatus.INFEASIBLE, refuted_by="feasibility")
        m = ~np.isnan(x)
        objective_value = float(np.sum(w[m] * (kids[m] - x[m]) ** 2))
        return GroupSolution(values=kids, objective=objective_value, solver=self.name,
                             wall_time=time.perf_counter() - t0, stats=result.stats)


def _check_groups(values: Any, offsets: Any, totals: Any, weights: Any) -> tuple[np.ndarray, ...]:
    """The checks of ``Problem.from_groups`` + ``Problem`` for a level (same errors)."""
    x = np.asarray(values, dtype=float).ravel()
    offsets = np.asarray(offsets, dtype=np.int64).ravel()
    totals = np.asarray(totals, dtype=float).ravel()
    g = totals.size
    if offsets.size != g + 1 or offsets[0] != 0 or offsets[-1] != x.size:
        raise ProblemError("offsets must have len(totals)+1 entries, start at 0, end at len(values)")
    if np.any(np.diff(offsets) < 0):
        raise ProblemError("offsets must be non-decreasing")
    if np.any(np.isinf(x)):
        raise ProblemError("targets must be finite or NaN")
    if not np.all(np.isfinite(totals)):
        raise ProblemError("fixed values must be finite")
    bad = totals != np.round(totals)
    if bad.any():
        raise ProblemError(f"node {int(np.flatnonzero(bad)[0])} is fixed at a non-integer value in an integer problem")
    if np.any(totals < 0):
        raise ProblemError(f"node {int(np.flatnonzero(totals < 0)[0])} is fixed at a negative value in a non-negative problem")
    w = np.ones(x.size) if weights is None else np.asarray(weights, dtype=float).ravel()
    if w.size != x.size:
        raise ProblemError(f"weights has {w.size + g} entries for {x.size + g} nodes")
    if np.any(w < 0) or not np.all(np.isfinite(w)):
        raise ProblemError("weights must be finite and non-negative")
    costed = ~np.isnan(x) & (w > 0)
    if np.any(costed & ((w < 2.0**-100) | (w > 2.0**100))):
        raise UnsupportedProblem("solver 'costtable' cannot solve this problem exactly: positive weights must lie in "
                                 "[2^-100, 2^100]")
    if np.any(np.abs(x[costed]) > MAX_EXACT):
        raise UnsupportedProblem("solver 'costtable' cannot solve this problem exactly: targets beyond the DP's exact "
                                 "range (2^50)")
    return x, offsets, totals, w
