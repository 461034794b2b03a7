"""Exact variances of the Census TopDown's real-valued step, top down (the ``wls`` method).

The Census TopDown (paper 003, :class:`~hierdp.mechanisms.census.CensusTopDown`) solves, per parent
p, a weighted least squares over its children's query answers with the children's histograms
summing to the parent's released one, then non-negativity and an integer rounder. Without the last
two (the *real-valued step*), every child's estimate is linear in the noise: with ``H_c = Σ_q w_q
Q_qᵀQ_q`` the information of child c's measurements (weights ``1/variance``, as the mechanism
weighs them) and ``S_p = Σ_c H_c⁻¹``,

    x_c = x^u_c + H_c⁻¹ S_p⁻¹ (x̂_p - Σ_s x^u_s),    x^u_c = H_c⁻¹ Σ_q w_q Q_qᵀ a_{c,q},

so its error covariance follows from the parent's, geolevel by geolevel (a top-down pass):

    V_c = H_c⁻¹ - H_c⁻¹ S_p⁻¹ H_c⁻¹ + H_c⁻¹ S_p⁻¹ V_p S_p⁻¹ H_c⁻¹,

``V_root = H⁻¹ - H⁻¹11ᵀH⁻¹ / (1ᵀH⁻¹1)`` (the public total fixed), a single child copying its parent
(``V_c = V_p``). This is the TopDown's own variance, larger than the full-information GLS variance
of :mod:`hierdp.spines.variance` (whose bottom-up pass also lets children inform their parents).
``value ± z sqrt(diag V)`` is a normal-approximation estimate that ignores non-negativity and
rounding: close to nominal where cells are large, and refused for invariants below the root.
The test checks V against the covariance of the same estimator computed densely (its linear map
applied to every unit noise vector).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from hierdp.intervals.errors import IntervalsUnsupported

__all__ = ["MAX_WLS_CELLS", "census_information", "census_topdown_covariances"]


#: above this many cells the dense K x K covariances of every geounit do not fit (PL94: 2,016)
MAX_WLS_CELLS = 512


def census_information(mechanism: Any, spine: Any, n_cells: int) -> tuple[np.ndarray, np.ndarray]:
    """``(H_inv, which)``: the inverse information ``H⁻¹`` (K x K) of each distinct (geolevel
    shares, measured proportion), and the index of each geounit's (-1: unmeasured), with the
    mechanism's own weights (per-geolevel shares where the strategy has them)."""
    from hierdp.mechanisms.census import QueryStrategy
    from hierdp.mechanisms.census.mechanism import _variance
    from hierdp.privacy.calibration import exact

    K = int(n_cells)
    if K > MAX_WLS_CELLS:
        raise IntervalsUnsupported(f"the wls variances are dense K x K per geounit: {K} cells is beyond "
                                   f"{MAX_WLS_CELLS} (use the bootstrap)")
    strategy = mechanism.strategy or QueryStrategy((K,), {"total": (), "detailed": (0,)},
                                                   {"total": Fraction(1, 2), "detailed": Fraction(1, 2)})
    total = exact(mechanism.spec.budget, "budget")
    sens = mechanism.noise.sensitivity(mechanism.unit, finest=False)
    m = np.asarray(spine.measured, bool)
    level = np.asarray(spine.level, np.int64)
    # the shares a geounit's groups get depend on its geolevel; the scale also on its proportion
    keys = np.stack([level[m], np.asarray(spine.gamma_num)[m]], axis=1)
    distinct, inverse = np.unique(keys, axis=0, return_inverse=True)
    h_inv = np.empty((distinct.shape[0], K, K))
    for i, (lev, gnum) in enumerate(distinct):
        shares = strategy.shares_at(str(spine.level_names[int(lev)]))
        H = np.zeros((K, K))
        for g in strategy.groups:
            amount = total * Fraction(int(gnum), spine.gamma_den) * shares[g]
            param = mechanism.noise.calibrate(amount, sens, culprit="intervals")
            Q = strategy.group_matrix(g).astype(float)
            H += Q.T @ Q / _variance(mechanism.noise, param)
        h_inv[i] = np.linalg.inv(H)
    which = np.full(spine.n, -1, np.int64)
    which[m] = np.asarray(inverse).ravel()
    return h_inv, which


def census_topdown_covariances(mechanism: Any, spine: Any, n_cells: int) -> np.ndarray:
    """``(n_geounits, K, K)``: the error covariance of every geounit's real-valued TopDown estimate.

    Raises:
        IntervalsUnsupported: invariants below the root, or an unmeasured geounit with siblings.
    """
    inv_levels = mechanism._invariant_levels(spine)
    if any(lv > 0 for lv in inv_levels):
        raise IntervalsUnsupported("the wls variances of the Census TopDown are for the root invariant only "
                                   f"(invariant geolevels {inv_levels})")
    h_inv, which = census_information(mechanism, spine, n_cells)
    K = int(n_cells)
    V = np.zeros((spine.n, K, K))
    A = h_inv[which[0]]
    one = np.ones(K)
    a1 = A @ one
    V[0] = A - np.outer(a1, a1) / float(one @ a1)
    ptr, child = spine.children_csr()
    lp = spine.level_ptr
    for lev in range(1, spine.n_levels):
        parents = np.arange(lp[lev - 1], lp[lev])
        counts = np.diff(ptr)[parents]
        single = parents[counts == 1]
        V[child[ptr[single]]] = V[single]
        multi = parents[counts > 1]
        if multi.size == 0:
            continue
        cnt = np.diff(ptr)[multi]
        kids = child[np.repeat(ptr[multi], cnt) + (np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt))]
        if np.any(which[kids] < 0):
            raise IntervalsUnsupported("an unmeasured geounit has siblings")
        local = np.repeat(np.arange(multi.size), cnt)
        Ak = h_inv[which[kids]]                       # (C, K, K)
        S = np.zeros((multi.size, K, K))
        np.add.at(S, local, Ak)
        S_inv = np.linalg.inv(S)[local]                # (C, K, K)
        T = Ak @ S_inv                                 # H_c^-1 S_p^-1
        V[kids] = Ak - T @ Ak + T @ V[multi][local] @ np.swapaxes(T, 1, 2)
    return V
