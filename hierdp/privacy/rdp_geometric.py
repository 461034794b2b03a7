"""Rényi DP of the geometric (discrete Laplace) mechanism (paper 004, App. B.1).

The geometric mechanism with parameter ``epsilon`` adds noise ``L_Z(b)``, ``b = 1/epsilon``, whose
pmf is ``P(x) = (e^{1/b} - 1)/(e^{1/b} + 1) * e^{-|x|/b}`` on the integers (paper 004, Def. 7).
For a count (sensitivity 1) its RDP curve is ``tau(alpha) = D_alpha(L_Z(b) || L_Z(b) + 1)``.

Three formulas live here:

* :func:`geometric_rdp_exact` — the exact divergence of the two *discrete* pmfs. Summing the
  geometric series on ``x <= 0`` and ``x >= 1`` gives the closed form

      tau(alpha) = log[(e^{(alpha-1) eps} + e^{-alpha eps}) / (1 + e^{-eps})] / (alpha - 1),

  which is also the tight RDP curve of *any* eps-DP mechanism (Bun & Steinke 2016, Prop. 3.3:
  randomized response attains it), so no eps-DP mechanism can have a smaller bound. It tends to
  the KL divergence as alpha -> 1 and to eps as alpha -> inf.
* :func:`geometric_rdp_paper` — paper 004 Lemma 8 / Corollary 1 (eq. 11, 17), as printed. Its
  proof integrates the discrete normalising constant times ``e^{-|x|/b}`` over the *reals*, which
  is not a probability density (it integrates to ``2b tanh(1/(2b)) < 1``). The result is smaller
  than the exact divergence at every alpha and even negative as alpha -> 1, so it is **not** a
  valid RDP bound for the discrete mechanism. It is kept to reproduce the paper's numbers only.
* :func:`laplace_rdp` — the continuous Laplace mechanism (Mironov 2017, Prop. 6), the formula
  Lemma 8 is patterned on; for reference.

:func:`renyi_divergence` computes ``D_alpha(P || Q)`` of two pmfs given as log-probabilities by
log-sum-exp; :func:`geometric_rdp_numeric` applies it to the discrete Laplace pmfs over a wide
finite support, an independent check of the closed form (and usable for shifts > 1).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp

from hierdp.privacy.errors import PrivacyParameterError

__all__ = [
    "discrete_laplace_logpmf",
    "geometric_rdp_exact",
    "geometric_rdp_numeric",
    "geometric_rdp_paper",
    "laplace_rdp",
    "renyi_divergence",
]

ArrayLike = float | np.ndarray


def _check(alpha: ArrayLike, epsilon: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(alpha, dtype=np.float64)
    e = np.asarray(epsilon, dtype=np.float64)
    if np.any(~np.isfinite(a)) or np.any(a <= 1.0):
        raise PrivacyParameterError(f"alpha must be finite and > 1, got {alpha!r}")
    if np.any(~np.isfinite(e)) or np.any(e <= 0.0):
        raise PrivacyParameterError(f"epsilon must be finite and > 0, got {epsilon!r}")
    return a, e


def _out(value: np.ndarray, *inputs: ArrayLike) -> ArrayLike:
    return value if any(np.ndim(x) for x in inputs) else float(value)


def geometric_rdp_exact(alpha: ArrayLike, epsilon: ArrayLike) -> ArrayLike:
    """Exact ``D_alpha(L_Z(1/eps) || L_Z(1/eps) + 1)`` of the discrete pmfs (closed form).

    Vectorized over ``alpha`` and ``epsilon`` (broadcast). Computed in log space so large
    ``alpha * eps`` does not overflow. Equals the tight RDP curve of eps-DP (Bun & Steinke 2016,
    Prop. 3.3); tends to the KL divergence as alpha -> 1 and to eps as alpha -> inf.
    """
    a, e = _check(alpha, epsilon)
    d = (a - 1.0) * e
    # (a-1) D = log R with R = (e^d + e^{-d-e}) / (1 + e^{-e}). Written as log1p(R - 1) with
    # R - 1 = (expm1(d) + e^{-e} expm1(-d)) / (1 + e^{-e}), the small-eps, small-(a-1) case keeps
    # its digits (log(num) - log(den) of two numbers near log 2 loses ~8 of them at eps = 0.005);
    # large d uses log-sum-exp, which cannot overflow and has no cancellation there.
    small = d < 700.0
    ds = np.where(small, d, 0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        stable = np.log1p((np.expm1(ds) + np.exp(-e) * np.expm1(-ds)) / (1.0 + np.exp(-e)))
        big = np.logaddexp(d, -a * e) - np.log1p(np.exp(-e))
    value = np.where(small, stable, big) / (a - 1.0)
    return _out(value, alpha, epsilon)


def geometric_rdp_paper(alpha: ArrayLike, epsilon: ArrayLike) -> ArrayLike:
    """Paper 004 Corollary 1 (eq. 17 / 29) exactly as printed: NOT a valid bound (see module doc).

    ``tau = log[ (e^eps - 1)/(e^eps + 1) * ( 2 alpha e^{(alpha-1) eps} / (eps (2 alpha - 1))
    + 2 (alpha - 1) e^{-alpha eps} / (eps (2 alpha - 1)) ) ] / (alpha - 1)``.
    """
    a, e = _check(alpha, epsilon)
    log_c = np.log(np.tanh(e / 2.0))  # (e^eps - 1)/(e^eps + 1) = tanh(eps/2)
    t1 = np.log(2.0 * a / (e * (2.0 * a - 1.0))) + (a - 1.0) * e
    t2 = np.log(2.0 * (a - 1.0) / (e * (2.0 * a - 1.0))) - a * e
    value = (log_c + np.logaddexp(t1, t2)) / (a - 1.0)
    return _out(value, alpha, epsilon)


def laplace_rdp(alpha: ArrayLike, epsilon: ArrayLike) -> ArrayLike:
    """RDP of the continuous Laplace mechanism with scale ``1/eps`` (Mironov 2017, Prop. 6).

    ``log[ alpha/(2alpha-1) e^{(alpha-1)eps} + (alpha-1)/(2alpha-1) e^{-alpha eps} ] / (alpha-1)``.
    """
    a, e = _check(alpha, epsilon)
    t1 = np.log(a / (2.0 * a - 1.0)) + (a - 1.0) * e
    t2 = np.log((a - 1.0) / (2.0 * a - 1.0)) - a * e
    return _out(np.logaddexp(t1, t2) / (a - 1.0), alpha, epsilon)


def discrete_laplace_logpmf(x: np.ndarray, scale: float) -> np.ndarray:
    """log P(x) of ``L_Z(scale)`` (paper 004, eq. 10), exact normalisation."""
    if not (math.isfinite(scale) and scale > 0):
        raise PrivacyParameterError(f"scale must be finite and > 0, got {scale!r}")
    inv = 1.0 / scale
    log_norm = math.log(math.tanh(inv / 2.0))  # (e^{1/b}-1)/(e^{1/b}+1)
    return log_norm - np.abs(np.asarray(x, dtype=np.float64)) * inv


def renyi_divergence(logp: np.ndarray, logq: np.ndarray, alpha: ArrayLike) -> ArrayLike:
    """``D_alpha(P || Q) = log sum_x P(x)^alpha Q(x)^(1-alpha) / (alpha - 1)`` over a common support.

    ``logp``, ``logq``: log-probabilities on the same points (they should sum to ~1; no
    renormalisation is done, so a truncated support gives a lower bound). ``alpha`` scalar or
    1-D array; computed by log-sum-exp.
    """
    lp = np.asarray(logp, dtype=np.float64).ravel()
    lq = np.asarray(logq, dtype=np.float64).ravel()
    if lp.shape != lq.shape:
        raise PrivacyParameterError(f"logp and logq differ in shape: {lp.shape} vs {lq.shape}")
    a = np.atleast_1d(np.asarray(alpha, dtype=np.float64))
    if np.any(~np.isfinite(a)) or np.any(a <= 1.0):
        raise PrivacyParameterError(f"alpha must be finite and > 1, got {alpha!r}")
    terms = a[:, None] * lp[None, :] + (1.0 - a[:, None]) * lq[None, :]
    value = logsumexp(terms, axis=1) / (a - 1.0)
    return value if np.ndim(alpha) else float(value[0])


def geometric_rdp_numeric(alpha: ArrayLike, epsilon: float, shift: int = 1,
                          tail_mass: float = 1e-300) -> ArrayLike:
    """``D_alpha(L_Z(1/eps) || L_Z(1/eps) + shift)`` by direct summation over a wide support.

    The support ``[-K, K + shift]`` is chosen so that each pmf's neglected tail is below
    ``tail_mass`` after weighting by the largest likelihood ratio; an independent check of
    :func:`geometric_rdp_exact` (``shift=1``) and a tool for sensitivity > 1.
    """
    a = np.atleast_1d(np.asarray(alpha, dtype=np.float64))
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise PrivacyParameterError(f"epsilon must be finite and > 0, got {epsilon!r}")
    if int(shift) != shift or shift < 0:
        raise PrivacyParameterError(f"shift must be a non-negative integer, got {shift!r}")
    # the summand decays like exp(-eps |x|) far from the shift; the ratio term adds at most
    # alpha*shift*eps to the exponent.
    k = math.ceil((-math.log(tail_mass) + float(a.max()) * shift * epsilon) / epsilon) + 2
    x = np.arange(-k, k + int(shift) + 1)
    logp = discrete_laplace_logpmf(x, 1.0 / epsilon)
    logq = discrete_laplace_logpmf(x - int(shift), 1.0 / epsilon)
    value = renyi_divergence(logp, logq, a)
    return value if np.ndim(alpha) else float(np.asarray(value)[0])
