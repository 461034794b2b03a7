"""Noise samplers: discrete Laplace (two-sided geometric), discrete Gaussian, Laplace.

Every sampler draws a whole array at once. The noise parameter is a scalar or an array of
per-entry parameters broadcast against ``size`` (``size=None`` takes the parameter's shape), and
``rng`` is either

* a :class:`numpy.random.Generator` (from ``make_rng(seed)``): vectorized and reproducible, for
  experiments (floating-point arithmetic, not side-channel hardened), or
* a :class:`~hierdp.privacy.rng.SecureRandom` (from ``make_rng(secure=True)``): exact integer /
  rational sampling from OS randomness, one entry at a time, for real releases.

See :mod:`hierdp.privacy.rng` for which mode is for what.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Callable, Sequence, Union

import numpy as np

from hierdp.privacy.errors import PrivacyParameterError
from hierdp.privacy.opendp_backend import MAX_SCALE, opendp_discrete_gaussian, opendp_discrete_laplace
from hierdp.privacy.rng import RandomSource, SecureRandom

__all__ = ["discrete_laplace", "discrete_gaussian", "geometric", "laplace"]

Size = Union[int, Sequence[int], None]


# -- argument handling ---------------------------------------------------------------------------
def _check_rng(rng: object) -> bool:
    """True for secure mode, False for numpy mode; anything else is refused."""
    if isinstance(rng, SecureRandom):
        return True
    if isinstance(rng, np.random.Generator):
        return False
    raise TypeError(f"rng must be a numpy.random.Generator or SecureRandom (see make_rng), "
                    f"got {type(rng).__name__}")


def _positive_param(name: str, value: object, size: Size) -> np.ndarray:
    """``value`` as a float64 array broadcast to ``size``, every entry finite and > 0."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise PrivacyParameterError(f"{name} must be a positive number or array, got {value!r}") \
            from exc
    if size is None:
        shape: tuple[int, ...] = arr.shape
    else:
        try:
            shape = tuple(int(s) for s in np.atleast_1d(np.asarray(size, dtype=np.int64)))
        except (TypeError, ValueError) as exc:
            raise PrivacyParameterError(f"size must be an int or a tuple of ints, got {size!r}") \
                from exc
        if any(s < 0 for s in shape):
            raise PrivacyParameterError(f"size must be non-negative, got {size!r}")
    try:
        arr = np.broadcast_to(arr, shape)
    except ValueError as exc:
        raise PrivacyParameterError(
            f"{name} of shape {np.shape(value)} does not broadcast to size {shape}") from exc
    bad = ~(np.isfinite(arr) & (arr > 0))
    if bad.any():
        first = arr[bad].flat[0]
        raise PrivacyParameterError(f"{name} must be finite and > 0, got {first!r}")
    return arr


def _secure_fill(values: np.ndarray, draw: Callable[[Fraction], object],
                 dtype: type, exact: bool = True) -> np.ndarray:
    """Call ``draw`` once per entry (converting each distinct parameter once)."""
    flat = values.ravel()
    out = np.empty(flat.size, dtype=dtype)
    if flat.size == 0:
        return out.reshape(values.shape)
    uniq, inverse = np.unique(flat, return_inverse=True)
    params = [Fraction(float(u)) if exact else float(u) for u in uniq]  # exact binary value
    for i, j in enumerate(inverse.ravel()):
        out[i] = draw(params[j])
    return out.reshape(values.shape)


# -- numpy-mode kernels (flat arrays) ------------------------------------------------------------
def _np_discrete_laplace(scale: np.ndarray | float, n: int, gen: np.random.Generator) -> np.ndarray:
    # Difference of two iid geometric variables with success prob 1 - exp(-1/scale) has
    # pmf proportional to exp(-|x|/scale) (the two-sided geometric law).
    p = -np.expm1(-1.0 / np.asarray(scale, dtype=np.float64))
    if p.ndim == 0:
        return gen.geometric(float(p), n) - gen.geometric(float(p), n)
    return gen.geometric(p) - gen.geometric(p)


def _np_discrete_gaussian(sigma2: np.ndarray, gen: np.random.Generator) -> np.ndarray:
    """CKS20 Alg. 3 vectorized: propose for all pending entries, retry only the rejected ones."""
    flat = sigma2.ravel()
    n = flat.size
    out = np.empty(n, dtype=np.int64)
    constant = n > 0 and bool(np.all(flat == flat[0]))
    pending = np.arange(n)
    while pending.size:
        s2 = flat[0] if constant else flat[pending]
        # Any t > 0 gives the exact law; t = floor(sigma) + 1 makes acceptance likely.
        t = np.floor(np.sqrt(s2)) + 1.0
        y = _np_discrete_laplace(t, pending.size, gen)
        accept_prob = np.exp(-np.square(np.abs(y) - s2 / t) / (2.0 * s2))
        accepted = gen.random(pending.size) < accept_prob
        out[pending[accepted]] = y[accepted]
        pending = pending[~accepted]
    return out.reshape(sigma2.shape)


# -- public samplers ----------------------------------------------------------------------------
def discrete_laplace(scale: float | np.ndarray, size: Size, rng: RandomSource) -> np.ndarray:
    """Discrete Laplace (two-sided geometric) noise: ``P(x) ∝ exp(-|x| / scale)`` on the integers.

    Args:
        scale: noise scale ``b > 0``, scalar or array broadcast against ``size``.
        size: output shape (``None``: the shape of ``scale``).
        rng: ``numpy.random.Generator`` (experiments) or ``SecureRandom`` (releases, exact).

    Returns:
        int64 array of shape ``size``.

    Raises:
        PrivacyParameterError: a scale is not finite and > 0, or does not broadcast.
    """
    secure = _check_rng(rng)
    scale_arr = _positive_param("scale", scale, size)
    if secure:
        if rng.backend == "opendp" and (scale_arr.size == 0 or scale_arr.max() <= MAX_SCALE):
            return opendp_discrete_laplace(scale_arr)
        return _secure_fill(scale_arr, rng.discrete_laplace, np.int64)
    if scale_arr.size and np.all(scale_arr == scale_arr.flat[0]):
        out = _np_discrete_laplace(scale_arr.flat[0], scale_arr.size, rng)
    else:
        out = _np_discrete_laplace(scale_arr.ravel(), scale_arr.size, rng)
    return out.astype(np.int64, copy=False).reshape(scale_arr.shape)


def geometric(epsilon: float | np.ndarray, sensitivity: float | np.ndarray, size: Size,
              rng: RandomSource) -> np.ndarray:
    """The geometric mechanism's noise: ``discrete_laplace(sensitivity / epsilon)``.

    Adding it to an integer query of L1 sensitivity ``sensitivity`` is ``epsilon``-DP.

    Raises:
        PrivacyParameterError: epsilon or sensitivity not finite and > 0.
    """
    eps = _positive_param("epsilon", epsilon, None)
    sens = _positive_param("sensitivity", sensitivity, None)
    return discrete_laplace(sens / eps, size, rng)


def discrete_gaussian(sigma2: float | np.ndarray, size: Size, rng: RandomSource) -> np.ndarray:
    """Discrete Gaussian noise ``N_Z(0, sigma2)``: ``P(x) ∝ exp(-x**2 / (2 sigma2))``.

    The exact rejection sampler of Canonne, Kamath & Steinke (2020, Alg. 3): propose from the
    discrete Laplace with scale ``t = floor(sigma) + 1`` and accept with probability
    ``exp(-(|Y| - sigma2/t)**2 / (2 sigma2))``. In numpy mode all pending entries are proposed
    at once and only rejected ones are redrawn; in secure mode each entry runs the exact
    integer/rational algorithm. ``sigma2`` is the parameter of the law; its variance is at most
    ``sigma2`` (CKS20) and practically equal to it once ``sigma2 >= 1``.

    Args:
        sigma2: the parameter ``sigma**2 > 0``, scalar or array broadcast against ``size``.
        size: output shape (``None``: the shape of ``sigma2``).
        rng: ``numpy.random.Generator`` (experiments) or ``SecureRandom`` (releases, exact).

    Returns:
        int64 array of shape ``size``.
    """
    secure = _check_rng(rng)
    sigma2_arr = _positive_param("sigma2", sigma2, size)
    if secure:
        if rng.backend == "opendp" and (sigma2_arr.size == 0 or sigma2_arr.max() <= MAX_SCALE ** 2):
            return opendp_discrete_gaussian(sigma2_arr)
        return _secure_fill(sigma2_arr, rng.discrete_gaussian, np.int64)
    return _np_discrete_gaussian(sigma2_arr, rng)


def laplace(scale: float | np.ndarray, size: Size, rng: RandomSource) -> np.ndarray:
    """Continuous Laplace noise with density ``∝ exp(-|x| / scale)``.

    In secure mode each draw is an exact discrete Laplace on a dyadic grid finer than
    ``scale * 2**-40`` (see :meth:`SecureRandom.laplace`), which closes the floating-point
    attack on naive Laplace samplers.

    Returns:
        float64 array of shape ``size``.
    """
    secure = _check_rng(rng)
    scale_arr = _positive_param("scale", scale, size)
    if secure:
        return _secure_fill(scale_arr, rng.laplace, np.float64, exact=False)
    return rng.laplace(0.0, scale_arr, scale_arr.shape)
