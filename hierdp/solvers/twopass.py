"""The ``twopass`` plug-in: exact continuous weighted least squares over a tree in two passes.

Hay, Rastogi, Miklau & Suciu's consistency ("boosting the accuracy of differentially private
histograms through consistency", VLDB 2010) generalised to any tree and any per-node variances:
the minimiser of ``sum_i w_i (y_i - x_i)^2`` over real ``x`` with every parent equal to the sum of
its children (``w_i = 1/σ_i²``; ``NaN`` target or ``w_i = 0``: node not measured; fixed nodes:
known exactly) is the best linear unbiased estimate, computed by Gaussian message passing:

* bottom-up, each node ``v`` gets the estimate ``z_v`` of its subtree total and its variance ``P_v``:
  a leaf ``z = y, P = 1/w``; an internal node combines its own measurement with its children's
  ``S_v = Σ z_c, Q_v = Σ P_c``: ``z_v = (w_v y_v + S_v/Q_v) / (w_v + 1/Q_v)``,
  ``P_v = 1/(w_v + 1/Q_v)`` (unmeasured: ``z_v = S_v, P_v = Q_v``; fixed: ``z_v = f_v, P_v = 0``);
* top-down, ``x_root = z_root`` and ``x_c = z_c + (P_c/Q_v)(x_v - S_v)``: each child absorbs the
  parent's correction in proportion to its variance.

With equal variances per level of a complete tree this is Hay et al.'s closed form; it is also
the scalar case of the Census two-pass GLS. Vectorized per depth level (one ``bincount`` per
level), O(n).

Supported: objective ``l2``, continuous values, any weights, fixed nodes, internal nodes without a
measurement, no sign constraint. Refused: integer or non-negative problems (the closed form is the
unconstrained optimum: use ``costtable`` for exact integer non-negative L2, ``highs`` for a
non-negative continuous QP), bounds, linear constraints, Pyomo hooks, free leaves without a
measurement (their split would not be unique), and fixed values that contradict their fixed
descendants.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from hierdp.models.problem import Problem
from hierdp.solvers.base import Capabilities, Solution, Solver, SolverFailed, Termination, finish

__all__ = ["TwoPassSolver", "two_pass_wls"]


def _levels(problem: Problem) -> list[np.ndarray]:
    depth = problem.depth()
    order = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[order], np.arange(int(depth.max()) + 2))
    return [order[bounds[d]:bounds[d + 1]] for d in range(int(depth.max()) + 1)]


def _bottom_up(problem: Problem,
               levels: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """``(z, P, S, Q, problems)``: subtree estimates and variances, children sums; ``problems``
    lists why the problem is not solvable (unmeasured free leaves, contradictory fixed nodes)."""
    n = problem.n
    parent = problem.parent
    fixed = problem.is_fixed
    w = np.where(np.isnan(problem.target), 0.0, problem.weights)
    y = np.nan_to_num(problem.target)
    measured = ~fixed & (w > 0)
    nch = problem.n_children
    z = np.zeros(n)
    P = np.zeros(n)
    S = np.zeros(n)
    Q = np.zeros(n)
    why: list[str] = []
    for v in reversed(levels):
        leaf = nch[v] == 0
        bad = leaf & ~fixed[v] & ~measured[v]
        if bad.any():
            why.append(f"free leaf {problem.label(int(v[bad][0]))} has no measurement (NaN target or weight 0): "
                       "its value is not determined")
            return z, P, S, Q, why
        zv = np.where(leaf, y[v], S[v])
        pv = np.where(leaf, 0.0, Q[v])
        with np.errstate(divide="ignore", invalid="ignore"):
            meas = measured[v]
            lv = meas & leaf
            pv = np.where(lv, 1.0 / np.where(lv, w[v], 1.0), pv)
            comb = meas & ~leaf & (Q[v] > 0)
            inv_q = np.where(comb, 1.0 / np.where(comb, Q[v], 1.0), 0.0)
            prec = w[v] + inv_q
            zc = (w[v] * y[v] + S[v] * inv_q) / np.where(comb, prec, 1.0)
            zv = np.where(comb, zc, zv)
            pv = np.where(comb, 1.0 / np.where(comb, prec, 1.0), pv)
        fx = fixed[v]
        if fx.any():
            f = problem.fixed[v]
            exact_kids = fx & ~leaf & (Q[v] == 0)
            tol = 1e-9 * np.maximum(1.0, np.abs(f))
            clash = exact_kids & (np.abs(S[v] - np.nan_to_num(f)) > tol)
            if clash.any():
                k = int(v[clash][0])
                why.append(f"infeasible: {problem.label(k)} is fixed at {problem.fixed[k]!r} but its fixed "
                           f"descendants add up to {S[k]!r}")
                return z, P, S, Q, why
            zv = np.where(fx, np.nan_to_num(f), zv)
            pv = np.where(fx, 0.0, pv)
        z[v] = zv
        P[v] = pv
        has_p = parent[v] >= 0
        if has_p.any():
            pv_idx = parent[v[has_p]]
            S += np.bincount(pv_idx, weights=zv[has_p], minlength=n)
            Q += np.bincount(pv_idx, weights=pv[has_p], minlength=n)
    return z, P, S, Q, why


def _top_down(problem: Problem, levels: list[np.ndarray], z: np.ndarray, P: np.ndarray, S: np.ndarray,
              Q: np.ndarray) -> np.ndarray:
    x = np.zeros(problem.n)
    parent = problem.parent
    for v in levels:
        p = parent[v]
        root = p < 0
        pp = np.where(root, 0, p)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(Q[pp] > 0, P[v] / np.where(Q[pp] > 0, Q[pp], 1.0), 0.0)
        x[v] = np.where(root, z[v], z[v] + share * (x[pp] - S[pp]))
    return x


def two_pass_wls(problem: Problem) -> np.ndarray:
    """The exact minimiser of a supported problem (see the module docstring), float64.

    Raises:
        ValueError: the problem is not solvable by the closed form (the message says why).
    """
    levels = _levels(problem)
    z, P, S, Q, why = _bottom_up(problem, levels)
    if why:
        raise ValueError("; ".join(why))
    return _top_down(problem, levels, z, P, S, Q)


class TwoPassSolver(Solver):
    """Hay et al.'s consistency as exact two-pass weighted least squares over a tree (closed form)."""

    name = "twopass"
    capabilities = Capabilities(
        objectives=frozenset({"l2"}),
        integer=False,
        continuous=True,
        structures=frozenset({"level", "tree"}),
        features=frozenset({"weights", "free_sign", "missing_targets"}),
        limits={"time_limit": "not needed (two linear passes)",
                "optimality": "closed form in float64 (round-off relative to the magnitude)"},
        tolerance=1e-9,
        description="Hay et al. two-pass GLS: exact continuous weighted L2 over a tree, any sign (closed form)",
    )

    def extra_checks(self, problem: Problem) -> list[str]:
        """Refuse non-negativity (not honoured by the closed form) and unsolvable trees."""
        why: list[str] = []
        if problem.nonnegative:
            why.append("non-negativity not supported (the closed form is the unconstrained optimum): pose the problem "
                       "with nonnegative=False, or use costtable (integer) / highs (continuous QP)")
        if problem.objective == "l2" and not problem.integer:
            levels = _levels(problem)
            why.extend(_bottom_up(problem, levels)[4])
        return why

    def solve_problem(self, problem: Problem, *, time_limit: float | None = None, **options: Any) -> Solution:
        """Solve exactly (``time_limit`` is ignored: two linear passes always finish)."""
        if options:
            raise TypeError(f"twopass takes no options, got {sorted(options)}")
        t0 = time.perf_counter()
        try:
            values = two_pass_wls(problem)
        except ValueError as exc:
            raise SolverFailed(self.name, Termination.INFEASIBLE, str(exc)) from exc
        return finish(problem, values, Termination.OPTIMAL, self.name, t0,
                      {"nodes": problem.n, "levels": int(problem.depth().max()) + 1})
