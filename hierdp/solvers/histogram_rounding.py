"""``histogram_cells``: the exact integer rounder of histogram level chunks (kind
``"histogram_rounding"``), certified per parent.

**Cells objective** (``rounding="cells"``). Over the box ``floor(x̂) <= y <= floor(x̂) + 1`` (within
the bounds) the L1 objective separates by parent cell: each parent cell needs
``r = P - sum floor`` increments among its child cells that have room, and an increment of a cell
with fractional part ``f`` changes the objective by ``1 - 2f``; so giving the increments to the
``r`` largest fractional parts is optimal (exactly; ties are equally good). Consistency holds
exactly in integers. A parent cell with ``r`` outside ``[0, cells with room]`` is not certified.
With rows or invariant child totals the same point is optimal whenever it satisfies them (they
only shrink the feasible set); when it does not, the parent is not certified.

**Queries objective** (``rounding="queries"``, L1 over every query answer, the DAS's objective).
Every term is at least the distance of its continuous value to the nearest integer it may take
(a cell: within its box; a query answer: an integer), so the sum of those distances is a lower
bound; the cell rounder's point is certified optimal when its objective meets that bound. Other
parents are not certified (the caller hands them to a MIP solver).

Cost ``O(slots log slots)`` over the cells with room (never a ``(C, K)`` sort).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from hierdp.models.histogram import HistogramRounding, rounding_box
from hierdp.models.problem import Problem
from hierdp.solvers.base import Capabilities, Solution, Solver

__all__ = ["HistogramCellsRounder", "round_cells"]

REASONS = {
    1: "the continuous point is not consistent with the parent's cells within the box (no integer point there)",
    2: "the cell rounder's point breaks a row or an invariant total (the rows need a MIP)",
    3: "rounding='queries': the cell rounder's point does not meet the lower bound (the queries objective needs "
       "a MIP)",
}


def round_cells(problem: HistogramRounding) -> tuple[np.ndarray, np.ndarray]:
    """The closed-form rounder (module docstring). Returns ``(y (C, K) int64, reason (P,))``
    (reason 0: certified)."""
    c = problem.chunk
    P, _C, K = c.shape
    kp = c.parent_values.shape[1]
    lo, hi = rounding_box(c, problem.xhat)
    lo_i = lo.astype(np.int64)
    room_c, room_k = np.nonzero(hi > lo)
    frac = problem.xhat[room_c, room_k] - lo[room_c, room_k]
    cp = np.asarray(c.child_parent, np.int64)
    group_all = (cp[:, None] * kp + c.cell_map[None, :])
    floor_sum = np.bincount(group_all.ravel(), weights=lo.ravel(), minlength=P * kp)
    need = np.rint(c.parent_values).astype(np.int64).ravel() - np.rint(floor_sum).astype(np.int64)
    g = group_all[room_c, room_k]
    size = np.bincount(g, minlength=P * kp)
    good = (need >= 0) & (need <= size)
    order = np.lexsort((-frac, g))
    gs = g[order]
    first = np.searchsorted(gs, np.arange(P * kp))
    rank = np.arange(gs.size) - first[gs]
    inc = np.zeros(gs.size, np.int64)
    inc[order] = rank < need[gs]
    y = lo_i.copy()
    y[room_c, room_k] += inc
    reason = np.where(good.reshape(P, kp).all(1), 0, 1)
    if c.totals is not None or c.n_rows:
        broken = np.zeros(P, bool)
        if c.totals is not None:
            off = y.sum(1) != np.rint(c.totals).astype(np.int64)
            np.logical_or.at(broken, cp[off], True)
        if c.n_rows:
            assert c.rows is not None and c.row_lower is not None and c.row_upper is not None
            r = c.rows @ y.ravel().astype(float)
            bad = np.flatnonzero((r < c.row_lower - 1e-9) | (r > c.row_upper + 1e-9))
            if bad.size:
                rows = c.rows[bad]
                np.logical_or.at(broken, cp[rows.indices // K], True)
        reason = np.where((reason == 0) & broken, 2, reason)
    if problem.queries:
        lower = _queries_lower_bound(problem, lo, hi)
        obj = problem.parent_objectives(y)
        reason = np.where((reason == 0) & (obj > lower + 1e-9 * np.maximum(1.0, lower)), 3, reason)
    return y, reason


def _queries_lower_bound(problem: HistogramRounding, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per parent: the sum over cells of the distance of x̂ to the nearest value of its box, and over
    query answers of the distance of the continuous answer to the nearest integer."""
    c = problem.chunk
    x = problem.xhat
    cell = np.minimum(np.abs(x - lo), np.where(hi > lo, np.abs(hi - x), np.inf)).sum(1)
    for q, mat in enumerate(c.query_mats):
        a = c.queries.answer(q, x) if c.queries is not None else x @ mat.T
        cell += np.abs(a - np.rint(a)).sum(1)
    return np.bincount(c.child_parent, cell, minlength=c.shape[0])


class HistogramCellsRounder(Solver):
    """The exact cell rounder of histogram chunks (module docstring)."""

    name = "histogram_cells"
    problem_kinds = frozenset({"histogram_rounding"})

    @dataclass(frozen=True)
    class Options:
        """No options."""

    capabilities = Capabilities(
        objectives=frozenset({"l1"}), integer=True, continuous=False, structures=frozenset({"histogram"}),
        features=frozenset({"bounds", "linear_constraints", "query_terms"}),
        limits={"problem_kind": "histogram_rounding",
                "tolerance": "exact (integers); the queries objective only where a lower bound certifies it",
                "rows": "certified when the cell rounder's point satisfies them",
                "time_limit": "not needed (one sort)"},
        description="closed-form L1 rounder of histogram chunks over floor + {0, 1} (exact per parent; rows and "
                    "the queries objective certified when met)",
    )

    def unsupported(self, problem: Any) -> list[str]:
        """General Problems and other kinds are refused."""
        if isinstance(problem, Problem):
            return ["solves histogram level chunks (problem kind 'histogram_rounding') only, not a general Problem"]
        if getattr(problem, "kind", None) != "histogram_rounding":
            return [f"solves problem kind 'histogram_rounding', not "
                    f"{getattr(problem, 'kind', type(problem).__name__)!r}"]
        return []

    def solve_problem(self, problem: Any, *, time_limit: float | None = None, **options: Any) -> Solution:
        """Round every parent; status ``optimal`` only when every parent is certified."""
        from hierdp.solvers.histogram_wls import chunk_solution

        self.parse_options(options)
        t0 = time.perf_counter()
        y, reason = round_cells(problem)
        return chunk_solution(problem, y, reason == 0, reason, self.name, t0, {}, REASONS)
