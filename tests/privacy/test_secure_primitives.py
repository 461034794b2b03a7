"""The exact primitives of hierdp.privacy.secure_sampling, against independent oracles.

Deterministic tests feed scripted bytes and check every decision against the definition of a
lazy comparison: with ``J`` random digits read, the uniform ``U`` is only known to lie in
``[U_J, U_J + 2**(-w J))``, so a True answer must have that whole interval below ``p`` and a
False answer the whole interval at or above ``p`` (then ``P(True) = p`` exactly). The oracle
works in :class:`fractions.Fraction` and simulates which entries are still undecided in each
round (undecided entries read the next bytes, in index order). Statistical tests (OS bytes)
check the composed steps against probabilities computed with mpmath.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import stats

from hierdp.privacy import secure_sampling as ss

# Secure draws cannot be seeded, so these tests are random: 1e-6 keeps the chance of a false
# alarm over the whole suite below 1e-4 while deviations of a wrong sampler are far larger.
ALPHA = 1e-6


class ScriptedBytes:
    """A byte source that replays a given byte string and records how much was read."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def uint8(self, n: int) -> np.ndarray:
        chunk = self.data[self.pos:self.pos + n]
        assert len(chunk) == n, "the sampler read more bytes than scripted"
        self.pos += n
        return np.frombuffer(chunk, dtype=np.uint8)


def digit_width(den: int) -> int:
    """The specified digit width: 8 bits, fewer when ``den << 8`` would leave int64."""
    return min(8, 63 - den.bit_length())


def lazy_script(probs: list[Fraction], width: int, pyrng: random.Random,
                tie_bias: float = 0.5) -> tuple[bytes, list[bool]]:
    """Bytes for a vectorized lazy comparison of entries with probabilities ``probs`` and the
    answers the definition forces. Each round gives one byte to every undecided entry (index
    order); a byte copies the entry's next digit with probability ``tie_bias`` (to exercise
    ties), else is random. Only the low ``width`` bits of a byte are a digit."""
    base = 1 << width
    lo = [Fraction(0)] * len(probs)   # U lies in [lo, lo + span)
    span = Fraction(1)
    answer: list[bool | None] = [None] * len(probs)
    script = bytearray()
    undecided = list(range(len(probs)))
    while undecided:
        span /= base
        still = []
        for i in undecided:
            digit = math.floor((probs[i] - lo[i]) / span)  # the next digit of p (may be >= base)
            if pyrng.random() < tie_bias and digit < base:
                byte = digit | (pyrng.randrange(256) & ~(base - 1) & 0xFF)  # noise above the digit
            else:
                byte = pyrng.randrange(256)
            script.append(byte)
            lo[i] += (byte & (base - 1)) * span
            if lo[i] + span <= probs[i]:
                answer[i] = True
            elif lo[i] >= probs[i]:
                answer[i] = False
            else:
                still.append(i)
        undecided = still
    return bytes(script), answer  # type: ignore[return-value]


@pytest.mark.parametrize("den_bits", [1, 5, 17, 40, 54, 55, 58, 61])
def test_bernoulli_ratio_decides_exactly_as_a_lazy_comparison(den_bits: int) -> None:
    pyrng = random.Random(den_bits)
    n = 300
    den = [pyrng.randrange(1 << (den_bits - 1), 1 << den_bits) | 1 for _ in range(n)]
    num = [pyrng.choice([0, d, d - 1, 1, pyrng.randrange(d + 1)]) for d in den]
    width = digit_width(max(den))
    script, expected = lazy_script([Fraction(a, b) for a, b in zip(num, den, strict=False)], width, pyrng)
    source = ScriptedBytes(script)
    got = ss.bernoulli_ratio(np.array(num), np.array(den), n, source)
    assert got.tolist() == expected
    assert source.pos == len(script)  # read exactly the digits the definition needs


def test_bernoulli_ratio_with_shared_scalars_and_ties() -> None:
    pyrng = random.Random(7)
    for num, den in [(1, 3), (2, 7), (1, 2), (5, 5), (0, 9), (1, (1 << 61) + 1)]:
        n = 200
        script, expected = lazy_script([Fraction(num, den)] * n, digit_width(den), pyrng, 0.7)
        source = ScriptedBytes(script)
        assert ss.bernoulli_ratio(num, den, n, source).tolist() == expected
        assert source.pos == len(script)


def test_bernoulli_ratio_refuses_denominators_beyond_int64_headroom() -> None:
    with pytest.raises(ValueError, match="2\\*\\*62"):
        ss.bernoulli_ratio(1, 1 << 62, 3, ss.OsRandomBytes())


@pytest.mark.parametrize("shared", [True, False])
def test_bernoulli_digits_compares_with_kappa_exactly_including_the_tail(shared: bool) -> None:
    pyrng = random.Random(11)
    kappas = [Fraction(pyrng.randrange(1, 10**40), 10**40 + 7) for _ in range(4)]
    kappas += [Fraction(1), Fraction(1, 2), Fraction(3, 2**120), Fraction(5, 7)]  # 1, terminating
    table = ss.KappaTable([(k.numerator, k.denominator) for k in kappas])
    n = 80
    row = np.array(2) if shared else np.array([pyrng.randrange(len(kappas)) for _ in range(n)])
    probs = [kappas[int(row)]] * n if shared else [kappas[r] for r in row]
    # tie_bias 0.97: most entries copy kappa's digits for many bytes, some all 16 of them
    script, expected = lazy_script(probs, 8, pyrng, tie_bias=0.97)
    source = ScriptedBytes(script)
    got = ss.bernoulli_digits(table, row, n, source)
    assert got.tolist() == expected
    assert source.pos == len(script)


def test_kappa_tail_is_reached_and_exact() -> None:
    # bytes equal to kappa's first 16 digits, then one more: the answer depends on the 17th digit
    kappa = Fraction(2**127 + 12345, 2**128 - 3)
    table = ss.KappaTable([(kappa.numerator, kappa.denominator)])
    digits = bytes(table.digits[0].astype(np.uint8))
    assert Fraction(int.from_bytes(digits, "big"), 256**16) < kappa < \
        Fraction(int.from_bytes(digits, "big") + 1, 256**16)
    x, b = table.tails[0]
    seventeenth = (x * 256) // b
    for extra, answer in [(seventeenth - 1, True), (seventeenth + 1, False)]:
        source = ScriptedBytes(digits + bytes([extra]))
        assert ss.bernoulli_digits(table, np.array(0), 1, source).tolist() == [answer]
        assert source.pos == 17


@pytest.mark.parametrize("m", [1, 2, 3, 5, 255, 256, 257, 1000, 2**31 + 1, 2**61 + 3])
def test_uniform_below_returns_the_first_masked_word_below_m(m: int) -> None:
    pyrng = random.Random(m)
    n = 64
    mask = (1 << (m - 1).bit_length()) - 1
    nbits = mask.bit_length()
    width = 0 if nbits == 0 else 1 if nbits <= 8 else 2 if nbits <= 16 else 4 if nbits <= 32 else 8
    script = bytearray()
    expected: list[int] = [0] * n
    undecided = list(range(n))
    while undecided:
        still = []
        for i in undecided:
            word = pyrng.randrange(1 << (8 * width)) if width else 0
            script += word.to_bytes(width, "little")
            if (word & mask) < m:
                expected[i] = word & mask
            else:
                still.append(i)
        undecided = still
    source = ScriptedBytes(bytes(script))
    values, ok = ss.uniform_below(m, mask, n, source)
    assert ok.all() and values.tolist() == expected
    assert source.pos == len(script)


def test_uniform_below_is_uniform_and_stops_after_max_rounds() -> None:
    m = 5  # mask 7: each round accepts 5/8
    values, ok = ss.uniform_below(m, 7, 400_000, ss.OsRandomBytes(), max_rounds=1)
    assert stats.binomtest(int(ok.sum()), ok.size, 5 / 8).pvalue > ALPHA
    counts = np.bincount(values[ok], minlength=m)
    assert counts.size == m
    assert stats.chisquare(counts).pvalue > ALPHA


@pytest.mark.parametrize("a,b", [(0, 1), (1, 3), (1, 1), (7, 10), (2**40 - 1, 2**40),
                                 (1, 2**61 + 1)])
def test_bernoulli_exp_ratio_has_probability_exp_minus_a_over_b(a: int, b: int) -> None:
    n = 400_000
    hits = int(ss.bernoulli_exp_ratio(np.full(n, a), b, n, ss.OsRandomBytes()).sum())
    p = float(mpmath.exp(-mpmath.mpf(a) / b))
    assert stats.binomtest(hits, n, p).pvalue > ALPHA


def test_bernoulli_exp1_and_geometric_runs() -> None:
    n = 400_000
    hits = int(ss.bernoulli_exp1(n, ss.OsRandomBytes()).sum())
    assert stats.binomtest(hits, n, float(mpmath.exp(-1))).pvalue > ALPHA
    v = ss.geometric_exp1(n, ss.OsRandomBytes())
    assert v.dtype == np.int64 and v.min() >= 0
    # P(V = k) = e^-k (1 - e^-1); pool k >= 12 (expected ~2.5 draws) into one bin
    probs = [float(mpmath.exp(-k) * (1 - mpmath.exp(-1))) for k in range(12)]
    probs.append(1 - sum(probs))
    observed = np.bincount(np.minimum(v, 12), minlength=13)
    assert stats.chisquare(observed, np.array(probs) * n).pvalue > ALPHA


def test_geometric_runs_carry_over_between_pools() -> None:
    # A pool of exactly the runs needed + 32 draws often runs out for n = 1: then the unfinished
    # run must carry on. Many tiny requests exercise that path; their law must not change.
    source = ss.OsRandomBytes()
    v = np.concatenate([ss.geometric_exp1(1, source) for _ in range(30_000)])
    probs = [float(mpmath.exp(-k) * (1 - mpmath.exp(-1))) for k in range(8)]
    probs.append(1 - sum(probs))
    observed = np.bincount(np.minimum(v, 8), minlength=9)
    assert stats.chisquare(observed, np.array(probs) * v.size).pvalue > ALPHA


def test_gaussian_constants_are_exact() -> None:
    # gamma = D**2 / N must equal (|y| - sigma2/t)**2 / (2 sigma2) for every y (Fraction oracle)
    for sigma2 in [Fraction(1, 2), Fraction(3), Fraction(0.1), Fraction(1e6),
                   Fraction(1 / (2 * 0.00123)), Fraction(7, 3), Fraction(2**59 + 1, 2**58)]:
        t, u, v, N, G, ok = ss._gauss_row(sigma2.numerator, sigma2.denominator)
        assert ok
        # t = max(1, round(sigma)): sigma in [t - 1/2, t + 1/2), or t = 1 for sigma < 3/2
        assert (2 * t - 1) ** 2 <= 4 * sigma2 < (2 * t + 1) ** 2 or (t == 1 and 4 * sigma2 < 9)
        assert Fraction(v, u) == sigma2 / t
        assert G * G <= N < (G + 1) ** 2
        for y in [0, 1, 2, t, 5 * t + 3]:
            D = y * u - v
            assert Fraction(D * D, N) == (y - sigma2 / t) ** 2 / (2 * sigma2)


def test_vectorizable_bounds() -> None:
    assert ss.gaussian_vectorizable(1e6) and ss.gaussian_vectorizable(2.0 ** -9)
    assert ss.gaussian_vectorizable(0.1) and ss.gaussian_vectorizable(1 / (2 * 0.00123))
    assert not ss.gaussian_vectorizable(Fraction(10**30 + 1, 10**29))
    assert not ss.gaussian_vectorizable(Fraction(2**70 + 1))  # v = sigma2 / gcd(p, t) > 2**61
    assert ss.gaussian_vectorizable(2.0 ** 70)  # a power of two reduces well (v = 2**51)
    assert ss.laplace_vectorizable(1 / 0.3) and ss.laplace_vectorizable(2.0 ** 61)
    assert not ss.laplace_vectorizable(2.0 ** 62)
    assert not ss.laplace_vectorizable(Fraction(10**30 + 1, 10**29))
