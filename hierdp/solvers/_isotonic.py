"""Isotonic regression on many runs at once: continuous (PAVA), exact integer, and a certificate.

A *run* is a sequence of variables ``x_1 <= x_2 <= ... <= x_m`` with common bounds ``lo <= x <= hi``
and separable costs ``f_i(x) = W_i x^2 - 2 S_i x + const`` (a merged block of nodes with total
weight ``W_i = sum w`` and ``S_i = sum w t``: ``sum_j w_j (x - t_j)^2``). The chain DP of paper 001
(§9.2, eq. 8) and the per-region projection of its §9.1 are such runs; the registry's ``chain``
plug-in solves both with these kernels.

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
float PAVA misplaces a value near a half-integer (at 2^46 with real targets a pooled mean of
``B + 0.5078125`` reads ``B + 0.5``: reproducer n1). So every integer answer is *certified*
(:func:`certify_runs`): by L♮-convexity of the problem (separable convex costs under difference
constraints, Murota) a point is optimal iff no move ``±χ_X`` lowers the cost; such moves decompose
into "lower a prefix" / "raise a suffix" of each block of equal values, checked with prefix sums
of the marginals ``w (2(c - t) ∓ 1)`` summed over the *nodes* (never over pre-summed component
sums, which float64 rounds). The arithmetic is exact or provably safe:

* targets and weights on a common binary grid (integers, halves, ... the usual case) whose scaled
  sums stay below 2^61: int64, exact;
* otherwise float64 with a rigorous error bound per prefix sum (each node's term is computed
  from ``c - t``, so the bound scales with the distance to the target, not with the counts): a
  run passes only if every prefix is below zero by more than its bound.

A run that does not pass is solved again exactly (:func:`exact_integer_run`: PAVA in rational
arithmetic on the nodes' own targets and weights), so the answer never rests on a float
comparison that could go either way.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from hierdp._segments import segment_cumsum

__all__ = ["Runs", "certify_runs", "continuous_runs", "exact_integer_run", "integer_runs"]

def _pava(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    from scipy.optimize import isotonic_regression

    return np.asarray(isotonic_regression(y, weights=w, increasing=True).x, dtype=float)


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


@dataclass(frozen=True)
class Runs:
    """Chains cut into runs, over merged *positions* (the nodes tied by equalities).

    Attributes:
        t, w: target and weight of every node, position by position (nodes of position ``p`` are
            ``t[ptr[p]:ptr[p + 1]]``); weights > 0.
        ptr: node ranges of the positions.
        offsets: positions of run ``r`` are ``offsets[r]:offsets[r + 1]`` (in chain order).
        lo, hi: common bounds of each run (integers or infinite for integer problems).
    """

    t: np.ndarray
    w: np.ndarray
    ptr: np.ndarray
    offsets: np.ndarray
    lo: np.ndarray
    hi: np.ndarray

    @classmethod
    def single_nodes(cls, t: np.ndarray, w: np.ndarray, offsets: np.ndarray, lo: np.ndarray, hi: np.ndarray
                     ) -> Runs:
        """Runs whose positions are single nodes."""
        t = np.asarray(t, dtype=float)
        return cls(t, np.asarray(w, dtype=float), np.arange(t.size + 1, dtype=np.int64),
                   np.asarray(offsets, dtype=np.int64), np.asarray(lo, dtype=float), np.asarray(hi, dtype=float))

    @property
    def n_positions(self) -> int:
        """Number of positions."""
        return int(self.ptr.size - 1)

    def position_of_node(self) -> np.ndarray:
        """Position of every node."""
        return np.repeat(np.arange(self.n_positions, dtype=np.int64), np.diff(self.ptr))

    def sums(self) -> tuple[np.ndarray, np.ndarray]:
        """``(S, W)`` per position: ``sum w t`` and ``sum w`` (float64, for the candidate only)."""
        pos = self.position_of_node()
        n = self.n_positions
        return (np.bincount(pos, weights=self.w * self.t, minlength=n),
                np.bincount(pos, weights=self.w, minlength=n))


def integer_runs(runs: Runs) -> tuple[np.ndarray, dict[str, Any]]:
    """Exact integer optimum of every run, certified (see the module docstring).

    Returns ``(values per position, stats)``: int64 values; ``stats`` says how many runs were
    certified at once, how many were re-solved exactly, and the certificate's arithmetic.
    """
    S, W = runs.sums()
    x = continuous_runs(S, W, runs.offsets, runs.lo, runs.hi)
    v = _round_half_down(x)
    ok, arithmetic = certify_runs(v, runs)
    stats: dict[str, Any] = {"runs": int(runs.offsets.size - 1), "certified_first": int(ok.sum()),
                             "exact_resolves": int((~ok).sum()), "certificate": arithmetic}
    for r in np.flatnonzero(~ok):
        a, b = int(runs.offsets[r]), int(runs.offsets[r + 1])
        v[a:b] = exact_integer_run(runs, int(r))
    return v.astype(np.int64), stats


def _grid_exponent(a: np.ndarray) -> int | None:
    """The smallest ``k >= 0`` with every ``a * 2^k`` an integer (None beyond 2^62)."""
    a = a[a != 0]
    if not a.size:
        return 0
    mant, exp = np.frexp(a)  # a = mant * 2^exp, 0.5 <= |mant| < 1: mant * 2^53 is an integer
    m = np.abs(mant * 2.0 ** 53).astype(np.int64)
    tz = np.zeros(m.size, np.int64)  # trailing zero bits of the integer mantissa
    rest = m.copy()
    for b in (32, 16, 8, 4, 2, 1):
        z = (rest & ((1 << b) - 1)) == 0
        tz += np.where(z, b, 0)
        rest = np.where(z, rest >> b, rest)
    k = int(np.max(53 - exp - tz))
    return max(k, 0) if k <= 62 else None


def _block_sums(d_down: np.ndarray, d_up: np.ndarray, new_block: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per node: the sum of ``d_down`` from its block's start through it (prefix), and of ``d_up``
    from it to its block's end (suffix). Each block is summed on its own (a float sum's error then
    depends on the block's terms only, not on the running total of the whole chain)."""
    n = d_down.size
    starts = np.flatnonzero(new_block)
    sizes = np.diff(np.concatenate([starts, [n]]))
    prefix = segment_cumsum(d_down, starts, sizes)
    rev_new = np.zeros(n, bool)  # the same blocks, read backwards
    rev_new[n - 1 - (starts + sizes - 1)] = True
    rev_starts = np.flatnonzero(rev_new)
    suffix = segment_cumsum(d_up[::-1].copy(), rev_starts, np.diff(np.concatenate([rev_starts, [n]])))[::-1]
    return prefix, suffix


def _exact_block_check(v: np.ndarray, runs: Runs, block_nodes: np.ndarray, last: np.ndarray, first: np.ndarray
                       ) -> tuple[bool, bool]:
    """``(some prefix lowers the cost, some suffix raising lowers the cost)`` for one block, in
    exact rational arithmetic (``block_nodes``: its nodes in order; ``last``/``first``: masks of
    the nodes ending / starting a position)."""
    c = Fraction(float(v))
    run = Fraction(0)
    lower = False
    down = []
    up = []
    for i in block_nodes:
        w, t = Fraction(float(runs.w[i])), Fraction(float(runs.t[i]))
        down.append(w * (2 * (c - t) - 1))
        up.append(w * (2 * (c - t) + 1))
    for k, d in enumerate(down):
        run += d
        if last[k] and run > 0:
            lower = True
            break
    run = Fraction(0)
    raise_ = False
    for k in range(len(up) - 1, -1, -1):
        run += up[k]
        if first[k] and run < 0:
            raise_ = True
            break
    return lower, raise_


def certify_runs(v: np.ndarray, runs: Runs) -> tuple[np.ndarray, str]:
    """Per run, whether the integer point ``v`` (one value per position) is *proven* optimal.

    Returns ``(ok, arithmetic)``: ``arithmetic`` is ``"exact int64"`` (targets and weights on a
    short binary grid, small sums) or ``"float64 with error bounds"`` (a block whose sums the
    bounds leave undecided is then summed again in exact rational arithmetic).
    """
    n_runs = runs.offsets.size - 1
    npos = runs.n_positions
    if npos == 0:
        return np.ones(n_runs, bool), "exact int64"
    v = np.asarray(v, dtype=float)
    run_of_pos = np.repeat(np.arange(n_runs), np.diff(runs.offsets))
    pos_of_node = runs.position_of_node()
    c = v[pos_of_node]
    t, w = runs.t, runs.w
    # moves act on blocks of equal values within a run; a prefix (suffix) of a block ends (starts)
    # at a position boundary, so node-level sums are read at the last (first) node of a position
    new_pos_block = np.ones(npos, bool)
    new_pos_block[1:] = (v[1:] != v[:-1]) | (run_of_pos[1:] != run_of_pos[:-1])
    new_block = np.zeros(t.size, bool)
    new_block[runs.ptr[:-1][new_pos_block]] = True
    last_node = runs.ptr[1:] - 1
    first_node = runs.ptr[:-1]
    kt, kw = _grid_exponent(t), _grid_exponent(w)
    exact = False
    if kt is not None and kw is not None:
        scale_t, scale_w = 2.0 ** kt, 2.0 ** kw
        size = np.abs(w * scale_w) * (2 * np.abs(c - t) * scale_t + scale_t)
        exact = float(size.sum()) < 2.0 ** 61 and float(np.abs(c).max() + np.abs(t).max()) * scale_t < 2.0 ** 61
    unsure = np.zeros(npos, bool)
    if exact:
        # d = w (2 (c - t) -+ 1), scaled by 2^(kt + kw): integers, summed exactly in int64
        delta = (c * scale_t).astype(np.int64) - (t * scale_t).astype(np.int64)
        wi = (w * scale_w).astype(np.int64)
        one = np.int64(round(scale_t))
        prefix, suffix = _block_sums(wi * (2 * delta - one), wi * (2 * delta + one), new_block)
        down_bad = prefix[last_node] > 0
        up_bad = suffix[first_node] < 0
        arithmetic = "exact int64"
    else:
        u = 2.0 ** -53
        delta = c - t  # one rounding: |error| <= u |c - t|
        d_down = w * (2 * delta - 1)
        d_up = w * (2 * delta + 1)
        # bound on the roundings of one node's term (three roundings, each relative u)
        term_err = 4 * u * w * (2 * np.abs(delta) + 1)
        prefix, suffix = _block_sums(d_down, d_up, new_block)
        starts = np.flatnonzero(new_block)
        longest = int(np.diff(np.concatenate([starts, [t.size]])).max())
        gamma = longest * u / (1 - longest * u)  # recursive summation of at most `longest` terms
        # a prefix's error: its terms' errors plus gamma times the sum of its absolute terms
        # (bounded with the same block sums; 1% headroom for the bounds' own rounding)
        e_p, a_p = _block_sums(term_err + gamma * np.abs(d_down), term_err + gamma * np.abs(d_up), new_block)
        err_p, err_s = 1.01 * e_p, 1.01 * a_p
        down_bad = prefix[last_node] - err_p[last_node] > 0  # proven > 0
        up_bad = suffix[first_node] + err_s[first_node] < 0  # proven < 0
        unsure = (np.abs(prefix[last_node]) <= err_p[last_node]) | (np.abs(suffix[first_node]) <= err_s[first_node])
        arithmetic = "float64 with error bounds"
    r = run_of_pos
    can_lower = v - 1 >= runs.lo[r]
    can_raise = v + 1 <= runs.hi[r]
    bad = (can_lower & down_bad) | (can_raise & up_bad)
    unsure &= ~bad & (can_lower | can_raise)
    if unsure.any():  # decide the undecided blocks exactly
        block_of_pos = np.cumsum(new_pos_block) - 1
        pos_start = np.flatnonzero(new_pos_block)
        pos_end = np.concatenate([pos_start[1:], [npos]])
        is_last = np.zeros(t.size, bool)
        is_last[last_node] = True
        is_first = np.zeros(t.size, bool)
        is_first[first_node] = True
        for b in np.unique(block_of_pos[unsure]):
            p0, p1 = int(pos_start[b]), int(pos_end[b])
            nodes = np.arange(int(runs.ptr[p0]), int(runs.ptr[p1]))
            lowers, raises = _exact_block_check(v[p0], runs, nodes, is_last[nodes], is_first[nodes])
            if (lowers and can_lower[p0]) or (raises and can_raise[p0]):
                bad[p0] = True
    ok = np.ones(n_runs, bool)
    ok[r[bad]] = False
    return ok, arithmetic


def exact_integer_run(runs: Runs, r: int) -> np.ndarray:
    """Exact integer optimum of run ``r`` in rational arithmetic (stack PAVA on the positions'
    exact ``sum w t / sum w``, clip, ``ceil(x - 1/2)``): the slow, certain fallback."""
    a, b = int(runs.offsets[r]), int(runs.offsets[r + 1])
    stack: list[list[Any]] = []  # [S_sum, W_sum, count]
    for p in range(a, b):
        s_, e_ = int(runs.ptr[p]), int(runs.ptr[p + 1])
        ws = [Fraction(float(x)) for x in runs.w[s_:e_]]
        si = sum((wk * Fraction(float(tk)) for wk, tk in zip(ws, runs.t[s_:e_], strict=True)), Fraction(0))
        stack.append([si, sum(ws, Fraction(0)), 1])
        while len(stack) > 1 and stack[-2][0] * stack[-1][1] >= stack[-1][0] * stack[-2][1]:
            top = stack.pop()
            stack[-1][0] += top[0]
            stack[-1][1] += top[1]
            stack[-1][2] += top[2]
    out = np.empty(b - a)
    pos = 0
    lo, hi = runs.lo[r], runs.hi[r]
    for bs, bw, cnt in stack:
        x = bs / bw
        if np.isfinite(lo):
            x = max(x, Fraction(float(lo)))
        if np.isfinite(hi):
            x = min(x, Fraction(float(hi)))
        val = -((-(2 * x - 1)) // 2)  # ceil(x - 1/2) exactly
        out[pos:pos + cnt] = float(val)
        pos += cnt
    return out
