"""The matrix form of a spine (paper 003 §3) and the WLS variance of queries (eq. 18-19), for small
spines (dense linear algebra; a few thousand block-cells at most).

* ``B = stack(B[0], ..., B[L])``: one row per geounit (level by level), one column per block;
  ``B[u, b] = 1`` when block b lies in geounit u (eq. 11). ``kron(B, W)`` is the workload V = B ⊗ W.
* the strategy of an (optimized) spine keeps only measured geounits (γ > 0: Theorem 3 drops the
  rows with infinite noise) and each row's noise variance:
  pure ε-DP (Laplace, scale b = Δ₁ / (ε γ α)): variance 2 b²;
  ρ-zCDP (Gaussian): variance σ² = Δ₂² / (2 ρ γ α).
  With the Census's bounded neighbours Δ₁ = 2 and Δ₂² = 2 per query group (Lemma 4).
* ``Var(V x̂) = V (Sᵀ Σ⁻¹ S)⁻¹ Vᵀ`` for the weighted least-squares estimate x̂ (eq. 19; the paper's
  rescaled S̃ folds Σ⁻¹ in and drops constants, which never change a comparison).

These are the numbers Theorem 2 is about; the tests check with them that a pure-DP bypass never
increases any query's variance (and that the difference of the variance matrices is PSD).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any
from collections.abc import Sequence

import numpy as np

from hierdp.spines.core import Spine, SpineError, as_fraction

__all__ = ["entity_rows", "spine_matrix", "strategy", "wls_variance", "workload"]


def spine_matrix(spine: Spine, *, measured_only: bool = False) -> Any:
    """``B`` as a ``scipy.sparse.csr_matrix`` (geounits x blocks), rows in spine order."""
    from scipy.sparse import csr_matrix

    anc = spine.block_of_geounit()  # (n_blocks, n_levels)
    nb = spine.n_blocks
    rows = anc.T.ravel()
    cols = np.tile(np.arange(nb), spine.n_levels)
    mat = csr_matrix((np.ones(rows.size), (rows, cols)), shape=(spine.n, nb))
    if measured_only:
        mat = mat[np.flatnonzero(spine.measured)]
    return mat


def entity_rows(spine: Spine, entities: Any) -> Any:
    """One 0/1 row per entity over the blocks (an off-spine query ``V`` before ``⊗ W``)."""
    from hierdp.spines.entities import Entities

    return Entities.coerce(spine, entities).indicator()


def workload(rows: Any, W: np.ndarray) -> Any:
    """``rows ⊗ W`` (sparse): every row's queries of ``W`` over the stacked block histograms."""
    from scipy.sparse import csr_matrix, kron

    return kron(csr_matrix(rows), csr_matrix(np.asarray(W, dtype=float)), format="csr")


def _noise_variance(calculus: str, budget: Fraction, share: Fraction, sensitivity: float) -> float:
    if calculus == "pure":
        b = sensitivity / float(budget * share)
        return 2.0 * b * b
    if calculus == "zcdp":
        return sensitivity / (2.0 * float(budget * share))  # sensitivity = Δ₂²
    raise SpineError(f"calculus must be 'pure' or 'zcdp', got {calculus!r}")


def strategy(spine: Spine, groups: Sequence[np.ndarray], shares: Sequence[Any], *, calculus: str = "zcdp",
             budget: Any = 1, sensitivity: float = 2.0) -> tuple[Any, np.ndarray]:
    """The measured rows and their noise variances: ``(S, variance)``.

    ``S = stack over measured geounits u and query groups q of (B[u] ⊗ Q_q)``; the noise of a row
    of (u, q) has the variance of a query at budget ``budget * γ_u * share_q`` (see the module
    docstring). ``sensitivity`` is Δ₁ (pure) or Δ₂² (zCDP) of one query group: 2 for bounded
    neighbours (Lemma 4).
    """
    from scipy.sparse import vstack

    shares_f = [as_fraction(a, f"shares[{i}]") for i, a in enumerate(shares)]
    if len(shares_f) != len(groups):
        raise SpineError("one share per query group")
    if any(a <= 0 for a in shares_f) or sum(shares_f, Fraction(0)) != 1:
        raise SpineError("query shares must be > 0 and sum to exactly 1")
    B = spine_matrix(spine)
    meas = np.flatnonzero(spine.measured)
    tot = as_fraction(budget, "budget")
    blocks, var = [], []
    for Q, a in zip(groups, shares_f, strict=False):
        Q = np.atleast_2d(np.asarray(Q, dtype=float))
        blocks.append(workload(B[meas], Q))
        v = np.array([_noise_variance(calculus, tot, spine.gamma(u) * a, sensitivity) for u in meas])
        var.append(np.repeat(v, Q.shape[0]))
    return vstack(blocks, format="csr"), np.concatenate(var)


def wls_variance(spine: Spine, groups: Sequence[np.ndarray], shares: Sequence[Any], V: Any, *,
                 calculus: str = "zcdp", budget: Any = 1, sensitivity: float = 2.0, full: bool = False) -> np.ndarray:
    """``Var(V x̂) = V (Sᵀ Σ⁻¹ S)⁻¹ Vᵀ`` (dense): its diagonal, or the whole matrix with ``full``.

    ``V`` has one column per (block, cell) in the order of ``B ⊗ W`` (blocks in spine order).
    Raises if the strategy does not determine every cell (``SᵀΣ⁻¹S`` singular).
    """
    S, var = strategy(spine, groups, shares, calculus=calculus, budget=budget, sensitivity=sensitivity)
    S = S.toarray()
    info = S.T @ (S / var[:, None])
    try:
        cov = np.linalg.inv(info)
    except np.linalg.LinAlgError:
        raise SpineError("the strategy does not determine every block cell (include the detailed query)") from None
    Vd = V.toarray() if hasattr(V, "toarray") else np.asarray(V, dtype=float)
    out = Vd @ cov @ Vd.T
    return out if full else np.diag(out).copy()
