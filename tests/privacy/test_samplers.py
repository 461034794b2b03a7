"""Samplers against their exact laws: chi-square tests vs the exact pmfs, KS for Laplace."""

from __future__ import annotations

import math
from fractions import Fraction

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

ALPHA = 1e-3  # significance of every goodness-of-fit test (fixed seeds: deterministic outcome)
# Secure draws cannot be seeded, so those tests are random: a stricter level keeps false alarms
# of the suite below ~1e-5 (a wrong law still fails them by orders of magnitude).
ALPHA_SECURE = 1e-6


# -- exact pmfs, normalised by brute-force summation over a wide support -------------------------
def dg_pmf(sigma2: float) -> tuple[np.ndarray, np.ndarray]:
    half = int(60 * math.sqrt(sigma2)) + 60
    xs = np.arange(-half, half + 1)
    w = np.exp(-(xs.astype(float) ** 2) / (2 * sigma2))
    return xs, w / w.sum()


def dl_pmf(scale: float) -> tuple[np.ndarray, np.ndarray]:
    half = int(80 * scale) + 80
    xs = np.arange(-half, half + 1)
    w = np.exp(-np.abs(xs) / scale)
    return xs, w / w.sum()


def chi_square_pvalue(samples: np.ndarray, xs: np.ndarray, pmf: np.ndarray) -> float:
    """Chi-square p-value of ``samples`` against ``pmf`` on ``xs``, pooling tails (expected >= 5)."""
    n = samples.size
    expected = n * pmf
    keep = np.flatnonzero(expected >= 5)
    lo, hi = xs[keep[0]], xs[keep[-1]]
    assert np.all(expected[keep[0]:keep[-1] + 1] >= 5)  # unimodal: the kept window is contiguous
    inner = (samples >= lo) & (samples <= hi)
    observed = np.bincount(samples[inner] - lo, minlength=hi - lo + 1).astype(float)
    exp_inner = expected[keep[0]:keep[-1] + 1].copy()
    # Pool each tail into its own bin if big enough, otherwise into the adjacent edge bin.
    left_obs, left_exp = float(np.sum(samples < lo)), float(expected[: keep[0]].sum())
    right_obs, right_exp = float(np.sum(samples > hi)), float(expected[keep[-1] + 1:].sum())
    obs_bins, exp_bins = list(observed), list(exp_inner)
    if left_exp >= 5:
        obs_bins.insert(0, left_obs)
        exp_bins.insert(0, left_exp)
    else:
        obs_bins[0] += left_obs
        exp_bins[0] += left_exp
    if right_exp >= 5:
        obs_bins.append(right_obs)
        exp_bins.append(right_exp)
    else:
        obs_bins[-1] += right_obs
        exp_bins[-1] += right_exp
    exp_arr = np.array(exp_bins)
    exp_arr *= n / exp_arr.sum()  # remove the ~1e-16 mass lost outside the summed support
    return float(stats.chisquare(np.array(obs_bins), exp_arr).pvalue)


# -- numpy (seeded) mode ---------------------------------------------------------------------------
@pytest.mark.parametrize("sigma2", [0.3, 2.0, 25.0, 400.0])
def test_discrete_gaussian_matches_exact_pmf(sigma2: float) -> None:
    samples = discrete_gaussian(sigma2, 200_000, make_rng(11))
    assert samples.dtype == np.int64 and samples.shape == (200_000,)
    assert chi_square_pvalue(samples, *dg_pmf(sigma2)) > ALPHA


@pytest.mark.parametrize("scale", [0.5, 3.0, 40.0])
def test_discrete_laplace_matches_exact_pmf(scale: float) -> None:
    samples = discrete_laplace(scale, 200_000, make_rng(12))
    assert samples.dtype == np.int64
    assert chi_square_pvalue(samples, *dl_pmf(scale)) > ALPHA


def test_geometric_is_discrete_laplace_with_scale_sensitivity_over_epsilon() -> None:
    a = geometric(0.5, 2.0, 10_000, make_rng(3))
    b = discrete_laplace(4.0, 10_000, make_rng(3))
    np.testing.assert_array_equal(a, b)
    assert chi_square_pvalue(geometric(0.5, 2.0, 100_000, make_rng(4)), *dl_pmf(4.0)) > ALPHA


def test_per_entry_scales_follow_their_own_laws() -> None:
    n = 100_000
    sigma2 = np.tile([0.5, 30.0], n)  # interleaved entries with two different laws
    samples = discrete_gaussian(sigma2, None, make_rng(21))
    assert samples.shape == sigma2.shape
    assert chi_square_pvalue(samples[0::2], *dg_pmf(0.5)) > ALPHA
    assert chi_square_pvalue(samples[1::2], *dg_pmf(30.0)) > ALPHA

    scale = np.tile([0.7, 12.0], n)
    lap = discrete_laplace(scale, scale.shape, make_rng(22))
    assert chi_square_pvalue(lap[0::2], *dl_pmf(0.7)) > ALPHA
    assert chi_square_pvalue(lap[1::2], *dl_pmf(12.0)) > ALPHA


def test_parameters_broadcast_against_size() -> None:
    rows = np.array([[1.0], [100.0], [10_000.0]])
    out = discrete_gaussian(rows, (3, 20_000), make_rng(5))
    assert out.shape == (3, 20_000)
    # Row spreads follow their own sigma (a loose, exact-law check: sample sd within 5%).
    sd = out.std(axis=1)
    np.testing.assert_allclose(sd, np.sqrt(rows.ravel()), rtol=0.05)
    assert discrete_laplace(2.0, None, make_rng(5)).shape == ()
    assert laplace([1.0, 2.0], None, make_rng(5)).shape == (2,)


def test_laplace_matches_continuous_law() -> None:
    for scale, seed in [(0.2, 1), (7.0, 2)]:
        x = laplace(scale, 50_000, make_rng(seed))
        assert x.dtype == np.float64
        assert stats.kstest(x, stats.laplace(scale=scale).cdf).pvalue > ALPHA
    per_entry = laplace(np.tile([1.0, 50.0], 20_000), None, make_rng(9))
    assert stats.kstest(per_entry[1::2], stats.laplace(scale=50.0).cdf).pvalue > ALPHA


def test_seeds_reproduce_and_differ() -> None:
    for sampler, param in [(discrete_gaussian, 9.0), (discrete_laplace, 3.0), (laplace, 1.0)]:
        a = sampler(param, 1000, make_rng(123))
        b = sampler(param, 1000, make_rng(123))
        c = sampler(param, 1000, make_rng(124))
        np.testing.assert_array_equal(a, b)
        assert not np.array_equal(a, c)
    gen = np.random.default_rng(1)
    assert make_rng(gen) is gen


# -- secure mode ----------------------------------------------------------------------------------
BACKENDS = ["vectorized", "python", "opendp"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("sigma2", [0.3, 25.0])
def test_secure_discrete_gaussian_matches_exact_pmf(sigma2: float, backend: str) -> None:
    samples = discrete_gaussian(sigma2, 8000, SecureRandom(backend=backend))
    assert samples.dtype == np.int64
    assert chi_square_pvalue(samples, *dg_pmf(sigma2)) > ALPHA_SECURE


@pytest.mark.parametrize("backend", BACKENDS)
def test_secure_discrete_laplace_and_laplace(backend: str) -> None:
    rng = SecureRandom(backend=backend)
    assert chi_square_pvalue(discrete_laplace(3.0, 8000, rng), *dl_pmf(3.0)) > ALPHA_SECURE
    per_entry = discrete_laplace(np.tile([0.5, 20.0], 3000), None, rng)
    assert chi_square_pvalue(per_entry[0::2], *dl_pmf(0.5)) > ALPHA_SECURE
    assert chi_square_pvalue(per_entry[1::2], *dl_pmf(20.0)) > ALPHA_SECURE
    x = laplace(2.5, 4000, rng)
    assert stats.kstest(x, stats.laplace(scale=2.5).cdf).pvalue > ALPHA_SECURE
    # Secure Laplace values lie on a dyadic grid no coarser than scale * 2**-40.
    grid = 2.0 ** (math.frexp(2.5)[1] - 1 - 40)
    assert np.all(np.mod(x, grid) == 0)


@pytest.mark.parametrize("gamma", [Fraction(0), Fraction(1, 3), Fraction(1), Fraction(27, 10)])
def test_secure_bernoulli_exp_is_exact(gamma: Fraction) -> None:
    rng = SecureRandom()
    n = 20_000
    hits = sum(rng.bernoulli_exp(gamma) for _ in range(n))
    assert stats.binomtest(hits, n, math.exp(-gamma)).pvalue > ALPHA_SECURE


def test_secure_mode_refuses_a_seed() -> None:
    with pytest.raises(PrivacyParameterError, match="seed"):
        make_rng(5, secure=True)
    with pytest.raises(PrivacyParameterError, match="seed"):
        SecureRandom(seed=5)
    assert isinstance(make_rng(secure=True), SecureRandom)
    with pytest.raises(PrivacyParameterError, match="backend"):
        SecureRandom(backend="urandom")


# -- bad input ------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf"), [1.0, 0.0], "x"])
def test_bad_parameters_name_the_culprit(bad: object) -> None:
    gen = make_rng(0)
    with pytest.raises(PrivacyParameterError, match="sigma2"):
        discrete_gaussian(bad, 2, gen)
    with pytest.raises(PrivacyParameterError, match="scale"):
        discrete_laplace(bad, 2, gen)
    with pytest.raises(PrivacyParameterError, match="scale"):
        laplace(bad, 2, gen)
    with pytest.raises(PrivacyParameterError, match="epsilon"):
        geometric(bad, 1.0, 2, gen)
    with pytest.raises(PrivacyParameterError, match="sensitivity"):
        geometric(1.0, bad, 2, gen)
    with pytest.raises(PrivacyParameterError, match="sigma2"):
        discrete_gaussian(bad, 2, make_rng(secure=True))


def test_bad_rng_and_shapes() -> None:
    with pytest.raises(TypeError, match="rng"):
        discrete_gaussian(1.0, 3, 42)  # a seed is not a generator
    with pytest.raises(PrivacyParameterError, match="broadcast"):
        discrete_gaussian([1.0, 2.0, 3.0], (2,), make_rng(0))
    with pytest.raises(PrivacyParameterError, match="seed"):
        make_rng(1.5)  # type: ignore[arg-type]


def test_secure_opendp_backend_does_not_saturate_at_32_bits() -> None:
    # sigma = 2**40: a 32-bit sampler would return values clamped at +-2**31
    x = discrete_gaussian(2.0 ** 80, 400, SecureRandom(backend="opendp"))
    assert np.abs(x).max() > 2 ** 33
    assert abs(np.std(x) / 2.0 ** 40 - 1) < 0.2
    # up to the largest scale hierdp accepts (2**48: beyond it int64 draws could wrap, so it is
    # refused - see test_calibration) the draws are not clamped either
    y = discrete_laplace(2.0 ** 48, 50, SecureRandom(backend="opendp"))
    assert np.abs(y).max() > 2 ** 45
    with pytest.raises(PrivacyParameterError, match="overflow"):
        discrete_laplace(2.0 ** 56, 50, SecureRandom(backend="opendp"))
