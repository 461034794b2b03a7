"""Margins of error (MOE) of the two integer base mechanisms, and the inverse calibration
(paper 004, App. D.3 / E.2, Cor. 2, Cor. 4, eq. 36-38).

The MOE at level ``L`` (default 95 %) of integer noise ``Y`` is the smallest integer ``m >= 0``
with ``P(|Y| <= m) >= L``: the interval ``noisy +- m`` then covers the true count with
probability at least ``L``. Two methods are offered everywhere:

* ``method="exact"`` (default): the exact discrete quantile from the pmf. For the geometric
  mechanism ``P(|Y| > m) = 2 e^{-(m+1) eps} / (1 + e^{-eps})`` in closed form; for the discrete
  Gaussian the pmf is summed over a support of +-40 sigma (the tail beyond is < e^-800).
  ``*_for_moe`` returns the smallest parameter whose exact coverage of ``+-moe`` is ``L``
  (the coverage then equals ``L`` exactly, up to root-finding tolerance).
* ``method="paper"``: the paper's formulas. Geometric: MOE ``floor(b ln(2/(p(1+e^{1/b}))))``
  (eq. 35/36, ``b = 1/eps``, ``p = 1-L``) and ``eps = ln(1/p) / (floor(MOE) + 1)`` (eq. 38,
  ``ln 20`` at 95 %). Discrete Gaussian: MOE ``floor(z sigma)`` (App. E.2, ``z = 1.96`` at 95 %)
  and ``rho = (z^2/2) / floor(MOE)^2`` (eq. 37, written 1.92 at 95 %).

Findings (checked by tests against the exact pmf):

* The paper's geometric MOE (eq. 36) is optimistic: eq. 34 bounds ``P(Y > y)`` by
  ``e^{-floor(y)/b}/(1+e^{1/b})``, and solving ``= p/2`` for ``y`` ignores the floor, so the
  interval ``+-floor(y*)`` covers with probability *below* ``1-p``. Cor. 2 therefore fails: with
  ``eps = ln 20 / 7`` the interval +-6 covers with probability 93.95 %, not 95 % (the exact
  95 % MOE is 7, covering 96.05 %). The correct statement rounds up: ``ceil(y*)``.
* The discrete Gaussian bound (Cor. 4) is valid and conservative: with ``rho = 1.92/MOE^2`` the
  interval +-MOE covers with probability >= 95 % (96.6 % at MOE 6, 95.2 % at MOE 50).
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Literal

import numpy as np

from hierdp.privacy.errors import PrivacyParameterError

__all__ = [
    "discrete_gaussian_coverage",
    "discrete_gaussian_moe",
    "discrete_gaussian_rho_for_moe",
    "geometric_coverage",
    "geometric_epsilon_for_moe",
    "geometric_moe",
]

Method = Literal["exact", "paper"]


def _level(level: float) -> float:
    if isinstance(level, bool) or not isinstance(level, (int, float, np.floating)) \
            or not (0.0 < float(level) < 1.0):
        raise PrivacyParameterError(f"level must be in (0, 1), got {level!r}")
    return float(level)


def _method(method: object) -> str:
    if method not in ("exact", "paper"):
        raise PrivacyParameterError(f"method must be 'exact' or 'paper', got {method!r}")
    return str(method)


def _positive(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(float(value)) or float(value) <= 0:
        raise PrivacyParameterError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def _moe_arg(moe: object) -> float:
    if isinstance(moe, bool) or not isinstance(moe, (int, float, np.integer, np.floating)) \
            or not math.isfinite(float(moe)) or float(moe) < 0:
        raise PrivacyParameterError(f"moe must be a finite number >= 0, got {moe!r}")
    return float(moe)


def _z(level: float) -> float:
    """Two-sided normal quantile; exactly 1.96 at 95 % as the paper writes it."""
    return 1.96 if level == 0.95 else NormalDist().inv_cdf(0.5 + level / 2.0)


# -- geometric (discrete Laplace, scale 1/eps) ----------------------------------------------------
def geometric_coverage(epsilon: float | np.ndarray, moe: float | np.ndarray) -> float | np.ndarray:
    """Exact ``P(|Y| <= moe)`` for ``Y ~ L_Z(1/epsilon)``: ``1 - 2 e^{-(floor(moe)+1) eps}/(1+e^{-eps})``."""
    e = np.asarray(epsilon, dtype=np.float64)
    m = np.floor(np.asarray(moe, dtype=np.float64))
    if np.any(~np.isfinite(e)) or np.any(e <= 0):
        raise PrivacyParameterError(f"epsilon must be finite and > 0, got {epsilon!r}")
    if np.any(~np.isfinite(m)) or np.any(m < 0):
        raise PrivacyParameterError(f"moe must be finite and >= 0, got {moe!r}")
    value = 1.0 - 2.0 * np.exp(-(m + 1.0) * e) / (1.0 + np.exp(-e))
    return value if (np.ndim(epsilon) or np.ndim(moe)) else float(value)


def geometric_moe(epsilon: float | np.ndarray, level: float = 0.95,
                  method: Method = "exact") -> int | np.ndarray:
    """MOE of the geometric mechanism with parameter ``epsilon`` (noise scale ``1/epsilon``).

    ``exact``: smallest integer m with ``P(|Y| <= m) >= level``. ``paper``: eq. 35/36,
    ``floor(b ln(2 / (p (1 + e^{1/b}))))`` with ``b = 1/eps`` and ``p = 1 - level`` (optimistic,
    see the module docstring). Vectorized over ``epsilon``.
    """
    lev = _level(level)
    meth = _method(method)
    e = np.asarray(epsilon, dtype=np.float64)
    if np.any(~np.isfinite(e)) or np.any(e <= 0):
        raise PrivacyParameterError(f"epsilon must be finite and > 0, got {epsilon!r}")
    p = 1.0 - lev
    # solves 2 e^{-y/b}/(1+e^{1/b}) = p; log(1 + e^eps) via logaddexp (no overflow)
    y_star = (math.log(2.0 / p) - np.logaddexp(0.0, e)) / e
    if meth == "paper":
        m = np.floor(y_star)
    else:
        m = np.maximum(np.ceil(y_star - 1e-9), 0.0)
        # guard the float ceiling with the exact coverage on both sides
        m = np.where(geometric_coverage(e, m) < lev, m + 1.0, m)
        m = np.where((m > 0) & (geometric_coverage(e, np.maximum(m - 1.0, 0.0)) >= lev), m - 1.0, m)
    m = np.maximum(m, 0.0).astype(np.int64)
    return m if np.ndim(epsilon) else int(m)


def geometric_epsilon_for_moe(moe: float, level: float = 0.95, method: Method = "exact") -> float:
    """The geometric mechanism's ``epsilon`` for a target MOE.

    ``exact``: the smallest epsilon whose exact coverage of ``+-floor(moe)`` equals ``level``
    (root of ``2 e^{-(m+1) eps}/(1+e^{-eps}) = 1 - level``, decreasing in eps).
    ``paper``: eq. 38, ``ln(1/(1-level)) / (floor(moe) + 1)`` (``ln 20 / (MOE+1)`` at 95 %).
    """
    lev = _level(level)
    meth = _method(method)
    m = math.floor(_moe_arg(moe))
    p = 1.0 - lev
    if meth == "paper":
        return math.log(1.0 / p) / (m + 1)
    # tail(eps) = 2/(e^{(m+1)eps} + e^{m eps}) is strictly decreasing from 1 (eps=0) to 0
    def excess(log_eps: float) -> float:
        e = math.exp(log_eps)
        return math.log(2.0) - np.logaddexp((m + 1) * e, m * e) - math.log(p)
    hi = math.log(math.log(2.0 / p) + 1.0)  # at this eps (m+1) eps > log(2/p): tail < p
    lo = math.log(1e-12)
    from scipy.optimize import brentq  # imported when a budget is solved for, not with hierdp

    root = math.exp(brentq(excess, lo, hi, xtol=1e-14, rtol=1e-14, maxiter=500))
    return root * (1.0 + 1e-9)  # step just past the root so the coverage is >= level in floats


# -- discrete Gaussian N_Z(sigma2), sigma2 = 1/(2 rho) ---------------------------------------------
def _dg_cumulative_coverage(sigma2: float) -> np.ndarray:
    """``c[m] = P(|Y| <= m)`` for m = 0..K, K = ceil(40 sigma) + 1, from the exact pmf."""
    k = math.ceil(40.0 * math.sqrt(sigma2)) + 1
    x = np.arange(0, k + 1, dtype=np.float64)
    w = np.exp(-x * x / (2.0 * sigma2))  # w[0] = 1; each |x| > 0 appears twice
    two_sided = np.where(x == 0, 1.0, 2.0) * w
    total = float(np.sum(two_sided))
    return np.minimum(np.cumsum(two_sided) / total, 1.0)


def discrete_gaussian_coverage(rho: float, moe: float) -> float:
    """Exact ``P(|Y| <= moe)`` for ``Y ~ N_Z(1/(2 rho))`` (the base mechanism of paper 004, Alg. 5)."""
    r = _positive("rho", rho)
    m = math.floor(_moe_arg(moe))
    cov = _dg_cumulative_coverage(1.0 / (2.0 * r))
    return float(cov[min(m, cov.size - 1)])


def discrete_gaussian_moe(rho: float, level: float = 0.95, method: Method = "exact") -> int:
    """MOE of the discrete Gaussian mechanism with zCDP parameter ``rho`` (sigma2 = 1/(2 rho)).

    ``exact``: smallest integer m with ``P(|Y| <= m) >= level`` from the pmf. ``paper``:
    ``floor(z sigma)`` (App. E.2; z = 1.96 at 95 %).
    """
    r = _positive("rho", rho)
    lev = _level(level)
    meth = _method(method)
    sigma2 = 1.0 / (2.0 * r)
    if meth == "paper":
        return math.floor(_z(lev) * math.sqrt(sigma2))
    cov = _dg_cumulative_coverage(sigma2)
    return int(np.searchsorted(cov, lev, side="left"))


def discrete_gaussian_rho_for_moe(moe: float, level: float = 0.95, method: Method = "exact") -> float:
    """The discrete Gaussian mechanism's ``rho`` for a target MOE.

    ``exact``: the smallest rho whose exact coverage of ``+-floor(moe)`` equals ``level`` (the
    coverage is continuous and decreasing in sigma; root-found on log sigma2).
    ``paper``: eq. 37, ``(z^2/2) / floor(moe)^2`` with ``z^2/2 = 1.92`` at 95 %.
    """
    lev = _level(level)
    meth = _method(method)
    m = math.floor(_moe_arg(moe))
    if meth == "paper":
        if m < 1:
            raise PrivacyParameterError(f"moe must be >= 1 for the paper's formula, got {moe!r}")
        half_z2 = 1.92 if lev == 0.95 else _z(lev) ** 2 / 2.0
        return half_z2 / (m * m)

    def excess(log_s2: float) -> float:
        s2 = math.exp(log_s2)
        k = math.ceil(40.0 * math.sqrt(s2)) + 1
        x = np.arange(-k, k + 1, dtype=np.float64)
        logw = -x * x / (2.0 * s2)
        inside = np.abs(x) <= m
        return float(np.log(np.sum(np.exp(logw[inside]))) - np.log(np.sum(np.exp(logw)))) \
            - math.log(lev)

    lo = math.log(1e-6)
    hi = math.log(max((m + 1.0) ** 2, 1.0) * 1e3)
    from scipy.optimize import brentq

    s2 = math.exp(brentq(excess, lo, hi, xtol=1e-13, rtol=1e-13, maxiter=500))
    return (1.0 / (2.0 * s2)) * (1.0 + 1e-9)  # just past the root: coverage >= level in floats
