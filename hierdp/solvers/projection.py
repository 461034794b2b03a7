"""L2 fast path: Euclidean projection onto the scaled simplex and its exact integer version.

One group: noisy values ``x`` (b reals) and a total ``c >= 0``.

* Continuous: ``argmin ||y - x||_2`` over ``{y >= 0, sum(y) = c}`` is ``y = max(x - tau, 0)`` with
  the unique ``tau`` solving ``sum(max(x - tau, 0)) = c`` (KKT of the projection). With ``x``
  sorted decreasingly and ``S_k`` the sum of its k largest entries, ``tau = max_k (S_k - c) / k``:
  ``sum(max(x - tau, 0)) >= S_k - k tau`` for every k forces ``tau >= (S_k - c)/k``, and at the
  maximum the active set's equation holds. One sort per group: O(b log b).
* Integer (TDA_l2 with integrality): ``argmin sum (y - x)^2`` over non-negative integers summing to
  ``c``: see :func:`integer_l2` for the method and its proof of exactness.

Both are vectorized over all groups of a TopDown level (segment sorts with ``np.lexsort`` on
``(key, group)``, segment cumulative sums, ``reduceat``).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from hierdp._segments import (
    MAX_REAL_MAGNITUDE,
    check_groups,
    check_sums,
    group_magnitude_problem,
    segment_cumsum,
    segment_sort,
)
from hierdp._segments import ulp_tolerance as _tolerance
from hierdp.models.problem import Problem
from hierdp.solvers.base import Capabilities, GroupSolution, Solution, Solver, Termination, UnsupportedProblem, finish


def _simplex_threshold(x: np.ndarray, c: np.ndarray, gid: np.ndarray, starts: np.ndarray,
                       sizes: np.ndarray) -> np.ndarray:
    """``tau`` of every (non-empty) group: ``max_k (S_k - c) / k`` over the k largest entries."""
    perm = segment_sort(-x, gid)  # decreasing within each group
    s_k = segment_cumsum(x[perm], starts, sizes)
    rank = np.arange(x.size) - np.repeat(starts, sizes) + 1
    return np.maximum.reduceat((s_k - np.repeat(c, sizes)) / rank, starts)


def project_batch(
    values: np.ndarray | list[float],
    offsets: np.ndarray | list[int],
    totals: np.ndarray | list[float],
) -> np.ndarray:
    """Euclidean projection of every group onto ``{y >= 0, sum(y) = totals[g]}`` (float64).

    Group g is ``values[offsets[g]:offsets[g+1]]``; totals are non-negative reals; an empty group
    must have total 0.

    Raises:
        ValueError: malformed input (see :func:`hierdp.solvers.intopt.check_groups`).
    """
    x, offs, tot = check_groups(values, offsets, totals, integer_totals=False, real_arithmetic=True)
    out = np.zeros(x.size)
    sizes_all = np.diff(offs)
    ne = sizes_all > 0
    if not ne.any():
        return out
    starts, sizes, c = offs[:-1][ne], sizes_all[ne], tot[ne]
    gid = np.repeat(np.arange(starts.size), sizes)
    tau = _simplex_threshold(x, c, gid, starts, sizes)
    out[:] = np.maximum(x - tau[gid], 0.0)
    return out


def project(x: np.ndarray | list[float], total: float) -> np.ndarray:
    """Euclidean projection of ``x`` onto ``{y >= 0, sum(y) = total}`` (float64), O(b log b)."""
    x = np.asarray(x, dtype=np.float64).ravel()
    return project_batch(x, np.array([0, x.size]), np.array([total], dtype=np.float64))


def integer_l2_batch(
    values: np.ndarray | list[float],
    offsets: np.ndarray | list[int],
    totals: np.ndarray | list[float],
) -> np.ndarray:
    """Exact integer L2 optimum of every group (int64); see :func:`integer_l2`.

    Raises:
        ValueError: malformed input; totals must be non-negative integers.
    """
    x, offs, tot = check_groups(values, offsets, totals, integer_totals=True, real_arithmetic=True)
    out = np.zeros(x.size, dtype=np.int64)
    sizes_all = np.diff(offs)
    ne = sizes_all > 0
    if not ne.any():
        return out
    starts, sizes, c = offs[:-1][ne], sizes_all[ne], tot[ne]
    gid = np.repeat(np.arange(starts.size), sizes)
    tau = _simplex_threshold(x, c.astype(np.float64), gid, starts, sizes)
    cont = np.maximum(x - tau[gid], 0.0)
    scale = np.maximum(np.maximum.reduceat(np.abs(x), starts), c.astype(np.float64))
    tol = _tolerance(scale)  # a few ulps: continuous solutions that are integers up to rounding
    base = np.floor(cont + tol[gid]).astype(np.int64)
    # units still to place: 0 <= k < (number of positive coordinates); rounding of the
    # continuous solution can leave k one unit per coordinate outside that range, either way
    k = c - np.add.reduceat(base, starts)
    rank = np.arange(x.size) - np.repeat(starts, sizes)
    k_e = np.repeat(k, sizes)
    # marginal cost of one more unit: (base+1-x)^2 - (base-x)^2 = 2 (base - x) + 1
    up = 2.0 * (base - x) + 1.0
    perm = segment_sort(up, gid)  # cheapest first; ties: earlier position first
    base[perm[(rank < k_e) & (k_e > 0)]] += 1
    if np.any(k < 0):  # remove units where removing one costs least: 1 - 2 (base - x), base > 0
        down = np.where(base > 0, 1.0 - 2.0 * (base - x), np.inf)
        perm = segment_sort(down, gid)
        base[perm[(rank < -k_e) & (k_e < 0)]] -= 1
    out[:] = base
    check_sums(out, offs, tot)
    return out


def integer_l2(x: np.ndarray | list[float], total: int) -> np.ndarray:
    """Exact ``argmin sum (y - x)^2`` over non-negative integers ``y`` with ``sum(y) == total``.

    Method: ``y0 = floor(p)`` with ``p = max(x - tau, 0)`` the continuous projection; then the
    ``k = total - sum(y0)`` coordinates with the smallest marginal cost
    ``(y0_i + 1 - x_i)^2 - (y0_i - x_i)^2 = 2 (y0_i - x_i) + 1`` get one more unit. Ties (equal
    marginal cost) go to the earlier position; every tie-break gives an optimum.

    Why exact: the problem is separable convex resource allocation, so an optimum is made of the
    ``total`` cheapest "units" (unit m of coordinate i costs ``2m - 1 - 2x_i``, increasing in m;
    picking the cheapest units greedily is exact, Gross 1956). Units ``m <= floor(p_i)`` cost
    ``<= -2 tau - 1``; the next unit of a coordinate with ``p_i > 0`` costs in
    ``(-2 tau - 1, -2 tau + 1]``; every other unit costs ``>= 1 - 2 tau`` (``>`` for third units).
    So the ``sum(floor(p))`` cheapest units are exactly the floor units, and the remaining
    ``k = sum(p - floor(p)) < #{p_i > 0}`` units are the cheapest "next units" (a unit costing
    exactly ``1 - 2 tau`` elsewhere only ties). Each coordinate gets at most one extra unit, so a
    single sort by marginal cost suffices.
    """
    x = np.asarray(x, dtype=np.float64).ravel()
    return integer_l2_batch(x, np.array([0, x.size]), np.array([total]))



def check_projection(out: np.ndarray, offsets: np.ndarray, totals: np.ndarray, values: np.ndarray) -> None:
    """Refuse a continuous projection whose groups miss their totals (beyond rounding) or go negative.

    A guard against logic errors, not a precision certificate: ``tau`` comes from a cumulative sum
    of up to ``b`` entries of ``values``, so the rounding of a group's sum is bounded by about ``b``
    ulps of ``sum |values| + total`` per entry.
    """
    offs = np.asarray(offsets, dtype=np.int64)
    sizes = np.diff(offs)
    ne = sizes > 0
    if not ne.any():
        return
    tot = np.asarray(totals, dtype=float)[ne]
    sums = np.add.reduceat(out, offs[:-1][ne])
    scale = np.add.reduceat(np.abs(np.asarray(values, dtype=float)), offs[:-1][ne]) + tot
    tol = sizes[ne] * _tolerance(scale)
    bad = (np.abs(sums - tot) > tol) | (np.minimum.reduceat(out, offs[:-1][ne]) < 0)
    if bad.any():
        g = int(np.flatnonzero(ne)[np.flatnonzero(bad)[0]])
        raise RuntimeError(f"internal error: projected group {g} sums to {sums[np.flatnonzero(bad)[0]]!r}, not its "
                           f"total {totals[g]!r}, or has a negative entry; please report this input")


class ProjectionSolver(Solver):
    """Plug-in ``"projection"``: L2 TopDown levels, continuous (simplex projection) or integer
    (exact optimal rounding of the projection).

    Refuses, before solving, magnitudes of 2^44 and beyond (real arithmetic must resolve units),
    so ``auto`` falls back to another plug-in there.
    """

    name = "projection"
    capabilities = Capabilities(
        objectives=frozenset({"l2"}),
        integer=True,
        continuous=True,
        structures=frozenset({"level"}),
        features=frozenset(),
        limits={"max_magnitude": MAX_REAL_MAGNITUDE, "time_limit": "not needed (one vectorized pass)",
                "optimality": "exact (integer); a few ulps per entry (continuous)"},
        tolerance=1e-9,
        description="sort-based projection onto the scaled simplex; exact integer L2 by greedy rounding",
    )

    def unsupported_groups(self, values: np.ndarray, offsets: np.ndarray, totals: np.ndarray, *, objective: str,
                           integer: bool, weights: np.ndarray | None = None) -> list[str]:
        """Refusals for a batch of groups, without building a :class:`Problem`."""
        why = []
        if objective != "l2":
            why.append(f"objective {objective!r} not supported (supports ['l2'])")
        if weights is not None and np.any(np.asarray(weights, dtype=float) != 1.0):
            why.append("non-uniform objective weights not supported")
        vals = np.asarray(values, dtype=float)
        if np.any(np.isnan(vals)):
            why.append("every free node needs a finite target (NaN targets not supported)")
        mag = group_magnitude_problem(vals, np.asarray(totals, dtype=float), real_arithmetic=True)
        if mag:
            why.append(mag)
        return why

    def solve_problem(self, problem: Problem, *, time_limit: float | None = None, **options: Any) -> Solution:
        """Solve a supported level problem (:func:`integer_l2_batch` or :func:`project_batch`)."""
        self.parse_options(options)
        t0 = time.perf_counter()
        parents, offsets, child_index, totals = problem.level_groups()
        x = problem.target[child_index]
        if problem.integer:
            y = integer_l2_batch(x, offsets, totals)
            values = np.rint(np.nan_to_num(problem.fixed)).astype(np.int64)
        else:
            y = project_batch(x, offsets, totals)
            check_projection(y, offsets, totals, x)
            values = np.nan_to_num(problem.fixed).astype(np.float64)
        values[child_index] = y
        sol = finish(problem, values, Termination.OPTIMAL, self.name, t0,
                     {"n_groups": int(parents.size), "n_children": int(child_index.size), "integer": problem.integer})
        sol.bound, sol.gap = sol.objective, 0.0
        return sol

    def solve_groups(self, values: np.ndarray, offsets: np.ndarray, totals: np.ndarray, *, objective: str,
                     integer: bool = True, weights: np.ndarray | None = None, time_limit: float | None = None,
                     **options: Any) -> GroupSolution:
        """The projection (or its exact integer rounding) on the whole batch, without a
        :class:`Problem`; the output is checked (sums, signs; exact int64 sums when integer)."""
        why = self.unsupported_groups(values, offsets, totals, objective=objective, integer=integer, weights=weights)
        if why:
            raise UnsupportedProblem(f"solver {self.name!r} cannot solve these groups exactly: " + "; ".join(why))
        self.parse_options(options)
        t0 = time.perf_counter()
        x = np.asarray(values, dtype=float)
        if integer:
            y = integer_l2_batch(x, offsets, totals)  # validates, and checks int64 sums and signs
        else:
            y = project_batch(x, offsets, totals)
            check_projection(y, offsets, totals, x)
        return GroupSolution(values=y, objective=float(np.sum((y - x) ** 2)), solver=self.name,
                             wall_time=time.perf_counter() - t0,
                             stats={"n_groups": int(np.asarray(totals).size), "n_children": int(x.size),
                                    "integer": bool(integer)})

    def extra_checks(self, problem: Problem) -> list[str]:
        """Magnitudes of 2^44 and beyond (real arithmetic must resolve units)."""
        if problem.structure != "level":
            return []
        _, _, child_index, totals = problem.level_groups()
        why = group_magnitude_problem(problem.target[child_index], totals, real_arithmetic=True)
        return [why] if why else []
