"""Noise samplers: discrete Laplace (two-sided geometric), discrete Gaussian, Laplace.

Every sampler draws a whole array at once. The noise parameter is a scalar or an array of
per-entry parameters broadcast against ``size`` (``size=None`` takes the parameter's shape), and
``rng`` is either

* a :class:`numpy.random.Generator` (from ``make_rng(seed)``): vectorized and reproducible, for
  experiments (floating-point arithmetic, not side-channel hardened), or
* a :class:`~hierdp.privacy.counter_noise.NodeStreams` (``CounterRandom.from_seed(s).nodes(level,
  keys)``): one counter-based stream per node, so that a node's value depends only on (seed, level,
  node key) and not on how a level is split (discrete Laplace / Gaussian, ``size`` = number of
  nodes; see :mod:`hierdp.privacy.counter_noise`), or
* a :class:`~hierdp.privacy.rng.SecureRandom` (from ``make_rng(secure=True)``): exact integer /
  rational sampling from OS randomness, for real releases. Its default backend
  (``"vectorized"``, :mod:`hierdp.privacy.secure_sampling`) runs the exact CKS20 algorithms on
  whole vectors (millions of draws a second); ``"opendp"`` uses OpenDP's exact samplers and
  ``"python"`` the one-draw-at-a-time reference implementation.

In secure mode a parameter may be a :class:`fractions.Fraction` (or an object array of them):
it is then used exactly. A float parameter is used at its exact binary value.

See :mod:`hierdp.privacy.rng` for which mode is for what.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, TypeAlias, cast
from collections.abc import Callable, Sequence

import numpy as np

from hierdp.privacy import counter_noise, secure_sampling
from hierdp.privacy.calibration import check_representable
from hierdp.privacy.counter_noise import NodeStreams
from hierdp.privacy.errors import PrivacyParameterError
from hierdp.privacy.opendp_backend import MAX_SCALE, opendp_discrete_gaussian, opendp_discrete_laplace
from hierdp.privacy.rng import RandomSource, SecureRandom

__all__ = ["discrete_gaussian", "discrete_laplace", "geometric", "laplace"]

Size: TypeAlias = int | Sequence[int] | None


# -- argument handling ---------------------------------------------------------------------------
def _check_rng(rng: object) -> bool:
    """True for secure mode, False for numpy mode (a Generator or counter-based node streams);
    anything else is refused."""
    if isinstance(rng, SecureRandom):
        return True
    if isinstance(rng, (np.random.Generator, NodeStreams)):
        return False
    raise TypeError(f"rng must be a numpy.random.Generator or SecureRandom (see make_rng), "
                    f"got {type(rng).__name__}")


def _shape_of(size: Size, default: tuple[int, ...]) -> tuple[int, ...]:
    if size is None:
        return default
    try:
        shape = tuple(int(s) for s in np.atleast_1d(np.asarray(size, dtype=np.int64)))
    except (TypeError, ValueError) as exc:
        raise PrivacyParameterError(f"size must be an int or a tuple of ints, got {size!r}") from exc
    if any(s < 0 for s in shape):
        raise PrivacyParameterError(f"size must be non-negative, got {size!r}")
    return shape


def _broadcast(name: str, arr: np.ndarray, value: Any, shape: tuple[int, ...]) -> np.ndarray:
    try:
        return np.broadcast_to(arr, shape)
    except ValueError as exc:
        raise PrivacyParameterError(
            f"{name} of shape {np.shape(value)} does not broadcast to size {shape}") from exc


def _is_exact(value: object) -> bool:
    """True for a Fraction or an array/sequence holding Fractions (used exactly in secure mode)."""
    if isinstance(value, Fraction):
        return True
    if isinstance(value, np.ndarray):
        return value.dtype == object
    if isinstance(value, (list, tuple)):
        return any(_is_exact(v) for v in value)
    return False


def _exact_param(name: str, value: object, size: Size) -> np.ndarray:
    """``value`` as an object array of positive Fractions broadcast to ``size``."""
    try:
        arr = np.asarray(value, dtype=object)
        flat = [v if isinstance(v, Fraction) else Fraction(v) for v in arr.ravel()]
    except (TypeError, ValueError) as exc:
        raise PrivacyParameterError(f"{name} must be a positive number or array, got {value!r}") \
            from exc
    for v in flat:
        if not v > 0:
            raise PrivacyParameterError(f"{name} must be > 0, got {v}")
    exact: np.ndarray = np.empty(len(flat), dtype=object)
    exact[:] = flat
    exact = exact.reshape(arr.shape)
    return _broadcast(name, exact, value, _shape_of(size, exact.shape))


def _positive_param(name: str, value: object, size: Size) -> np.ndarray:
    """``value`` as a float64 array broadcast to ``size``, every entry finite and > 0."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise PrivacyParameterError(f"{name} must be a positive number or array, got {value!r}") \
            from exc
    bad = ~(np.isfinite(arr) & (arr > 0))  # checked before broadcasting: no size-long temporaries
    if bad.any():
        first = arr[bad].flat[0]
        raise PrivacyParameterError(f"{name} must be finite and > 0, got {first!r}")
    return _broadcast(name, arr, value, _shape_of(size, arr.shape))


def _param(name: str, value: object, size: Size, secure: bool) -> np.ndarray:
    """Float64 parameters, or exact Fractions (object array) in secure mode when given as such."""
    if secure and _is_exact(value):
        out = _exact_param(name, value, size)
        check_representable(name, np.asarray([float(v) for v in np.unique(out.ravel())]))
        return out
    out = _positive_param(name, value, size)
    check_representable(name, out)
    return out


def _secure_fill(values: np.ndarray, draw: Callable[[Any], object],
                 dtype: type, exact: bool = True) -> np.ndarray:
    """Call ``draw`` once per entry (converting each distinct parameter once): the ``python``
    backend, one exact draw at a time in Python (interruptible between draws)."""
    flat = values.ravel()
    out: np.ndarray = np.empty(flat.size, dtype=dtype)
    if flat.size == 0:
        return out.reshape(values.shape)
    uniq, inverse = np.unique(flat, return_inverse=True)
    params: list[Any] = [(u if isinstance(u, Fraction) else Fraction(float(u))) if exact else float(u)
              for u in uniq]  # a float's exact binary value
    for i, j in enumerate(inverse.ravel()):
        out[i] = draw(params[j])
    return out.reshape(values.shape)


def _secure_integer(kind: str, params: np.ndarray, rng: SecureRandom) -> np.ndarray:
    """Exact discrete Laplace (``kind="laplace"``) or Gaussian noise through ``rng``'s backend."""
    if rng.backend == "python":
        draw = rng.discrete_laplace if kind == "laplace" else rng.discrete_gaussian
        return _secure_fill(params, draw, np.int64)
    if rng.backend == "opendp" and params.dtype != object:
        limit = MAX_SCALE if kind == "laplace" else MAX_SCALE ** 2
        if params.size == 0 or params.max() <= limit:
            bulk = opendp_discrete_laplace if kind == "laplace" else opendp_discrete_gaussian
            return bulk(params)
    # the vectorized exact sampler (also for exact Fractions and scales beyond OpenDP's range)
    if kind == "laplace":
        return secure_sampling.discrete_laplace(params)
    return secure_sampling.discrete_gaussian(params)


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
def discrete_laplace(scale: float | Fraction | np.ndarray, size: Size,
                     rng: RandomSource) -> np.ndarray:
    """Discrete Laplace (two-sided geometric) noise: ``P(x) ∝ exp(-|x| / scale)`` on the integers.

    Args:
        scale: noise scale ``b > 0``, scalar or array broadcast against ``size`` (in secure mode
            also a Fraction or an object array of Fractions, used exactly).
        size: output shape (``None``: the shape of ``scale``).
        rng: ``numpy.random.Generator`` (experiments) or ``SecureRandom`` (releases, exact).

    Returns:
        int64 array of shape ``size``.

    Raises:
        PrivacyParameterError: a scale is not finite and > 0, or does not broadcast.
    """
    secure = _check_rng(rng)
    scale_arr = _param("scale", scale, size, secure)
    if secure:
        return _secure_integer("laplace", scale_arr, cast(SecureRandom, rng))
    if isinstance(rng, NodeStreams):
        return counter_noise.discrete_laplace(scale_arr.ravel(), rng).reshape(scale_arr.shape)
    gen = cast(np.random.Generator, rng)
    if scale_arr.size and np.all(scale_arr == scale_arr.flat[0]):
        out = _np_discrete_laplace(scale_arr.flat[0], scale_arr.size, gen)
    else:
        out = _np_discrete_laplace(scale_arr.ravel(), scale_arr.size, gen)
    return out.astype(np.int64, copy=False).reshape(scale_arr.shape)


def _scale_at_least(sens: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """``sens / eps`` as floats never below the exact quotient of the two floats (rounded up by
    one ulp where float division rounded down), so the mechanism never exceeds ``epsilon``."""
    sens_b, eps_b = np.broadcast_arrays(sens, eps)
    scale = sens_b / eps_b
    pairs, inverse = np.unique(np.stack([sens_b.ravel(), eps_b.ravel()]), axis=1,
                               return_inverse=True)
    low = np.array([Fraction(float(q)) < Fraction(float(s)) / Fraction(float(e))
                    for s, e, q in zip(pairs[0], pairs[1], pairs[0] / pairs[1], strict=False)], dtype=bool)
    if low.any():
        up = low[inverse.ravel()].reshape(scale.shape)
        scale = np.where(up, np.nextafter(scale, np.inf), scale)
    return scale


def geometric(epsilon: float | np.ndarray, sensitivity: float | np.ndarray, size: Size,
              rng: RandomSource) -> np.ndarray:
    """The geometric mechanism's noise: ``discrete_laplace(sensitivity / epsilon)``.

    Adding it to an integer query of L1 sensitivity ``sensitivity`` is ``epsilon``-DP. The
    scale is the float ``sensitivity / epsilon`` rounded up (never below the exact quotient,
    checked with fractions), so float rounding cannot make the noise smaller than required. In
    secure mode, Fractions are divided exactly.

    Raises:
        PrivacyParameterError: epsilon or sensitivity not finite and > 0.
    """
    secure = _check_rng(rng)
    if secure and (_is_exact(epsilon) or _is_exact(sensitivity)):
        eps = _exact_param("epsilon", epsilon, None)
        sens = _exact_param("sensitivity", sensitivity, None)
        try:
            sens_b, eps_b = np.broadcast_arrays(sens, eps)
        except ValueError as exc:
            raise PrivacyParameterError(
                f"sensitivity of shape {sens.shape} and epsilon of shape {eps.shape} do not "
                "broadcast") from exc
        return discrete_laplace(sens_b / eps_b, size, rng)
    eps = _positive_param("epsilon", epsilon, None)
    sens = _positive_param("sensitivity", sensitivity, None)
    try:
        scale = _scale_at_least(sens, eps)
    except ValueError as exc:
        raise PrivacyParameterError(
            f"sensitivity of shape {sens.shape} and epsilon of shape {eps.shape} do not "
            "broadcast") from exc
    return discrete_laplace(scale, size, rng)


def discrete_gaussian(sigma2: float | Fraction | np.ndarray, size: Size,
                      rng: RandomSource) -> np.ndarray:
    """Discrete Gaussian noise ``N_Z(0, sigma2)``: ``P(x) ∝ exp(-x**2 / (2 sigma2))``.

    The exact rejection sampler of Canonne, Kamath & Steinke (2020, Alg. 3): propose from the
    discrete Laplace with scale ``t = floor(sigma) + 1`` and accept with probability
    ``exp(-(|Y| - sigma2/t)**2 / (2 sigma2))``. In numpy mode all pending entries are proposed
    at once and only rejected ones are redrawn; in secure mode the same algorithm runs in exact
    integer arithmetic (vectorized by default, see :mod:`hierdp.privacy.secure_sampling`).
    ``sigma2`` is the parameter of the law; its variance is at most ``sigma2`` (CKS20) and
    practically equal to it once ``sigma2 >= 1``.

    Args:
        sigma2: the parameter ``sigma**2 > 0``, scalar or array broadcast against ``size`` (in
            secure mode also a Fraction or an object array of Fractions, used exactly).
        size: output shape (``None``: the shape of ``sigma2``).
        rng: ``numpy.random.Generator`` (experiments) or ``SecureRandom`` (releases, exact).

    Returns:
        int64 array of shape ``size``.
    """
    secure = _check_rng(rng)
    sigma2_arr = _param("sigma2", sigma2, size, secure)
    if secure:
        return _secure_integer("gaussian", sigma2_arr, cast(SecureRandom, rng))
    if isinstance(rng, NodeStreams):
        return counter_noise.discrete_gaussian(sigma2_arr.ravel(), rng).reshape(sigma2_arr.shape)
    return _np_discrete_gaussian(sigma2_arr, cast(np.random.Generator, rng))


def laplace(scale: float | np.ndarray, size: Size, rng: RandomSource) -> np.ndarray:
    """Continuous Laplace noise with density ``∝ exp(-|x| / scale)``.

    In secure mode each draw is an exact discrete Laplace on a dyadic grid finer than
    ``scale * 2**-40`` (see :meth:`SecureRandom.laplace`), which closes the floating-point
    attack on naive Laplace samplers; the default backend draws the whole vector at once.

    Returns:
        float64 array of shape ``size``.
    """
    secure = _check_rng(rng)
    if isinstance(rng, NodeStreams):
        raise TypeError("laplace: counter-based node streams draw discrete noise only (discrete_laplace, "
                        "discrete_gaussian, geometric); pass a numpy Generator or SecureRandom")
    scale_arr = _positive_param("scale", scale, size)
    if secure:
        if cast(SecureRandom, rng).backend == "python":
            return _secure_fill(scale_arr, cast(SecureRandom, rng).laplace, np.float64, exact=False)
        return np.asarray(secure_sampling.laplace(scale_arr))
    return cast(np.random.Generator, rng).laplace(0.0, scale_arr, scale_arr.shape)
