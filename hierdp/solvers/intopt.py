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

Floating point: comparisons with integers use a tolerance ``1e-12 * max(1, max|x|, c)`` per
group, so that values equal to an integer up to rounding are treated as that integer.

:func:`intopt_batch` solves all groups of a TopDown level at once with numpy segment
operations (a stable segment sort by ``(group, value)``, segment cumulative sums and
``reduceat``); only the passes of step 4 are iterated, over the groups still active (typically
one to three passes).
"""

from __future__ import annotations

import time
from typing import Any, Literal

import numpy as np

from hierdp.models.problem import Problem
from hierdp.solvers.base import Capabilities, Solution, Solver

Order = Literal["ascending", "descending"]
ORDERS = ("ascending", "descending")

#: "is this float an integer" decisions on real-valued groups allow this many ulps of the group's
#: magnitude (a fixed *relative* tolerance would reach whole units at counts of 10^12)
_ULPS = 8
#: largest magnitude of values and totals: beyond 2^52 float64 no longer resolves integers
MAX_MAGNITUDE = 2.0 ** 52
#: largest magnitude when real-valued arithmetic (fractional noise, projections) is involved:
#: sums of a group's values must still resolve units with room for rounding
MAX_REAL_MAGNITUDE = 2.0 ** 44


def _tolerance(scale: np.ndarray) -> np.ndarray:
    """Absolute tolerance per group: a few ulps of the group's magnitude."""
    return _ULPS * np.spacing(np.maximum(1.0, scale))


# ---------------------------------------------------------------------------------- validation
def check_groups(
    values: np.ndarray | list[float],
    offsets: np.ndarray | list[int],
    totals: np.ndarray | list[float],
    *,
    integer_totals: bool = True,
    real_arithmetic: bool | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate a batch of groups; returns ``(values float64, offsets int64, totals)``.

    ``totals`` is int64 when ``integer_totals`` (the totals must be non-negative integers), else
    float64 (non-negative, finite). Empty groups must have total 0. Magnitudes must be below
    :data:`MAX_MAGNITUDE`, or :data:`MAX_REAL_MAGNITUDE` when ``real_arithmetic`` (default: when
    some value is not an integer).

    Raises:
        ValueError: naming the offending argument, group or entry.
    """
    vals = np.asarray(values, dtype=np.float64)
    if vals.ndim != 1:
        raise ValueError(f"values must be one-dimensional, got shape {vals.shape}")
    if not np.all(np.isfinite(vals)):
        raise ValueError(f"values must be finite; entry {int(np.flatnonzero(~np.isfinite(vals))[0])} is not")
    if real_arithmetic is None:
        real_arithmetic = bool(np.any(vals != np.rint(vals)))
    limit, limit_text = (MAX_REAL_MAGNITUDE, "2^44") if real_arithmetic else (MAX_MAGNITUDE, "2^52")
    if vals.size and np.abs(vals).max() >= limit:
        raise ValueError(f"values must be below {limit_text} in magnitude (beyond it float64 cannot resolve "
                         f"single units here); entry {int(np.argmax(np.abs(vals)))} is "
                         f"{vals[np.argmax(np.abs(vals))]:g}")
    offs = np.asarray(offsets)
    if offs.ndim != 1 or offs.size < 1:
        raise ValueError("offsets must be a one-dimensional array with len(totals)+1 entries")
    if not np.issubdtype(offs.dtype, np.integer):
        if not np.all(np.isfinite(offs)) or np.any(offs != np.round(offs)):
            raise ValueError("offsets must be integers")
    offs = offs.astype(np.int64)
    tot = np.asarray(totals, dtype=np.float64)
    if tot.ndim != 1 or offs.size != tot.size + 1:
        raise ValueError(f"offsets has {offs.size} entries; expected len(totals)+1 = {tot.size + 1}")
    if offs[0] != 0 or offs[-1] != vals.size:
        raise ValueError(f"offsets must start at 0 and end at len(values) = {vals.size}")
    sizes = np.diff(offs)
    if np.any(sizes < 0):
        raise ValueError(f"offsets must be non-decreasing (group {int(np.flatnonzero(sizes < 0)[0])})")
    if not np.all(np.isfinite(tot)):
        raise ValueError(f"totals must be finite; group {int(np.flatnonzero(~np.isfinite(tot))[0])} is not")
    if np.any(tot < 0):
        g = int(np.flatnonzero(tot < 0)[0])
        raise ValueError(f"totals must be non-negative; group {g} has total {tot[g]}")
    if tot.size and tot.max() >= limit:
        g = int(np.argmax(tot))
        raise ValueError(f"totals must be below {limit_text}; group {g} has total {tot[g]:g}")
    if integer_totals:
        if np.any(tot != np.round(tot)):
            g = int(np.flatnonzero(tot != np.round(tot))[0])
            raise ValueError(f"totals must be integers; group {g} has total {tot[g]}")
        tot = tot.astype(np.int64)
    bad = (sizes == 0) & (tot != 0)
    if bad.any():
        g = int(np.flatnonzero(bad)[0])
        raise ValueError(f"group {g} has no entries but total {tot[g]} (an empty group must have total 0)")
    return vals, offs, tot


def check_sums(out: np.ndarray, offsets: np.ndarray, totals: np.ndarray) -> None:
    """Refuse to return groups that do not sum to their totals or have negative entries.

    A cheap guard (one ``reduceat``) so that no inconsistent level is ever labelled optimal.
    """
    sizes = np.diff(offsets)
    ne = sizes > 0
    if not ne.any():
        return
    sums = np.add.reduceat(out, offsets[:-1][ne])
    bad = (sums != totals[ne]) | (np.minimum.reduceat(out, offsets[:-1][ne]) < 0)
    if bad.any():
        g = int(np.flatnonzero(ne)[np.flatnonzero(bad)[0]])
        raise RuntimeError(f"internal error: group {g} does not sum to its total {totals[g]} "
                           f"(got {int(sums[np.flatnonzero(bad)[0]])}); please report this input")


def _check_order(order: str) -> None:
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")


# ---------------------------------------------------------------------------------- segment helpers
def segment_cumsum(arr: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Inclusive cumulative sum restarted at every segment (segments contiguous, non-empty)."""
    cs = np.cumsum(arr)
    before = np.concatenate([np.zeros(1, dtype=cs.dtype), cs])[starts]  # sum of earlier segments
    return cs - np.repeat(before, sizes)


def segment_sort(keys: np.ndarray, gid: np.ndarray) -> np.ndarray:
    """Permutation sorting each contiguous segment by ``keys`` (stable: ties by position).

    Same result as ``np.lexsort((keys, gid))``, about twice as fast: a stable global sort gives
    every entry its rank, and ``gid * n + rank`` is a unique integer key.
    """
    n = keys.size
    by_key = np.argsort(keys, kind="stable")
    rank = np.empty(n, dtype=np.int64)
    rank[by_key] = np.arange(n, dtype=np.int64)
    return np.argsort(gid.astype(np.int64) * n + rank)


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
class IntOptSolver(Solver):
    """Plug-in ``"intopt"``: integer L-infinity TopDown levels by Algorithm 4 of paper 000.

    Option ``order="ascending" | "descending"`` (see :func:`intopt`).
    """

    name = "intopt"
    capabilities = Capabilities(
        objectives=frozenset({"linf"}),
        integer=True,
        continuous=False,
        structures=frozenset({"level"}),
        weights=False,
        bounds=False,
        linear_constraints=False,
        pyomo_hooks=False,
        free_sign=False,
        missing_targets=False,
        description="IntOpt (InfTDA, paper 000 Alg. 4): exact integer L-inf per group, vectorized",
    )

    def _solve(self, problem: Problem, *, time_limit: float | None = None, **options: Any) -> Solution:
        order = options.pop("order", "ascending")
        if options:
            raise TypeError(f"intopt: unknown option(s) {sorted(options)}")
        t0 = time.perf_counter()
        parents, offsets, child_index, totals = problem.level_groups()
        y = intopt_batch(problem.target[child_index], offsets, totals, order=order)
        values = np.rint(np.nan_to_num(problem.fixed)).astype(np.int64)
        values[child_index] = y
        return Solution(
            values=values,
            objective=problem.objective_value(values),
            status="optimal",
            solver=self.name,
            wall_time=time.perf_counter() - t0,
            stats={"n_groups": int(parents.size), "n_children": int(child_index.size), "order": order},
        )
