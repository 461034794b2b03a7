"""Sources of randomness: seeded numpy generators for experiments, OS randomness for releases.

Two modes, chosen once with :func:`make_rng` and passed to every sampler in
:mod:`hierdp.privacy.samplers`:

* **Seeded numpy mode** (``make_rng(seed)`` -> :class:`numpy.random.Generator`) is for
  *reproducible experiments*: a run is replayed exactly from its seed, and whole levels are drawn
  at once with vectorized numpy code. The samplers follow the exact algorithms, but their
  arithmetic is floating point (acceptance probabilities, geometric inversion) and numpy's PRNG
  is not cryptographic, so this mode is **not** hardened against floating-point or timing side
  channels. Do not use it to publish real data.
* **Secure mode** (``make_rng(secure=True)`` -> :class:`SecureRandom`) is for *real releases*:
  every bit comes from the operating system (:mod:`secrets`), no seed can be given, and the
  discrete samplers are exact: they use only integer and rational arithmetic (the algorithms of
  Canonne, Kamath & Steinke 2020), so the output distribution is exactly the discrete Laplace or
  discrete Gaussian with the given (rational, i.e. floating-point-valued) parameter. It draws one
  entry at a time in Python and is therefore much slower (tens of microseconds per draw). Its
  running time depends on the values drawn (as for any rejection sampler): do not publish
  per-entry timings of a release.

OpenDP (installed; ``dp.enable_features("contrib")``) offers equivalent exact samplers; hierdp
uses its own small implementation so that secure mode needs no extra dependency and keeps the
same vectorized interface.
"""

from __future__ import annotations

import math
import secrets
from fractions import Fraction
from typing import Union

import numpy as np

from hierdp.privacy.errors import PrivacyParameterError

__all__ = ["SecureRandom", "make_rng", "RandomSource"]

_ONE = Fraction(1)
# Secure continuous Laplace: the grid is at most scale * 2**-_LAPLACE_GRID_BITS.
_LAPLACE_GRID_BITS = 40


class SecureRandom:
    """Exact samplers driven only by OS randomness (:func:`secrets.randbits`); no seed allowed.

    The scalar methods below implement Algorithms 1-3 of Canonne, Kamath & Steinke (2020),
    "The Discrete Gaussian for Differential Privacy", with Python integers and
    :class:`fractions.Fraction` only, so no rounding ever enters the sampled distribution.
    The vectorized entry points in :mod:`hierdp.privacy.samplers` call these per entry.
    """

    __slots__ = ("backend",)

    def __init__(self, seed: object = None, *, backend: str = "auto") -> None:
        """``backend``: ``"opendp"`` (OpenDP's exact samplers, bulk, faster), ``"python"`` (the
        exact samplers below, one entry at a time) or ``"auto"`` (OpenDP when installed)."""
        if seed is not None:
            raise PrivacyParameterError(
                f"seed: SecureRandom draws from the operating system and cannot be seeded "
                f"(got seed={seed!r}); use make_rng(seed) for reproducible experiments")
        if backend not in ("auto", "opendp", "python"):
            raise PrivacyParameterError(f"backend must be 'auto', 'opendp' or 'python', got {backend!r}")
        from hierdp.privacy.opendp_backend import opendp_available

        if backend == "opendp" and not opendp_available():
            raise PrivacyParameterError("backend 'opendp' requested but opendp is not installed "
                                        "(pip install 'hierdp[secure]')")
        if backend == "auto":
            backend = "opendp" if opendp_available() else "python"
        self.backend = backend

    def __repr__(self) -> str:
        return f"SecureRandom(backend={self.backend!r})"

    # -- uniform primitives -------------------------------------------------------------------
    @staticmethod
    def randbits(k: int) -> int:
        """A uniform integer in ``[0, 2**k)`` from the OS."""
        return secrets.randbits(k)

    @staticmethod
    def randbelow(n: int) -> int:
        """A uniform integer in ``[0, n)`` from the OS (``n >= 1``)."""
        return secrets.randbelow(n)

    def bernoulli(self, numerator: int, denominator: int) -> bool:
        """Exact Bernoulli(numerator / denominator), ``0 <= numerator <= denominator``."""
        return self.randbelow(denominator) < numerator

    # -- CKS20 Algorithm 1: Bernoulli(exp(-gamma)) --------------------------------------------
    def _bernoulli_exp_unit(self, gamma: Fraction) -> bool:
        # For gamma in [0, 1]: K is the first k with Bernoulli(gamma/k) = 0; P(K odd) = exp(-gamma).
        k = 1
        while self.bernoulli(gamma.numerator, gamma.denominator * k):
            k += 1
        return k % 2 == 1

    def bernoulli_exp(self, gamma: Fraction) -> bool:
        """Exact Bernoulli(exp(-gamma)) for a rational ``gamma >= 0``."""
        gamma = Fraction(gamma)
        if gamma < 0:
            raise PrivacyParameterError(f"gamma must be >= 0, got {gamma}")
        whole = gamma.numerator // gamma.denominator
        # exp(-gamma) = exp(-1)**floor(gamma) * exp(-frac(gamma)): stop at the first failure.
        for _ in range(whole):
            if not self._bernoulli_exp_unit(_ONE):
                return False
        return self._bernoulli_exp_unit(gamma - whole)

    # -- CKS20 Algorithm 2: discrete Laplace ----------------------------------------------------
    def discrete_laplace(self, scale: Fraction) -> int:
        """Exact draw with pmf proportional to ``exp(-|x| / scale)`` on the integers."""
        scale = Fraction(scale)
        if scale <= 0:
            raise PrivacyParameterError(f"scale must be > 0, got {scale}")
        t, s = scale.numerator, scale.denominator  # scale = t / s
        while True:
            u = self.randbelow(t)
            if not self.bernoulli_exp(Fraction(u, t)):
                continue
            v = 0  # geometric: number of successes of Bernoulli(exp(-1)) before a failure
            while self._bernoulli_exp_unit(_ONE):
                v += 1
            y = (u + t * v) // s  # |Z| ~ geometric with ratio exp(-s/t)
            negative = self.randbits(1) == 1
            if negative and y == 0:
                continue  # reject "-0" so that 0 is not counted twice
            return -y if negative else y

    # -- CKS20 Algorithm 3: discrete Gaussian ---------------------------------------------------
    def discrete_gaussian(self, sigma2: Fraction) -> int:
        """Exact draw with pmf proportional to ``exp(-x**2 / (2 sigma2))`` on the integers."""
        sigma2 = Fraction(sigma2)
        if sigma2 <= 0:
            raise PrivacyParameterError(f"sigma2 must be > 0, got {sigma2}")
        # t = floor(sigma) + 1, computed exactly: floor(sqrt(x)) == isqrt(floor(x)).
        t = math.isqrt(sigma2.numerator // sigma2.denominator) + 1
        shift = sigma2 / t
        while True:
            y = self.discrete_laplace(Fraction(t))
            gamma = (abs(y) - shift) ** 2 / (2 * sigma2)
            if self.bernoulli_exp(gamma):
                return y

    # -- continuous Laplace on a fine dyadic grid -----------------------------------------------
    def laplace(self, scale: float) -> float:
        """Laplace(scale) discretised to a dyadic grid ``2**k <= scale * 2**-40``, sampled exactly.

        A floating-point Laplace sample leaks through its low-order bits (Mironov 2012); drawing
        an exact discrete Laplace on a power-of-two grid and scaling it (exactly representable)
        removes that channel while staying within ``scale * 1e-12`` of the continuous law.
        """
        if not (math.isfinite(scale) and scale > 0):
            raise PrivacyParameterError(f"scale must be finite and > 0, got {scale!r}")
        _, exponent = math.frexp(scale)  # scale in [2**(exponent-1), 2**exponent)
        k = exponent - 1 - _LAPLACE_GRID_BITS
        grid_scale = Fraction(scale) * (Fraction(2) ** -k)
        z = self.discrete_laplace(grid_scale)
        return math.ldexp(float(z), k)  # exact: |z| < 2**53 with overwhelming probability


#: What the samplers accept as randomness.
RandomSource = Union[np.random.Generator, SecureRandom]


def make_rng(seed: int | np.random.Generator | None = None, *,
             secure: bool = False) -> np.random.Generator | SecureRandom:
    """The randomness every sampler takes.

    Args:
        seed: seed of a reproducible numpy generator (``None`` = fresh entropy). An existing
            :class:`numpy.random.Generator` is returned unchanged.
        secure: return a :class:`SecureRandom` (OS randomness, exact samplers) for real
            releases. A seed is refused in this mode: a seeded release is not private.

    Raises:
        PrivacyParameterError: ``secure=True`` together with a seed.
    """
    if secure:
        if seed is not None:
            raise PrivacyParameterError(
                f"seed: secure mode uses OS randomness and refuses a seed (got {seed!r}); "
                "seeded generators are for reproducible experiments only")
        return SecureRandom()
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
        raise PrivacyParameterError(f"seed must be an int or None, got {seed!r}")
    return np.random.default_rng(seed)


def resolve_rng(rng: np.random.Generator | SecureRandom | None, seed: int | None, *,
                secure: bool) -> np.random.Generator | SecureRandom:
    """The randomness a mechanism should use, refusing combinations that would weaken a release.

    ``rng`` (an explicit source) wins over ``seed``; with ``secure=True`` it must be a
    :class:`SecureRandom` and no seed may be given.

    Raises:
        PrivacyParameterError: ``secure=True`` with a numpy generator or a seed.
    """
    if rng is None:
        return make_rng(seed, secure=secure)
    if secure and not isinstance(rng, SecureRandom):
        raise PrivacyParameterError(
            f"rng: this mechanism was created with secure=True but got a {type(rng).__name__}; "
            "pass make_rng(secure=True) or nothing")
    if not isinstance(rng, (SecureRandom, np.random.Generator)):
        raise PrivacyParameterError(f"rng must be a numpy Generator or SecureRandom, got {type(rng).__name__}")
    return rng
