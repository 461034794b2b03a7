"""The linear maps of paper 001's cumulative mechanisms, vectorized over regions and sizes.

* :func:`cumulative` / :func:`inverse_cumulative` - Γ and Γ⁻¹ (§8): ``Γ(c)_k = sum_{j<=k} c_j``.
* :func:`level_vectors` - the level-wide running sums of §9.2.1 in chain order (size-major,
  regions of the level in index order = post-order restricted to the level).
* :func:`chain_targets_from_region_cumulatives` - per-region cumulatives mapped to chain
  coordinates (the chain mechanism's default measurement: linear post-processing of noise
  calibrated with Lemma 6).
* :func:`chain_to_histograms` - chain coordinates back to histograms (differences along a level).

Arrays are size-major: ``(K, n_regions)``.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "chain_targets_from_region_cumulatives",
    "chain_to_histograms",
    "cumulative",
    "inverse_cumulative",
    "level_vectors",
    "round_half_up",
]


def cumulative(by_size: np.ndarray) -> np.ndarray:
    """Γ per region: cumulative sums over sizes (axis 0)."""
    return np.cumsum(by_size, axis=0)


def inverse_cumulative(s: np.ndarray) -> np.ndarray:
    """Γ⁻¹ per region: ``c_k = s_k - s_{k-1}`` (``s_0 = 0``)."""
    return np.diff(s, axis=0, prepend=np.zeros((1, s.shape[1]), dtype=s.dtype))


def round_half_up(x: np.ndarray) -> np.ndarray:
    """``floor(x + 1/2)`` as int64 (the OP baselines' rounding rule, decision A5; monotone)."""
    return np.floor(np.asarray(x, dtype=float) + 0.5).astype(np.int64)


def level_vectors(by_size: np.ndarray, level_ptr: np.ndarray) -> np.ndarray:
    """Level-wide running sums (§9.2.1), one per node, in the ``(K, n_regions)`` layout."""
    out = np.empty(by_size.shape, dtype=np.result_type(by_size.dtype, np.int64))
    for lev in range(level_ptr.size - 1):
        a, b = int(level_ptr[lev]), int(level_ptr[lev + 1])
        block = by_size[:, a:b]
        out[:, a:b] = np.cumsum(block.ravel()).reshape(block.shape)
    return out


def chain_targets_from_region_cumulatives(s: np.ndarray, level_ptr: np.ndarray) -> np.ndarray:
    """Map per-region cumulatives ``s = Γ(c_r)`` (one column per region) to chain coordinates.

    For node ``(k, j)`` of a level with regions ``0..m-1``: ``sum_{j' > j} s[k-1, j'] +
    sum_{j' <= j} s[k, j']`` - exactly the level-wide running sum when ``s`` is exact.
    """
    s = np.asarray(s)
    out = np.empty(s.shape, dtype=np.result_type(s.dtype, np.float64) if s.dtype.kind == "f" else np.int64)
    for lev in range(level_ptr.size - 1):
        a, b = int(level_ptr[lev]), int(level_ptr[lev + 1])
        block = s[:, a:b]
        prev = np.vstack([np.zeros((1, b - a), dtype=block.dtype), block[:-1]])
        cs_prev = np.cumsum(prev, axis=1)
        out[:, a:b] = (prev.sum(axis=1, keepdims=True) - cs_prev) + np.cumsum(block, axis=1)
    return out


def chain_to_histograms(level_values: np.ndarray, level_ptr: np.ndarray) -> np.ndarray:
    """Invert :func:`level_vectors`: differences along each level's chain order."""
    out = np.empty_like(level_values)
    for lev in range(level_ptr.size - 1):
        a, b = int(level_ptr[lev]), int(level_ptr[lev + 1])
        block = level_values[:, a:b]
        flat = block.ravel()
        out[:, a:b] = np.diff(flat, prepend=np.zeros(1, dtype=flat.dtype)).reshape(block.shape)
    return out
