"""Accounting conversions against independent computations and published numbers."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from hierdp.privacy import (
    PrivacyParameterError,
    approx_dp_to_zcdp,
    delivered_rho,
    gaussian_sigma2,
    laplace_scale,
    pure_rdp_curve,
    pure_to_zcdp,
    rdp_to_approx_dp,
    zcdp_rdp_curve,
    zcdp_to_approx_dp,
)

RHOS = [1e-4, 0.01, 0.5, 1.41, 10.0, 1000.0]
DELTAS = [1e-12, 1e-8, 1e-3, 0.3]


def brute_force_eq7(rho: float, delta: float) -> float:
    """Paper 004 eq. 7, min over alpha > 1 (written independently), in 50-digit arithmetic: a log
    grid of h = alpha - 1 brackets the minimum, then a golden-section search in log h narrows the
    bracket to 1e-40. The result is the true minimum to far below double precision."""
    with mpmath.workdps(50):
        r, L = mpmath.mpf(rho), mpmath.log(1 / mpmath.mpf(delta))

        def f(x):  # x = log h
            h = mpmath.exp(x)
            return r * (1 + h) + (L + h * mpmath.log(h / (1 + h)) - mpmath.log1p(h)) / h

        xs = [mpmath.mpf(k) / 20 * mpmath.log(10) for k in range(-160, 161)]
        i = min(range(len(xs)), key=lambda j: f(xs[j]))
        lo, hi = xs[max(i - 1, 0)], xs[min(i + 1, len(xs) - 1)]
        g = (mpmath.sqrt(5) - 1) / 2
        while hi - lo > mpmath.mpf(10) ** -40:
            a, b = hi - g * (hi - lo), lo + g * (hi - lo)
            if f(a) < f(b):
                hi = b
            else:
                lo = a
        return float(f((lo + hi) / 2))


def balle_wang_delta(epsilon: float, sigma: float, sensitivity: float = 1.0) -> float:
    """Exact delta(eps) of the continuous Gaussian mechanism (Balle & Wang 2018, Thm 8), in 50-digit
    arithmetic: the two terms nearly cancel when delta is small, so doubles would lose the digits."""
    with mpmath.workdps(50):
        a = mpmath.mpf(sensitivity) / (2 * mpmath.mpf(sigma))
        b = mpmath.mpf(epsilon) * mpmath.mpf(sigma) / mpmath.mpf(sensitivity)
        return float(mpmath.ncdf(a - b) - mpmath.exp(mpmath.mpf(epsilon)) * mpmath.ncdf(-a - b))


# -- published numbers (paper 004, Table 2 with Table 1 totals) -----------------------------------
def test_paper_004_table_2_discrete_gaussian_column() -> None:
    rho = 2 * 0.534 + 2 * 0.159 + 3 * 0.008  # Table 1 "Total" rho over the 7 levels = 1.41
    delta = 1e-10
    assert round(zcdp_to_approx_dp(rho, delta, "analytic"), 1) == 12.8
    assert round(zcdp_to_approx_dp(rho, delta, "numeric"), 1) == 12.2
    # The paper minimises eq. 6 over alpha in {1.01, ..., 10.0}: same number, from our RDP path.
    grid = np.round(np.arange(1.01, 10.0 + 1e-9, 0.01), 2)
    eps, alpha = rdp_to_approx_dp(zcdp_rdp_curve(rho), delta, grid)
    assert round(eps, 1) == 12.2 and 1.01 <= alpha <= 10.0


def test_analytic_conversion_hand_values() -> None:
    # rho + 2 sqrt(rho log(1/delta)), evaluated by hand; the library's closed form in doubles is a
    # few ulps from these exact values (log(exp(-4)) is -4 to an ulp)
    assert zcdp_to_approx_dp(1.0, math.exp(-4), "analytic") == pytest.approx(1 + 2 * 2, rel=1e-14)
    assert zcdp_to_approx_dp(0.25, math.exp(-9), "analytic") == pytest.approx(0.25 + 2 * 1.5, rel=1e-14)
    assert zcdp_to_approx_dp(0.5, 1e-10, "analytic") == pytest.approx(
        0.5 + 2 * math.sqrt(0.5 * 23.025850929940457), rel=1e-12)
    # and its closed-form inverse
    assert approx_dp_to_zcdp(5.0, math.exp(-4), "analytic") == pytest.approx(1.0, rel=1e-12)


# -- numeric conversion vs independent brute force ----------------------------------------------
@pytest.mark.parametrize("rho", RHOS)
@pytest.mark.parametrize("delta", DELTAS)
def test_numeric_conversion_matches_brute_force(rho: float, delta: float) -> None:
    numeric = zcdp_to_approx_dp(rho, delta, "numeric")
    expected = max(brute_force_eq7(rho, delta), 0.0)
    # The library returns the objective at a real order (a valid bound), so it is >= the true
    # minimum up to the rounding of that double evaluation (a few ulps of the largest term, L/h,
    # which is at most ~rho + L: 1e-13 relative to max(1, eps) covers it), and its bounded-Brent
    # search (xatol 1e-12 in log h) lands within a second-order 1e-12 of the minimum (1e-10 margin).
    assert numeric >= expected - 1e-13 * max(1.0, expected)
    assert numeric <= expected + 1e-10 * max(1.0, expected)
    assert numeric <= zcdp_to_approx_dp(rho, delta, "analytic")


def test_numeric_never_exceeds_analytic_on_a_wide_grid() -> None:
    # no tolerance needed: eq. 7 adds log(1 - 1/alpha) - log(alpha)/(alpha - 1) < 0 to eq. 8's
    # objective, a margin far above rounding at every (rho, delta) of this grid
    for rho in np.logspace(-6, 4, 21):
        for delta in np.logspace(-15, -0.5, 12):
            assert zcdp_to_approx_dp(rho, delta) <= zcdp_to_approx_dp(rho, delta, "analytic")


@pytest.mark.parametrize("rho", [1e-3, 0.05, 0.5, 2.0, 20.0])
@pytest.mark.parametrize("delta", [1e-10, 1e-6, 1e-2])
def test_gaussian_exact_privacy_loss_is_below_the_zcdp_bound(rho: float, delta: float) -> None:
    # The continuous Gaussian with sigma2 = 1/(2 rho) is rho-zCDP; its exact delta at the
    # converted epsilon cannot exceed the delta the conversion promised.
    sigma = math.sqrt(gaussian_sigma2(rho, 1))
    for method in ("numeric", "analytic"):
        eps = zcdp_to_approx_dp(rho, delta, method)
        # the reference is exact to double precision; 1e-9 relative absorbs the conversion's own
        # rounding of eps (a few ulps, moving delta by ~eps * ulp)
        assert balle_wang_delta(eps, sigma) <= delta * (1 + 1e-9)


# -- round trips -----------------------------------------------------------------------------------
@pytest.mark.parametrize("eps", [0.01, 0.1, 1.0, 10.0, 17.14])
@pytest.mark.parametrize("delta", [1e-10, 1e-8, 1e-5])
def test_round_trip_approx_to_zcdp_and_back(eps: float, delta: float) -> None:
    for method in ("numeric", "analytic"):
        rho = approx_dp_to_zcdp(eps, delta, method)
        back = zcdp_to_approx_dp(rho, delta, method)
        assert back <= eps  # the returned rho never overshoots the user's target
        # rho is found to ~1e-15 relative (brentq, then ulp steps down); eps grows at most linearly
        # in rho, so the round trip is within ~1e-14; 1e-9 leaves room for the step-down loop
        assert back == pytest.approx(eps, rel=1e-9)
    # The tight conversion allows a larger rho than the analytic one.
    assert approx_dp_to_zcdp(eps, delta) >= approx_dp_to_zcdp(eps, delta, "analytic")


# -- RDP ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("rho", [0.01, 1.41, 50.0])
def test_rdp_path_of_a_zcdp_curve_equals_the_zcdp_conversion(rho: float) -> None:
    eps, alpha = rdp_to_approx_dp(zcdp_rdp_curve(rho), 1e-9)
    # two numeric minima of the same objective (bounded Brent, xatol 1e-12 in log(alpha - 1)): they
    # agree to second order in that tolerance; 1e-9 allows different starting grids
    assert eps == pytest.approx(zcdp_to_approx_dp(rho, 1e-9), rel=1e-9)
    assert alpha > 1
    # A scalar-only callable (math, not numpy) works too.
    eps_scalar, _ = rdp_to_approx_dp(lambda a: rho * math.fabs(a), 1e-9)
    assert eps_scalar == pytest.approx(eps, rel=1e-12)


def test_rdp_conversion_formula_at_a_single_alpha() -> None:
    # Paper 004 eq. 6 at alpha = 3 with tau = 0.7, by hand.
    delta = 1e-6
    expected = 0.7 + (math.log(1e6) + 2 * math.log(2 / 3) - math.log(3)) / 2
    eps, alpha = rdp_to_approx_dp(lambda a: 0.7, delta, alphas=[3.0])
    # one closed form in doubles against another (log1p vs log): a few ulps of a value ~7
    assert alpha == 3.0 and eps == pytest.approx(expected, rel=1e-14)


def test_pure_rdp_curve() -> None:
    curve = pure_rdp_curve(2.0)
    # products of doubles: correctly rounded to an ulp, so 1e-15 relative
    assert curve(1.5) == pytest.approx(min(2.0, 1.5 * 2.0), rel=1e-15)  # = 2.0 (the eps bound)
    assert pure_rdp_curve(0.1)(4.0) == pytest.approx(4.0 * 0.01 / 2, rel=1e-15)  # the zCDP bound is smaller
    np.testing.assert_allclose(curve(np.array([1.1, 100.0])), [2.0, 2.0])
    # It is pointwise below the zCDP curve of eps**2/2, so it converts no worse.
    eps_rdp, _ = rdp_to_approx_dp(pure_rdp_curve(1.0), 1e-8)
    # both are numeric minima (see above): 1e-12 absorbs the minimisers' second-order slack
    assert eps_rdp <= zcdp_to_approx_dp(pure_to_zcdp(1.0), 1e-8) + 1e-12


# -- calibration ----------------------------------------------------------------------------------
def renyi_discrete_gaussian(sigma2: float, shift: int, alpha: float) -> float:
    """D_alpha(N_Z(0, sigma2) || N_Z(shift, sigma2)) by summing the pmfs (independent oracle), in
    40-digit arithmetic: the divergence is a small difference of two log-sums, which doubles
    would compute with cancellation. Tails beyond 30 sigma (below e^-450) are dropped."""
    half = int(30 * math.sqrt(sigma2)) + 30 + abs(shift)
    with mpmath.workdps(40):
        s2, a = mpmath.mpf(sigma2), mpmath.mpf(alpha)
        xs = [mpmath.mpf(x) for x in range(-half, half + 1)]
        norm = mpmath.fsum(mpmath.exp(-x ** 2 / (2 * s2)) for x in xs)  # shared (integer shift)
        mixed = mpmath.fsum(mpmath.exp((-a * x ** 2 - (1 - a) * (x - shift) ** 2) / (2 * s2)) for x in xs)
        return float(mpmath.log(mixed / norm) / (a - 1))


@pytest.mark.parametrize("rho", [0.05, 0.5, 2.0])
@pytest.mark.parametrize("sensitivity", [1, 3])
def test_discrete_gaussian_calibration_gives_rho_zcdp(rho: float, sensitivity: int) -> None:
    sigma2 = gaussian_sigma2(rho, sensitivity ** 2)  # the one calibration API: rounded up, checked exactly
    # closed forms in doubles: one or two roundings each
    assert sigma2 == pytest.approx(sensitivity ** 2 / (2 * rho), rel=1e-15)
    assert delivered_rho(sigma2, sensitivity ** 2) <= Fraction(rho)
    for alpha in (1.5, 2.0, 2.6, 7.0):
        # CKS20: D_alpha <= alpha * shift**2 / (2 sigma2) = alpha * rho, with equality when
        # (alpha - 1) * shift is an integer.
        # the oracle is exact to double rounding; sigma2 itself carries one rounding, which moves
        # alpha * rho by ~1e-16 relative: 1e-12 is a wide margin for both comparisons
        divergence = renyi_discrete_gaussian(sigma2, sensitivity, alpha)
        assert divergence <= alpha * rho * (1 + 1e-12)
        if float((alpha - 1) * sensitivity).is_integer():
            assert divergence == pytest.approx(alpha * rho, rel=1e-12)


def test_laplace_calibration_and_pure_to_zcdp() -> None:
    assert laplace_scale(0.5, 2) == 4.0
    assert laplace_scale(2.0, 1) == 0.5
    # Worst-case privacy loss of the discrete Laplace at that scale is eps (rounded up: never more)
    scale = laplace_scale(0.7, 3)
    xs = np.arange(-50, 51)
    loss = np.abs(np.abs(xs) / scale - np.abs(xs - 3) / scale)
    # differences of correctly rounded quotients: a few ulps of values <= 50 / scale ~ 12
    assert loss.max() == pytest.approx(0.7, rel=1e-13)
    assert pure_to_zcdp(0.4) == pytest.approx(0.08, rel=1e-15)


# -- bad input ------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf"), "1", None, True])
def test_bad_epsilon_and_rho_are_named(bad: object) -> None:
    with pytest.raises(PrivacyParameterError, match="epsilon"):
        pure_to_zcdp(bad)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError, match="epsilon"):
        approx_dp_to_zcdp(bad, 1e-6)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError, match="rho"):
        zcdp_to_approx_dp(bad, 1e-6)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError):
        gaussian_sigma2(bad, 1)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError, match="rho"):
        zcdp_rdp_curve(bad)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError, match="sensitivity"):
        gaussian_sigma2(1.0, bad)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError):
        laplace_scale(bad, 1)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.1, 1.5, float("nan")])
def test_bad_delta_is_named(bad: float) -> None:
    with pytest.raises(PrivacyParameterError, match="delta"):
        zcdp_to_approx_dp(1.0, bad)
    with pytest.raises(PrivacyParameterError, match="delta"):
        approx_dp_to_zcdp(1.0, bad, "analytic")
    with pytest.raises(PrivacyParameterError, match="delta"):
        rdp_to_approx_dp(zcdp_rdp_curve(1.0), bad)


def test_bad_method_alphas_and_curve() -> None:
    with pytest.raises(PrivacyParameterError, match="method"):
        zcdp_to_approx_dp(1.0, 1e-6, "exact")  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError, match="alphas"):
        rdp_to_approx_dp(zcdp_rdp_curve(1.0), 1e-6, alphas=[0.5, 2.0])
    with pytest.raises(PrivacyParameterError, match="rdp_curve"):
        rdp_to_approx_dp(lambda a: float("nan"), 1e-6, alphas=[2.0])
    with pytest.raises(PrivacyParameterError, match="rdp_curve"):
        rdp_to_approx_dp(3.0, 1e-6)  # type: ignore[arg-type]
