"""Noise scales rounded in the safe direction, checked with exact fractions.

A budget part is an exact :class:`~fractions.Fraction` (see :class:`~hierdp.privacy.budget.Budget`);
the samplers take a float parameter. Computing ``sigma2 = Δ² / (2ρ)`` in floating point can land
one ulp *below* the exact value, and then the noise actually added delivers a little more than ρ
(measured before this module: up to 1.5e-16 relative, in half of the configurations). Here each
scale is the float nearest to the exact one, moved up by ulps until the delivered privacy
parameter - recomputed exactly from the float that will be used - is at most the granted one:

* discrete Gaussian on an integer query of squared L2 sensitivity Δ²: ρ-zCDP with
  ``ρ = Δ² / (2 σ²)`` (Canonne, Kamath & Steinke 2020, Thm 4), so σ² is rounded *up*;
* geometric (discrete Laplace) on an integer query of L1 sensitivity Δ₁: ε-DP with
  ``ε = Δ₁ / b`` for the scale b (pmf ∝ exp(-|x| / b)), so b is rounded *up*.

A budget too large (the scale underflows to 0) is refused, and so is a budget so small that the
noise could not be represented: counts and noise are int64, so a geometric scale above
``MAX_LAPLACE_SCALE`` = 2^48 (or a discrete Gaussian σ above 2^48) is refused before any noise is
drawn - at that scale |noise| < 2^62 still holds with probability 1 - exp(-2^14), while a larger
scale would let float-to-int casts wrap or collapse and publish the data unprotected. Such a
release carries no information anyway; the message names the parameter the caller chose.
"""

from __future__ import annotations

import math
from fractions import Fraction
from numbers import Real
from typing import Any

import numpy as np

from hierdp.privacy.budget import Budget
from hierdp.privacy.errors import PrivacyParameterError

#: the largest noise scale (geometric b, or discrete Gaussian σ) whose draws stay far inside int64:
#: the one set of int64 limits, used by the calibration here and by every sampler
MAX_LAPLACE_SCALE = float(2 ** 48)
MAX_GAUSSIAN_SIGMA2 = float(2 ** 96)
#: the limit of each sampler parameter, by its name in the samplers (``scale``, ``sigma2``)
MAX_NOISE_PARAMETER = {"scale": MAX_LAPLACE_SCALE, "sigma2": MAX_GAUSSIAN_SIGMA2}

__all__ = [
    "MAX_GAUSSIAN_SIGMA2",
    "MAX_LAPLACE_SCALE",
    "MAX_NOISE_PARAMETER",
    "check_representable",
    "delivered_epsilon",
    "delivered_rho",
    "exact",
    "gaussian_sigma2",
    "gaussian_sigma2_per_share",
    "laplace_scale",
    "laplace_scale_per_share",
]


def check_representable(name: str, arr: np.ndarray) -> None:
    """Refuse a noise scale (``scale``) or variance (``sigma2``) whose int64 draws could wrap
    (the samplers' last line of defence; the calibration below refuses such budgets first)."""
    limit = MAX_NOISE_PARAMETER.get(name)
    if limit is not None and arr.size and float(np.max(arr)) > limit:
        raise PrivacyParameterError(f"{name} {float(np.max(arr)):.3g} exceeds {limit:.3g}: its int64 draws could "
                                    "overflow (the budget is too small for any meaningful release)")


def exact(value: Any, name: str = "value") -> Fraction:
    """An exact Fraction of ``value``: a Budget's single parameter (rho or epsilon), a Fraction, an
    int, or the exact binary value of a float."""
    if isinstance(value, Budget):
        params = value.exact_parameters
        if value.calculus == "approx":
            raise PrivacyParameterError(f"{name}: an (epsilon, delta) budget does not calibrate one noise scale")
        return next(iter(params.values()))
    if isinstance(value, Fraction):
        return value
    if isinstance(value, bool) or not isinstance(value, (Real, np.integer, np.floating)):
        raise PrivacyParameterError(f"{name} must be a number, got {value!r}")
    if isinstance(value, (int, np.integer)):
        return Fraction(int(value))
    f = float(value)
    if not math.isfinite(f):
        raise PrivacyParameterError(f"{name} must be finite, got {value!r}")
    return Fraction(f)


def _round_up(target: Fraction, what: str, culprit: str) -> float:
    """The smallest float >= ``target`` (exact comparison), refusing overflow and underflow."""
    try:
        x = float(target)  # correctly rounded, so at most one ulp below
    except OverflowError:
        raise PrivacyParameterError(
            f"{culprit} is too small: the {what} it needs exceeds double precision (about 1.8e308); "
            "no release is meaningful at this budget") from None
    if x == 0.0 or not math.isfinite(x):
        if x == 0.0:
            raise PrivacyParameterError(
                f"{culprit} is too large: the {what} it needs underflows to 0 in double precision")
        raise PrivacyParameterError(f"{culprit} is too small: the {what} it needs overflows double precision")
    if Fraction(x) < target:
        x = math.nextafter(x, math.inf)
    if not math.isfinite(x):
        raise PrivacyParameterError(f"{culprit} is too small: the {what} it needs overflows double precision")
    return x


def gaussian_sigma2(rho: Any, sensitivity_sq: Any, *, culprit: str = "rho") -> float:
    """σ² of the discrete Gaussian so that an integer query of squared L2 sensitivity
    ``sensitivity_sq`` is at most ``rho``-zCDP, exactly: ``Δ² / (2 σ²) <= rho`` in rationals.

    ``rho`` may be a zCDP :class:`Budget`, a Fraction or a float (its exact binary value).
    """
    r = exact(rho, "rho")
    s = exact(sensitivity_sq, "sensitivity_sq")
    if r <= 0:
        raise PrivacyParameterError(f"{culprit} must be > 0, got {float(r)!r}")
    if s <= 0:
        raise PrivacyParameterError(f"sensitivity_sq must be > 0, got {float(s)!r}")
    sigma2 = _round_up(s / (2 * r), "noise variance sigma2", culprit)
    if sigma2 > MAX_GAUSSIAN_SIGMA2:
        raise PrivacyParameterError(
            f"{culprit} is too small: it needs noise of standard deviation {math.sqrt(sigma2):.3g}, beyond the "
            f"2^48 that int64 counts can carry (no release is meaningful at this budget)")
    return sigma2


def laplace_scale(epsilon: Any, sensitivity: Any, *, culprit: str = "epsilon") -> float:
    """Scale b of the geometric / Laplace mechanism so that a query of L1 sensitivity
    ``sensitivity`` is at most ``epsilon``-DP, exactly: ``Δ₁ / b <= epsilon`` in rationals."""
    e = exact(epsilon, "epsilon")
    s = exact(sensitivity, "sensitivity")
    if e <= 0:
        raise PrivacyParameterError(f"{culprit} must be > 0, got {float(e)!r}")
    if s <= 0:
        raise PrivacyParameterError(f"sensitivity must be > 0, got {float(s)!r}")
    scale = _round_up(s / e, "noise scale", culprit)
    if scale > MAX_LAPLACE_SCALE:
        raise PrivacyParameterError(
            f"{culprit} is too small: it needs noise of scale {scale:.3g}, beyond the 2^48 that int64 counts "
            "can carry (no release is meaningful at this budget)")
    return scale


def delivered_rho(sigma2: float, sensitivity_sq: Any) -> Fraction:
    """The exact ρ that discrete Gaussian noise of parameter ``sigma2`` delivers: Δ² / (2 σ²)."""
    return exact(sensitivity_sq, "sensitivity_sq") / (2 * Fraction(float(sigma2)))


def delivered_epsilon(scale: float, sensitivity: Any) -> Fraction:
    """The exact ε that geometric noise of scale ``scale`` delivers: Δ₁ / b."""
    return exact(sensitivity, "sensitivity") / Fraction(float(scale))


def _per_share(level_param: Fraction, sensitivity: Any, shares: np.ndarray, fn: Any, culprit: str) -> np.ndarray:
    """``fn(level_param * share, sensitivity)`` per entry, computed once per distinct share."""
    s = np.asarray(shares, dtype=np.float64)
    if s.size and (np.any(~np.isfinite(s)) or np.any(s <= 0) or np.any(s > 1)):
        raise PrivacyParameterError("per-node budget shares must be in (0, 1]")
    uniq, inverse = np.unique(s, return_inverse=True)
    vals = np.array([fn(level_param * Fraction(float(u)), sensitivity, culprit=culprit) for u in uniq],
                    dtype=np.float64)
    return vals[inverse.ravel()].reshape(s.shape)


def gaussian_sigma2_per_share(rho: Any, sensitivity_sq: Any, shares: np.ndarray, *, culprit: str = "rho") -> np.ndarray:
    """σ² per node when node i gets the share ``shares[i]`` (in (0, 1]) of ``rho`` (safe rounding)."""
    return _per_share(exact(rho, "rho"), sensitivity_sq, shares, gaussian_sigma2, culprit)


def laplace_scale_per_share(epsilon: Any, sensitivity: Any, shares: np.ndarray, *,
                            culprit: str = "epsilon") -> np.ndarray:
    """Geometric scale per node when node i gets ``shares[i]`` of ``epsilon`` (safe rounding)."""
    return _per_share(exact(epsilon, "epsilon"), sensitivity, shares, laplace_scale, culprit)
