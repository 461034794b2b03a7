"""Margins of error of the geometric and discrete Gaussian mechanisms (paper 004 Cor. 2, Cor. 4,
eq. 36-38) against the exact pmfs and against sampled noise."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hierdp.privacy.errors import PrivacyParameterError
from hierdp.privacy.moe import (
    discrete_gaussian_coverage,
    discrete_gaussian_moe,
    discrete_gaussian_rho_for_moe,
    geometric_coverage,
    geometric_epsilon_for_moe,
    geometric_moe,
)
from hierdp.privacy.rng import make_rng
from hierdp.privacy.samplers import discrete_gaussian, discrete_laplace


def _geo_pmf(eps: float, x: np.ndarray) -> np.ndarray:
    return (math.exp(eps) - 1) / (math.exp(eps) + 1) * np.exp(-np.abs(x) * eps)


def _dg_pmf(sigma2: float, x: np.ndarray) -> np.ndarray:
    k = np.arange(-4000, 4001)
    return np.exp(-x ** 2 / (2 * sigma2)) / np.exp(-k ** 2 / (2 * sigma2)).sum()


@pytest.mark.parametrize("eps", [0.05, 0.4279, 1.0, 3.0])
def test_geometric_coverage_is_pmf_sum(eps):
    for m in (0, 1, 6, 20):
        brute = _geo_pmf(eps, np.arange(-m, m + 1)).sum()
        # <= 41 positive terms of at most a few ulps each against a closed form: 1e-12 is wide
        assert geometric_coverage(eps, m) == pytest.approx(brute, rel=1e-12)


@pytest.mark.parametrize("sigma2", [0.3, 4.0, 52.0, 650.0])
def test_dg_coverage_is_pmf_sum(sigma2):
    for m in (0, 1, 6, 50):
        brute = _dg_pmf(sigma2, np.arange(-m, m + 1)).sum()
        # sums of positive terms (no cancellation; the normaliser has 8,001 terms, ~1e-12 relative
        # rounding) against the library's own summation: 1e-10 relative
        assert discrete_gaussian_coverage(1 / (2 * sigma2), m) == pytest.approx(brute, rel=1e-10)


def test_exact_moe_is_the_smallest_covering_integer():
    for eps in np.geomspace(0.01, 5, 40):
        m = geometric_moe(eps)
        assert geometric_coverage(eps, m) >= 0.95
        assert m == 0 or geometric_coverage(eps, m - 1) < 0.95
    for rho in np.geomspace(1e-4, 2, 25):
        m = discrete_gaussian_moe(rho)
        assert discrete_gaussian_coverage(rho, m) >= 0.95
        assert m == 0 or discrete_gaussian_coverage(rho, m - 1) < 0.95


def test_paper_geometric_moe_is_optimistic():
    # Cor. 2: eps = ln 20 / (MOE + 1) should give a 95 % MOE of MOE; the exact pmf disagrees.
    eps = math.log(20) / 7
    assert geometric_epsilon_for_moe(6, method="paper") == pytest.approx(eps, rel=1e-15)  # one formula
    assert geometric_moe(eps, method="paper") == 6
    # closed form 1 - 2 e^{-7 eps} / (1 + e^{-eps}) with e^{-7 eps} = 1/20: a few ulps
    assert geometric_coverage(eps, 6) == pytest.approx(1 - 0.1 * math.exp(eps) / (1 + math.exp(eps)), rel=1e-14)
    assert geometric_coverage(eps, 6) < 0.94          # 93.95 %
    assert geometric_moe(eps) == 7                    # exact 95 % MOE
    # eq. 36's floor is never above the exact quantile
    for e in np.geomspace(0.02, 3, 30):
        assert geometric_moe(e, method="paper") <= geometric_moe(e)


def test_paper_dg_moe_is_conservative():
    # Cor. 4: rho = 1.92 / MOE^2 covers +-MOE with probability >= 95 %.
    for moe in range(1, 61):
        rho = discrete_gaussian_rho_for_moe(moe, method="paper")
        assert rho == pytest.approx(1.92 / moe ** 2, rel=1e-15)  # the same closed form
        assert discrete_gaussian_coverage(rho, moe) >= 0.95
        assert discrete_gaussian_moe(rho) <= moe


@pytest.mark.parametrize("moe", [0, 1, 6, 11, 50])
def test_exact_calibration_hits_the_level(moe):
    eps = geometric_epsilon_for_moe(moe)
    # the calibration stops 1e-9 relative past its root; coverage moves by at most ~1e-9 there
    assert geometric_coverage(eps, moe) == pytest.approx(0.95, abs=1e-8)
    assert geometric_moe(eps) == moe
    if moe >= 1:
        rho = discrete_gaussian_rho_for_moe(moe)
        assert discrete_gaussian_coverage(rho, moe) == pytest.approx(0.95, abs=1e-8)
        assert discrete_gaussian_moe(rho) == moe
    for level in (0.5, 0.9, 0.99):
        e = geometric_epsilon_for_moe(moe, level)
        assert geometric_coverage(e, moe) == pytest.approx(level, abs=1e-8)


@pytest.mark.parametrize("moe", [6, 11, 50])
def test_empirical_coverage_geometric(moe):
    # 2,000 runs x 20 counts drawn at once; the stated 95 % MOE must cover 94-96 %.
    eps = geometric_epsilon_for_moe(moe)
    noise = discrete_laplace(1 / eps, (2000, 20), make_rng(moe))
    cover = (np.abs(noise) <= geometric_moe(eps)).mean()
    assert 0.94 <= cover <= 0.96


@pytest.mark.parametrize("moe", [6, 11, 50])
def test_empirical_coverage_discrete_gaussian(moe):
    rho = discrete_gaussian_rho_for_moe(moe)
    noise = discrete_gaussian(1 / (2 * rho), (2000, 20), make_rng(100 + moe))
    cover = (np.abs(noise) <= discrete_gaussian_moe(rho)).mean()
    assert 0.94 <= cover <= 0.96


@pytest.mark.parametrize("call", [
    lambda: geometric_moe(0.0), lambda: geometric_moe(1.0, level=1.0),
    lambda: geometric_epsilon_for_moe(-1), lambda: discrete_gaussian_moe(-0.1),
    lambda: discrete_gaussian_rho_for_moe(3, method="nope"),
    lambda: discrete_gaussian_rho_for_moe(0, method="paper"),
])
def test_bad_input_raises(call):
    with pytest.raises(PrivacyParameterError):
        call()
