"""Privacy accounting: conversions between pure DP, zCDP, RDP and (epsilon, delta)-DP, and noise
calibration. Pure functions; each checks its inputs and raises
:class:`~hierdp.privacy.errors.PrivacyParameterError` naming the bad parameter.

Conventions (Bun & Steinke 2016; Canonne, Kamath & Steinke 2020; paper 004 App. A):

* pure epsilon-DP implies (epsilon**2 / 2)-zCDP;
* rho-zCDP means D_alpha <= rho * alpha for every alpha > 1, i.e. the RDP curve alpha -> rho*alpha;
* (alpha, tau)-RDP implies (epsilon, delta)-DP with (paper 004, Lemma 4, eq. 6)
  ``epsilon = tau + (log(1/delta) + (alpha-1) log(1-1/alpha) - log(alpha)) / (alpha-1)``;
* rho-zCDP -> (epsilon, delta): "numeric" is eq. 7 of paper 004 (eq. 6 minimised over alpha),
  "analytic" is Lemma 5 / eq. 8 ``rho + 2 sqrt(rho log(1/delta))`` (looser, closed form; the
  conversion paper 000 uses as its Lemma 3).
"""

from __future__ import annotations

import math
from typing import Any, Literal
from collections.abc import Callable, Iterable

import numpy as np

from hierdp.privacy.errors import PrivacyParameterError

__all__ = [
    "approx_dp_to_zcdp",
    "check_delta",
    "check_epsilon",
    "check_rho",
    "pure_rdp_curve",
    "pure_to_zcdp",
    "rdp_epsilon_term",
    "rdp_to_approx_dp",
    "zcdp_rdp_curve",
    "zcdp_to_approx_dp",
]

Method = Literal["analytic", "numeric"]
#: Below this rho the Gaussian variance 1 / (2 rho) overflows a double: no usable release.
_SMALLEST_RHO = 1e-300
RdpCurve = Callable[[Any], Any]  # alpha (a float or an array of orders) -> divergence(s)


# -- input checks (public: other privacy modules reuse them) -------------------------------------
def _finite_number(name: str, value: object) -> float:
    if isinstance(value, (bool, str, bytes)):
        raise PrivacyParameterError(f"{name} must be a number, got {value!r}")
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise PrivacyParameterError(f"{name} must be a number, got {value!r}") from exc
    if not math.isfinite(x):
        raise PrivacyParameterError(f"{name} must be finite, got {value!r}")
    return x


def _positive(name: str, value: object) -> float:
    x = _finite_number(name, value)
    if x <= 0:
        raise PrivacyParameterError(f"{name} must be > 0, got {value!r}")
    return x


def check_epsilon(epsilon: object, name: str = "epsilon") -> float:
    """``epsilon`` as a float, if finite and > 0."""
    return _positive(name, epsilon)


def check_rho(rho: object, name: str = "rho") -> float:
    """``rho`` as a float, if finite and > 0."""
    return _positive(name, rho)


def check_delta(delta: object, name: str = "delta") -> float:
    """``delta`` as a float, if in the open interval (0, 1)."""
    x = _finite_number(name, delta)
    if not 0.0 < x < 1.0:
        raise PrivacyParameterError(f"{name} must be in (0, 1), got {delta!r}")
    return x


def _check_method(method: object) -> Method:
    if method == "analytic":
        return "analytic"
    if method == "numeric":
        return "numeric"
    raise PrivacyParameterError(f"method must be 'analytic' or 'numeric', got {method!r}")


# -- pure DP, zCDP, RDP ----------------------------------------------------------------------------
def pure_to_zcdp(epsilon: float) -> float:
    """rho such that epsilon-DP implies rho-zCDP: ``epsilon**2 / 2`` (Bun & Steinke 2016)."""
    eps = check_epsilon(epsilon)
    return eps * eps / 2.0


def zcdp_rdp_curve(rho: float) -> Callable[[float | np.ndarray], float | np.ndarray]:
    """The RDP curve of rho-zCDP: ``alpha -> rho * alpha`` (accepts scalars or arrays)."""
    r = check_rho(rho)

    def curve(alpha: float | np.ndarray) -> float | np.ndarray:
        return r * np.asarray(alpha, dtype=np.float64) if np.ndim(alpha) else r * float(alpha)

    return curve


def pure_rdp_curve(epsilon: float) -> Callable[[float | np.ndarray], float | np.ndarray]:
    """An RDP curve implied by pure epsilon-DP: ``alpha -> min(epsilon, alpha * epsilon**2 / 2)``.

    Pure epsilon-DP bounds every Renyi divergence by epsilon (Mironov 2017) and implies
    (epsilon**2/2)-zCDP (Bun & Steinke 2016); the curve takes the smaller of the two. The exact
    curve of the geometric mechanism is tighter still: see
    :func:`hierdp.privacy.rdp_geometric.geometric_rdp_exact` (paper 004's Cor. 1 is *not* a valid
    bound: it undershoots the true divergence, see that module).
    """
    eps = check_epsilon(epsilon)
    half_sq = eps * eps / 2.0

    def curve(alpha: float | np.ndarray) -> float | np.ndarray:
        a = np.asarray(alpha, dtype=np.float64)
        value = np.minimum(eps, a * half_sq)
        return value if np.ndim(alpha) else float(value)

    return curve


def rdp_epsilon_term(alpha: float | np.ndarray, delta: float) -> float | np.ndarray:
    """The alpha-dependent part of paper 004 eq. 6 (epsilon = tau + this term).

    ``(log(1/delta) + (alpha-1) log(1 - 1/alpha) - log(alpha)) / (alpha - 1)``, alpha > 1.
    """
    d = check_delta(delta)
    a = np.asarray(alpha, dtype=np.float64)
    if np.any(~np.isfinite(a)) or np.any(a <= 1.0):
        raise PrivacyParameterError(f"alpha must be finite and > 1, got {alpha!r}")
    am1 = a - 1.0
    term = (-math.log(d) - np.log(a)) / am1 + np.log1p(-1.0 / a)
    return term if np.ndim(alpha) else float(term)


def _rdp_epsilon_term_h(h: np.ndarray, log_inv_delta: float) -> np.ndarray:
    """:func:`rdp_epsilon_term` at ``alpha = 1 + h``, written in ``h`` so that orders within
    machine epsilon of 1 (optimal for very large budgets, e.g. rho = 1e20) stay distinct from 1:
    ``(log(1/delta) - log1p(h)) / h + log(h) - log1p(h)``."""
    lp = np.log1p(h)
    return (log_inv_delta - lp) / h + np.log(h) - lp


def _minimise_over_alpha(objective: Callable[[np.ndarray], np.ndarray], centre: float,
                         decades: float = 7.0, points: int = 561) -> tuple[float, float]:
    """min over h = alpha - 1 > 0 of ``objective(h)`` (vectorized), searched in x = log(h).

    A coarse grid of ``points`` spanning ``centre * 10**±decades`` (in h) guards against local
    minima; bounded Brent then refines between the grid neighbours of the best point. Every value
    returned is the objective at an actual order, so it is a valid bound even if the refinement
    stops early. Returns ``(value, alpha)``.
    """
    x_c = math.log(centre)
    span = decades * math.log(10.0)
    xs = np.linspace(x_c - span, x_c + span, points)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        values = objective(np.exp(xs))
    values = np.where(np.isnan(values), np.inf, values)
    i = int(np.argmin(values))
    best_x, best_v = float(xs[i]), float(values[i])
    if not math.isfinite(best_v):
        return best_v, 1.0 + math.exp(best_x)
    lo, hi = xs[max(i - 1, 0)], xs[min(i + 1, points - 1)]
    if hi > lo:
        from scipy.optimize import minimize_scalar  # imported when needed, not with hierdp

        res = minimize_scalar(lambda x: float(objective(np.array([math.exp(x)]))[0]),
                              bounds=(float(lo), float(hi)), method="bounded",
                              options={"xatol": 1e-12, "maxiter": 500})
        if math.isfinite(res.fun) and res.fun < best_v:
            best_x, best_v = float(res.x), float(res.fun)
    return best_v, 1.0 + math.exp(best_x)


def zcdp_to_approx_dp(rho: float, delta: float, method: Method = "numeric") -> float:
    """epsilon such that rho-zCDP implies (epsilon, delta)-DP.

    Args:
        rho: zCDP parameter, > 0.
        delta: target delta in (0, 1).
        method: ``"numeric"``: paper 004 eq. 7, the infimum over alpha > 1 of
            ``rho*alpha + (log(1/delta) + (alpha-1) log(1-1/alpha) - log(alpha)) / (alpha-1)``
            (CKS20 Cor. 13), minimised numerically; ``"analytic"``: paper 004 eq. 8 /
            paper 000 Lemma 3, ``rho + 2 sqrt(rho log(1/delta))``.

    Returns:
        epsilon (clamped at 0: a negative bound means (0, delta)-DP).
    """
    r = check_rho(rho)
    d = check_delta(delta)
    method = _check_method(method)
    log_inv_delta = -math.log(d)
    if method == "analytic":
        return r + 2.0 * math.sqrt(r * log_inv_delta)
    # The analytic bound's optimiser alpha - 1 = sqrt(log(1/delta) / rho) centres the search.
    centre = math.sqrt(log_inv_delta / r)
    eps, _ = _minimise_over_alpha(lambda h: r * (1.0 + h) + _rdp_epsilon_term_h(h, log_inv_delta), centre)
    return max(eps, 0.0)


def approx_dp_to_zcdp(epsilon: float, delta: float, method: Method = "numeric") -> float:
    """The largest rho whose rho-zCDP guarantee converts to (epsilon, delta)-DP.

    ``"analytic"`` inverts eq. 8 in closed form: ``(sqrt(log(1/delta) + eps) - sqrt(log(1/delta)))**2``.
    ``"numeric"`` root-finds :func:`zcdp_to_approx_dp` (numeric) and then steps down until the
    forward conversion is at most ``epsilon``, so the returned rho never overshoots the target.
    """
    eps = check_epsilon(epsilon)
    d = check_delta(delta)
    method = _check_method(method)
    log_inv_delta = -math.log(d)
    # (sqrt(L + eps) - sqrt(L))**2 written without the cancellation of the difference.
    rho_analytic = (eps / (math.sqrt(log_inv_delta + eps) + math.sqrt(log_inv_delta))) ** 2
    if not rho_analytic >= _SMALLEST_RHO:
        raise PrivacyParameterError(
            f"epsilon={epsilon!r} (with delta={delta!r}) is too small: it converts to rho-zCDP below "
            f"{_SMALLEST_RHO:g}, where no noise scale is representable in double precision")
    # Round down to the largest float whose forward conversion does not exceed eps.
    while rho_analytic > 0 and zcdp_to_approx_dp(rho_analytic, d, "analytic") > eps:
        rho_analytic = math.nextafter(rho_analytic, 0.0)
    if method == "analytic":
        return rho_analytic

    def excess(r: float) -> float:
        return zcdp_to_approx_dp(r, d, "numeric") - eps

    # The numeric conversion is never looser than the analytic one, so rho_analytic is a lower
    # bracket; grow the upper bracket until it overshoots.
    lo = rho_analytic
    if excess(lo) > 0:  # numerical safety: should not happen
        while excess(lo) > 0:
            lo /= 2.0
    hi = max(2.0 * lo, 1e-300)
    while excess(hi) <= 0:
        lo, hi = hi, 2.0 * hi
    from scipy.optimize import brentq

    rho = brentq(excess, lo, hi, xtol=1e-15 * hi, rtol=4 * np.finfo(float).eps, maxiter=500)
    # Guarantee the contract excess(rho) <= 0 (brentq may land just above the root): step down
    # with growing steps; lo itself satisfies it, so this ends.
    step = rho * 1e-15
    while rho > lo and excess(rho) > 0:
        rho = max(lo, rho - step)
        step *= 2.0
    return float(rho)


def _evaluate_curve(rdp_curve: RdpCurve, alphas: np.ndarray) -> np.ndarray:
    """``rdp_curve`` on every alpha (vectorized call if the curve supports it)."""
    try:
        values = np.asarray(rdp_curve(alphas), dtype=np.float64)
        if values.shape != alphas.shape:
            raise ValueError
    except Exception:  # scalar-only callable: evaluate one alpha at a time
        values = np.array([float(rdp_curve(float(a))) for a in alphas], dtype=np.float64)
    if np.any(np.isnan(values)) or np.any(values < 0):
        raise PrivacyParameterError("rdp_curve must return values >= 0 (inf allowed), "
                                    "got NaN or a negative value")
    return values


def rdp_to_approx_dp(rdp_curve: RdpCurve, delta: float,
                     alphas: Iterable[float] | None = None) -> tuple[float, float]:
    """Convert an RDP curve to (epsilon, delta)-DP by paper 004 Lemma 4 / eq. 6, minimised over alpha.

    ``epsilon = min_alpha [ tau(alpha) + (log(1/delta) + (alpha-1) log(1-1/alpha) - log(alpha)) / (alpha-1) ]``

    Args:
        rdp_curve: callable ``alpha -> tau(alpha)`` (the mechanism is (alpha, tau(alpha))-RDP);
            may be vectorized; ``inf`` means "no bound at this alpha".
        delta: target delta in (0, 1).
        alphas: orders to minimise over exactly (e.g. paper 004's grid 1.01, 1.02, ..., 10).
            ``None``: a log-spaced grid of alpha - 1 over [1e-6, 1e6] refined by bounded Brent.

    Returns:
        ``(epsilon, best_alpha)``; epsilon clamped at 0.
    """
    d = check_delta(delta)
    if not callable(rdp_curve):
        raise PrivacyParameterError(f"rdp_curve must be callable, got {rdp_curve!r}")

    def objective(a: np.ndarray) -> np.ndarray:
        return _evaluate_curve(rdp_curve, a) + rdp_epsilon_term(a, d)

    log_inv_delta = -math.log(d)

    def objective_h(h: np.ndarray) -> np.ndarray:
        return _evaluate_curve(rdp_curve, 1.0 + h) + _rdp_epsilon_term_h(h, log_inv_delta)

    if alphas is not None:
        grid = np.asarray(list(alphas), dtype=np.float64).ravel()
        if grid.size == 0 or np.any(~np.isfinite(grid)) or np.any(grid <= 1.0):
            raise PrivacyParameterError("alphas must be a non-empty list of finite orders > 1")
        values = objective(grid)
        i = int(np.argmin(values))
        if not math.isfinite(values[i]):
            raise PrivacyParameterError("rdp_curve is infinite at every alpha given")
        return max(float(values[i]), 0.0), float(grid[i])
    eps, best_alpha = _minimise_over_alpha(objective_h, centre=1.0, decades=6.0, points=961)
    if not math.isfinite(eps):
        raise PrivacyParameterError("rdp_curve is infinite at every alpha searched")
    return max(eps, 0.0), best_alpha
