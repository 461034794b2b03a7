"""HiGHS as the back end of the lazy-chord loop (:mod:`hierdp.solvers._chords`): exact integer L2.

One ``highspy.Highs`` object holds the batch's model for every round: columns ``y`` (the node
variables, integer) and ``t`` (one per objective term: node terms, then query terms), rows for
consistency and user constraints, then the chord rows ``t_j - slope v_j >= intercept``, added with
``addRows`` as the windows grow. Each round is warm-started with ``setSolution`` from the best
point so far (``t_j = f_j(v_j)`` makes it feasible for the new rows) and runs with the time left.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from hierdp.models.arrays import ModelArrays
from hierdp.solvers._chords import ChordRound, ConvexTerms, chord_coefficients
from hierdp.solvers.base import Status

__all__ = ["HighsChordModel", "l2_terms"]


def l2_terms(arr: ModelArrays, lower: np.ndarray, upper: np.ndarray) -> ConvexTerms:
    """The integer-L2 terms of a batch: node terms (domain: their variable's bounds), then query
    terms (domain: unbounded; their values are integers since coefficients are)."""
    nq = arr.n_queries
    return ConvexTerms(
        target=np.r_[arr.obj_target, arr.q_target].astype(float),
        weight=np.r_[arr.obj_weight, arr.q_weight].astype(float),
        lower=np.r_[lower[arr.obj_var], np.full(nq, -np.inf)],
        upper=np.r_[upper[arr.obj_var], np.full(nq, np.inf)],
    )


class HighsChordModel:
    """The MIP ``min sum t`` of one batch in a ``highspy.Highs`` object (see module docstring)."""

    def __init__(self, runner: Any, arr: ModelArrays, terms: ConvexTerms, lower: np.ndarray, upper: np.ndarray,
                 settings: dict[str, Any]) -> None:
        import highspy as hs
        from scipy.sparse import coo_matrix

        self.runner = runner  # the plug-in's reused Highs object, its clock and its interrupt
        h = runner.h
        self.h = h
        self.hs = hs
        self.lower = np.asarray(lower, dtype=float)
        self.upper = np.asarray(upper, dtype=float)
        self.arr = arr
        self.terms = terms
        nv = arr.n_vars
        self.nv = nv
        self.nt = terms.size
        self.q_row = np.repeat(np.arange(arr.n_queries), np.diff(arr.q_ptr))
        rows = [np.repeat(np.arange(arr.cons_node.size), np.diff(arr.cons_ptr)),
                arr.cons_node.size + np.repeat(np.arange(arr.lin_lower.size), np.diff(arr.lin_ptr))]
        cols = [arr.cons_col, arr.lin_col]
        vals = [arr.cons_coef, arr.lin_coef]
        nrow = arr.cons_node.size + arr.lin_lower.size
        ncol = nv + self.nt
        a = coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                       shape=(nrow, ncol)).tocsc()
        a.sum_duplicates()
        lp = hs.HighsLp()
        lp.num_col_ = ncol
        lp.num_row_ = nrow
        lp.col_cost_ = np.r_[np.zeros(nv), np.ones(self.nt)]
        lp.col_lower_ = np.r_[lower, np.zeros(self.nt)]  # f_j >= 0
        lp.col_upper_ = np.r_[upper, np.full(self.nt, np.inf)]
        lp.row_lower_ = np.r_[arr.cons_rhs, arr.lin_lower]
        lp.row_upper_ = np.r_[arr.cons_rhs, arr.lin_upper]
        lp.a_matrix_.format_ = hs.MatrixFormat.kColwise
        lp.a_matrix_.start_ = a.indptr.astype(np.int32)
        lp.a_matrix_.index_ = a.indices.astype(np.int32)
        lp.a_matrix_.value_ = a.data.astype(float)
        lp.a_matrix_.num_col_ = ncol
        lp.a_matrix_.num_row_ = nrow
        lp.integrality_ = [hs.HighsVarType.kInteger] * nv + [hs.HighsVarType.kContinuous] * self.nt
        h.clearModel()
        h.setOptionValue("mip_rel_gap", float(settings.get("mip_rel_gap", 0.0)))
        h.setOptionValue("presolve", settings.get("presolve", "off"))
        h.passModel(lp)

    def add_chords(self, term: np.ndarray, k: np.ndarray) -> None:
        """Rows ``t_j - slope * v_j >= intercept`` (``v_j = y`` of a node term, ``a_q . y`` of a query)."""
        if term.size == 0:
            return
        slope, intercept = chord_coefficients(self.terms, term, k)
        arr = self.arr
        n_node = arr.obj_var.size
        is_q = term >= n_node
        # entries: the t column, then -slope on the node variable or on each query entry
        counts = np.where(is_q, 0, 1)
        q = term[is_q] - n_node
        qcount = np.diff(arr.q_ptr)[q] if q.size else np.zeros(0, np.int64)
        counts = counts.astype(np.int64)
        counts[is_q] = qcount
        r = term.size
        starts = np.zeros(r + 1, np.int64)
        np.cumsum(1 + counts, out=starts[1:])
        index = np.empty(int(starts[-1]), np.int64)
        value = np.empty(int(starts[-1]))
        index[starts[:-1]] = self.nv + term
        value[starts[:-1]] = 1.0
        node_rows = np.flatnonzero(~is_q)
        index[starts[node_rows] + 1] = arr.obj_var[term[node_rows]]
        value[starts[node_rows] + 1] = -slope[node_rows]
        if q.size:
            q_rows = np.flatnonzero(is_q)
            rep = np.repeat(q_rows, qcount)
            within = np.arange(int(qcount.sum())) - np.repeat(np.cumsum(qcount) - qcount, qcount)
            e = np.repeat(arr.q_ptr[q], qcount) + within
            pos = np.repeat(starts[q_rows] + 1, qcount) + within
            index[pos] = arr.q_col[e]
            value[pos] = -slope[rep] * arr.q_coef[e]
        self.h.addRows(r, intercept.astype(float), np.full(r, np.inf), int(starts[-1]),
                       starts[:-1].astype(np.int32), index.astype(np.int32), value)

    def term_values(self, y: np.ndarray) -> np.ndarray:
        """``v_j`` at ``y``: node values, then query values (exact for integers below 2^53)."""
        arr = self.arr
        yv = np.asarray(y, dtype=float)
        node = yv[arr.obj_var]
        if not arr.n_queries:
            return node
        qv = np.bincount(self.q_row, weights=arr.q_coef * yv[arr.q_col], minlength=arr.n_queries)
        return np.r_[node, np.rint(qv)]

    def solve_restricted(self, a: np.ndarray, b: np.ndarray, time_left: float | None,
                         start: np.ndarray | None) -> ChordRound:
        """The MIP with every node term's variable held inside its window (chords exact there)."""
        cols = self.arr.obj_var
        n_node = cols.size
        lo = np.maximum(self.lower[cols], a[:n_node])
        hi = np.minimum(self.upper[cols], b[:n_node])
        idx = cols.astype(np.int32)
        self.h.changeColsBounds(idx.size, idx, lo, hi)
        inside = start is not None and bool(np.all((start[cols] >= lo) & (start[cols] <= hi)))
        try:
            return self.solve(time_left, start if inside else None)
        finally:
            self.h.changeColsBounds(idx.size, idx, self.lower[cols], self.upper[cols])

    def solve(self, time_left: float | None, start: np.ndarray | None) -> ChordRound:
        """One round: the MIP with the chords so far, warm-started from ``start``."""
        h = self.h
        if not self.runner._set_time_limit(None if time_left is None else time.perf_counter() + time_left):
            return ChordRound(Status.TIME_LIMIT, None, None, "no time left for this round")
        if start is not None:
            sol = self.hs.HighsSolution()
            sol.col_value = np.r_[start, self.terms.values(self.term_values(start))].tolist()
            sol.value_valid = True
            h.setSolution(sol)
        h.run()
        status = self.runner.status()
        info = h.getInfo()
        bound = float(info.mip_dual_bound)
        bound_or_none = bound if math.isfinite(bound) else None
        has_point = int(info.primal_solution_status) == 2  # kSolutionStatusFeasible
        y = None
        if has_point and status in (Status.OPTIMAL, Status.TIME_LIMIT, Status.INTERRUPTED,
                                    Status.ITERATION_LIMIT):
            y = np.rint(np.asarray(h.getSolution().col_value, dtype=float)[: self.nv])
        if status == Status.OPTIMAL and y is None:
            status = Status.ERROR
        return ChordRound(status, y, bound_or_none, "" if status == Status.OPTIMAL else f"HiGHS status {status.value}")

