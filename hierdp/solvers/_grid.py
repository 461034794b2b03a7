"""Targets and weights on a grid ``1/S``: where a general solver's objective becomes an integer.

Noise of the geometric or discrete Gaussian mechanism is an integer, so the noisy targets of most
releases are integers (``S = 1``); binary or decimal fractions are common too. On a grid,
``S x`` and ``S_w w`` are exact integers and every deviation ``w |y - x|`` of an integer ``y`` is
a multiple of ``1 / (S S_w)``: CP-SAT (integer coefficients only) and HiGHS's integer L∞ model
(an integer objective variable per group) use this.
"""

from __future__ import annotations

import numpy as np

__all__ = ["GRIDS", "grid_scale"]

#: the grids tried: powers of two up to 2^20 and of ten up to 10^6
GRIDS = sorted({2 ** k for k in range(21)} | {10 ** k for k in range(1, 7)})


def grid_scale(values: np.ndarray) -> int | None:
    """Smallest ``S`` in {1, 2, 4, ..., 2^20, 10, ..., 10^6} with every value exactly ``m / S``, else None."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return 1
    for s in GRIDS:
        m = np.rint(v * s)
        if np.all(m / s == v):
            return s
    return None
