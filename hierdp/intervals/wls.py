"""Exact variances of weighted least squares over a tree (Hay et al.'s consistency), in two passes.

When the post-processing is linear - the spatial tree baselines' consistency step ("smoothing":
minimise ``Σ_v (x_v - y_v)²/σ_v²`` with every parent the sum of its children, no sign or integer
constraint) - the released value of every node is the BLUE of its count from independent noisy
measurements, and its variance is known in closed form. For a tree it takes two passes (the same
decomposition as the estimate itself):

* **up**: ``U_v``, the variance of the best estimate of v from the measurements in v's subtree:
  a leaf's own variance; an internal node combines its own measurement with the sum of its
  children's subtree estimates (variance ``S_v = Σ_c U_c``) by inverse variance;
* **down**: ``D_v``, the variance of the best estimate of v from everything outside its subtree:
  the parent's outside-and-own estimate (``E_p = 1/(1/D_p + 1/σ_p²)``) minus the siblings' subtree
  estimates, ``D_v = E_p + S_p - U_v`` (infinite at the root);
* the released value's variance is ``1/(1/U_v + 1/D_v)``: the two estimates are independent.

Unmeasured nodes have ``σ² = ∞`` (no term). The result equals the diagonal of the dense covariance
``S (S_Mᵀ W S_M)⁻¹ Sᵀ`` (checked by a test with numpy on small trees). An interval
``value ± z σ_v`` is then a normal approximation of a linear combination of discrete noise: an
estimate, close to the nominal level when many draws enter a node (measured in the coverage
experiment), not a guarantee.
"""

from __future__ import annotations

import numpy as np

__all__ = ["tree_wls_variance"]


def tree_wls_variance(parent: np.ndarray, variances: np.ndarray, level_of: np.ndarray | None = None) -> np.ndarray:
    """Variance of every node's WLS estimate (``parent``: -1 for the root, parents before
    children; ``variances``: the measurement's variance per node, ``inf`` where not measured).

    Raises:
        ValueError: shapes differ, a variance is not > 0, or a node is not determined by any
            measurement (infinite variance).
    """
    p = np.asarray(parent, dtype=np.int64)
    var = np.asarray(variances, dtype=np.float64)
    n = p.size
    if var.shape != (n,):
        raise ValueError(f"variances has shape {var.shape} for {n} nodes")
    if np.any(~(var > 0)):
        raise ValueError("every variance must be > 0 (inf: not measured)")
    if level_of is None:
        level_of = np.zeros(n, np.int64)
        for v in range(n):  # parents come first: one pass (small trees; callers pass levels)
            if p[v] >= 0:
                level_of[v] = level_of[p[v]] + 1
    depth = np.asarray(level_of, dtype=np.int64)
    own = 1.0 / var  # precision of the node's own measurement (0: none)
    with np.errstate(divide="ignore", invalid="ignore"):
        has_kids = np.zeros(n, bool)
        has_kids[p[p >= 0]] = True
        S = np.zeros(n)  # variance of the sum of the children's subtree estimates (finite terms)
        n_inf = np.zeros(n, np.int64)  # children whose subtree says nothing (infinite variance)
        U = np.empty(n)
        for d in range(int(depth.max()), -1, -1):  # deepest first: S of depth d is complete here
            at = np.flatnonzero(depth == d)
            kid_prec = np.where(has_kids[at] & (n_inf[at] == 0), 1.0 / S[at], 0.0)
            U[at] = 1.0 / (own[at] + kid_prec)
            kids = at[p[at] >= 0]
            if kids.size:
                fin = np.isfinite(U[kids])
                np.add.at(S, p[kids[fin]], U[kids[fin]])
                np.add.at(n_inf, p[kids[~fin]], 1)
        D = np.full(n, np.inf)
        for d in range(1, int(depth.max()) + 1):
            at = np.flatnonzero(depth == d)
            q = p[at]
            E = 1.0 / (1.0 / D[q] + own[q])
            fin = np.isfinite(U[at])
            siblings = S[q] - np.where(fin, U[at], 0.0)  # the other children's subtree estimates
            blind = n_inf[q] - (~fin).astype(np.int64) > 0  # a sibling without information
            D[at] = np.where(blind, np.inf, E + siblings)
        out = 1.0 / (1.0 / U + 1.0 / D)
    if np.any(~np.isfinite(out)):
        v = int(np.flatnonzero(~np.isfinite(out))[0])
        raise ValueError(f"node {v} is not determined by any measurement (infinite variance)")
    return out
