"""Paper 000's L∞ error bound for InfTDA, per node: a proven interval, not an estimate.

The proof of Theorem 4 (paper 000 §4.1) is deterministic up to its last step: for a node u at level
ℓ with parent p, when the level is solved to an L∞ optimum (IntOpt, or any exact L∞ solver) over
non-negative integers summing to the parent's released value,

    |err(u)| <= 2 ||η_C(p)||∞ + |err(p)|,

η_C(p) the noise added to p's children (u and its siblings). Unrolled to the root,
``|err(u)| <= |err(root)| + 2 Σ_{k=1..ℓ} ||η_k||∞`` with η_k the noise of the sibling group on
u's path at level k (``err(root) = 0`` under bounded neighbours; the root's own noise under
unbounded ones, clipped at 0, which only shrinks it). A node below a parent released as 0 has the
bound too (its error is at most its parent's). Instead of the theorem's union bound over a whole
level and its O(·) constant, this module takes the exact tail of the recorded noise law: with
``g_k`` the size of the sibling group at level k and ``α`` the miss probability,

    t_k = min { t : g_k P(|Y_k| > t) <= α / m },   m = number of terms,

so ``P(some |η| on u's path exceeds its t_k) <= α`` by a union bound, and
``[r - B, r + B] ∩ [0, ∞)``, ``B = t_0 + 2 Σ t_k``, covers the true count with probability at least
``1 - α`` - for every input, every node. It is conservative (the triangle inequalities and the
union bound are loose): the coverage experiment measures how much wider it is than the bootstrap.
Valid only for L∞-optimal level solves (InfTDA, ``tda_linf`` with an exact solver); refused for
L2 objectives, where the proof does not apply.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hierdp.intervals.errors import IntervalsUnsupported
from hierdp.intervals.topdown import PublicStructure, TopDownLaw, topdown_law

__all__ = ["linf_bound"]

#: plug-ins that return an L∞ optimum of a level (the bound needs an optimum, not a heuristic)
EXACT_LINF_SOLVERS = frozenset({"intopt", "highs", "ortools"})


def linf_bound(release: Any, domain: Any, level: float, law: TopDownLaw | None = None
               ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per level, ``(lower, upper)`` of every released node (release order): paper 000's bound.

    Raises:
        IntervalsUnsupported: not an L∞-optimal TopDown release.
    """
    law = law or topdown_law(release)
    if law.objective != "linf" or law.solver not in EXACT_LINF_SOLVERS:
        raise IntervalsUnsupported(
            f"{release.mechanism}: paper 000's L-inf bound holds for levels solved to an L-inf optimum "
            f"(solvers {sorted(EXACT_LINF_SOLVERS)}); this release used {law.objective} / {law.solver}")
    if not 0.0 < float(level) < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    alpha = 1.0 - float(level)
    structure = domain if isinstance(domain, PublicStructure) else PublicStructure(domain)
    root_term = 0 in law.noise
    # per level, for every released node: the sizes of the sibling groups on its path (levels 1..L)
    paths: list[np.ndarray] = [np.zeros((1, 0), np.int64)]
    out = []
    for L, lv in enumerate(release.levels):
        vals = np.asarray(lv.values, dtype=np.float64)
        if L == 0:
            if root_term:
                t0 = float(law.noise[0].threshold(alpha))
                lo, hi = np.maximum(vals - t0, 0.0), vals + t0
            else:
                lo, hi = vals.copy(), vals.copy()
            out.append((lo, hi))
            continue
        prev = release.levels[L - 1]
        parent_rows = np.asarray(lv.parent, dtype=np.int64)
        _kids, offs = structure.children(L - 1, np.asarray(prev.keys, np.int64))
        group_size = np.diff(offs)[parent_rows]  # every domain child of the parent was measured
        path = np.concatenate([paths[-1][parent_rows], group_size[:, None]], axis=1)
        paths.append(path)
        m = L + (1 if root_term else 0)
        total = np.full(vals.size, float(law.noise[0].threshold(alpha / m)) if root_term else 0.0)
        for k in range(1, L + 1):
            g = path[:, k - 1].astype(np.float64)
            uniq, inv = np.unique(g, return_inverse=True)
            t = law.noise[k].threshold(alpha / (m * uniq)).astype(np.float64)
            total += 2.0 * t[inv.ravel()]
        out.append((np.maximum(vals - total, 0.0), vals + total))
    return out
