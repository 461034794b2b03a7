"""Plug-in ``"paper_round"``: TDA_l2's rounding of a continuous L2 optimum (paper 000 §5).

This is a *named heuristic*, registered so that a mechanism reaches it like any other level solver
(and ``hierdp solvers`` lists it): the continuous L2 projection of each group (by the
``projection`` plug-in, or any solver of continuous L2 levels given as ``continuous_solver=``),
then the paper's rule. The result is consistent (non-negative integers summing to each total) but
it is **not** the integer L2 optimum - that is ``projection`` on an integer problem. The plug-in
says so in its description and in every solution's ``stats["exact"] = False``; ``solver="auto"``
never picks it, because ``projection`` comes first in the registry and accepts every problem this
plug-in accepts.

:func:`paper_round_batch` is the rule ("rounds and redistributes the
exceeding in a similar fashion of InfTDA, prioritizing the elimination of small values"), as
the authors' artifact implements it: round every entry to the nearest integer (half to even);
if a group then sums below its total, add 1 to its largest entries; if above, subtract 1 from
its smallest non-zero entries. Ties are broken by position (stable sort).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from hierdp._segments import MAX_REAL_MAGNITUDE
from hierdp.models.problem import Problem
from hierdp.solvers.base import Capabilities, GroupSolution, Solution, Solver, Termination, UnsupportedProblem, finish

__all__ = ["PaperRoundSolver", "paper_round_batch"]


def _rank_within_groups(group: np.ndarray, sort_key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Order of entries by (group, sort_key) stable, and each entry's rank inside its group."""
    order = np.lexsort((np.arange(group.size), sort_key, group))
    g_sorted = group[order]
    starts = np.flatnonzero(np.r_[True, g_sorted[1:] != g_sorted[:-1]]) if g_sorted.size else np.zeros(0, np.int64)
    first = np.zeros(g_sorted.size, np.int64)
    if g_sorted.size:
        first[starts] = starts
        first = np.maximum.accumulate(first)
    rank = np.empty(group.size, np.int64)
    rank[order] = np.arange(g_sorted.size) - first
    return order, rank


def paper_round_batch(values: np.ndarray, offsets: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """Round each group of a continuous non-negative solution to integers summing to its total.

    Args:
        values: float children values (e.g. the L2 projection), groups contiguous.
        offsets: group g is ``values[offsets[g]:offsets[g+1]]``.
        totals: integer group totals.

    Returns:
        int64 array, non-negative, each group summing exactly to its total.
    """
    x = np.rint(np.asarray(values, dtype=float)).astype(np.int64)
    x = np.maximum(x, 0)
    offsets = np.asarray(offsets, dtype=np.int64)
    totals = np.asarray(totals, dtype=np.int64)
    sizes = np.diff(offsets)
    group = np.repeat(np.arange(sizes.size, dtype=np.int64), sizes)
    # the residual is at most half the group size, but loop defensively until every group is exact
    for _ in range(64):
        diff = totals - np.bincount(group, weights=x, minlength=sizes.size).astype(np.int64)
        if not np.any(diff):
            return x
        d = diff[group]
        # add: the |diff| largest entries of groups below their total
        up = d > 0
        if up.any():
            _, rank = _rank_within_groups(group[up], -x[up])
            idx = np.flatnonzero(up)
            x[idx[rank < d[up]]] += 1
        # remove: the |diff| smallest non-zero entries of groups above their total
        down = (d < 0) & (x > 0)
        if down.any():
            _, rank = _rank_within_groups(group[down], x[down])
            idx = np.flatnonzero(down)
            x[idx[rank < -d[down]]] -= 1
    diff = totals - np.bincount(group, weights=x, minlength=sizes.size).astype(np.int64)
    if np.any(diff):
        g = int(np.flatnonzero(diff)[0])
        raise ValueError(f"rounding failed for group {g}: total {int(totals[g])} not reachable "
                         "with non-negative integers (is the total negative or the group empty?)")
    return x


class PaperRoundSolver(Solver):
    """Plug-in ``"paper_round"`` (see the module docstring). Option ``continuous_solver`` (a
    registered name or Solver; default ``"projection"``) computes the continuous step, with
    ``continuous_options`` (a dict) passed to it."""

    name = "paper_round"
    exact = False  # a named heuristic: solver="auto" never picks it
    capabilities = Capabilities(
        objectives=frozenset({"l2"}),
        integer=True,
        continuous=False,
        structures=frozenset({"level"}),
        features=frozenset(),
        # the continuous step (projection by default) resolves real targets below 2^44 only
        limits={"max_magnitude": MAX_REAL_MAGNITUDE, "time_limit": "passed to the continuous step",
                "optimality": "none: a heuristic, not the integer L2 optimum"},
        description="paper 000 TDA_l2 heuristic: paper's rounding of the continuous L2 projection "
                    "(consistent; NOT the integer L2 optimum; never chosen by auto)",
    )

    @staticmethod
    def _options(options: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        continuous_solver = options.pop("continuous_solver", "projection")
        continuous_options = dict(options.pop("continuous_options", None) or {})
        if options:
            raise TypeError(f"paper_round: unknown option(s) {sorted(options)} (options of the continuous "
                            "solver go in continuous_options)")
        return continuous_solver, continuous_options

    def _round(self, x: np.ndarray, offsets: np.ndarray, totals: np.ndarray, continuous_solver: Any,
               time_limit: float | None, continuous_options: dict[str, Any]) -> np.ndarray:
        from hierdp.solvers.registry import solve_groups

        cont = solve_groups(np.asarray(x, dtype=np.float64), offsets, np.asarray(totals, dtype=np.float64),
                            solver=continuous_solver, objective="l2", integer=False, time_limit=time_limit,
                            **continuous_options)
        return paper_round_batch(np.asarray(cont.values, dtype=np.float64), offsets,
                                 np.rint(np.asarray(totals, dtype=np.float64)).astype(np.int64))

    def solve_problem(self, problem: Problem, *, time_limit: float | None = None, **options: Any) -> Solution:
        """The paper's rounding of the continuous optimum (termination ``completed``: a heuristic)."""
        continuous_solver, continuous_options = self._options(options)
        t0 = time.perf_counter()
        parents, offsets, child_index, totals = problem.level_groups()
        y = self._round(problem.target[child_index], offsets, totals, continuous_solver, time_limit,
                        continuous_options)
        values = np.rint(np.nan_to_num(problem.fixed)).astype(np.int64)
        values[child_index] = y
        return finish(problem, values, Termination.COMPLETED, self.name, t0,
                      {"exact": False, "rule": "paper 000 §5 rounding", "n_groups": int(parents.size),
                       "continuous_solver": getattr(continuous_solver, "name", continuous_solver)})

    def solve_groups(self, values: np.ndarray, offsets: np.ndarray, totals: np.ndarray, *, objective: str,
                     integer: bool = True, weights: np.ndarray | None = None, time_limit: float | None = None,
                     **options: Any) -> GroupSolution:
        """A TopDown level without posing a :class:`Problem` (the level's own arrays)."""
        if objective != "l2" or not integer or weights is not None:
            raise UnsupportedProblem("solver 'paper_round' rounds unweighted integer L2 levels only "
                                     f"(got objective {objective!r}, integer={integer}, "
                                     f"weights={'yes' if weights is not None else 'no'})")
        continuous_solver, continuous_options = self._options(options)
        t0 = time.perf_counter()
        x = np.asarray(values, dtype=np.float64)
        offs = np.asarray(offsets, dtype=np.int64)
        y = self._round(x, offs, np.asarray(totals), continuous_solver, time_limit, continuous_options)
        return GroupSolution(values=y, objective=float(np.sum((y - x) ** 2)), solver=self.name,
                             wall_time=time.perf_counter() - t0,
                             stats={"exact": False, "rule": "paper 000 §5 rounding",
                                    "continuous_solver": getattr(continuous_solver, "name", continuous_solver)})
