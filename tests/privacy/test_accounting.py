"""Accounting conversions against independent computations and published numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from hierdp.privacy import (
    PrivacyParameterError,
    approx_dp_to_zcdp,
    gaussian_rho,
    gaussian_sigma2_for_rho,
    laplace_scale_for_epsilon,
    pure_rdp_curve,
    pure_to_zcdp,
    rdp_to_approx_dp,
    zcdp_rdp_curve,
    zcdp_to_approx_dp,
)

RHOS = [1e-4, 0.01, 0.5, 1.41, 10.0, 1000.0]
DELTAS = [1e-12, 1e-8, 1e-3, 0.3]


def brute_force_eq7(rho: float, delta: float) -> float:
    """Paper 004 eq. 7 minimised on a dense log grid of alpha - 1 (written independently)."""
    a = 1.0 + np.logspace(-7, 7, 400_001)
    values = rho * a + (math.log(1 / delta) + (a - 1) * np.log(1 - 1 / a) - np.log(a)) / (a - 1)
    return float(values.min())


def balle_wang_delta(epsilon: float, sigma: float, sensitivity: float = 1.0) -> float:
    """Exact delta(eps) of the continuous Gaussian mechanism (Balle & Wang 2018, Thm 8)."""
    a = sensitivity / (2 * sigma)
    b = epsilon * sigma / sensitivity
    return float(stats.norm.cdf(a - b) - math.exp(epsilon + stats.norm.logcdf(-a - b)))


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
    # rho + 2 sqrt(rho log(1/delta)), evaluated by hand.
    assert zcdp_to_approx_dp(1.0, math.exp(-4), "analytic") == pytest.approx(1 + 2 * 2)
    assert zcdp_to_approx_dp(0.25, math.exp(-9), "analytic") == pytest.approx(0.25 + 2 * 1.5)
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
    assert numeric <= expected + 1e-12 * max(1.0, expected)  # never worse than the grid
    assert numeric == pytest.approx(expected, rel=1e-8, abs=1e-9)
    assert numeric <= zcdp_to_approx_dp(rho, delta, "analytic")


def test_numeric_never_exceeds_analytic_on_a_wide_grid() -> None:
    for rho in np.logspace(-6, 4, 21):
        for delta in np.logspace(-15, -0.5, 12):
            assert zcdp_to_approx_dp(rho, delta) <= zcdp_to_approx_dp(rho, delta, "analytic")


@pytest.mark.parametrize("rho", [1e-3, 0.05, 0.5, 2.0, 20.0])
@pytest.mark.parametrize("delta", [1e-10, 1e-6, 1e-2])
def test_gaussian_exact_privacy_loss_is_below_the_zcdp_bound(rho: float, delta: float) -> None:
    # The continuous Gaussian with sigma2 = 1/(2 rho) is rho-zCDP; its exact delta at the
    # converted epsilon cannot exceed the delta the conversion promised.
    sigma = math.sqrt(gaussian_sigma2_for_rho(rho))
    for method in ("numeric", "analytic"):
        eps = zcdp_to_approx_dp(rho, delta, method)
        assert balle_wang_delta(eps, sigma) <= delta * (1 + 1e-9)


# -- round trips -----------------------------------------------------------------------------------
@pytest.mark.parametrize("eps", [0.01, 0.1, 1.0, 10.0, 17.14])
@pytest.mark.parametrize("delta", [1e-10, 1e-8, 1e-5])
def test_round_trip_approx_to_zcdp_and_back(eps: float, delta: float) -> None:
    for method in ("numeric", "analytic"):
        rho = approx_dp_to_zcdp(eps, delta, method)
        back = zcdp_to_approx_dp(rho, delta, method)
        assert back <= eps  # the returned rho never overshoots the user's target
        assert back == pytest.approx(eps, rel=1e-9)
    # The tight conversion allows a larger rho than the analytic one.
    assert approx_dp_to_zcdp(eps, delta) >= approx_dp_to_zcdp(eps, delta, "analytic")


# -- RDP ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("rho", [0.01, 1.41, 50.0])
def test_rdp_path_of_a_zcdp_curve_equals_the_zcdp_conversion(rho: float) -> None:
    eps, alpha = rdp_to_approx_dp(zcdp_rdp_curve(rho), 1e-9)
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
    assert alpha == 3.0 and eps == pytest.approx(expected, rel=1e-14)


def test_pure_rdp_curve() -> None:
    curve = pure_rdp_curve(2.0)
    assert curve(1.5) == pytest.approx(min(2.0, 1.5 * 2.0))  # = 2.0 (the eps bound)
    assert pure_rdp_curve(0.1)(4.0) == pytest.approx(4.0 * 0.01 / 2)  # the zCDP bound is smaller
    np.testing.assert_allclose(curve(np.array([1.1, 100.0])), [2.0, 2.0])
    # It is pointwise below the zCDP curve of eps**2/2, so it converts no worse.
    eps_rdp, _ = rdp_to_approx_dp(pure_rdp_curve(1.0), 1e-8)
    assert eps_rdp <= zcdp_to_approx_dp(pure_to_zcdp(1.0), 1e-8) + 1e-12


# -- calibration ----------------------------------------------------------------------------------
def renyi_discrete_gaussian(sigma2: float, shift: int, alpha: float) -> float:
    """D_alpha(N_Z(0, sigma2) || N_Z(shift, sigma2)) by summing the pmfs (independent oracle)."""
    half = int(60 * math.sqrt(sigma2)) + 60 + abs(shift)
    xs = np.arange(-half, half + 1).astype(float)
    logp = -xs ** 2 / (2 * sigma2)
    logq = -(xs - shift) ** 2 / (2 * sigma2)
    log_norm = np.logaddexp.reduce(logp)  # both laws share the normaliser (integer shift)
    log_sum = np.logaddexp.reduce(alpha * logp + (1 - alpha) * logq) - log_norm
    return float(log_sum / (alpha - 1))


@pytest.mark.parametrize("rho", [0.05, 0.5, 2.0])
@pytest.mark.parametrize("sensitivity", [1, 3])
def test_discrete_gaussian_calibration_gives_rho_zcdp(rho: float, sensitivity: int) -> None:
    sigma2 = gaussian_sigma2_for_rho(rho, sensitivity)
    assert sigma2 == pytest.approx(sensitivity ** 2 / (2 * rho))
    assert gaussian_rho(sigma2, sensitivity) == pytest.approx(rho, rel=1e-15)
    for alpha in (1.5, 2.0, 2.6, 7.0):
        # CKS20: D_alpha <= alpha * shift**2 / (2 sigma2) = alpha * rho, with equality when
        # (alpha - 1) * shift is an integer.
        divergence = renyi_discrete_gaussian(sigma2, sensitivity, alpha)
        assert divergence <= alpha * rho * (1 + 1e-12)
        if float((alpha - 1) * sensitivity).is_integer():
            assert divergence == pytest.approx(alpha * rho, rel=1e-9)


def test_laplace_calibration_and_pure_to_zcdp() -> None:
    assert laplace_scale_for_epsilon(0.5, 2.0) == 4.0
    assert laplace_scale_for_epsilon(2.0) == 0.5
    # Worst-case privacy loss of the discrete Laplace at that scale is exactly eps.
    scale = laplace_scale_for_epsilon(0.7, 3.0)
    xs = np.arange(-50, 51)
    loss = np.abs(np.abs(xs) / scale - np.abs(xs - 3) / scale)
    assert loss.max() == pytest.approx(0.7)
    assert pure_to_zcdp(0.4) == pytest.approx(0.08)


# -- bad input ------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf"), "1", None, True])
def test_bad_epsilon_and_rho_are_named(bad: object) -> None:
    with pytest.raises(PrivacyParameterError, match="epsilon"):
        pure_to_zcdp(bad)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError, match="epsilon"):
        approx_dp_to_zcdp(bad, 1e-6)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError, match="epsilon"):
        laplace_scale_for_epsilon(bad)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError, match="rho"):
        zcdp_to_approx_dp(bad, 1e-6)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError, match="rho"):
        gaussian_sigma2_for_rho(bad)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError, match="rho"):
        zcdp_rdp_curve(bad)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError, match="sigma2"):
        gaussian_rho(bad)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError, match="sensitivity"):
        gaussian_sigma2_for_rho(1.0, bad)  # type: ignore[arg-type]


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
