"""Secure-mode samplers against the exact laws, and the rules of secure randomness.

The exact pmfs are computed here, independently of the samplers, with mpmath (40 digits):

* discrete Gaussian: weights ``exp(-x**2 / (2 sigma2))`` summed integer by integer over
  ``|x| <= 9 sigma + 10``, normalised by the Poisson-summation identity
  ``sum_x exp(-x**2/(2 s)) = sqrt(2 pi s) * sum_k exp(-2 pi**2 s k**2)`` (a second, independent
  route to the normaliser; the mass left beyond the summed range is the tail);
* discrete Laplace: the closed form ``P(x) = (1 - r)/(1 + r) * r**|x|``, ``r = exp(-1/scale)``,
  and its geometric partial sums for bins and tails.

Counts are binned (width about sigma/6 at large scales, tails pooled until every bin expects at
least 20 draws) and compared with a chi-square test. Secure draws cannot be seeded, so the tests
are random: each uses a significance of 1e-6 (a false alarm in this file about once in 10^5 runs);
a sampler with a wrong law fails by many orders of magnitude at these sample sizes.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import cache

import mpmath
import numpy as np
import pytest
from scipy import stats

from hierdp.privacy import (
    PrivacyParameterError,
    SecureRandom,
    discrete_gaussian,
    discrete_laplace,
    geometric,
    laplace,
    make_rng,
)
from hierdp.privacy import secure_sampling as ss
from hierdp.privacy.rng import resolve_rng
from hierdp.privacy.samplers import _scale_at_least

ALPHA = 1e-6
MIN_EXPECTED = 20.0
mpmath.mp.dps = 40


# -- exact laws (mpmath) ---------------------------------------------------------------------------
@cache
def dg_law(sigma2: Fraction) -> tuple[int, np.ndarray, float]:
    """``(L, pmf on [-L, L], mass beyond L on each side)`` of N_Z(0, sigma2)."""
    s = mpmath.mpf(sigma2.numerator) / sigma2.denominator
    L = int(9 * math.sqrt(sigma2)) + 10
    w = [mpmath.exp(-mpmath.mpf(x * x) / (2 * s)) for x in range(L + 1)]
    Z = mpmath.sqrt(2 * mpmath.pi * s) * (1 + 2 * mpmath.fsum(
        mpmath.exp(-2 * mpmath.pi ** 2 * s * k * k) for k in range(1, 12)))
    inner = w[0] + 2 * mpmath.fsum(w[1:])
    assert inner <= Z * (1 + mpmath.mpf(10) ** -30)  # the two routes agree (tail >= 0)
    half = np.array([float(v / Z) for v in w])
    return L, np.concatenate([half[:0:-1], half]), max(float((Z - inner) / (2 * Z)), 0.0)


@cache
def dl_law(scale: Fraction) -> tuple[int, np.ndarray, float]:
    """``(L, pmf on [-L, L], mass beyond L on each side)`` of the discrete Laplace."""
    b = mpmath.mpf(scale.numerator) / scale.denominator
    r = mpmath.exp(-1 / b)
    L = int(40 * float(scale)) + 40
    c = (1 - r) / (1 + r)
    xs = np.arange(-L, L + 1)
    # float r**|x| from the 40-digit r: relative error ~1e-15, far below sampling resolution
    pmf = float(c) * np.exp(np.abs(xs) * float(mpmath.log(r)))
    return L, pmf, float(r ** (L + 1) / (1 + r))


def chi_square_pvalue(samples: np.ndarray, law: tuple[int, np.ndarray, float],
                      width: int = 1) -> float:
    """Chi-square p-value of integer ``samples`` against an exact law on ``[-L, L]`` plus tails."""
    L, pmf, tail = law
    samples = np.asarray(samples).ravel()
    n = samples.size
    # bins of `width` integers laid out symmetrically from 0, then the two tails
    edges = np.arange(-(L // width) * width - width // 2, L + width, width)
    edges = edges[(edges > -L) & (edges <= L)]
    starts = np.concatenate(([-L], edges))
    ends = np.concatenate((edges - 1, [L]))
    cum = np.concatenate(([0.0], np.cumsum(pmf)))
    exp_bins = [tail, *list(cum[ends + L + 1] - cum[starts + L]), tail]
    inner = samples[(samples >= -L) & (samples <= L)]
    pos = np.searchsorted(starts, inner, side="right") - 1
    obs_bins = [np.sum(samples < -L), *list(np.bincount(pos, minlength=starts.size)), np.sum(samples > L)]
    merged_obs, merged_exp, acc_o, acc_e = [], [], 0.0, 0.0
    for o, e in zip(obs_bins, exp_bins, strict=False):  # pool from the left until a bin expects enough
        acc_o, acc_e = acc_o + o, acc_e + e * n
        if acc_e >= MIN_EXPECTED:
            merged_obs.append(acc_o)
            merged_exp.append(acc_e)
            acc_o, acc_e = 0.0, 0.0
    merged_obs[-1] += acc_o  # what is left on the right joins the last bin
    merged_exp[-1] += acc_e
    assert len(merged_obs) >= 2
    exp_arr = np.array(merged_exp)
    exp_arr *= n / exp_arr.sum()  # removes float rounding (~1e-15) of the total
    return float(stats.chisquare(np.array(merged_obs), exp_arr).pvalue)


def width_for(sd: float) -> int:
    return max(1, int(sd / 6))


# -- discrete Gaussian -----------------------------------------------------------------------------
@pytest.mark.parametrize("sigma2,n", [(0.5, 400_000), (3.0, 400_000), (100.0, 400_000),
                                      (1e4, 400_000), (1e6, 1_000_000)])
def test_discrete_gaussian_scalar_parameter(sigma2: float, n: int) -> None:
    x = discrete_gaussian(sigma2, n, make_rng(secure=True))
    assert x.dtype == np.int64 and x.shape == (n,)
    assert chi_square_pvalue(x, dg_law(Fraction(sigma2)), width_for(math.sqrt(sigma2))) > ALPHA


@pytest.mark.parametrize("sigma2", [0.1, 1 / (2 * 0.00123), Fraction(7, 3), Fraction(10**6 + 1, 7)])
def test_discrete_gaussian_awkward_exact_values(sigma2: float | Fraction) -> None:
    # floats with 53-bit numerators (0.1 = 3602879701896397 / 2**55), exact Fractions
    x = discrete_gaussian(sigma2, 300_000, SecureRandom())
    assert chi_square_pvalue(x, dg_law(Fraction(sigma2)), width_for(math.sqrt(sigma2))) > ALPHA


def test_discrete_gaussian_per_entry_parameters() -> None:
    laws = [0.5, 3.0, 100.0, 1e4, 1e6]
    n = 200_000
    sigma2 = np.tile(laws, n)  # interleaved: every chunk mixes the five laws
    x = discrete_gaussian(sigma2, None, make_rng(secure=True))
    assert x.shape == sigma2.shape
    for j, s2 in enumerate(laws):
        assert chi_square_pvalue(x[j::5], dg_law(Fraction(s2)), width_for(math.sqrt(s2))) > ALPHA
    # broadcasting rows against a size, and exact Fractions per entry
    rows = np.array([[Fraction(1, 3)], [Fraction(250)]], dtype=object)
    y = discrete_gaussian(rows, (2, 100_000), SecureRandom())
    assert y.shape == (2, 100_000)
    assert chi_square_pvalue(y[0], dg_law(Fraction(1, 3))) > ALPHA
    assert chi_square_pvalue(y[1], dg_law(Fraction(250)), width_for(math.sqrt(250))) > ALPHA


def test_discrete_gaussian_exact_fallbacks(monkeypatch: pytest.MonkeyPatch) -> None:
    # (1) proposals beyond the int64 bound of the acceptance test (|y| > ylim = 2 here: u = 2**60)
    # are tested in Python integers inside a vectorized draw
    s2 = Fraction(2**59 + 1, 2**60)
    table = ss._GaussTable([(s2.numerator, s2.denominator)])
    assert table.vectorizable[0] and table.ylim[0] == 2
    scalar, gammas = ss._scalar_rng(), []

    class Counting:  # records the acceptance tests done in Python integers
        def bernoulli_exp(self, gamma: Fraction) -> bool:
            gammas.append(gamma)
            return scalar.bernoulli_exp(gamma)

    monkeypatch.setattr(ss, "_scalar_rng", lambda: Counting())
    x = discrete_gaussian(s2, 200_000, SecureRandom())
    assert len(gammas) > 1000  # about 7% of the proposals took the exact scalar test
    assert chi_square_pvalue(x, dg_law(s2)) > ALPHA
    monkeypatch.undo()
    # (2) a parameter whose exact form exceeds int64 runs entirely on the scalar path
    big = Fraction(10**30 + 1, 10**29)
    assert not ss.gaussian_vectorizable(big)
    y = discrete_gaussian(np.array([big, Fraction(5)] * 6000, dtype=object), None, SecureRandom())
    assert chi_square_pvalue(y[0::2], dg_law(big)) > ALPHA
    assert chi_square_pvalue(y[1::2], dg_law(Fraction(5))) > ALPHA


# -- discrete Laplace / geometric -------------------------------------------------------------------
@pytest.mark.parametrize("scale,n", [(0.5, 400_000), (3.0, 400_000), (1 / 0.3, 400_000),
                                     (100.0, 400_000), (1000.0, 1_000_000)])
def test_discrete_laplace_scalar_parameter(scale: float, n: int) -> None:
    x = discrete_laplace(scale, n, make_rng(secure=True))
    assert x.dtype == np.int64 and x.shape == (n,)
    assert chi_square_pvalue(x, dl_law(Fraction(scale)), width_for(scale)) > ALPHA


def test_discrete_laplace_per_entry_and_exact() -> None:
    laws = [0.5, 3.0, 1 / 0.3, 100.0, 1000.0]
    n = 150_000
    x = discrete_laplace(np.tile(laws, n), None, SecureRandom())
    for j, b in enumerate(laws):
        assert chi_square_pvalue(x[j::5], dl_law(Fraction(b)), width_for(b)) > ALPHA
    y = discrete_laplace(Fraction(7, 3), 300_000, SecureRandom())
    assert chi_square_pvalue(y, dl_law(Fraction(7, 3))) > ALPHA


def test_discrete_laplace_exact_fallbacks() -> None:
    # (1) t = 2**61 + 1: U + t V leaves int64 for V > 2 (5% of proposals), finished in Python
    s = Fraction(2**61 + 1, 2**58)
    assert ss.laplace_vectorizable(s) and ss._vlim(2**61 + 1) == 2
    x = discrete_laplace(s, 200_000, SecureRandom())
    # |x| >= 25 needs V >= 3 (U + 2t < 25 * 2**58), so only the Python-integer path yields it
    assert (np.abs(x) >= 25).sum() > 1000
    assert chi_square_pvalue(x, dl_law(s)) > ALPHA
    # (2) beyond int64 altogether: the scalar path
    big = Fraction(10**30 + 1, 10**29)
    assert not ss.laplace_vectorizable(big)
    y = discrete_laplace(np.array([big] * 10_000, dtype=object), None, SecureRandom())
    assert chi_square_pvalue(y, dl_law(big)) > ALPHA


def test_geometric_secure() -> None:
    x = geometric(0.3, 1.0, 300_000, make_rng(secure=True))
    assert chi_square_pvalue(x, dl_law(Fraction(_scale_at_least(np.array(1.0), np.array(0.3)).item())),
                             1) > ALPHA
    y = geometric(Fraction(1, 4), 2, 300_000, make_rng(secure=True))  # exact scale 8
    assert chi_square_pvalue(y, dl_law(Fraction(8))) > ALPHA


def test_geometric_scale_never_below_the_exact_quotient() -> None:
    gen = np.random.default_rng(3)
    sens = np.concatenate([[1.0, 2.0, 3.0, 1.0], gen.uniform(0.5, 10, 300)])
    eps = np.concatenate([[0.3, 0.7, 0.1, 1e-3], gen.uniform(1e-3, 5, 300)])
    scale = _scale_at_least(sens, eps)
    for s, e, q in zip(sens, eps, scale, strict=False):
        exact = Fraction(s) / Fraction(e)
        assert Fraction(q) >= exact > Fraction(np.nextafter(q, 0))  # the smallest such float


def test_laplace_secure_vectorized() -> None:
    rng = make_rng(secure=True)
    for scale in [0.2, 2.5, 1e5]:
        x = laplace(scale, 100_000, rng)
        assert x.dtype == np.float64
        assert stats.kstest(x, stats.laplace(scale=scale).cdf).pvalue > ALPHA
        grid = 2.0 ** (math.frexp(scale)[1] - 1 - 40)  # values on a dyadic grid <= scale 2**-40
        assert np.all(np.mod(x, grid) == 0)


# -- OpenDP as an independent cross-check ---------------------------------------------------------
def two_sample_pvalue(a: np.ndarray, b: np.ndarray) -> float:
    lo, hi = np.percentile(np.concatenate([a, b]), [0.5, 99.5])
    edges = np.unique(np.round(np.linspace(lo, hi, 40)))
    table = np.array([np.histogram(v, np.concatenate(([-np.inf], edges, [np.inf])))[0]
                      for v in (a, b)])
    table = table[:, table.sum(axis=0) > 0]
    return float(stats.chi2_contingency(table).pvalue)


def test_vectorized_and_opendp_agree() -> None:
    opendp, ours = SecureRandom(backend="opendp"), SecureRandom()
    for sampler, param in [(discrete_gaussian, 100.0), (discrete_laplace, 3.0)]:
        a = sampler(param, 20_000, opendp)
        b = sampler(param, 200_000, ours)
        assert two_sample_pvalue(a, b) > ALPHA


# -- rules of secure randomness ----------------------------------------------------------------------
def test_secure_mode_uses_the_vectorized_backend_and_is_not_reproducible() -> None:
    a, b = make_rng(secure=True), make_rng(secure=True)
    assert a.backend == b.backend == "vectorized"
    assert SecureRandom(backend="auto").backend == "vectorized"
    x, y = discrete_gaussian(1e4, 1000, a), discrete_gaussian(1e4, 1000, b)
    assert not np.array_equal(x, y)
    assert not np.array_equal(x, discrete_gaussian(1e4, 1000, a))
    assert not np.array_equal(discrete_laplace(50.0, 1000, a), discrete_laplace(50.0, 1000, a))


def test_secure_paths_refuse_seeds_and_numpy_generators() -> None:
    gen = np.random.default_rng(1)
    with pytest.raises(PrivacyParameterError, match="seed"):
        make_rng(5, secure=True)
    with pytest.raises(PrivacyParameterError, match="seed"):
        make_rng(gen, secure=True)
    with pytest.raises(PrivacyParameterError, match="seed"):
        SecureRandom(seed=5)
    with pytest.raises(PrivacyParameterError, match="rng"):
        resolve_rng(gen, None, secure=True)
    with pytest.raises(PrivacyParameterError, match="seed"):
        resolve_rng(None, 7, secure=True)
    with pytest.raises(PrivacyParameterError, match="seed"):
        resolve_rng(SecureRandom(), 7, secure=True)
    with pytest.raises(PrivacyParameterError, match="seed"):
        resolve_rng(SecureRandom(), 7, secure=False)  # a seed would be silently ignored
    with pytest.raises(PrivacyParameterError, match="rng"):
        resolve_rng("urandom", None, secure=False)  # type: ignore[arg-type]
    sec = SecureRandom()
    assert resolve_rng(sec, None, secure=True) is sec
    assert resolve_rng(gen, 3, secure=False) is gen  # experiments: an explicit generator wins
    assert isinstance(resolve_rng(None, None, secure=True), SecureRandom)


def test_bad_exact_parameters_name_the_culprit() -> None:
    rng = make_rng(secure=True)
    with pytest.raises(PrivacyParameterError, match="sigma2"):
        discrete_gaussian(Fraction(-1, 2), 3, rng)
    with pytest.raises(PrivacyParameterError, match="scale"):
        discrete_laplace(np.array([Fraction(1), Fraction(0)], dtype=object), None, rng)
    with pytest.raises(PrivacyParameterError, match="sigma2"):
        discrete_gaussian(np.array([Fraction(1), "x"], dtype=object), None, rng)
    with pytest.raises(PrivacyParameterError, match="epsilon"):
        geometric(Fraction(0), 1, 3, rng)
    with pytest.raises(PrivacyParameterError, match="broadcast"):
        discrete_gaussian(np.array([Fraction(1)] * 3, dtype=object), (2,), rng)
    assert discrete_gaussian(Fraction(9), None, rng).shape == ()
    assert discrete_gaussian(np.empty(0), None, rng).shape == (0,)


@pytest.mark.parametrize("backend", ["vectorized", "python"])
@pytest.mark.parametrize("exponent", [41, 45, 48])
def test_laplace_large_scales_keep_no_residue(backend: str, exponent: int) -> None:
    """Issue 20, P8: at scales >= 2**41 the grid used to be 2**k >= 2 (a multiple of 32 at 2**45),
    so an integer count plus the draw kept the count's residue mod 2**k. The grid is now at most 1:
    draws are integers again, and their parity is a fair coin (the discrete Laplace of a scale this
    large gives odd and even values with probability 1/2 each, up to exp(-2**41))."""
    scale = float(2**exponent)
    rng = SecureRandom(backend=backend)
    n = 4000 if backend == "vectorized" else 400
    x = laplace(scale, n, rng)
    assert np.all(x == np.rint(x))  # the grid is 1 at these scales
    odd = float(np.mean(np.mod(x, 2) == 1))
    # binomial(n, 1/2): 5 standard deviations either side
    assert abs(odd - 0.5) < 5 * 0.5 / math.sqrt(n), odd
    assert stats.kstest(x / scale, stats.laplace().cdf).pvalue > ALPHA
