"""RDP of the geometric mechanism (paper 004 Lemma 8 / Cor. 1) against independent computations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hierdp.privacy.errors import PrivacyParameterError
from hierdp.privacy.rdp_geometric import (
    discrete_laplace_logpmf,
    geometric_rdp_exact,
    geometric_rdp_numeric,
    geometric_rdp_paper,
    laplace_rdp,
    renyi_divergence,
)
from hierdp.privacy.rng import make_rng
from hierdp.privacy.samplers import discrete_laplace

ALPHAS = np.array([1.001, 1.01, 1.5, 2.0, 3.7, 7.36, 10.0, 50.0])
EPSILONS = [0.005, 0.0587, 0.475, 1.0, 3.0]


@pytest.mark.parametrize("eps", EPSILONS)
def test_exact_closed_form_equals_direct_summation(eps):
    # a consistency check of two library paths (the independent 60-digit oracle is the next test):
    # the log-sum-exp path cancels at small eps and alpha near 1, hence 1e-6 relative / 1e-15 absolute
    np.testing.assert_allclose(geometric_rdp_exact(ALPHAS, eps),
                               geometric_rdp_numeric(ALPHAS, eps), rtol=1e-6, atol=1e-15)


@pytest.mark.parametrize("eps", EPSILONS)
def test_exact_equals_randomized_response_bound(eps):
    # Bun & Steinke 2016 Prop. 3.3: the tight RDP of eps-DP is
    # log((sinh(a eps) - sinh((a-1) eps)) / sinh(eps)) / (a - 1)
    # The reference is evaluated with 60 significant digits: in double precision the sinh
    # difference cancels at small eps and loses ~8 digits (at eps = 0.005 it differs from the exact
    # value in the 8th digit), so a float reference could not justify any tight tolerance.
    import mpmath

    a = ALPHAS[ALPHAS * eps < 300]
    with mpmath.workdps(60):
        e = mpmath.mpf(float(eps))
        rr = np.array([float(mpmath.log((mpmath.sinh(mpmath.mpf(float(x)) * e) - mpmath.sinh((mpmath.mpf(float(x)) - 1) * e))
                                        / mpmath.sinh(e)) / (mpmath.mpf(float(x)) - 1)) for x in a])
    # The reference is exact to 1e-16 relative after rounding to a double. The library's
    # expm1/log1p form has a relative error of about ulp / tanh(eps/2) (the two expm1 terms cancel
    # to d * tanh(eps/2)): at most 1e-16 / 0.0025 = 4e-14 here, so 1e-11 leaves a wide margin.
    np.testing.assert_allclose(geometric_rdp_exact(a, eps), rr, rtol=1e-11, atol=0)


def test_exact_limits_and_monotonicity():
    a = np.linspace(1.0001, 200, 2000)
    v = geometric_rdp_exact(a, 0.7)
    assert np.all(np.diff(v) > 0)            # Renyi divergence increases with the order
    assert v[-1] < 0.7                       # bounded by eps (pure DP)
    # alpha -> 1: the KL divergence sum_x p log(p/q), computed directly
    x = np.arange(-200, 202)
    logp = discrete_laplace_logpmf(x, 1 / 0.7)
    logq = discrete_laplace_logpmf(x - 1, 1 / 0.7)
    kl = float(np.sum(np.exp(logp) * (logp - logq)))
    # D_alpha differs from KL by O(alpha - 1) = 1e-7 relative, and from D_inf = eps by about
    # log(2) / alpha = 7e-7 at alpha = 1e6: 1e-5 bounds both limits
    assert geometric_rdp_exact(1 + 1e-7, 0.7) == pytest.approx(kl, rel=1e-5)
    assert geometric_rdp_exact(1e6, 0.7) == pytest.approx(0.7, rel=1e-5)


def test_renyi_divergence_of_sampled_pmfs_matches_exact():
    # Empirical pmf of 400,000 draws of the project's sampler, compared on the central support
    # with the exact pmf's divergence truncated to the same support.
    eps = 1.0
    draws = discrete_laplace(1.0 / eps, 400_000, make_rng(7))
    xs = np.arange(-5, 7)
    counts = np.array([(draws == x).sum() for x in xs], dtype=float)
    p_hat = counts / draws.size
    logp_hat = np.log(p_hat[1:])       # P(x) for x in -4..6
    logq_hat = np.log(p_hat[:-1])      # Q(x) = P(x - 1)
    logp = discrete_laplace_logpmf(xs[1:], 1.0 / eps)
    logq = discrete_laplace_logpmf(xs[1:] - 1, 1.0 / eps)
    for a in (1.5, 2.0, 4.0):
        d_hat = renyi_divergence(logp_hat, logq_hat, a)
        d_true = renyi_divergence(logp, logq, a)
        # sampling error: 400,000 seeded draws put every central cell's relative SE below 1 %;
        # the divergence of the truncated pmfs inherits ~0.5 %: 3 % is about six SE
        assert d_hat == pytest.approx(d_true, rel=0.03)
    # and the full-support exact divergence is the closed form (no cancellation at eps = 1: 1e-12)
    assert renyi_divergence(discrete_laplace_logpmf(np.arange(-800, 802), 1.0),
                            discrete_laplace_logpmf(np.arange(-800, 802) - 1, 1.0), 2.0) \
        == pytest.approx(geometric_rdp_exact(2.0, 1.0), rel=1e-12)


def test_paper_corollary_is_lemma_8_in_b():
    # eq. 11 typed independently in terms of b = 1/eps
    for eps in EPSILONS:
        b = 1 / eps
        for a in ALPHAS:
            inner = (math.exp(1 / b) - 1) / (math.exp(1 / b) + 1) * (
                2 * a * b / (2 * a - 1) * math.exp((a - 1) / b)
                + (2 * a * b - 2 * b) / (2 * a - 1) * math.exp(-a / b))
            if a * eps < 500:
                # both evaluate the same formula in doubles; near alpha = 1 log(inner) cancels, so
                # their difference is ~ulp(1) / (alpha - 1) <= 2e-13 absolute: abs=1e-12
                assert geometric_rdp_paper(a, eps) == pytest.approx(math.log(inner) / (a - 1),
                                                                    rel=1e-6, abs=1e-12)


@pytest.mark.parametrize("eps", EPSILONS)
def test_paper_corollary_understates_the_discrete_divergence(eps):
    # Lemma 8 integrates the discrete normalising constant over the reals: its value is below the
    # true discrete divergence at every order, and negative near alpha = 1 (impossible for D_alpha).
    paper = geometric_rdp_paper(ALPHAS, eps)
    exact = geometric_rdp_numeric(ALPHAS, eps)
    assert np.all(paper < exact)
    assert geometric_rdp_paper(1.001, eps) < 0


def test_laplace_reference_values():
    # Mironov 2017 Prop. 6 at alpha = 2, eps = 1: log(2/3 e + 1/3 e^-2)
    assert laplace_rdp(2.0, 1.0) == pytest.approx(math.log(2 / 3 * math.e + math.exp(-2) / 3), rel=1e-14)


def test_shift_two_is_between_one_shift_and_twice_eps():
    d2 = geometric_rdp_numeric(np.array([2.0, 5.0]), 0.5, shift=2)
    assert np.all(d2 > geometric_rdp_exact(np.array([2.0, 5.0]), 0.5))
    assert np.all(d2 <= 1.0 + 1e-12)  # sensitivity 2 at eps 0.5 is 1.0-DP


@pytest.mark.parametrize("bad", [dict(alpha=1.0, epsilon=1.0), dict(alpha=2.0, epsilon=0.0),
                                 dict(alpha=np.nan, epsilon=1.0), dict(alpha=2.0, epsilon=-1)])
def test_bad_parameters_raise(bad):
    with pytest.raises(PrivacyParameterError):
        geometric_rdp_exact(**bad)
