"""Fast exact secure sampling: the CKS20 samplers vectorized over buffers of OS random bytes.

Secure mode must sample the discrete Laplace and the discrete Gaussian *exactly* (no floating
point anywhere in the sampled law, so the floating-point attacks on naive samplers -- Mironov
2012 -- have nothing to exploit) from operating-system randomness. The reference algorithms are
those of Canonne, Kamath & Steinke (2020), "The Discrete Gaussian for Differential Privacy"
(CKS20), Algorithms 1-3; :class:`hierdp.privacy.rng.SecureRandom` runs them one draw at a time in
Python (tens of microseconds a draw). This module runs the *same* algorithms on whole vectors:
every step is a numpy operation over all the entries still pending, every comparison is an exact
comparison of int64 integers, and the random input is raw bytes from :func:`os.urandom`.

Exactness, step by step
-----------------------
Let ``R`` be the stream of uniform random bytes from the OS. Every random decision below is
derived from fresh bytes of ``R`` by integer operations only, so each entry's draws are
independent of every other entry's and of every earlier draw.

1. **Bernoulli(a/b)** for integers ``0 <= a <= b``, ``1 <= b < 2**62`` (:func:`bernoulli_ratio`).
   Compare a uniform real ``U = 0.r1 r2 r3 ...`` (random base-``2**w`` digits ``r_j``, ``w`` bits
   each) with ``a/b`` digit by digit, from the long-division expansion ``a/b = 0.d1 d2 d3 ...``:
   ``x_0 = a``, ``d_j = (x_{j-1} * 2**w) // b``, ``x_j = x_{j-1} * 2**w - d_j * b``. Return True at
   the first ``j`` with ``r_j < d_j``, False at the first ``j`` with ``r_j > d_j``. Then
   ``P(True) = sum_j 2**(-w (j-1)) * d_j / 2**w = a/b`` exactly (the expansion converges because
   ``0 <= x_j < b``). Everything is int64: ``x_j < b`` and ``w = min(8, 63 - bitlen(b))``, so
   ``x * 2**w < 2**63``. A zero remainder ``x_j = 0`` after equal digits means ``a/b`` equals the
   ``U`` read so far, so ``U >= a/b``: False at once. No uniform integer on ``[0, b)`` is needed,
   hence no modulo bias, and on average about one byte is consumed.
2. **Uniform integer on [0, m)** (:func:`uniform_below`), ``1 <= m < 2**62``: take
   ``bitlen(m - 1)`` random bits (a uniform integer on ``[0, 2**bitlen(m-1))``) and reject values
   ``>= m``. Accepted values are uniform on ``[0, m)`` (rejection keeps the conditional law
   uniform); each round accepts with probability > 1/2.
3. **Bernoulli(exp(-gamma)), gamma in [0, 1]** (CKS20 Alg. 1; :func:`bernoulli_exp_ratio`): draw
   ``A_k ~ Bernoulli(gamma / k)`` for ``k = 1, 2, ...`` until the first failure ``K``; return
   ``K`` odd. ``P(K > k) = gamma**k / k!``, so ``P(K odd) = sum_k (-gamma)**k / k! = exp(-gamma)``.
   ``Bernoulli(gamma / k)`` is the AND of two independent draws ``Bernoulli(gamma)`` and
   ``Bernoulli(1/k)`` (the probabilities multiply), so neither denominator grows with ``k``.
4. **Geometric count of Bernoulli(exp(-1)) successes** (:func:`geometric_exp1`): step 3 with
   ``gamma = 1``, repeated until the first failure; ``P(V >= v) = exp(-v)``.
5. **Discrete Laplace with rational scale t/s** (CKS20 Alg. 2; :func:`discrete_laplace`): draw
   ``U`` uniform on ``[0, t)`` and keep it with probability ``exp(-U/t)`` (steps 2-3, else retry),
   draw ``V`` (step 4), set ``X = U + t V`` -- then ``P(X = x) ∝ exp(-x/t)`` on ``x >= 0`` -- and
   ``Y = X // s`` -- then ``P(Y = y) ∝ exp(-y s / t)``; draw a sign bit and retry on ``-0``. The
   result has ``P(Z = z) ∝ exp(-|z| s / t)``, the discrete Laplace with scale ``t/s``.
6. **Discrete Gaussian with rational sigma2 = p/q** (CKS20 Alg. 3; :func:`discrete_gaussian`):
   propose ``Y`` from the discrete Laplace with integer scale ``t`` (step 5, ``s = 1``) and
   accept with probability ``exp(-gamma)``, ``gamma = (|Y| - sigma2/t)**2 / (2 sigma2)``. Since
   ``exp(-|y|/t) * exp(-gamma(y)) = exp(-y**2 / (2 sigma2)) * exp(-sigma2 / (2 t**2))`` and
   ``gamma >= 0``, an accepted ``Y`` is ``N_Z(0, sigma2)`` exactly for *every* ``t >= 1``; CKS20
   take ``t = floor(sigma) + 1``, we take ``t = max(1, round(sigma))`` (decided with integers),
   which accepts more often (0.48 instead of 0.35 of the attempts at ``sigma2 = 1``). To keep the
   test exact in int64, write ``sigma2 / t = v/u``; then ``gamma = D**2 / N`` with the integer
   ``D = |Y| u - v`` and a per-parameter integer ``N`` (:func:`_gauss_row`). Let
   ``G = isqrt(N)``, ``kappa = G**2 / N <= 1``, ``s = max(1, ceil(|D|/G))`` and ``n = s**2``.
   Then ``gamma / n = (|D|/(G s))**2 * kappa <= 1`` and ``exp(-gamma) = exp(-gamma/n)**n``:
   accept iff ``n`` independent runs of step 3 on ``gamma/n`` all succeed. Inside step 3,
   ``Bernoulli(gamma / (n k))`` is the AND of the four independent draws
   ``Bernoulli(|D| / (G s))`` (twice), ``Bernoulli(kappa)`` and ``Bernoulli(1/k)``; the first
   two are step 1 on int64 integers, ``Bernoulli(kappa)`` compares the random digits with the
   precomputed base-256 expansion of ``kappa`` (16 digits, then the exact remainder in Python
   integers, reached with probability ``2**-128``; :class:`KappaTable`).
7. **Vectorized rounds** (:func:`_drive`): each round makes one *attempt* (steps 5-6) for a
   batch of entries -- those whose last attempt failed plus fresh ones, or, at the end, several
   replicas of each remaining entry -- and an entry takes the value of its first successful
   attempt. Attempts are independent, so this is exactly the value of the sequential rejection
   loop, however the attempts are grouped. Step 4 draws its counts from a pool of
   Bernoulli(exp(-1)) draws cut at the failures (an unfinished last run carries over to the next
   pool instead of being dropped, which would bias the counts).

Where the vectorized path stops, and what happens then
------------------------------------------------------
Nothing is ever approximated: what does not fit the int64 bounds is done in Python integers by
the exact scalar code of :class:`~hierdp.privacy.rng.SecureRandom`, which samples the same law.

* **Discrete Laplace**, scale ``t/s`` in lowest terms: vectorized when ``t < 2**62`` and
  ``s < 2**62`` -- for a float scale, every scale in ``[2**-9, 2**62)``. An entry whose
  ``X = U + t V`` might leave int64 (``V > (2**63 - t) // t``; probability about
  ``exp(-2**63 / t)``, i.e. never below ``t = 2**56``) is finished in Python integers; a draw that
  does not fit int64 at all raises ``OverflowError``.
* **Discrete Gaussian**, ``sigma2 = p/q`` in lowest terms: vectorized when ``u < 2**61``,
  ``v < 2**61`` and ``1 <= G < 2**61`` (:func:`_gauss_row`) -- for a float sigma2, every value in
  ``[2**-8, 2**58)`` (checked on 10^5 random floats per octave). A proposal with
  ``|Y| > ylim = (2**61 - 1 + v) // u`` (so that ``|D| < 2**61``) or ``s > 2**30`` has its
  acceptance test done in Python integers; ``ylim >= 228 t`` for every float sigma2 in
  ``[1, 2**52)`` (the proposal exceeds it with probability ``exp(-228)``: never),
  ``ylim >= 9 t`` up to ``2**58`` and ``ylim >= 2 t`` for small sigma2 (``[2**-8, 1)``, where a
  few per cent of the proposals take the Python test).
* Everything else -- floats outside those ranges, Fractions whose reduced numerator or
  denominator are too large -- runs entirely on the scalar path, one draw at a time.
  :func:`laplace_vectorizable` and :func:`gaussian_vectorizable` say which path a value takes.

Randomness and side channels
----------------------------
All random bytes come from :func:`os.urandom` (the kernel CSPRNG, the same source as
:mod:`secrets`); there is no seed and no user-visible generator. As with every rejection sampler,
running time depends on the values drawn; do not publish per-entry timings of a release.
Work is done in chunks of :data:`CHUNK` entries so that memory stays bounded and a Ctrl-C
(``KeyboardInterrupt``) is handled within one chunk (milliseconds).
"""

from __future__ import annotations

import math
import os
from fractions import Fraction
from typing import Any
from collections.abc import Iterable, Sequence

import numpy as np

__all__ = [
    "CHUNK",
    "KappaTable",
    "OsRandomBytes",
    "bernoulli_digits",
    "bernoulli_exp1",
    "bernoulli_exp_ratio",
    "bernoulli_ratio",
    "discrete_gaussian",
    "discrete_laplace",
    "gaussian_vectorizable",
    "geometric_exp1",
    "laplace",
    "laplace_vectorizable",
    "uniform_below",
]

#: entries sampled per chunk: bounds temporary memory and the latency of a Ctrl-C
CHUNK = 1 << 17
_I64_MAX = (1 << 63) - 1
_LIM62 = 1 << 62
_LIM61 = 1 << 61
_KAPPA_DIGITS = 16  # base-256 digits of kappa precomputed per parameter (128 bits)
_S_MAX = 1 << 30  # largest s (n = s**2 factors) handled in int64 in the Gaussian acceptance
# Secure continuous Laplace: the grid is at most scale * 2**-_LAPLACE_GRID_BITS and at most 1 (a
# coarser grid would keep an integer input's residue modulo it: see hierdp.privacy.rng).
_LAPLACE_GRID_BITS = 40
_LAPLACE_MAX_GRID_EXP = 0


# -- the random input ----------------------------------------------------------------------------
class OsRandomBytes:
    """Uniform random bytes from the operating system, served as numpy arrays.

    ``bytes_drawn`` counts what was consumed (for benchmarks). Tests of the exact primitives may
    pass another object with the same ``uint8`` method (e.g. scripted bytes); the public samplers
    in :mod:`hierdp.privacy.samplers` always use this class.
    """

    __slots__ = ("bytes_drawn",)

    def __init__(self) -> None:
        self.bytes_drawn = 0

    def uint8(self, n: int) -> np.ndarray:
        """``n`` independent uniform bytes (uint8 array)."""
        self.bytes_drawn += n
        return np.frombuffer(os.urandom(n), dtype=np.uint8)


def _uniform_bits(source, n: int, nbits: int) -> np.ndarray:
    """``n`` uniform integers on ``[0, 2**nbits)`` as int64 (``0 <= nbits <= 62``)."""
    if nbits == 0:
        return np.zeros(n, dtype=np.int64)
    width = 1 if nbits <= 8 else 2 if nbits <= 16 else 4 if nbits <= 32 else 8
    raw = source.uint8(n * width).view(f"<u{width}")
    # the low bits of uniform bytes are independent uniform bits
    return (raw & np.array((1 << nbits) - 1, dtype=raw.dtype)).astype(np.int64)


def _random_bits(source, n: int) -> np.ndarray:
    """``n`` independent fair bits as a bool array (8 per byte)."""
    return np.unpackbits(source.uint8((n + 7) // 8), count=n).view(bool)


def _where(mask: np.ndarray) -> np.ndarray:
    """Indices of the True entries of a 1-d bool array (``np.flatnonzero`` without its wrappers)."""
    return mask.nonzero()[0]


def _sub(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``x`` restricted to ``idx`` when ``x`` is per entry; a shared 0-d value stays as it is."""
    return x if x.ndim == 0 else x[idx]


# -- step 1: Bernoulli(a/b) by lazy digit comparison ---------------------------------------------
def bernoulli_ratio(num: np.ndarray | int, den: np.ndarray | int, n: int,
                    source: OsRandomBytes) -> np.ndarray:
    """Exact ``Bernoulli(num/den)`` for each of ``n`` entries (``0 <= num <= den < 2**62``).

    ``num`` and ``den`` are int64 arrays of length ``n`` or scalars shared by all entries. Module
    docstring, step 1: the random base-``2**w`` digits are compared with the long-division digits
    of ``num/den``; ``P(True) = num/den`` exactly.
    """
    x = np.asarray(num, dtype=np.int64)
    den = np.asarray(den, dtype=np.int64)
    out = np.empty(n, dtype=bool)
    if n == 0:
        return out
    dmax = int(den) if den.ndim == 0 else int(den.max())
    if dmax >= _LIM62:
        raise ValueError(f"denominator {dmax} is not below 2**62")
    w = min(8, 63 - dmax.bit_length())
    idx: np.ndarray | None = None  # None: all n entries are still undecided
    m = n
    while True:
        shifted = x << w  # < 2**63 because x < den (or x == den on the first digit)
        digit = shifted // den
        r = source.uint8(m)
        if w < 8:
            r = r & np.uint8((1 << w) - 1)
        if idx is None:
            np.less(r, digit, out=out)
        else:
            out[idx] = r < digit
        tie = _where(r == digit)
        if tie.size == 0:
            return out
        # equal digits (probability 2**-w each): compare the next digit of the remainder; a
        # zero remainder means num/den is exactly the U read so far, so U >= num/den: False
        x = _sub(shifted, tie) - _sub(digit, tie) * _sub(den, tie)
        if x.ndim == 0:
            if int(x) == 0:
                return out
        else:
            go = _where(x)
            if go.size < tie.size:
                tie, x = tie[go], x[go]
        if tie.size == 0:
            return out
        den = _sub(den, tie)
        idx = tie if idx is None else idx[tie]
        m = tie.size


def _kappa_expansion(num: int, den: int) -> tuple[bytes, tuple[int, int]]:
    """The first base-256 digits of ``kappa = num/den`` in ``(0, 1)`` (as bytes) and the exact
    remainder ``frac(kappa * 256**L)`` after them, as ``(numerator, denominator)``."""
    scaled = num << (8 * _KAPPA_DIGITS)
    head = scaled // den
    return head.to_bytes(_KAPPA_DIGITS, "big"), (scaled - head * den, den)


class KappaTable:
    """Base-256 expansions of constants ``kappa_i = num_i / den_i`` in ``(0, 1]``, one per row.

    ``digits[i]`` holds the first ``L`` digits (for ``kappa = 1``: the digit 256, which no byte
    reaches, so the draw is always True); ``tails[i]`` the exact remainder after them;
    ``stop[i]`` the number of digits after which the remainder is zero (``L + 1`` when it never
    is within the table): a tie on the last of them decides False, as ``U >= kappa`` then.
    """

    def __init__(self, ratios: Sequence[tuple[int, int]]) -> None:
        digits, tails, stop = [], [], []
        for num, den in ratios:
            if num == den:
                digits.append(bytes(_KAPPA_DIGITS))
                tails.append((0, 1))
                stop.append(_KAPPA_DIGITS + 1)
                continue
            head, tail = _kappa_expansion(num, den)
            digits.append(head)
            tails.append(tail)
            stop.append(len(head.rstrip(b"\0")) if tail[0] == 0 else _KAPPA_DIGITS + 1)
        self.digits = np.frombuffer(b"".join(digits), np.uint8).reshape(
            len(ratios), _KAPPA_DIGITS).astype(np.int64)
        self.one = np.array([num == den for num, den in ratios], dtype=bool)
        self.digits[self.one] = 256
        self.tails = tails
        self.stop = np.array(stop, dtype=np.int64)


def bernoulli_digits(kappas: KappaTable, row: np.ndarray, n: int,
                     source: OsRandomBytes) -> np.ndarray:
    """Exact ``Bernoulli(kappa)`` from kappa's precomputed base-256 expansion.

    Args:
        kappas: the expansions.
        row: int array of shape ``()`` (one kappa for all entries) or ``(n,)``: each entry's row.
        n: number of entries.

    Random bytes are compared with kappa's digits (a lazy comparison of a uniform ``U`` with
    ``kappa``, step 1); after ``L`` equal digits (probability ``256**-L``) the comparison
    continues exactly against the remainder, in Python integers.
    """
    out = np.empty(n, dtype=bool)
    idx = np.arange(n)
    shared = row.ndim == 0
    digits = kappas.digits
    for j in range(digits.shape[1]):
        if idx.size == 0:
            return out
        r = source.uint8(idx.size)
        d = digits[int(row), j] if shared else digits[row[idx], j]
        out[idx] = r < d
        tie = _where(r == d)
        stop = kappas.stop[int(row)] if shared else kappas.stop[row[idx[tie]]]
        idx = idx[tie[stop > j + 1]] if not shared else (idx[tie] if stop > j + 1 else idx[:0])
    # all L digits equal (probability 2**-128): go on against the exact remainders, in Python
    # integers, one byte per undecided entry per round (as in the vectorized rounds)
    pending = [(i, *kappas.tails[int(row if shared else row[i])]) for i in idx.tolist()]
    while pending:
        still = []
        for (i, x, b), r in zip(pending, source.uint8(len(pending)).tolist(), strict=False):
            x <<= 8
            digit = x // b
            if r != digit:
                out[i] = r < digit
            elif x == digit * b:  # zero remainder: kappa equals the U read so far
                out[i] = False
            else:
                still.append((i, x - digit * b, b))
        pending = still
    return out


# -- step 2: uniform integers ----------------------------------------------------------------------
def uniform_below(m: np.ndarray | int, mask: np.ndarray | int, n: int, source: OsRandomBytes,
                  max_rounds: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Uniform integers on ``[0, m)`` by rejection (``1 <= m < 2**62``,
    ``mask = 2**bitlen(m - 1) - 1``).

    ``m`` and ``mask`` are int64 arrays of length ``n`` or shared scalars. Returns ``(values, ok)``;
    with ``max_rounds`` an entry may stay unresolved (``ok`` False, probability < 2**-max_rounds):
    a caller that treats this as a failed attempt and retries keeps the law exact, because an
    accepted value is uniform whatever the round it was accepted in.
    """
    m = np.asarray(m, dtype=np.int64)
    mask = np.asarray(mask, dtype=np.int64)
    out = np.empty(n, dtype=np.int64)
    ok = np.zeros(n, dtype=bool)
    nbits = (int(mask) if mask.ndim == 0 else int(mask.max())).bit_length() if n else 0
    idx = np.arange(n)
    rounds = 0
    while idx.size and (max_rounds is None or rounds < max_rounds):
        w = _uniform_bits(source, idx.size, nbits)
        if mask.ndim:
            w &= mask[idx]
        accepted = w < _sub(m, idx)
        good = _where(accepted)
        out[idx[good]] = w[good]
        ok[idx[good]] = True
        idx = idx[_where(~accepted)]
        rounds += 1
    return out, ok


# -- step 3: Bernoulli(exp(-a/b)) for a <= b (CKS20 Alg. 1) ------------------------------------
def bernoulli_exp_ratio(a: np.ndarray | int, b: np.ndarray | int, n: int,
                        source: OsRandomBytes) -> np.ndarray:
    """Exact ``Bernoulli(exp(-a/b))`` for integers ``0 <= a <= b < 2**62`` (CKS20 Alg. 1).

    All entries run in lockstep (same ``k``): draw ``Bernoulli(a/b) AND Bernoulli(1/k)`` for the
    entries still running, stop an entry at its first failure ``K`` and return ``K`` odd.
    """
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    out = np.empty(n, dtype=bool)
    idx = np.arange(n)
    k = 1
    while idx.size:
        trial = bernoulli_ratio(_sub(a, idx), _sub(b, idx), idx.size, source)  # B(gamma)
        if k > 1:
            on = _where(trial)
            trial[on] = bernoulli_ratio(1, k, on.size, source)  # AND B(1/k)
        stopped = _where(~trial)
        out[idx[stopped]] = k % 2 == 1  # K = k: success iff K is odd
        idx = idx[_where(trial)]
        k += 1
    return out


# -- step 4: the number of Bernoulli(exp(-1)) successes before the first failure ---------------
def bernoulli_exp1(n: int, source: OsRandomBytes) -> np.ndarray:
    """``n`` independent exact Bernoulli(exp(-1)) draws (CKS20 Alg. 1 with gamma = 1)."""
    out = np.empty(n, dtype=bool)
    idx = np.arange(n)
    k = 2  # Alg. 1's k = 1 draw is Bernoulli(1): always True
    while idx.size:
        trial = bernoulli_ratio(1, k, idx.size, source)  # B(1/k)
        stopped = _where(~trial)
        out[idx[stopped]] = k % 2 == 1
        idx = idx[_where(trial)]
        k += 1
    return out


def geometric_exp1(n: int, source: OsRandomBytes) -> np.ndarray:
    """``n`` iid ``V`` with ``P(V >= v) = exp(-v)``: runs of Bernoulli(exp(-1)) successes.

    A pool of iid Bernoulli(exp(-1)) draws is cut at its failures; the run lengths before
    successive failures are iid geometric. The first ``n`` runs are returned; if the pool holds
    fewer, the unfinished last run carries over into the next pool (so the runs are those of one
    infinite iid sequence -- dropping it would bias the runs towards short ones).
    """
    out = np.empty(n, dtype=np.int64)
    filled, carry = 0, 0
    while filled < n:
        need = n - filled
        pool = bernoulli_exp1(need + need // 2 + need // 8 + 32, source)  # ~1.58 draws per run
        fails = _where(~pool)
        if fails.size == 0:
            carry += pool.size
            continue
        use = min(need, fails.size)
        runs = np.diff(fails[:use], prepend=-1) - 1
        runs[0] += carry
        out[filled:filled + use] = runs
        filled += use
        carry = pool.size - 1 - int(fails[-1])  # used only if the pool ran out (use == fails.size)
    return out


# -- parameter tables ----------------------------------------------------------------------------
def _ratio(value: object) -> tuple[int, int]:
    """``(p, q)``, the exact value ``p/q`` in lowest terms of a float (its binary value), an int
    or a Fraction."""
    if isinstance(value, float):
        return value.as_integer_ratio()
    if isinstance(value, Fraction):
        return value.numerator, value.denominator
    if isinstance(value, (int, np.integer)):
        return int(value), 1
    return float(value).as_integer_ratio()  # type: ignore[arg-type]  # (anything float() takes)


def _mask_for(m: int) -> int:
    """``2**bitlen(m - 1) - 1``: the fewest low bits that cover ``[0, m)``."""
    return (1 << (m - 1).bit_length()) - 1


def _vlim(t: int) -> int:
    """The largest ``V`` with ``U + t V < 2**63`` for every ``U < t``."""
    return (_I64_MAX - (t - 1)) // t


def laplace_vectorizable(scale: Fraction | float) -> bool:
    """True when the discrete Laplace with this exact scale runs on the vectorized int64 path."""
    t, s = _ratio(scale)
    return t < _LIM62 and s < _LIM62


def _gauss_row(p: int, q: int) -> tuple[int, int, int, int, int, bool]:
    """Step 6 constants for ``sigma2 = p/q`` (lowest terms): ``(t, u, v, N, G, vectorizable)``.

    ``t = max(1, round(sigma))`` (exactly: ``a = floor(sigma) = isqrt(floor(p/q))``, plus one
    when ``sigma >= a + 1/2``, i.e. ``4 p >= (2a + 1)**2 q``). ``sigma2 / t = v/u`` with
    ``u = M q t/g`` and ``v = M p/g`` (``g = gcd(p, t)``, which is ``gcd(p, q t)`` as
    ``gcd(p, q) = 1``; ``M`` a power of two). Then ``gamma = (|Y| - v/u)**2 / (2 p/q) = D**2 / N``
    with ``D = |Y| u - v`` and the integer ``N = 2 p q (M t/g)**2``; ``G = isqrt(N)``. ``M``
    brings ``u t`` up to about ``2**52`` when it is smaller: ``G`` is then large, so
    ``kappa = G**2 / N >= (1 - 1/G)**2`` is practically 1 (cheap to draw), while
    ``ylim = (2**61 - 1 + v) // u``, the largest ``|Y|`` with ``|D| < 2**61``, stays at least
    ``2**9 t`` (see the module docstring for the float ranges).
    """
    a = math.isqrt(p // q)  # floor(sqrt(p/q)) = isqrt(floor(p/q))
    t = max(1, a + 1 if 4 * p >= (2 * a + 1) ** 2 * q else a)
    g = math.gcd(p, t)
    u, v = q * (t // g), p // g
    M = 1 << max(0, 52 - (u * t).bit_length())
    u, v = u * M, v * M
    N = 2 * p * q * (M * (t // g)) ** 2
    G = math.isqrt(N)
    ok = u < _LIM61 and v < _LIM61 and 1 <= G < _LIM61 and t < _LIM62
    return t, u, v, N, G, ok


def gaussian_vectorizable(sigma2: Fraction | float) -> bool:
    """True when ``N_Z(0, sigma2)`` (exact ``sigma2``) runs on the vectorized int64 path."""
    return _gauss_row(*_ratio(sigma2))[-1]


class _Columns:
    """Parameter columns of a batch of entries.

    Shared (one parameter for the whole batch): every column is 0-d and :meth:`take` is free.
    Per entry: columns are 1-d (0-d ones are constants) and :meth:`take` restricts them together.
    """

    def __init__(self, shared: bool, **cols: np.ndarray) -> None:
        self.shared = shared
        self.__dict__.update(cols)
        self._names = tuple(cols)

    def __getattr__(self, name: str) -> Any:  # the columns, set in __init__ (typed for the checker)
        raise AttributeError(name)

    def take(self, idx: np.ndarray) -> _Columns:
        if self.shared:
            return self
        return _Columns(False, **{k: _sub(getattr(self, k), idx) for k in self._names})


# -- step 5: one attempt of the discrete Laplace (CKS20 Alg. 2) ---------------------------------
def _laplace_attempt(c: _Columns, m: int, source: OsRandomBytes) -> tuple[np.ndarray, np.ndarray]:
    """One attempt of CKS20 Alg. 2 per entry (scale ``t/s``): ``(values, ok)``.

    An attempt fails when ``U`` is not resolved in two rounds, is not kept (probability
    ``1 - exp(-U/t)``) or the draw is ``-0``; the caller retries failed entries with fresh
    randomness, so each entry gets the value of its first successful attempt -- exactly the
    output of Alg. 2's loop.
    """
    U, ok = uniform_below(c.t, c.tmask, m, source, max_rounds=2)
    cand = _where(ok)
    kept = bernoulli_exp_ratio(U[cand], _sub(c.t, cand), cand.size, source)
    ok[cand] = kept
    live = cand[_where(kept)]
    U = U[live]
    t, s = _sub(c.t, live), _sub(c.s, live)
    V = geometric_exp1(live.size, source)
    big = _where(_sub(c.vlim, live) < V)  # U + t V might leave int64
    Y = U + t * V
    if s.ndim or int(s) != 1:
        Y //= s
    for i in big.tolist():  # probability exp(-vlim) < exp(1 - 2**63 / t): in Python integers
        y = (int(U[i]) + int(_sub(t, i)) * int(V[i])) // int(_sub(s, i))
        if y > _I64_MAX:
            raise OverflowError(f"a discrete Laplace draw ({y}) does not fit in int64")
        Y[i] = y
    neg = _random_bits(source, live.size)
    ok[live[_where(neg & (Y == 0))]] = False  # -0: retry, so 0 is not counted twice
    np.negative(Y, out=Y, where=neg)
    values = np.zeros(m, dtype=np.int64)
    values[live] = Y
    return values, ok


# -- step 6: one attempt of the discrete Gaussian (CKS20 Alg. 3) --------------------------------
def _gauss_accept(y: np.ndarray, c: _Columns, table: _GaussTable,
                  source: OsRandomBytes) -> np.ndarray:
    """Bernoulli(exp(-(|y| - sigma2/t)**2 / (2 sigma2))) per entry, exactly (module step 6)."""
    m = y.size
    acc = np.empty(m, dtype=bool)
    ay = np.abs(y)
    slow = ay > c.ylim  # |D| could reach 2**61: done in Python integers below
    D = np.abs(ay * c.u - c.v)  # wraps only where slow, and those entries are not used
    D[slow] = 0
    s = np.maximum((D + c.G - 1) // c.G, 1)
    slow |= s > _S_MAX
    for i in _where(slow).tolist():
        row = int(_sub(c.pid, i))
        Dx = int(ay[i]) * int(table.u[row]) - int(table.v[row])
        acc[i] = _scalar_rng().bernoulli_exp(Fraction(Dx * Dx, table.N[row]))
    idx = _where(~slow)
    D, s = D[idx], s[idx]
    b = _sub(c.G, idx) * s  # < 2**62 since |D| < 2**61 and G < 2**61
    rem = s * s  # n = s**2 runs of Alg. 1, each on gamma / n <= 1
    k = np.ones(idx.size, dtype=np.int64)
    pid = _sub(c.pid, idx)
    kappas = table.kappas
    kappa_one = bool(kappas.one.all()) or (c.shared and bool(kappas.one[int(c.pid)]))
    while idx.size:
        # Bernoulli(gamma / (n k)) = B(|D|/(G s)) AND B(|D|/(G s)) AND B(kappa) AND B(1/k)
        trial = bernoulli_ratio(D, b, idx.size, source)
        on = _where(trial)
        trial[on] = bernoulli_ratio(D[on], b[on], on.size, source)
        if not kappa_one:
            on = _where(trial)
            trial[on] = bernoulli_digits(kappas, _sub(pid, on), on.size, source)
        on = _where(trial & (k > 1))
        trial[on] = bernoulli_ratio(1, k[on], on.size, source)
        stop = _where(~trial)
        odd = (k[stop] & 1) == 1
        acc[idx[stop[~odd]]] = False  # K even: this run of Alg. 1 failed: reject
        passed = stop[odd]  # K odd: this factor exp(-gamma/n) succeeded
        rem[passed] -= 1
        acc[idx[passed[rem[passed] == 0]]] = True  # all n factors succeeded: accept
        restart = passed[rem[passed] > 0]
        k[restart] = 0  # the next run of Alg. 1 starts at k = 1 (incremented below)
        keep = _where(trial)
        if restart.size:
            keep = np.sort(np.concatenate((keep, restart)))
        k[keep] += 1
        idx, D, b, rem, k = idx[keep], D[keep], b[keep], rem[keep], k[keep]
        pid = _sub(pid, keep)
    return acc


def _gauss_attempt(c: _Columns, m: int, table: _GaussTable,
                   source: OsRandomBytes) -> tuple[np.ndarray, np.ndarray]:
    """One attempt of CKS20 Alg. 3 per entry: a Laplace proposal (scale t) and its acceptance."""
    y, ok = _laplace_attempt(c, m, source)
    live = _where(ok)
    ok[live] = _gauss_accept(y[live], c.take(live), table, source)
    return y, ok


# -- driver: full batches of attempts, tails replicated, chunks interruptible -------------------
_MAX_REPLICAS = 16
_TAIL_ATTEMPTS = 8192  # attempts per round once the fresh entries are used up
_SCALAR = None


def _scalar_rng():
    """The exact one-draw-at-a-time sampler (OS randomness) used where int64 does not suffice."""
    global _SCALAR
    if _SCALAR is None:
        from hierdp.privacy.rng import SecureRandom

        _SCALAR = SecureRandom(backend="python")
    return _SCALAR


def _drive(n: int, columns, attempt, source: OsRandomBytes,
           out: np.ndarray | None = None) -> np.ndarray:
    """Run ``attempt`` over batches of about :data:`CHUNK` entries until every entry succeeded.

    Each batch holds the entries whose last attempt failed plus fresh entries, so batches stay
    full until the end. Then the few entries left are replicated (up to ``_MAX_REPLICAS``
    attempts each in one batch) and each takes the value of its first successful replica. In
    every case an entry's value is that of its first successful attempt in a sequence of
    independent attempts, i.e. exactly the output of the sequential rejection loop.
    """
    out = np.empty(n, dtype=np.int64) if out is None else out
    pending = np.empty(0, dtype=np.int64)
    fresh = 0
    while pending.size or fresh < n:
        if fresh < n:
            new = np.arange(fresh, min(n, fresh + max(CHUNK - pending.size, CHUNK // 4)))
            fresh += new.size
            batch = np.concatenate((pending, new))
            values, ok = attempt(columns(batch), batch.size, source)
            good = _where(ok)
            out[batch[good]] = values[good]
            pending = batch[_where(~ok)]
            continue
        # enough replicas to avoid many tiny rounds, not so many that most of them are wasted
        reps = max(1, min(_MAX_REPLICAS, _TAIL_ATTEMPTS // pending.size))
        batch = np.tile(pending, reps)
        values, ok = attempt(columns(batch), batch.size, source)
        hit = ok.reshape(reps, pending.size)
        done = _where(hit.any(axis=0))
        first = hit[:, done].argmax(axis=0)  # first successful replica of each finished entry
        out[pending[done]] = values[first * pending.size + done]
        pending = pending[_where(~hit.any(axis=0))]
    return out


def _shared_value(params: np.ndarray) -> object | None:
    """The one value of ``params`` when every entry has it (0-d, broadcast view, or all equal)."""
    if params.size == 0:
        return None
    if all(st == 0 for st in params.strides):  # a scalar broadcast to a shape: no copy made
        return params.flat[0]
    first = params.flat[0]
    if params.dtype == object:
        return first if all(v == first for v in params.flat) else None
    return first if bool((params == first).all()) else None


def _distinct(flat: np.ndarray) -> tuple[list[tuple[int, int]], np.ndarray]:
    """Distinct exact parameter values ``(p, q)`` and, per entry, the index of its value."""
    if flat.dtype == object:  # Fractions: hash them (sorting Fractions would be slow)
        index: dict = {}
        inverse = np.fromiter((index.setdefault(v, len(index)) for v in flat.tolist()),
                              dtype=np.int64, count=flat.size)
        return [_ratio(v) for v in index], inverse
    uniq, inverse = np.unique(flat, return_inverse=True)
    return [_ratio(u) for u in uniq.tolist()], inverse.ravel().astype(np.int64)


def _sample(params: np.ndarray, table_cls, scalar_draw, source: OsRandomBytes | None) -> np.ndarray:
    """Shared driver: exact tables per distinct value, vectorized batches, scalar fallback.

    One parameter for all entries (the usual case, e.g. a scalar broadcast to a level's size)
    needs no per-entry array besides the output; per-entry parameters cost a few int64 per entry.
    """
    params = np.asarray(params)
    source = OsRandomBytes() if source is None else source
    n = params.size
    out = np.empty(n, dtype=np.int64)
    if n == 0:
        return out.reshape(params.shape)
    value = _shared_value(params)
    if value is not None:
        ratio = _ratio(value)
        table = table_cls([ratio])
        if table.vectorizable[0]:
            shared = table.columns(None)
            _drive(n, lambda batch: shared, table.attempt, source, out=out)
        else:
            for i in range(n):  # exact scalar path, one entry at a time (interruptible)
                out[i] = scalar_draw(Fraction(*ratio))
        return out.reshape(params.shape)
    values, inverse = _distinct(params.ravel())
    table = table_cls(values)
    fast_entry = table.vectorizable[inverse]
    fast = _where(fast_entry)
    if fast.size:
        pid = inverse[fast]
        out[fast] = _drive(fast.size, lambda batch: table.columns(pid[batch]), table.attempt,
                           source)
    for i in _where(~fast_entry).tolist():  # exact scalar path, one entry at a time
        out[i] = scalar_draw(Fraction(*values[int(inverse[i])]))
    return out.reshape(params.shape)


class _LaplaceTable:
    """Columns ``t``, ``s``, ``tmask`` of the distinct scales ``t/s``."""

    def __init__(self, values: list[tuple[int, int]]) -> None:
        rows = [(t, s) if t < _LIM62 and s < _LIM62 else (1, 1) for t, s in values]
        self.vectorizable = np.array([t < _LIM62 and s < _LIM62 for t, s in values])
        self.t = np.array([r[0] for r in rows], np.int64)
        self.s = np.array([r[1] for r in rows], np.int64)
        self.tmask = np.array([_mask_for(r[0]) for r in rows], np.int64)
        self.vlim = np.array([_vlim(r[0]) for r in rows], np.int64)

    def columns(self, pid: np.ndarray | None) -> _Columns:
        if pid is None:
            return _Columns(True, t=self.t[0], s=self.s[0], tmask=self.tmask[0], vlim=self.vlim[0])
        return _Columns(False, t=self.t[pid], s=self.s[pid], tmask=self.tmask[pid],
                        vlim=self.vlim[pid])

    def attempt(self, c: _Columns, m: int, source: OsRandomBytes):
        return _laplace_attempt(c, m, source)


class _GaussTable:
    """Columns of step 6 for the distinct sigma2 values (see :func:`_gauss_row`)."""

    def __init__(self, values: list[tuple[int, int]]) -> None:
        full = [_gauss_row(p, q) for p, q in values]
        self.vectorizable = np.array([r[-1] for r in full])
        rows = [r if r[-1] else _gauss_row(1, 1) for r in full]
        self.t = np.array([r[0] for r in rows], np.int64)
        self.tmask = np.array([_mask_for(r[0]) for r in rows], np.int64)
        self.vlim = np.array([_vlim(r[0]) for r in rows], np.int64)
        self.u = np.array([r[1] for r in rows], np.int64)
        self.v = np.array([r[2] for r in rows], np.int64)
        self.N = [r[3] for r in rows]
        self.G = np.array([r[4] for r in rows], np.int64)
        self.ylim = np.array([(_LIM61 - 1 + r[2]) // r[1] for r in rows], np.int64)
        self.kappas = KappaTable([(r[4] * r[4], r[3]) for r in rows])  # kappa = G**2 / N

    def columns(self, pid: np.ndarray | None) -> _Columns:
        one = np.array(1, np.int64)
        if pid is None:
            return _Columns(True, t=self.t[0], s=one, tmask=self.tmask[0], vlim=self.vlim[0],
                            u=self.u[0], v=self.v[0], G=self.G[0], ylim=self.ylim[0],
                            pid=np.array(0, np.int64))
        return _Columns(False, t=self.t[pid], s=one, tmask=self.tmask[pid], vlim=self.vlim[pid],
                        u=self.u[pid], v=self.v[pid], G=self.G[pid], ylim=self.ylim[pid], pid=pid)

    def attempt(self, c: _Columns, m: int, source: OsRandomBytes):
        return _gauss_attempt(c, m, self, source)


# -- public entry points -------------------------------------------------------------------------
def discrete_laplace(scale: np.ndarray | Iterable,
                     source: OsRandomBytes | None = None) -> np.ndarray:
    """Exact discrete Laplace noise ``P(z) ∝ exp(-|z| / scale)``, one draw per entry of ``scale``.

    Args:
        scale: array (any shape) of positive floats (taken at their exact binary value), ints or
            :class:`~fractions.Fraction` (object array). Not validated here: callers check > 0.
        source: random bytes (default: a fresh :class:`OsRandomBytes`).

    Returns:
        int64 array with the shape of ``scale``.
    """
    return _sample(np.asarray(scale), _LaplaceTable,
                   lambda v: _scalar_rng().discrete_laplace(v), source)


def discrete_gaussian(sigma2: np.ndarray | Iterable,
                      source: OsRandomBytes | None = None) -> np.ndarray:
    """Exact discrete Gaussian noise ``N_Z(0, sigma2)``, one draw per entry of ``sigma2``.

    ``sigma2`` as for :func:`discrete_laplace` (floats at their exact binary value, ints,
    Fractions). Returns an int64 array of the same shape.
    """
    return _sample(np.asarray(sigma2), _GaussTable,
                   lambda v: _scalar_rng().discrete_gaussian(v), source)


def laplace(scale: np.ndarray, source: OsRandomBytes | None = None) -> np.ndarray:
    """Continuous Laplace noise, drawn as an exact discrete Laplace on a fine dyadic grid.

    Each entry with float scale ``b`` is ``2**k * Z`` with ``Z`` the exact discrete Laplace of
    scale ``b / 2**k`` and ``2**k <= min(b * 2**-40, 1)`` (the grid of
    :meth:`~hierdp.privacy.rng.SecureRandom.laplace`): no floating-point rounding enters the
    sampled law, which is within ``b * 1e-12`` of the continuous one, and a draw added to an integer
    never keeps the integer's residue modulo the grid. Returns float64.
    """
    scale = np.asarray(scale, dtype=np.float64)
    one = _shared_value(scale)
    base = np.asarray(one, dtype=np.float64) if one is not None else scale
    _, exponent = np.frexp(base)  # exact: scale in [2**(e-1), 2**e)
    k = np.minimum(exponent.astype(np.int64) - 1 - _LAPLACE_GRID_BITS, _LAPLACE_MAX_GRID_EXP)
    grid = np.ldexp(base, -k)  # exact power-of-two rescaling of a normal float
    z = discrete_laplace(np.broadcast_to(grid, scale.shape), source).astype(np.float64)
    return np.ldexp(z, k, out=z)  # exact while |z| < 2**53 (all but ~exp(-32) at the largest scale, 2**48)
