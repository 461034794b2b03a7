"""Exact integer L2 by outer approximation with lazy chord cuts (the one home of the loop that the
``highs`` and ``ortools`` plug-ins run).

An integer L2 objective is a sum of convex terms ``f_j(v_j) = w_j (v_j - x_j)^2`` where ``v_j`` is
an integer: a node's value, or the value ``a_q . y`` of a query term with integer coefficients.
On integers, ``f_j`` is exactly the maximum of its *chords*: the chord of segment ``k`` is the line
through ``(k, f_j(k))`` and ``(k + 1, f_j(k + 1))``,

    ``t_j >= slope_k v_j + intercept_k``,  ``slope_k = w_j (2k + 1 - 2 x_j)``,
    ``intercept_k = w_j ((k - x_j)^2 - (2k + 1 - 2 x_j) k)``,

and every chord lies on or below ``f_j`` at every integer (``f_j`` is convex). Enumerating the
chords of a whole domain is what made the exact MIP hopeless at real magnitudes (22 million chord
rows for a 3,744-node count-of-counts tree, 1.2e9 for a county level). Here each term keeps a
contiguous *window* ``[a_j, b_j]`` of segments only:

1. the first windows are ``[floor(c_j) - 1, ceil(c_j) + 1]`` around a centre ``c_j`` (the
   target; measured: the tree's unconstrained continuous optimum as centre took more rounds on a
   count-of-counts tree, whose zero counts it puts below zero), so every term's chord set bounds
   ``t_j`` from below on both sides;
2. the MIP ``min sum t_j`` over the problem's constraints with these chords is solved exactly (the
   back end's own optimality proof); its optimum is a **lower bound** of the integer-L2 optimum
   (fewer chords = fewer constraints, and each chord is below ``f_j`` at integers);
3. at the MIP's solution ``y``, every term whose value lies inside its window has ``t_j = f_j(v_j)``
   (the maximum of a window's chords equals ``f_j`` at every integer of the window); a term outside
   its window may be under-estimated, and its window is extended past the value (by the distance
   again, so far values take few rounds). Beyond its window a term's chords continue linearly, far
   below the parabola, so the MIP may move a large deviation onto a term whose window is still
   narrow, and onto another one the next round (measured on a county level with a row: thousands
   of units onto one county per round, the bound stuck). So when a value lands ``D`` outside its
   window, every term gets a *ladder* of chords at distances ``4, 16, 64, ...`` up to ``D``
   (:func:`ladder`), which keeps the under-estimate within a factor of about 2;
4. when every value lies in its window, the MIP's objective at ``y`` *is* the true objective
   ``F(y)``, and it is also the MIP's optimum, a lower bound: ``y`` is optimal. The certificate is
   ``bound == objective`` (up to the back end's tolerance, reported as ``gap``);
5. the relaxation often has many optima (ties), and the back end may keep picking one that leaves a
   window by a unit somewhere (measured: 27 extra rounds at the optimal bound on a 3,744-node
   tree). So after a round that did not converge, a back end that can also solves the *restricted*
   MIP, every node term held inside its (extended) window, where the chords are exact: its answer
   is feasible, its true objective an upper bound. When it meets the best lower bound, it is
   optimal.

The model grows with the distance between the first windows and the answer, not with the domain.
Each round is warm-started from the best point so far (with ``t_j = f_j(v_j)`` it is feasible for
every later round). A deadline bounds all rounds together: when it passes, the best feasible point
found (smallest true objective) is returned with status ``time_limit`` and the best proven bound.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from hierdp.models.problem import Problem
from hierdp.solvers.base import Status

__all__ = ["ChordModel", "ChordRound", "ChordWindows", "ConvexTerms", "LazyResult", "chord_coefficients", "first_windows",
           "l2_centre", "ladder", "solve_lazily"]

#: a safety net: windows at least double their distance to an outside value every round, so a
#: domain of 2^52 needs at most ~53 extensions per term; more rounds than this means a defect
MAX_ROUNDS = 200


@dataclass(frozen=True)
class ConvexTerms:
    """The terms ``w_j (v_j - x_j)^2`` of an integer L2 objective, in the model's (shifted) space.

    Attributes:
        target: ``x_j``.
        weight: ``w_j > 0``.
        lower, upper: the integer domain of ``v_j`` (``-inf`` / ``inf`` when unbounded); windows
            never leave it.
    """

    target: np.ndarray
    weight: np.ndarray
    lower: np.ndarray
    upper: np.ndarray

    @property
    def size(self) -> int:
        """Number of terms."""
        return int(self.target.size)

    def values(self, v: np.ndarray) -> np.ndarray:
        """``f_j(v_j)`` per term."""
        d = np.asarray(v, dtype=float) - self.target
        return self.weight * d * d


#: half-width of the first windows around their centre
FIRST_RADIUS = 1


def first_windows(terms: ConvexTerms, center: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``[floor(min(x, c)) - 1, ceil(max(x, c)) + 1]`` per term (``x`` the target, ``c`` the
    ``center`` where finite), inside the domain. The outer segments have slopes of both signs, so
    ``sum t_j`` is bounded below."""
    x = terms.target
    c = x if center is None else np.where(np.isfinite(center), np.asarray(center, dtype=float), x)
    a = np.clip(np.floor(np.minimum(x, c)) - FIRST_RADIUS, terms.lower, terms.upper)
    b = np.clip(np.ceil(np.maximum(x, c)) + FIRST_RADIUS, terms.lower, terms.upper)
    return a, np.maximum(a, b)


def l2_centre(problem: Problem) -> np.ndarray:
    """The tree's unconstrained continuous L2 optimum (:func:`~hierdp.solvers.twopass.two_pass_wls`:
    no sign, bounds, rows or query terms), clipped to the bounds; NaN where it does not apply.

    With it the first windows reach from each target to where the constraints of the tree move
    it (measured: a fixed root of 45,000 over targets summing to ~46,500 moves a level-one node
    from 50 to ~45,000; windows around the targets alone took rounds past a 120 s limit)."""
    from hierdp.solvers.twopass import two_pass_wls

    try:
        c = two_pass_wls(problem)
    except (ValueError, ZeroDivisionError, FloatingPointError):
        return np.full(problem.n, np.nan)
    if c.shape != (problem.n,):
        return np.full(problem.n, np.nan)
    return np.clip(c, problem.effective_lower, problem.upper)


#: when no value lies further than this outside its window, every window is widened by one unit
WIDEN_BELOW = 2.0

#: distances of the ladder's chords beyond the first windows: about 4^i, odd and even in turn
#: (``4^i + 1`` for odd ``i``), so every crossing of two neighbouring chords is an integer (the
#: chords of segments ``k < m`` cross at ``(k + m + 1) / 2``): with integer breakpoints the
#: relaxation of a totally unimodular problem (a tree without rows) stays integral, and each round
#: is an LP
RUNGS = np.array([4 ** i + (i % 2) for i in range(1, 27)], dtype=float)


def ladder(terms: ConvexTerms, a: np.ndarray, b: np.ndarray, a0: np.ndarray, b0: np.ndarray, above: float,
           upto: float) -> tuple[np.ndarray, np.ndarray]:
    """``(term, k)`` of the ladder chords at distances :data:`RUNGS` in ``(above, upto]`` beyond the
    first windows ``[a0, b0]``, outside the current windows ``[a, b]`` and inside the domain: a
    coarse global under-estimator, exact at its breakpoints, within a factor of about 2 of the
    parabola in between."""
    steps = RUNGS[(above < RUNGS) & (upto >= RUNGS)]
    if steps.size == 0:
        return np.zeros(0, np.int64), np.zeros(0)
    d = steps[None, :]
    k_lo = a0[:, None] - d
    k_hi = b0[:, None] - 1 + d
    left = (k_lo < a[:, None]) & (k_lo >= terms.lower[:, None])
    right = (k_hi >= b[:, None]) & (k_hi + 1 <= terms.upper[:, None])
    t_lo, j_lo = np.nonzero(left)
    t_hi, j_hi = np.nonzero(right)
    return (np.r_[t_lo, t_hi].astype(np.int64), np.r_[k_lo[t_lo, j_lo], k_hi[t_hi, j_hi]])


def fix_parity(terms: ConvexTerms, a: np.ndarray, b: np.ndarray, a0: np.ndarray, b0: np.ndarray, reach: float
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Windows widened by one segment where their end chord and the nearest ladder chord beyond
    would cross between integers. Returns ``(a, b, term, k)`` with the added segments."""
    ok = RUNGS[reach >= RUNGS]
    if ok.size == 0:
        return a, b, np.zeros(0, np.int64), np.zeros(0)
    # nearest rung beyond each end (in the domain), if any
    i_lo = np.searchsorted(ok, a0 - a, side="right")
    d_lo = ok[np.minimum(i_lo, ok.size - 1)]
    has_lo = (i_lo < ok.size) & (a0 - d_lo >= terms.lower)
    k_lo = a0 - d_lo
    fix_lo = has_lo & ((a + k_lo) % 2 == 0) & (a - 1 > k_lo)
    i_hi = np.searchsorted(ok, b - b0, side="right")
    d_hi = ok[np.minimum(i_hi, ok.size - 1)]
    has_hi = (i_hi < ok.size) & (b0 + d_hi <= terms.upper)
    k_hi = b0 - 1 + d_hi
    fix_hi = has_hi & ((b - 1 + k_hi) % 2 == 0) & (b < k_hi)
    a_new = np.where(fix_lo, a - 1, a)
    b_new = np.where(fix_hi, b + 1, b)
    term = np.r_[np.flatnonzero(fix_lo), np.flatnonzero(fix_hi)].astype(np.int64)
    k = np.r_[a_new[fix_lo], b[fix_hi]]
    return a_new, b_new, term, k


def segments(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(term, k)`` of every segment of the windows ``[a, b]`` (one segment ``k = a`` for a point
    window: its chord is exact at ``a``, the only value the domain allows)."""
    pieces = np.maximum(b - a, 1).astype(np.int64)
    term = np.repeat(np.arange(a.size, dtype=np.int64), pieces)
    first = np.repeat(np.cumsum(pieces) - pieces, pieces)
    k = np.repeat(a, pieces) + (np.arange(term.size) - first)
    return term, k


def chord_coefficients(terms: ConvexTerms, term: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(slope, intercept)`` of the chord of segment ``k`` of each ``term``: ``t >= slope v + intercept``."""
    x = terms.target[term]
    w = terms.weight[term]
    s = 2 * k + 1 - 2 * x
    return w * s, w * ((k - x) ** 2 - s * k)


def extend(terms: ConvexTerms, a: np.ndarray, b: np.ndarray, v: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Windows that reach every value outside its window, past it by the same distance.

    Returns ``(a_new, b_new, term, k)`` with the new segments only (the old chords stay)."""
    below = v < a
    above = v > b
    a_new = np.where(below, np.maximum(terms.lower, v - (a - v)), a)
    b_new = np.where(above, np.minimum(terms.upper, v + (v - b)), b)
    t_lo, k_lo = segments(a_new[below], a[below])
    t_hi, k_hi = segments(b[above], b_new[above])
    idx_lo = np.flatnonzero(below)[t_lo]
    idx_hi = np.flatnonzero(above)[t_hi]
    # a window that was a single point ([a, a], one segment k = a) already has chord a
    keep_lo = k_lo < a[idx_lo]
    keep_hi = k_hi >= np.maximum(b[idx_hi], a[idx_hi] + 1)
    return (a_new, b_new, np.r_[idx_lo[keep_lo], idx_hi[keep_hi]], np.r_[k_lo[keep_lo], k_hi[keep_hi]])


@dataclass
class ChordRound:
    """What a back end returns for one round.

    Attributes:
        status: :attr:`Status.OPTIMAL` when the round's MIP was solved to proven optimality.
        y: the model's variable values (integers) - the optimum, or on a time limit the best
            feasible point of the round (None when it has none).
        bound: a proven lower bound of the round's MIP optimum (None when unknown).
        message: details from the back end.
    """

    status: Status
    y: np.ndarray | None = None
    bound: float | None = None
    message: str = ""


class ChordModel(Protocol):
    """A back end's MIP ``min sum t_j`` over the problem's constraints and the chords added so far."""

    def add_chords(self, term: np.ndarray, k: np.ndarray) -> None:
        """Add the chords of segments ``k`` of ``term``."""

    def solve(self, time_left: float | None, start: np.ndarray | None) -> ChordRound:
        """Solve the current MIP (``start``: a feasible point of the variables to warm-start from)."""

    def term_values(self, y: np.ndarray) -> np.ndarray:
        """``v_j`` at the variable values ``y`` (exact integers)."""

    def solve_restricted(self, a: np.ndarray, b: np.ndarray, time_left: float | None,
                         start: np.ndarray | None) -> ChordRound:
        """The same MIP with every node term's value held in ``[a_j, b_j]`` (an upper-bound point)."""


@dataclass
class LazyResult:
    """The outcome of :func:`solve_lazily`.

    Attributes:
        status: optimal (converged), time_limit, or the back end's failing status.
        y: the best point found (the optimum when optimal), or None.
        objective: the true objective ``sum f_j(v_j)`` at ``y`` (NaN without a point).
        bound: the best proven lower bound of the optimum (None when no round gave one).
        rounds: MIP solves run.
        chords: chord rows in the last model.
        message: details of a failure.
    """

    status: Status
    y: np.ndarray | None
    objective: float
    bound: float | None
    rounds: int
    chords: int
    message: str = ""
    history: list[tuple[float, float | None, int]] = field(default_factory=list)


class ChordWindows:
    """The chord windows of every term and their growth (steps 1, 3 and the ladder of the module
    docstring): ``a, b`` the current windows, ``a0, b0`` the first ones, ``reach`` the ladder's."""

    def __init__(self, terms: ConvexTerms, a: np.ndarray, b: np.ndarray) -> None:
        self.terms = terms
        self.a, self.b = np.asarray(a, dtype=float).copy(), np.asarray(b, dtype=float).copy()
        self.a0, self.b0 = self.a.copy(), self.b.copy()
        self.reach = 0.0

    def initial(self) -> tuple[np.ndarray, np.ndarray]:
        """``(term, k)`` of the first windows' segments."""
        return segments(self.a, self.b)

    def outside(self, v: np.ndarray, tol: float = 0.0) -> np.ndarray:
        """Terms whose value lies outside its window (``tol``: slack for a continuous ``v``)."""
        return (v < self.a - tol) | (v > self.b + tol)

    def grow(self, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Extend the windows to the values ``v`` outside them (a continuous ``v`` counts by its
        floor below and its ceiling above), add the ladder if a value landed beyond its reach, widen
        every window by one unit when only small steps were left, keep the breakpoints integral.
        Returns ``(term, k)`` of the new segments."""
        terms, a, b = self.terms, self.a, self.b
        v = np.where(v < a, np.floor(v), np.where(v > b, np.ceil(v), v))
        far = float(np.max(np.maximum(a - v, v - b), initial=0.0))
        a, b, term, k = extend(terms, a, b, v)
        if far > self.reach:
            # a deviation this large went to a term whose chords did not see it: give every term
            # a ladder that far, so the next round cannot move it onto another narrow window
            t_far, k_far = ladder(terms, a, b, self.a0, self.b0, self.reach, far)
            term, k = np.r_[term, t_far], np.r_[k, k_far]
            self.reach = far
        if far <= WIDEN_BELOW:
            # only small steps out of windows are left: the relaxation picks among many near-ties
            # (a unit outside a window is under-estimated by 2w), a few terms per round; widen
            # every window by one unit on each side so the ties end together
            a_w = np.maximum(terms.lower, a - 1)
            b_w = np.minimum(terms.upper, b + 1)
            t_l, k_l = segments(a_w, a)
            t_l, k_l = t_l[a_w[t_l] < a[t_l]], k_l[a_w[t_l] < a[t_l]]
            t_r, k_r = segments(b, b_w)
            t_r, k_r = t_r[b_w[t_r] > b[t_r]], k_r[b_w[t_r] > b[t_r]]
            term, k = np.r_[term, t_l, t_r], np.r_[k, k_l, k_r]
            a, b = a_w, b_w
        a, b, t_fix, k_fix = fix_parity(terms, a, b, self.a0, self.b0, self.reach)
        self.a, self.b = a, b
        return np.r_[term, t_fix].astype(np.int64), np.r_[k, k_fix]


def solve_lazily(model: ChordModel, terms: ConvexTerms, a: np.ndarray, b: np.ndarray, *,
                 deadline: float | None = None, start: np.ndarray | None = None) -> LazyResult:
    """Run the lazy-chord loop (module docstring) on ``model`` from the windows ``[a, b]``.

    Args:
        model: the back end's MIP, holding the problem's constraints and no chords yet.
        terms: the objective's terms.
        a, b: the first windows (:func:`first_windows`).
        deadline: a ``time.perf_counter()`` time bounding every round together.
        start: a feasible point of the variables, if the caller has one (the first warm start).
    """
    win = ChordWindows(terms, a, b)
    term, k = win.initial()
    model.add_chords(term, k)
    n_chords = term.size
    best_y: np.ndarray | None = None if start is None else np.asarray(start, dtype=float)
    best_obj = float(terms.values(model.term_values(best_y)).sum()) if best_y is not None else np.inf
    best_bound: float | None = None
    history: list[tuple[float, float | None, int]] = []
    for rounds in range(1, MAX_ROUNDS + 1):
        left = None if deadline is None else deadline - time.perf_counter()
        if left is not None and left <= 0:
            return _stop(Status.TIME_LIMIT, best_y, best_obj, best_bound, rounds - 1, n_chords, history,
                         "no time left for the next round")
        out = model.solve(left, best_y)
        if out.bound is not None and np.isfinite(out.bound):
            best_bound = out.bound if best_bound is None else max(best_bound, out.bound)
        if out.y is None:
            return _stop(out.status, best_y, best_obj, best_bound, rounds, n_chords, history, out.message)
        y = np.rint(out.y)
        v = model.term_values(y)
        obj = float(terms.values(v).sum())
        history.append((obj, out.bound, n_chords))
        if obj < best_obj:
            best_y, best_obj = y, obj
        if out.status != Status.OPTIMAL:
            return _stop(out.status, best_y, best_obj, best_bound, rounds, n_chords, history, out.message)
        outside = win.outside(v)
        if not outside.any() or (best_bound is not None and best_obj - best_bound <= tolerance(best_obj)):
            # converged: the MIP optimum is F(y), a lower bound of the optimum and its value (or an
            # earlier point already meets the best bound)
            if not outside.any() and obj <= best_obj:
                best_y, best_obj = y, obj
            bound = best_obj if best_bound is None else min(best_bound, best_obj)
            return LazyResult(Status.OPTIMAL, best_y, best_obj, bound, rounds, n_chords, "", history)
        term, k = win.grow(v)
        model.add_chords(term, k)
        n_chords += term.size
        left = None if deadline is None else deadline - time.perf_counter()
        if left is not None and left <= 0:
            continue  # reported as a time limit at the top of the loop
        inner = model.solve_restricted(win.a, win.b, left, best_y)
        if inner.y is not None:
            y_in = np.rint(inner.y)
            obj_in = float(terms.values(model.term_values(y_in)).sum())
            if obj_in < best_obj:
                best_y, best_obj = y_in, obj_in
        if best_bound is not None and best_obj - best_bound <= tolerance(best_obj):
            return LazyResult(Status.OPTIMAL, best_y, best_obj, min(best_bound, best_obj), rounds, n_chords, "",
                              history)
    return _stop(Status.ERROR, best_y, best_obj, best_bound, MAX_ROUNDS, n_chords, history,
                 f"the chord windows did not converge in {MAX_ROUNDS} rounds")


def tolerance(objective: float) -> float:
    """How far a proven lower bound may sit below an objective for the two to count as equal:
    the back ends' absolute MIP gap (1e-6), or 1e-9 relative for large objectives."""
    return max(1e-6, 1e-9 * abs(objective))


def _stop(status: Status, y: np.ndarray | None, obj: float, bound: float | None, rounds: int, chords: int,
          history: list[tuple[float, float | None, int]], message: str) -> LazyResult:
    return LazyResult(status, y, obj if y is not None else float("nan"), bound, rounds, chords, message, history)
