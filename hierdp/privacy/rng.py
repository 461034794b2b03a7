"""Sources of randomness: seeded numpy generators for experiments, OS randomness for releases.

Two modes, chosen once with :func:`make_rng` and passed to every sampler in
:mod:`hierdp.privacy.samplers`. **Secure is the default**: ``make_rng()`` and every mechanism's
``release(data)`` without a seed use OS randomness and exact samplers; seeded randomness is opt-in
(a ``seed=`` or a numpy generator) and every release records which one it used
(:func:`secure_by_default`). Where hierdp draws a seed for a caller who asked for seeded randomness
without one, the seed has :data:`SEED_BITS` = 128 bits (:func:`draw_seed`) and is recorded.

* **Seeded numpy mode** (``make_rng(seed)`` -> :class:`numpy.random.Generator`) is for
  *reproducible experiments*: a run is replayed exactly from its seed, and whole levels are drawn
  at once with vectorized numpy code. The samplers follow the exact algorithms, but their
  arithmetic is floating point (acceptance probabilities, geometric inversion) and numpy's PRNG
  is not cryptographic, so this mode is **not** hardened against floating-point or timing side
  channels. Do not use it to publish real data.
* **Secure mode** (``make_rng(secure=True)`` -> :class:`SecureRandom`) is for *real releases*:
  every bit comes from the operating system (:func:`os.urandom` / :mod:`secrets`), no seed can
  be given, and the discrete samplers are exact: they use only integer and rational arithmetic
  (the algorithms of Canonne, Kamath & Steinke 2020), so the output distribution is exactly the
  discrete Laplace or discrete Gaussian with the given parameter (a Fraction, or a float at its
  exact binary value). Backends:

  - ``"vectorized"`` (default): :mod:`hierdp.privacy.secure_sampling`, the same exact
    algorithms run on whole vectors with numpy int64 arithmetic over buffers of OS random
    bytes -- millions of draws a second, 34-80x OpenDP (``experiments/bench/
    secure_sampling.py``), interruptible within a fraction of a second.
  - ``"opendp"``: OpenDP's exact samplers (``pip install 'hierdp[secure]'``), ~20-35 µs a
    draw; an independent implementation, kept as an option and as a cross-check.
  - ``"python"``: the scalar methods of :class:`SecureRandom` below, one draw at a time.

  Running time depends on the values drawn (as for any rejection sampler): do not publish
  per-entry timings of a release.
"""

from __future__ import annotations

import math
import secrets
from fractions import Fraction
from typing import TypeAlias

import numpy as np

from hierdp.privacy.errors import PrivacyParameterError

__all__ = ["BACKENDS", "SEED_BITS", "RandomSource", "SecureRandom", "draw_seed", "make_rng", "resolve_rng",
           "secure_by_default"]

#: secure-mode backends, the default first
BACKENDS = ("vectorized", "opendp", "python")
#: bits of entropy of a seed hierdp draws for a caller (a 32-bit seed is found by brute force in hours)
SEED_BITS = 128

_ONE = Fraction(1)
# Secure continuous Laplace: the grid is at most scale * 2**-_LAPLACE_GRID_BITS, and never coarser
# than 1 (2**_LAPLACE_MAX_GRID_EXP): on a grid of 2**k with k >= 1 a draw added to an integer would
# keep the integer's residue mod 2**k, i.e. publish its low bits (issue 20, P8).
_LAPLACE_GRID_BITS = 40
_LAPLACE_MAX_GRID_EXP = 0


class SecureRandom:
    """Exact samplers driven only by OS randomness; no seed allowed.

    Pass it as ``rng`` to the samplers of :mod:`hierdp.privacy.samplers`, which draw whole
    arrays through :attr:`backend` (see the module docstring). The scalar methods below are the
    reference implementation of Algorithms 1-3 of Canonne, Kamath & Steinke (2020), "The
    Discrete Gaussian for Differential Privacy", with Python integers and
    :class:`fractions.Fraction` only (no rounding ever enters the sampled distribution); they
    are the ``"python"`` backend and the exact fallback of the vectorized one.
    """

    __slots__ = ("backend",)

    def __init__(self, seed: object = None, *, backend: str = "vectorized") -> None:
        """``backend``: ``"vectorized"`` (default; exact CKS20 on whole vectors), ``"opendp"``
        (OpenDP's exact samplers) or ``"python"`` (the scalar methods below, one entry at a
        time). ``"auto"`` is accepted as a synonym of the default."""
        if seed is not None:
            raise PrivacyParameterError(
                f"seed: SecureRandom draws from the operating system and cannot be seeded "
                f"(got seed={seed!r}); use make_rng(seed) for reproducible experiments")
        if backend not in (*BACKENDS, "auto"):
            raise PrivacyParameterError(
                f"backend must be one of {', '.join(map(repr, BACKENDS))} (or 'auto'), got {backend!r}")
        if backend == "opendp":
            from hierdp.privacy.opendp_backend import opendp_available

            if not opendp_available():
                raise PrivacyParameterError("backend 'opendp' requested but opendp is not "
                                            "installed (pip install 'hierdp[secure]')")
        self.backend = "vectorized" if backend == "auto" else backend

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
        """Laplace(scale) discretised to a dyadic grid ``2**k <= min(scale * 2**-40, 1)``, sampled
        exactly.

        A floating-point Laplace sample leaks through its low-order bits (Mironov 2012); drawing
        an exact discrete Laplace on a power-of-two grid and scaling it (exactly representable)
        removes that channel while staying within ``scale * 1e-12`` of the continuous law. The
        grid is never coarser than 1, so a draw added to an integer count never keeps the count's
        residue modulo the grid (at every scale the calibration accepts, up to 2**48).
        """
        if not (math.isfinite(scale) and scale > 0):
            raise PrivacyParameterError(f"scale must be finite and > 0, got {scale!r}")
        _, exponent = math.frexp(scale)  # scale in [2**(exponent-1), 2**exponent)
        k = min(exponent - 1 - _LAPLACE_GRID_BITS, _LAPLACE_MAX_GRID_EXP)
        grid_scale = Fraction(scale) * (Fraction(2) ** -k)
        z = self.discrete_laplace(grid_scale)
        return math.ldexp(float(z), k)  # exact: |z| < 2**53 with overwhelming probability


#: What the samplers accept as randomness.
RandomSource: TypeAlias = np.random.Generator | SecureRandom


def draw_seed() -> int:
    """A fresh seed of :data:`SEED_BITS` (128) bits from the operating system, for a caller who asked
    for seeded randomness without giving a seed: recorded in the release, so the run can be repeated,
    and too large to be found by a search over candidate seeds."""
    return secrets.randbits(SEED_BITS)


def secure_by_default(secure: object, seed: object, rng: object) -> bool:
    """Whether a run is secure when the caller says ``secure`` (``None``: not said).

    The default is secure: OS randomness and exact samplers, unless a ``seed`` or a numpy ``rng``
    is given (seeded randomness is opt-in, for experiments). ``secure=True`` / ``False`` is taken as
    said (type-checked).

    Raises:
        PrivacyParameterError: ``secure`` is neither ``None`` nor a bool.
    """
    if secure is None:
        return seed is None and (rng is None or isinstance(rng, SecureRandom))
    if type(secure).__name__ not in ("bool", "bool_"):
        raise PrivacyParameterError(f"secure must be True, False or None, got {secure!r}")
    return bool(secure)


def make_rng(seed: int | np.random.Generator | None = None, *,
             secure: bool | None = None) -> np.random.Generator | SecureRandom:
    """The randomness every sampler takes.

    Args:
        seed: seed of a reproducible numpy generator. An existing
            :class:`numpy.random.Generator` is returned unchanged.
        secure: return a :class:`SecureRandom` (OS randomness, exact samplers, the vectorized
            backend) for real releases. A seed is refused in this mode: a seeded release is not
            private. ``None`` (default): secure unless a seed is given; ``secure=False`` without a
            seed is a numpy generator seeded from fresh entropy (not reproducible: prefer a seed).

    Raises:
        PrivacyParameterError: ``secure=True`` together with a seed.
    """
    if secure_by_default(secure, seed, None):
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
    :class:`SecureRandom` and no seed may be given. A seed next to a :class:`SecureRandom` is
    refused too: it would be silently ignored and suggest a reproducibility that does not exist.

    Raises:
        PrivacyParameterError: ``secure=True`` with a numpy generator or a seed; a seed with a
            :class:`SecureRandom`; an ``rng`` that is neither.
    """
    if rng is None:
        return make_rng(seed, secure=secure)
    if seed is not None and (secure or isinstance(rng, SecureRandom)):
        raise PrivacyParameterError(
            f"seed: secure randomness cannot be seeded (got seed={seed!r} with "
            f"rng={type(rng).__name__}); drop the seed for a release, or use make_rng(seed) "
            "without secure=True for a reproducible experiment")
    if secure and not isinstance(rng, SecureRandom):
        raise PrivacyParameterError(
            f"rng: this mechanism was created with secure=True but got a {type(rng).__name__}; "
            "pass make_rng(secure=True) or nothing")
    if not isinstance(rng, (SecureRandom, np.random.Generator)):
        raise PrivacyParameterError(f"rng must be a numpy Generator or SecureRandom, got {type(rng).__name__}")
    return rng
