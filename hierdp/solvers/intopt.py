"""IntOpt: the integer Chebyshev (L-infinity) optimizer of InfTDA (paper 000, Alg. 2 and Alg. 4).

Problem of one group (paper 000, eq. 6): given noisy values ``x`` (b entries) and a non-negative
integer ``c``, find non-negative integers ``y`` with ``sum(y) == c`` minimising ``max_i |y_i - x_i|``.
The optimum is not unique; Algorithm 4 (App. C, "fast IntOpt") picks one particular optimum, and
:func:`intopt` returns *exactly* that one. Written with ``y = x + z`` (the paper works with ``z``),
Algorithm 4 reads:

1. ``D = c - sum(x)``; start at ``y_i = max(0, x_i + ceil(D / b))`` (line 2), whose sum is ``>= c``;
2. ``t = max_i |y_i - x_i|`` (line 3), a lower bound of the optimum;
3. visit the entries with ``y_i > 0`` in the order of their noisy values (lines 4-5) and lower
   each to ``max(y_i - excess, 0, x_i - t)`` while the sum exceeds ``c`` (lines 7-9);
4. after each full pass drop the entries that reached 0 and raise the tolerance to
   ``t + max(1, floor(excess / #remaining))`` (lines 11-14), the smallest tolerance that may
   absorb the excess, then continue.

Order (the false-positive heuristic, §4.2 "Reducing False Positives"): ``"ascending"`` visits
the *smallest* noisy values first, so that the entries most likely to be false positives are
lowered (possibly to zero) before the others: this is what the paper implements. The paper
mentions the inverse choice, sorting the indices of ``x`` in *descending* order, "which would
focus on reducing false negatives instead": ``"descending"`` visits the largest noisy values
first, so the excess is taken from large counts and small counts are kept. Only the order of the
visits changes; the optimum value is the same. Ties are visited by position (earlier first) in
both orders (a stable sort of ``x``, resp. of ``-x``).

Real-valued ``x`` (e.g. continuous Gaussian or Laplace noise): Algorithm 4 is stated for integer
``x``; for real ``x`` the same steps would not produce integers nor, in general, an optimum. This
module uses the following extension, which coincides with Algorithm 4 on integer ``x`` and is
exactly optimal on real ``x``: with ``a*`` the exact optimum (computed in closed form per group,
see :func:`_optimal_alpha`), floors are ``L_i(t) = max(0, ceil(x_i - t))``, the start is
``y_i = min(max(0, ceil(x_i + D/b)), floor(x_i + a*))`` and the tolerance update is capped:
``t <- min(t + max(1, r), a*)``. On integer ``x`` the cap and the clip are no-ops (Algorithm 4
never passes the optimum: its ``t`` is a lower bound of it, Lemma 5/6), ``ceil(x_i + D/b) =
x_i + ceil(D/b)`` and ``L_i(t) = max(0, x_i - t)``. On real ``x`` every intermediate vector stays
in the box ``[L(a*), floor(x + a*)]``, whose points are exactly the optimal solutions, so the
output is optimal. The start sums to at least ``c``: if no entry is clipped, its sum is ``>=
sum(x + D/b) = c``; if one is, no integer lies in ``[x_i + D/b, x_i + a*]`` so ``a* - D/b < 1``,
which leaves room for at most one integer in any such interval and forces every other entry's
start to equal ``floor(x_i + a*)``: the sum is then ``sum(floor(x + a*)) >= c``.

Floating point: on real-valued groups, comparisons with integers allow a few ulps of the group's
magnitude (:func:`hierdp._segments.ulp_tolerance`), so that values equal to an integer up to
rounding are treated as that integer; integer groups are computed exactly.

:func:`intopt_batch` solves all groups of a TopDown level at once with numpy segment
operations (a stable segment sort by ``(group, value)``, segment cumulative sums and
``reduceat``); only the passes of step 4 are iterated, over the groups still active (typically
one to three passes).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from hierdp._segments import (
    MAX_MAGNITUDE,
    MAX_REAL_MAGNITUDE,
    check_groups,
    check_sums,
    group_magnitude_problem,
    segment_cumsum,
    segment_sort,
    ulp_tolerance as _tolerance,
)
from hierdp.models.problem import Problem
from hierdp.solvers.base import Capabilities, GroupSolution, Solution, Solver, Termination, UnsupportedProblem, finish

Order = Literal["ascending", "descending"]
ORDERS = ("ascending", "descending")


def _check_order(order: str) -> None:
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")


# ---------------------------------------------------------------------------------- optimum
def _optimal_alpha(
    x: np.ndarray, c: np.ndarray, gid: np.ndarray, starts: np.ndarray, sizes: np.ndarray, tol: np.ndarray
) -> np.ndarray:
    """Exact optimum ``a*`` of every (non-empty) group, in closed form.

    With ``L_i(a) = max(0, ceil(x_i - a))`` and ``H_i(a) = floor(x_i + a)``, an integer solution
    of tolerance ``a`` exists iff (A) ``L_i(a) <= H_i(a)`` for all i, (B) ``sum L(a) <= c`` and
    (C) ``sum H(a) >= c``. Each condition is monotone in ``a``, so ``a*`` is the largest of the
    three smallest tolerances. Write ``phi_i = x_i - ceil(x_i) + 1`` (the fractional part of
    ``x_i``, or 1 for an integer):

    * (A) ``max_i`` distance of ``x_i`` to the nearest non-negative integer;
    * (C) ``sum H`` rises by one at ``e_i, e_i + 1, ...`` with ``e_i = 1 - phi_i`` (1 for an
      integer): the ``need``-th rise (``need = c - sum floor(x)``) is at
      ``(need-1)//b + sorted(e)[(need-1) % b]``;
    * (B) ``sum L`` at integer ``n`` is ``sum max(0, v_i - n)`` with ``v_i = max(0, ceil(x_i))``;
      its first integer ``n0`` with value ``<= c`` is ``max_k ceil((S_k - c) / k)`` (``S_k``: sum of
      the k largest ``v``); within ``(n0 - 1, n0]`` entry i (if ``v_i >= n0``) drops at
      ``n0 - 1 + phi_i``, and ``a_B`` is the ``(sum L(n0-1) - c)``-th drop.

    One sort by ``phi`` serves (B) and (C) (``e`` is ``phi`` reversed, integers last); one sort
    by ``x`` (hence by ``v``) serves ``S_k``.
    """
    g_tol = tol[gid]
    b = sizes
    n_groups = starts.size
    pos = np.arange(x.size) - np.repeat(starts, sizes)  # position within the group
    # (A)
    dist = np.where(x < 0, -x, np.abs(x - np.rint(x)))
    dist = np.where(dist <= g_tol, 0.0, dist)
    alpha_a = np.maximum.reduceat(dist, starts)
    v = np.maximum(0.0, np.ceil(x - g_tol))
    phi = x - np.ceil(x - g_tol) + 1.0  # in (0, 1]; == 1 (up to rounding) for integers
    is_frac = np.ceil(x - g_tol) != np.floor(x + g_tol)
    phi = np.where(is_frac, phi, 1.0)
    phi_perm = segment_sort(phi, gid)
    phi_sorted = phi[phi_perm]
    n_frac = np.add.reduceat(is_frac.astype(np.int64), starts)
    # (C)
    need_c = c - np.add.reduceat(np.floor(x + g_tol), starts).astype(np.int64)
    alpha_c = np.zeros(n_groups)
    gc = need_c > 0
    if gc.any():
        k = need_c[gc] - 1
        q, rem = k // b[gc], k % b[gc]
        m = n_frac[gc]
        # the rem-th smallest e: the (m-1-rem)-th smallest phi among fractional entries, else 1
        idx = starts[gc] + np.clip(m - 1 - rem, 0, None)
        e_val = np.where(rem < m, 1.0 - phi_sorted[idx], 1.0)
        alpha_c[gc] = q + e_val
    # (B)
    vi = v.astype(np.int64)
    excess0 = np.add.reduceat(vi, starts) - c
    alpha_b = np.zeros(n_groups)
    gb = excess0 > 0
    if gb.any():
        perm = segment_sort(-x, gid)  # x, hence v, non-increasing within each group
        s_k = segment_cumsum(vi[perm], starts, sizes)
        ceil_div = -((np.repeat(c, sizes) - s_k) // (pos + 1))
        n = np.maximum.reduceat(ceil_div, starts) - 1  # n0 - 1 (>= 0 on gb groups)
        w = vi - n[gid]
        need_b = np.add.reduceat(np.maximum(w, 0), starts) - c
        # need_b-th smallest phi among entries with w >= 1, read off the phi-sorted order
        elig = (w >= 1)[phi_perm]
        rank = segment_cumsum(elig.astype(np.int64), starts, sizes)
        hit = elig & (rank == np.repeat(need_b, sizes)) & np.repeat(gb, sizes)
        alpha_b[gid[phi_perm[hit]]] = n[gid[phi_perm[hit]]] + phi_sorted[hit]
    return np.maximum(np.maximum(alpha_a, alpha_b), alpha_c)


# ---------------------------------------------------------------------------------- IntOpt
def intopt_batch(
    values: np.ndarray | list[float],
    offsets: np.ndarray | list[int],
    totals: np.ndarray | list[float],
    *,
    order: Order = "ascending",
) -> np.ndarray:
    """Algorithm 4 of paper 000 on every group of a level at once.

    Group g is ``values[offsets[g]:offsets[g+1]]`` and must sum to ``totals[g]`` (a non-negative
    integer; an empty group must have total 0). Returns int64 values aligned with ``values``:
    for every group exactly what :func:`intopt` returns on it.

    Raises:
        ValueError: malformed input (shapes, non-finite values, negative or non-integer totals,
            an empty group with a positive total, unknown order).
    """
    _check_order(order)
    x_all, offs, tot = check_groups(values, offsets, totals)
    out = np.zeros(x_all.size, dtype=np.int64)
    sizes_all = np.diff(offs)
    nonempty = sizes_all > 0
    if not nonempty.any():
        return out
    # non-empty groups are contiguous in ``values`` (empty ones hold no entries)
    starts = offs[:-1][nonempty]
    sizes = sizes_all[nonempty]
    c = tot[nonempty]
    n_groups = starts.size
    gid = np.repeat(np.arange(n_groups), sizes)
    x = x_all
    scale = np.maximum(np.maximum.reduceat(np.abs(x), starts), c.astype(np.float64))
    # a* only bounds the extension to real x: on an all-integer group Algorithm 4 never reaches
    # past the optimum, so its clip and cap are no-ops (a* = inf skips two segment sorts)
    alpha = np.full(n_groups, np.inf)
    frac_group = np.logical_or.reduceat(x != np.rint(x), starts)
    # integer groups are computed exactly (no tolerance); real ones allow a few ulps
    tol = np.where(frac_group, _tolerance(scale), 0.0)
    g_tol = tol[gid]
    if frac_group.any():
        sub_sizes = sizes[frac_group]
        sub_x = x[frac_group[gid]]
        sub_starts = np.concatenate([[0], np.cumsum(sub_sizes)[:-1]]).astype(np.int64)
        sub_gid = np.repeat(np.arange(sub_sizes.size), sub_sizes)
        alpha[frac_group] = _optimal_alpha(sub_x, c[frac_group], sub_gid, sub_starts, sub_sizes, tol[frac_group])

    # line 2 (start), clipped to the optimal box (a no-op on integer x)
    delta = (c - np.add.reduceat(x, starts)) / sizes
    start = np.maximum(0.0, np.ceil(x + delta[gid] - g_tol))
    upper = np.floor(x + alpha[gid] + g_tol)
    level = np.minimum(start, upper).astype(np.int64)  # P: values at the start of the current pass
    # line 3
    t = np.maximum.reduceat(np.abs(level - x), starts)

    # lines 7-14, pass by pass, on the groups whose current pass does not absorb the excess
    final_t = np.empty(n_groups)
    act_g = np.arange(n_groups)  # active groups
    act_e = np.arange(x.size)  # their entries (contiguous per group, in order)
    act_starts, act_sizes = starts, sizes
    max_passes = 4 * int(sizes.max()) + 16
    for _ in range(max_passes):
        t_e = np.repeat(t[act_g], act_sizes)
        floor_t = np.maximum(0.0, np.ceil(x[act_e] - t_e - g_tol[act_e])).astype(np.int64)
        local_starts = act_starts
        sum_floor = np.add.reduceat(floor_t, local_starts)
        done = sum_floor <= c[act_g]
        final_t[act_g[done]] = t[act_g[done]]
        if done.all():
            break
        cont = ~done
        cg = act_g[cont]
        excess = sum_floor[cont] - c[cg]
        positive = np.add.reduceat((floor_t > 0).astype(np.int64), local_starts)[cont]
        r = excess // positive
        t[cg] = np.minimum(t[cg] + np.maximum(1, r), alpha[cg])
        keep_e = np.repeat(cont, act_sizes)
        level[act_e[keep_e]] = floor_t[keep_e]  # the pass lowered every entry to its floor
        act_e = act_e[keep_e]
        act_g = cg
        act_sizes = act_sizes[cont]
        act_starts = np.concatenate([[0], np.cumsum(act_sizes)[:-1]]).astype(np.int64)
    else:  # pragma: no cover - the tolerance reaches a* after finitely many passes
        raise RuntimeError("IntOpt did not converge (this is a bug)")

    # the final pass: lower entries in visiting order toward their floor until the excess is gone
    floor_f = np.maximum(0.0, np.ceil(x - final_t[gid] - g_tol)).astype(np.int64)
    cap = level - floor_f
    excess = np.add.reduceat(level, starts) - c
    key = x if order == "ascending" else -x
    perm = segment_sort(key, gid)
    cap_sorted = cap[perm]
    before = segment_cumsum(cap_sorted, starts, sizes) - cap_sorted
    lowered = np.clip(np.repeat(excess, sizes) - before, 0, cap_sorted)
    y = level.copy()
    y[perm] -= lowered
    out[:] = y
    check_sums(out, offs, tot)
    return out


def intopt(x: np.ndarray | list[float], total: int, *, order: Order = "ascending") -> np.ndarray:
    """IntOpt (Algorithm 4 of paper 000) on one group.

    Args:
        x: noisy values (any real numbers, possibly negative).
        total: the non-negative integer the result must sum to.
        order: ``"ascending"`` (the paper's false-positive heuristic: lower the smallest noisy
            values first) or ``"descending"`` (lower the largest first; favours keeping small
            counts, i.e. fewer false negatives).

    Returns:
        int64 vector ``y >= 0`` with ``sum(y) == total`` minimising ``max |y - x|``: exactly the
        vector Algorithm 4 returns (see the module docstring for real-valued ``x``).
    """
    x = np.asarray(x, dtype=np.float64).ravel()
    return intopt_batch(x, np.array([0, x.size]), np.array([total]), order=order)


def linf_optimum(values: np.ndarray, offsets: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """The optimal integer L-infinity distance of every group (0 for empty groups).

    A floating-point closed form, so magnitudes are limited to 2^44 (see :func:`check_groups`).
    """
    x, offs, tot = check_groups(values, offsets, totals, real_arithmetic=True)
    sizes_all = np.diff(offs)
    res = np.zeros(tot.size)
    ne = sizes_all > 0
    if ne.any():
        starts, sizes, c = offs[:-1][ne], sizes_all[ne], tot[ne]
        gid = np.repeat(np.arange(starts.size), sizes)
        scale = np.maximum(np.maximum.reduceat(np.abs(x), starts), c.astype(np.float64))
        res[ne] = _optimal_alpha(x, c, gid, starts, sizes, _tolerance(scale))
    return res


# ---------------------------------------------------------------------------------- plug-in
@dataclass(frozen=True)
class IntOptOptions:
    """Options of the ``intopt`` plug-in.

    Attributes:
        order: ``"ascending"`` (the paper's false-positive heuristic) or ``"descending"``; see
            :func:`intopt`.
    """

    order: Order = "ascending"

    def __post_init__(self) -> None:
        _check_order(self.order)


class IntOptSolver(Solver):
    """Plug-in ``"intopt"``: integer L-infinity TopDown levels by Algorithm 4 of paper 000.

    Exact (the closed-form optimum of every group is reached); refuses, before solving, magnitudes
    float64 cannot resolve to single units (2^52 for integer targets, 2^44 for real targets), so
    ``auto`` falls back to another plug-in there. ``time_limit`` is not needed: one vectorized
    pass over the level (about a second per 10^7 children).
    """

    name = "intopt"
    Options = IntOptOptions
    capabilities = Capabilities(
        objectives=frozenset({"linf"}),
        integer=True,
        continuous=False,
        structures=frozenset({"level"}),
        features=frozenset(),
        limits={"max_magnitude": MAX_MAGNITUDE, "max_magnitude_real_targets": MAX_REAL_MAGNITUDE,
                "time_limit": "not needed (one vectorized pass)", "optimality": "exact"},
        description="IntOpt (InfTDA, paper 000 Alg. 4): exact integer L-inf per group, vectorized",
    )

    def extra_checks(self, problem: Problem) -> list[str]:
        """Magnitudes beyond float64's unit resolution (real targets: 2^44)."""
        if problem.structure != "level":
            return []
        _, _, child_index, totals = problem.level_groups()
        why = group_magnitude_problem(problem.target[child_index], totals)
        return [why] if why else []

    def unsupported_groups(self, values: np.ndarray, offsets: np.ndarray, totals: np.ndarray, *, objective: str,
                           integer: bool, weights: np.ndarray | None = None) -> list[str]:
        """Refusals for a batch of groups, without building a :class:`Problem`."""
        why = []
        if objective != "linf":
            why.append(f"objective {objective!r} not supported (supports ['linf'])")
        if not integer:
            why.append("continuous problems not supported")
        if weights is not None and np.any(np.asarray(weights, dtype=float) != 1.0):
            why.append("non-uniform objective weights not supported")
        vals = np.asarray(values, dtype=float)
        if np.any(np.isnan(vals)):
            why.append("every free node needs a finite target (NaN targets not supported)")
        mag = group_magnitude_problem(vals, np.asarray(totals, dtype=float))
        if mag:
            why.append(mag)
        return why

    def solve_problem(self, problem: Problem, *, time_limit: float | None = None, **options: Any) -> Solution:
        """Solve a supported level problem (see :func:`intopt_batch`)."""
        opts: IntOptOptions = self.parse_options(options)
        t0 = time.perf_counter()
        parents, offsets, child_index, totals = problem.level_groups()
        y = intopt_batch(problem.target[child_index], offsets, totals, order=opts.order)
        values = np.rint(np.nan_to_num(problem.fixed)).astype(np.int64)
        values[child_index] = y
        sol = finish(problem, values, Termination.OPTIMAL, self.name, t0,
                     {"n_groups": int(parents.size), "n_children": int(child_index.size), "order": opts.order})
        sol.bound, sol.gap = sol.objective, 0.0
        return sol

    def solve_groups(self, values: np.ndarray, offsets: np.ndarray, totals: np.ndarray, *, objective: str,
                     integer: bool = True, weights: np.ndarray | None = None, time_limit: float | None = None,
                     **options: Any) -> GroupSolution:
        """Algorithm 4 on the whole batch, without a :class:`Problem`; the output is checked (int64
        sums exact, non-negative) before it is returned."""
        why = self.unsupported_groups(values, offsets, totals, objective=objective, integer=integer, weights=weights)
        if why:
            raise UnsupportedProblem(f"solver {self.name!r} cannot solve these groups exactly: " + "; ".join(why))
        opts: IntOptOptions = self.parse_options(options)
        t0 = time.perf_counter()
        x = np.asarray(values, dtype=float)
        y = intopt_batch(x, offsets, totals, order=opts.order)  # validates, and checks sums and signs
        offs = np.asarray(offsets, dtype=np.int64)
        sizes = np.diff(offs)
        ne = sizes > 0
        objective_value = 0.0
        if ne.any():
            objective_value = float(np.maximum.reduceat(np.abs(y - x), offs[:-1][ne]).sum())
        return GroupSolution(values=y, objective=objective_value, solver=self.name, wall_time=time.perf_counter() - t0,
                             stats={"n_groups": int(sizes.size), "n_children": int(x.size), "order": opts.order})
