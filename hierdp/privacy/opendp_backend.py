"""Secure-mode bulk sampling through OpenDP (its exact samplers, fed by OS randomness).

OpenDP's integer Laplace and Gaussian measurements sample the discrete Laplace and the discrete
Gaussian exactly (rational arithmetic, OS randomness); calling them on a vector of zeros returns
pure noise. This is the ``"opendp"`` backend of :class:`~hierdp.privacy.rng.SecureRandom`: an
independent implementation of the same laws as hierdp's default vectorized sampler
(:mod:`hierdp.privacy.secure_sampling`), kept as an option and as a cross-check in the tests. It
costs about 20-35 µs a draw.

OpenDP takes the Gaussian's σ, not σ²: we pass the smallest float σ whose exact square is at
least σ² (checked with fractions), so the noise is never smaller than the accounting assumes.
Samples are 64-bit integers (OpenDP's ``int`` is 32-bit and saturates at ±2³¹, which would put a
point mass on the clamp); scales above :data:`MAX_SCALE` (where even 64-bit saturation stops
being negligible) are refused here and drawn by another backend instead.

OpenDP runs each call in native code that Python cannot interrupt, so vectors are sent in
chunks of :data:`CALL_SIZE` entries (well under a second each): a Ctrl-C acts between chunks.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import numpy as np


#: largest noise scale (σ or Laplace scale) sent to OpenDP: P(|noise| >= 2**63) is nil below it
MAX_SCALE = 2.0 ** 50
#: entries per OpenDP call (~0.3-0.6 s at 20-35 µs a draw), so that a Ctrl-C is not held up
CALL_SIZE = 1 << 14


@lru_cache(maxsize=1)
def opendp_available() -> bool:
    """True when OpenDP can be imported here."""
    try:
        pass
    except Exception:
        return False
    return True


@lru_cache(maxsize=256)
def _measurement(kind: str, scale: float):
    import opendp.prelude as dp

    dp.enable_features("contrib")
    domain = dp.vector_domain(dp.atom_domain(T="i64"))
    if kind == "gaussian":
        return dp.m.make_gaussian(domain, dp.l2_distance(T="i64"), scale=scale)
    return dp.m.make_laplace(domain, dp.l1_distance(T="i64"), scale=scale)


def _sigma_at_least(sigma2: float) -> float:
    """The smallest float σ with σ² >= sigma2 exactly."""
    target = Fraction(sigma2)
    s = math.sqrt(sigma2)
    while Fraction(s) ** 2 < target:
        s = math.nextafter(s, math.inf)
    while s > 0 and Fraction(math.nextafter(s, 0.0)) ** 2 >= target:
        s = math.nextafter(s, 0.0)
    return s


def _bulk(kind: str, params: np.ndarray) -> np.ndarray:
    flat = params.ravel()
    out = np.empty(flat.size, dtype=np.int64)
    uniq, inverse = np.unique(flat, return_inverse=True)
    inverse = inverse.ravel()
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(uniq.size + 1))
    for j, value in enumerate(uniq):  # one OpenDP measurement per distinct scale
        where = order[bounds[j]:bounds[j + 1]]
        scale = _sigma_at_least(float(value)) if kind == "gaussian" else float(value)
        if scale > MAX_SCALE:
            raise ValueError(f"noise scale {scale:g} above the OpenDP backend's limit {MAX_SCALE:g}")
        measure = _measurement(kind, scale)
        for start in range(0, where.size, CALL_SIZE):  # interruptible between calls
            part = where[start:start + CALL_SIZE]
            out[part] = np.asarray(measure([0] * part.size), dtype=np.int64)
    return out.reshape(params.shape)


def opendp_discrete_gaussian(sigma2: np.ndarray) -> np.ndarray:
    """Discrete Gaussian noise N_Z(0, σ²) (σ rounded up to a float), one draw per entry."""
    return _bulk("gaussian", np.asarray(sigma2, dtype=float))


def opendp_discrete_laplace(scale: np.ndarray) -> np.ndarray:
    """Discrete Laplace noise ∝ exp(-|x|/scale), one draw per entry."""
    return _bulk("laplace", np.asarray(scale, dtype=float))
