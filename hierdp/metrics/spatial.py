"""Accuracy of spatial releases (paper 002 §5.1): mean relative error on random range queries.

A workload is a ``(Q, 4)`` int64 array of cell rectangles ``[r0, r1, c0, c1]`` (half-open) on the
release's grid:

* :func:`random_rectangles` - "random shape and size": side lengths uniform in
  ``[max(1, ceil(min_side_fraction * side)), side]`` along each axis independently, lower-left corner
  uniform over the positions where the rectangle fits (paper 002 notes A9);
* :func:`random_squares` - squares covering a fraction of the domain (2 %, 6 %, 10 % in the paper):
  side ``round(sqrt(f rows cols))`` cells (clamped to the grid), corner uniform where it fits.

:func:`relative_errors` is ``|answer - true| / max(true, smoothing)`` with smoothing 20 (the
standard of DPBench, PrivTree and AG, which paper 002 follows); :func:`mean_relative_error` reports
its mean in percent. Everything is vectorized over the whole workload.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = [
    "SMOOTHING",
    "mean_relative_error",
    "mre",
    "random_rectangles",
    "random_squares",
    "relative_errors",
]

#: smoothing of the relative error (paper 002 §5.1)
SMOOTHING = 20.0


def _check_shape(shape: Any) -> tuple[int, int]:
    if not isinstance(shape, (tuple, list)) or len(shape) != 2 or any(
            isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1 for s in shape):
        raise ValueError(f"shape must be (rows, cols) of positive ints, got {shape!r}")
    return int(shape[0]), int(shape[1])


def _check_count(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    return int(n)


def random_rectangles(shape: tuple[int, int], n: int, rng: np.random.Generator | int | None = None, *,
                      min_side_fraction: float = 0.01) -> np.ndarray:
    """``n`` rectangles of random shape and size, placed uniformly where they fit (``(n, 4)`` int64)."""
    rows, cols = _check_shape(shape)
    n = _check_count(n)
    if not 0 < min_side_fraction <= 1:
        raise ValueError(f"min_side_fraction must be in (0, 1], got {min_side_fraction!r}")
    g = np.random.default_rng(rng)
    lo_r = max(1, math.ceil(min_side_fraction * rows))
    lo_c = max(1, math.ceil(min_side_fraction * cols))
    h = g.integers(lo_r, rows + 1, n)
    w = g.integers(lo_c, cols + 1, n)
    r0 = g.integers(0, rows - h + 1)
    c0 = g.integers(0, cols - w + 1)
    return np.stack([r0, r0 + h, c0, c0 + w], axis=1).astype(np.int64)


def random_squares(shape: tuple[int, int], n: int, fraction: float, rng: np.random.Generator | int | None = None
                   ) -> np.ndarray:
    """``n`` squares covering ``fraction`` of the domain each (side ``round(sqrt(f rows cols))``),
    placed uniformly where they fit."""
    rows, cols = _check_shape(shape)
    n = _check_count(n)
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction!r}")
    g = np.random.default_rng(rng)
    side = max(1, round(math.sqrt(fraction * rows * cols)))
    sr, sc = min(side, rows), min(side, cols)
    r0 = g.integers(0, rows - sr + 1, n)
    c0 = g.integers(0, cols - sc + 1, n)
    return np.stack([r0, r0 + sr, c0, c0 + sc], axis=1).astype(np.int64)


def relative_errors(answers: np.ndarray, truth: np.ndarray, smoothing: float = SMOOTHING) -> np.ndarray:
    """``|answers - truth| / max(truth, smoothing)`` per query."""
    a = np.asarray(answers, dtype=np.float64)
    t = np.asarray(truth, dtype=np.float64)
    if a.shape != t.shape:
        raise ValueError(f"answers {a.shape} and truth {t.shape} differ in shape")
    if not smoothing > 0:
        raise ValueError(f"smoothing must be > 0, got {smoothing!r}")
    return np.abs(a - t) / np.maximum(t, smoothing)


def mean_relative_error(answers: np.ndarray, truth: np.ndarray, smoothing: float = SMOOTHING) -> float:
    """Mean relative error in percent (paper 002 eq. 3 with smoothing)."""
    return float(100.0 * relative_errors(answers, truth, smoothing).mean())


def mre(release: Any, grid: Any, queries: np.ndarray, smoothing: float = SMOOTHING) -> float:
    """MRE (percent) of a :class:`~hierdp.release.spatial.SpatialRelease` on a workload, against the
    true counts of ``grid`` (a :class:`~hierdp.hierarchy.spatial.SpatialGrid`)."""
    if getattr(release, "domain", None) is None or release.domain.shape != grid.domain.shape:
        raise ValueError("the release and the grid must share one grid")
    return mean_relative_error(release.answer(queries), grid.query_counts(queries), smoothing)
