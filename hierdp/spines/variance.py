"""The WLS (GLS) variance of every geounit's estimate on large spines: the two-pass algorithm.

:func:`~hierdp.spines.matrices.wls_variance` inverts the dense information matrix over all block
cells, which stops at a few thousand block-cells. The estimate has tree structure, so the same
covariances follow from two passes over the geolevels (the Census's "full-information" two-pass
estimator, arXiv 2404.13164).

**Separability.** A measured geounit u answers query group q with noise variance
``Δ₂² / (2 B γ_u α_q)`` (zCDP) or ``2 (Δ₁ / (B γ_u α_q))²`` (pure), so its own information matrix
is ``J_u = c_u J₀`` with ``J₀ = sum_q Q_qᵀ Q_q / var(γ = 1, q)`` and ``c_u = γ_u`` (zCDP) or
``γ_u²`` (pure); ``c_u = 0`` when unmeasured. Every step below keeps that form, so each geounit's
covariance is ``V_u = v_u J₀⁻¹`` with a *scalar* ``v_u`` from the two passes run on the c_u:

* **bottom-up** (information of u's estimate from its subtree's measurements):
  ``i_u = c_u + 1 / sum_c g_c`` over u's children (``i_u = c_u + i_c`` for a single child;
  ``i_u = c_u`` for a block); ``g_u = 1 / i_u``, ``s_u = sum_c g_c``;
* **top-down** (all measurements; Gaussian conditioning on the children's sum):
  ``v_root = g_root``; for a child c of p with siblings: ``a_c = g_c / s_p``,
  ``v_c = g_c + a_c² (v_p − s_p)``; a single child equals its parent: ``v_c = v_p``.

``V_u`` is the diagonal block of ``Var((B ⊗ I) x̂)`` for u; the tests check it against the dense
formula on random small spines (bypassed, unequal proportions, pure and zCDP). Time and memory are
O(#geounits), vectorized per geolevel. Cross-covariances between geounits (an off-spine entity
composed of several geounits) are not computed here: use the dense ``wls_variance`` on small
spines.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any
from collections.abc import Sequence

import numpy as np

from hierdp.spines.core import Spine, SpineError, as_fraction
from hierdp.spines.matrices import _noise_variance

__all__ = ["geounit_covariances", "geounit_query_variances", "geounit_variance_factors", "unit_information"]


def geounit_variance_factors(spine: Spine, calculus: str = "zcdp") -> np.ndarray:
    """``(n_geounits,)`` scalars ``v_u``: geounit u's WLS covariance is ``v_u J₀⁻¹`` (module docstring).

    Raises:
        SpineError: the spine fails the Theorem 3 check (an unmeasured geounit with siblings makes
            the estimate undetermined) or ``calculus`` is unknown.
    """
    if calculus not in ("pure", "zcdp"):
        raise SpineError(f"calculus must be 'pure' or 'zcdp', got {calculus!r}")
    spine.check_path_sums()
    gamma = spine.gamma_num / float(spine.gamma_den)
    info = gamma ** 2 if calculus == "pure" else gamma.copy()
    n = spine.n
    ptr, child = spine.children_csr()
    nch = np.diff(ptr)
    lp = spine.level_ptr
    g = np.zeros(n)
    s = np.zeros(n)
    for lev in range(spine.n_levels - 1, -1, -1):
        idx = np.arange(lp[lev], lp[lev + 1])
        if lev < spine.n_levels - 1:
            single = idx[nch[idx] == 1]
            info[single] += info[child[ptr[single]]]
            multi = idx[nch[idx] > 1]
            if multi.size:
                cnt = nch[multi]
                first = np.concatenate([[0], np.cumsum(cnt)[:-1]])
                kids = child[np.repeat(ptr[multi] - first, cnt) + np.arange(cnt.sum())]
                s[multi] = np.add.reduceat(g[kids], first)
                info[multi] += 1.0 / s[multi]
        # g is needed for the root and for children with siblings (a single child may have no
        # information of its own: unmeasured after a bypass, it equals its parent)
        need = idx[(spine.parent[idx] < 0) | (nch[np.maximum(spine.parent[idx], 0)] > 1)]
        if (info[need] <= 0).any():  # impossible after the Theorem 3 check; kept as a guard
            u = int(need[np.flatnonzero(info[need] <= 0)[0]])
            raise SpineError(f"geounit {spine.names[u]!r}: no measurement in its subtree determines it")
        g[need] = 1.0 / info[need]
    v = np.zeros(n)
    v[0] = g[0]
    for lev in range(1, spine.n_levels):
        parents = np.arange(lp[lev - 1], lp[lev])
        single = parents[nch[parents] == 1]
        v[child[ptr[single]]] = v[single]
        multi = parents[nch[parents] > 1]
        if multi.size:
            cnt = nch[multi]
            first = np.concatenate([[0], np.cumsum(cnt)[:-1]])
            kids = child[np.repeat(ptr[multi] - first, cnt) + np.arange(cnt.sum())]
            p_of = np.repeat(multi, cnt)
            a = g[kids] / s[p_of]
            v[kids] = g[kids] + a * a * (v[p_of] - s[p_of])
    return v


def unit_information(groups: Sequence[np.ndarray], shares: Sequence[Any], *, calculus: str = "zcdp",
                     budget: Any = 1, sensitivity: float = 2.0) -> np.ndarray:
    """``J₀`` (K x K): the information of one geounit's measurements at proportion γ = 1."""
    mats = [np.atleast_2d(np.asarray(Q, dtype=float)) for Q in groups]
    shares_f = [as_fraction(a, f"shares[{i}]") for i, a in enumerate(shares)]
    if len(shares_f) != len(mats):
        raise SpineError("one share per query group")
    if any(a <= 0 for a in shares_f) or sum(shares_f, Fraction(0)) != 1:
        raise SpineError("query shares must be > 0 and sum to exactly 1")
    K = mats[0].shape[1]
    if any(Q.shape[1] != K for Q in mats):
        raise SpineError("every query group needs the same number of cells")
    tot = as_fraction(budget, "budget")
    J0 = sum(Q.T @ Q / _noise_variance(calculus, tot, a, sensitivity) for Q, a in zip(mats, shares_f, strict=False))
    if np.linalg.matrix_rank(J0) < K:
        raise SpineError("the strategy does not determine every cell (include the detailed query)")
    return J0


def geounit_covariances(spine: Spine, groups: Sequence[np.ndarray], shares: Sequence[Any], *,
                        calculus: str = "zcdp", budget: Any = 1, sensitivity: float = 2.0) -> np.ndarray:
    """``(n_geounits, K, K)``: the covariance of every geounit's WLS histogram estimate.

    Same measurement model and arguments as :func:`~hierdp.spines.matrices.wls_variance` (query
    group matrices ``groups`` over K cells, exact ``shares`` summing to 1, ``calculus`` "pure" or
    "zcdp", ``sensitivity`` Δ₁ or Δ₂² of one group). Materializes n K² numbers: for large spines
    prefer :func:`geounit_query_variances`.

    Raises:
        SpineError: the spine fails the Theorem 3 check, shares are invalid, or the strategy does
            not determine every cell.
    """
    J0 = unit_information(groups, shares, calculus=calculus, budget=budget, sensitivity=sensitivity)
    v = geounit_variance_factors(spine, calculus)
    return v[:, None, None] * np.linalg.inv(J0)[None]


def geounit_query_variances(spine: Spine, groups: Sequence[np.ndarray], shares: Sequence[Any],
                            queries: np.ndarray | None = None, *, calculus: str = "zcdp", budget: Any = 1,
                            sensitivity: float = 2.0) -> np.ndarray:
    """``(n_geounits, R)``: the WLS variance of every geounit's answer to each row of ``queries``
    (default: the strategy's query groups stacked, i.e. ``W``): ``v_u · diag(Q J₀⁻¹ Qᵀ)``.
    O(n R) memory: fine for spines of millions of geounits."""
    J0 = unit_information(groups, shares, calculus=calculus, budget=budget, sensitivity=sensitivity)
    Q = np.vstack([np.atleast_2d(np.asarray(g, dtype=float)) for g in groups]) if queries is None \
        else np.atleast_2d(np.asarray(queries, dtype=float))
    per_unit = np.einsum("rk,kl,rl->r", Q, np.linalg.inv(J0), Q)
    return geounit_variance_factors(spine, calculus)[:, None] * per_unit[None, :]
