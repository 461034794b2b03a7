"""Isotonic regression on many runs at once: continuous (PAVA), exact integer, and a certificate.

A *run* is a sequence of variables ``x_1 <= x_2 <= ... <= x_m`` with common bounds ``lo <= x <= hi``
and separable costs ``f_i(x) = W_i x^2 - 2 S_i x + const`` (a merged block of nodes with total
weight ``W_i = sum w`` and ``S_i = sum w t``: ``sum_j w_j (x - t_j)^2``). The chain DP of paper 001
(§9.2, eq. 8) and the per-node projection of its §9.1 are such runs.

Exactness of the integer answer (why rounding is optimal). Write ``C_i`` for the cost table of the
prefix ending at ``i`` (eq. 8a/8b: ``C_i(v) = f_i(v) + min_{v' <= v} C_{i-1}(v')``). For the
continuous tables the derivative obeys ``D_i(x) = f_i'(x) + min(D_{i-1}(x), 0)``; for the integer
tables the marginal ``Δ_i(v) = C_i(v) - C_i(v-1)`` obeys ``Δ_i(v) = (f_i(v) - f_i(v-1)) +
min(Δ_{i-1}(v), 0)``, and for a quadratic ``f_i(v) - f_i(v-1) = f_i'(v - 1/2)``. By induction
``Δ_i(v) = D_i(v - 1/2)``: the integer tables are the continuous ones sampled at half-integers.
Hence the smallest integer minimiser of ``C_i`` is ``ceil(z_i - 1/2)`` for the continuous
minimiser ``z_i``, and the top-down pass ``v_{i-1} = clip(z_{i-1}, lo, v_i)`` commutes with
``r(x) = ceil(x - 1/2)`` (monotone, identity on integers): the integer optimum is ``r`` of the
continuous optimum, which is ``clip(PAVA(S/W), lo, hi)``. Bounds common to a run do not change the
derivatives inside ``(lo, hi]``.

Floating point can only matter at exact ties (where both roundings are optimal) or when the
float PAVA misplaces a value near a half-integer; so every integer answer is *certified*
(:func:`certify_runs`): by L♮-convexity of the problem (separable convex costs under difference
constraints, Murota) a point is optimal iff no move ``±χ_X`` lowers the cost; such moves decompose
into "lower a prefix" / "raise a suffix" of each block of equal values, checked with prefix sums
of the integer marginals ``W (2c - 1) - 2 S`` — exact in int64 when ``S`` and ``W`` are integers.
A run that fails is solved again by an exact rational PAVA (:func:`exact_integer_run`).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

__all__ = ["certify_runs", "clip_isotonic", "continuous_runs", "exact_integer_run", "integer_runs"]

#: int64 certificate only while every partial sum stays below this (2^62: no overflow)
_INT_SAFE = float(2 ** 62)


def _pava(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    from scipy.optimize import isotonic_regression

    return np.asarray(isotonic_regression(y, weights=w, increasing=True).x, dtype=float)


def clip_isotonic(y: np.ndarray, w: np.ndarray | None = None, lower: float = -np.inf,
                  upper: float = np.inf) -> np.ndarray:
    """``argmin sum w (x - y)^2`` over ``lower <= x_1 <= ... <= x_m <= upper`` (continuous): PAVA,
    then clipping (clipping commutes with L2 isotonic regression under common bounds)."""
    y = np.asarray(y, dtype=float)
    w = np.ones_like(y) if w is None else np.asarray(w, dtype=float)
    if y.size == 0:
        return y.copy()
    return np.clip(_pava(y, w), lower, upper)


def continuous_runs(S: np.ndarray, W: np.ndarray, offsets: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The continuous optimum of every run (``offsets`` delimit runs; ``lo``/``hi`` per run)."""
    y = S / W
    out = np.empty_like(y)
    sizes = np.diff(offsets)
    single = np.flatnonzero(sizes == 1)
    if single.size:
        i = offsets[single]
        out[i] = np.clip(y[i], lo[single], hi[single])
    for r in np.flatnonzero(sizes > 1):  # one compiled PAVA call per run of length >= 2
        a, b = int(offsets[r]), int(offsets[r + 1])
        out[a:b] = np.clip(_pava(y[a:b], W[a:b]), lo[r], hi[r])
    return out


def _round_half_down(x: np.ndarray) -> np.ndarray:
    """``ceil(x - 1/2)``: the smallest integer minimiser of a quadratic centred at ``x``."""
    return np.ceil(x - 0.5)


def integer_runs(S: np.ndarray, W: np.ndarray, offsets: np.ndarray, lo: np.ndarray,
                 hi: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
    """Exact integer optimum of every run (``lo``/``hi`` integers or infinite), certified.

    Returns ``(values, stats)``: int64 values; ``stats`` says how many runs were certified at once
    and how many were re-solved exactly, and the arithmetic of the certificate.
    """
    x = continuous_runs(S, W, offsets, lo, hi)
    v = _round_half_down(x)
    ok, arithmetic = certify_runs(v, S, W, offsets, lo, hi)
    stats: dict[str, Any] = {"runs": int(offsets.size - 1), "certified_first": int(ok.sum()),
                             "exact_resolves": int((~ok).sum()), "certificate": arithmetic}
    for r in np.flatnonzero(~ok):
        a, b = int(offsets[r]), int(offsets[r + 1])
        v[a:b] = exact_integer_run(S[a:b], W[a:b], lo[r], hi[r])
    return v.astype(np.int64), stats


def certify_runs(v: np.ndarray, S: np.ndarray, W: np.ndarray, offsets: np.ndarray, lo: np.ndarray,
                 hi: np.ndarray) -> tuple[np.ndarray, str]:
    """Per run, whether the integer point ``v`` is optimal (see the module docstring).

    Returns ``(ok, arithmetic)`` with ``arithmetic`` ``"exact int64"`` or ``"float64"`` (non-integer
    costs: marginals compared with a relative tolerance of 1e-9).
    """
    n = v.size
    n_runs = offsets.size - 1
    if n == 0:
        return np.ones(n_runs, bool), "exact int64"
    run_of = np.repeat(np.arange(n_runs), np.diff(offsets))
    integral = bool(np.all(np.round(S) == S) and np.all(np.round(W) == W))
    mag = (np.abs(v).max() * 2 + 1) * W.max() + 2 * np.abs(S).max()
    exact = integral and mag * n < _INT_SAFE
    if exact:
        vi, Si, Wi = v.astype(np.int64), S.astype(np.int64), W.astype(np.int64)
        d_down = Wi * (2 * vi - 1) - 2 * Si  # Δ(c): cost saved by lowering from c to c-1 is -Δ(c)
        d_up = Wi * (2 * vi + 1) - 2 * Si  # Δ(c+1): cost added by raising from c to c+1
        tol = 0
    else:
        d_down = W * (2 * v - 1) - 2 * S
        d_up = W * (2 * v + 1) - 2 * S
        tol = 1e-9 * float(np.max(np.abs(W * (2 * np.abs(v) + 1)) + 2 * np.abs(S)))
    new_block = np.ones(n, bool)
    new_block[1:] = (v[1:] != v[:-1]) | (run_of[1:] != run_of[:-1])
    starts = np.flatnonzero(new_block)
    block_of = np.cumsum(new_block) - 1
    # prefixes of a block: cumulative sums restarted at each block start
    cd = np.cumsum(d_down)
    base = np.where(starts > 0, cd[starts - 1], 0)
    prefix = cd - base[block_of]
    max_prefix = np.maximum.reduceat(prefix, starts)
    cu = np.cumsum(d_up)
    ends = np.concatenate([starts[1:], [n]]) - 1
    block_total = cu[ends] - np.where(starts > 0, cu[starts - 1], 0)
    before = cu - d_up - np.where(starts > 0, cu[starts - 1], 0)[block_of]  # sum of the block before j
    suffix = block_total[block_of] - before
    min_suffix = np.minimum.reduceat(suffix, starts)
    c = v[starts]
    r = run_of[starts]
    can_lower = c - 1 >= lo[r]
    can_raise = c + 1 <= hi[r]
    bad = (can_lower & (max_prefix > tol)) | (can_raise & (min_suffix < -tol))
    ok = np.ones(n_runs, bool)
    ok[r[bad]] = False
    return ok, "exact int64" if exact else "float64"


def exact_integer_run(S: np.ndarray, W: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Exact integer optimum of one run with rational arithmetic (stack PAVA on ``S/W``, clip,
    ``ceil(x - 1/2)``); the slow, certain fallback."""
    s = [Fraction(float(a)) for a in S]
    w = [Fraction(float(a)) for a in W]
    stack: list[list[Any]] = []  # [S_sum, W_sum, count]
    for si, wi in zip(s, w):
        stack.append([si, wi, 1])
        while len(stack) > 1 and stack[-2][0] * stack[-1][1] >= stack[-1][0] * stack[-2][1]:
            top = stack.pop()
            stack[-1][0] += top[0]
            stack[-1][1] += top[1]
            stack[-1][2] += top[2]
    out = np.empty(len(s))
    pos = 0
    for bs, bw, cnt in stack:
        x = bs / bw
        if np.isfinite(lo):
            x = max(x, Fraction(int(lo)))
        if np.isfinite(hi):
            x = min(x, Fraction(int(hi)))
        val = -((-(2 * x - 1)) // 2)  # ceil(x - 1/2) exactly
        out[pos:pos + cnt] = float(val)
        pos += cnt
    return out
