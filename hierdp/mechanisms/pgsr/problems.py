"""Paper 001's post-processing models posed as :class:`~hierdp.models.Problem` s: Model 1 on the
dynamic-programming tree (:func:`histogram_problem`), Model 2 in
cumulative variables (:func:`cumulative_problem`) or with prefix-sum query terms
(:func:`prefix_problem`), and Model 3, the post-order chain (:func:`chain_problem`, with
:func:`chain_target_variances` for its inverse-variance weights)."""

from __future__ import annotations

from typing import Any
from collections.abc import Sequence

import numpy as np

from hierdp.hierarchy.count_of_counts import CountOfCounts, DynProgTree

__all__ = ["chain_problem", "chain_target_variances", "cumulative_problem", "histogram_problem", "prefix_problem"]


def histogram_problem(dp: DynProgTree, noisy_by_size: np.ndarray, *, integer: bool = True,
                      weights: np.ndarray | None = None, objective: str = "l2", lower: np.ndarray | None = None,
                      upper: np.ndarray | None = None) -> Any:
    """Model 1 (H1-H4) on the dynamic-programming tree ``dp``: the root fixed at ``G``, every other
    node's target its noisy count (``(K, n_regions)``), consistency, non-negativity, integrality
    (``integer``); ``lower`` / ``upper``: per-node bounds (a public constraint set's intervals)."""
    from hierdp.models import Problem

    target = np.concatenate([[np.nan], np.asarray(noisy_by_size, dtype=float).ravel()])
    fixed = np.full(dp.n, np.nan)
    fixed[0] = dp.data.G
    w = None if weights is None else np.concatenate([[1.0], np.asarray(weights, dtype=float).ravel()])
    return Problem(dp.parent, target, fixed=fixed, objective=objective, integer=integer, weights=w, lower=lower,
                   upper=upper)


def cumulative_problem(data: CountOfCounts, noisy_cumulative: np.ndarray, *, integer: bool = True,
                       region_totals_public: bool = False, lower: np.ndarray | None = None,
                       upper: np.ndarray | None = None) -> Any:
    """Model 2 (C1-C5) in cumulative variables: node ``(k, r)`` holds ``s_r^k`` (index
    ``(k-1) * n_regions + r``); consistency per size (C4) from the parent array, the national
    ``s^K`` fixed at ``G`` (C2; every ``s_r^K`` fixed at ``G_r`` with public region totals),
    monotone chains over sizes per region (C3), non-negativity and integrality (C5)."""
    from hierdp.models import Problem

    n, K = data.n_regions, data.K
    rp = np.asarray(data.regions.parent, dtype=np.int64)
    base = np.arange(K, dtype=np.int64)[:, None] * n
    parent = np.where(rp[None, :] < 0, -1, base + rp[None, :]).ravel()
    fixed = np.full(n * K, np.nan)
    if region_totals_public:
        fixed[(K - 1) * n + np.arange(n)] = data.group_totals
    else:
        fixed[(K - 1) * n + 0] = data.G
    # implied bounds s_r^k <= s_root^k <= G (G_r when region totals are public): they keep every
    # feasible point; general MIP solvers need a bounded domain for the exact integer-L2 epigraph.
    # (s_r^K <= G_r is *not* implied without public region totals: only the root total is fixed.)
    implied = np.tile(data.group_totals.astype(float), K) if region_totals_public else np.full(n * K, float(data.G))
    upper = implied if upper is None else np.minimum(implied, upper)
    p = Problem(parent, np.asarray(noisy_cumulative, dtype=float).ravel(), fixed=fixed, objective="l2",
                integer=integer, lower=lower, upper=upper)
    chains = (np.arange(K, dtype=np.int64)[None, :] * n + np.arange(n, dtype=np.int64)[:, None])
    if K > 1:
        p.add_monotone_chains(chains, name="cumulative")
    return p


def prefix_problem(data: CountOfCounts, noisy_cumulative: np.ndarray, *, integer: bool = True,
                   lower: np.ndarray | None = None, upper: np.ndarray | None = None) -> Any:
    """Model 2 in histogram variables: the dynamic-programming hierarchy (root fixed at ``G``, C2-C5 as Model 1's
    constraints) with a query-term objective over prefix sums, ``sum (sum_{j<=k} c_r^j - s~_r^k)^2``.
    ``K (K+1) / 2`` non-zeros per region: for small instances and cross-checks."""
    from scipy.sparse import csr_matrix

    dp = data.dynprog_tree()
    n, K = data.n_regions, data.K
    p = histogram_problem(dp, np.full((K, n), np.nan), integer=integer, lower=lower, upper=upper)
    kk = np.arange(1, K + 1)
    per_region = K * (K + 1) // 2
    rows = np.repeat(np.arange(n * K), np.tile(kk, n))  # term (r, k) has k entries
    r_of = rows // K
    j_of = np.concatenate([np.arange(1, k + 1) for k in kk])
    cols = dp.node(np.tile(j_of, n), r_of)
    mat = csr_matrix((np.ones(n * per_region), (rows, cols)), shape=(n * K, dp.n))
    target = np.asarray(noisy_cumulative, dtype=float).T.ravel()  # term index r * K + (k - 1)
    p.add_query_terms(mat, target, name="prefix")
    return p


def chain_problem(data: CountOfCounts, chain_targets: np.ndarray, *, integer: bool = True,
                  weights: np.ndarray | None = None, lower: np.ndarray | None = None,
                  upper: np.ndarray | None = None) -> tuple[Any, np.ndarray]:
    """Model 3 (C6-C10): one variable per position of the post-order chain of the dynamic-programming hierarchy,
    the last (the dummy root) fixed at ``G`` (C7), "=" rows where the chain moves up to a parent
    (C8), monotone rows elsewhere (C9), non-negativity and integrality (C10).

    ``chain_targets`` is ``(K, n_regions)`` in node layout; ``lower`` / ``upper`` are per chain
    position. Returns ``(problem, order)`` with ``order[p]`` the node at chain position ``p``.
    """
    from scipy.sparse import csr_matrix

    from hierdp.models import Problem

    dp = data.dynprog_tree()
    order = dp.chain_order()
    N = order.size
    node_target = np.concatenate([[np.nan], np.asarray(chain_targets, dtype=float).ravel()])
    fixed = np.full(N, np.nan)
    fixed[-1] = data.G
    w = None
    if weights is not None:
        w = np.concatenate([[1.0], np.asarray(weights, dtype=float).ravel()])[order]
    p = Problem(np.full(N, -1, np.int64), node_target[order], fixed=fixed, objective="l2", integer=integer, weights=w,
                lower=lower, upper=upper)
    equal = dp.chain_equal_edges()
    pos = np.arange(1, N, dtype=np.int64)
    ge = pos[~equal]
    if ge.size:
        p.add_monotone_chains(np.stack([ge - 1, ge], axis=1), name="chain_ge")
    eq = pos[equal]
    if eq.size:
        m = eq.size
        mat = csr_matrix((np.tile([-1.0, 1.0], m), np.stack([eq - 1, eq], axis=1).ravel(), np.arange(0, 2 * m + 1, 2)),
                         shape=(m, N))
        p.add_constraints(mat, 0.0, 0.0, name="chain_eq")
    return p, order


def chain_target_variances(level_ptr: np.ndarray, K: int, scales: Sequence[float], measure: str) -> np.ndarray:
    """Variance of every chain target, ``(K, n_regions)``, for the chain mechanism's diagonal
    (inverse-variance) weights.

    ``measure="level_vector"``: each target is one measured value (one discrete-Laplace variance of
    its level's scale). ``"per_region"``: the target of node ``(k, j)`` (``j`` the region's position
    within its level of ``m`` regions) is the sum of ``m`` independent noisy cumulatives for
    ``k >= 2`` (``s[k-1, j']`` for ``j' > j`` and ``s[k, j']`` for ``j' <= j``) and of ``j + 1`` for
    ``k = 1``. (The targets are also correlated; the weights ignore that.)
    """
    lp = np.asarray(level_ptr, dtype=np.int64)
    var = np.empty((K, int(lp[-1])))
    for lev in range(lp.size - 1):
        a, b = int(lp[lev]), int(lp[lev + 1])
        alpha = np.exp(-1.0 / float(scales[lev]))
        one = 2 * alpha / (1 - alpha) ** 2  # variance of the discrete Laplace of this scale
        if measure == "level_vector":
            terms = np.ones((K, b - a))
        else:
            terms = np.full((K, b - a), float(b - a))
            terms[0] = np.arange(1, b - a + 1)
        var[:, a:b] = terms * one
    return var
