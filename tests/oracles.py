"""Independent oracles shared by the solver tests (not a test module)."""

import numpy as np

from hierdp.models import Problem


def brute_force(problem: Problem, lo: int, hi: int) -> float:
    """Optimal objective by enumerating every integer vector of the free nodes in [lo, hi] (vectorized)."""
    free = np.flatnonzero(problem.is_free)
    r = np.arange(lo, hi + 1, dtype=float)
    grid = np.stack(np.meshgrid(*[r] * free.size, indexing="ij"), -1).reshape(-1, free.size)
    vals = np.tile(np.nan_to_num(problem.fixed), (grid.shape[0], 1))
    vals[:, free] = grid
    kids = np.flatnonzero(problem.parent >= 0)
    incidence = np.zeros((problem.n, problem.n))
    incidence[problem.parent[kids], kids] = 1.0
    has_kids = incidence.sum(1) > 0
    ok = np.all(np.abs(vals @ incidence.T - vals)[:, has_kids] < 1e-9, axis=1)
    ok &= np.all(vals >= problem.effective_lower - 1e-9, axis=1) & np.all(vals <= problem.upper + 1e-9, axis=1)
    for c in problem.linear:
        a = vals[:, c.index] @ c.coef
        ok &= (a >= c.lower - 1e-9) & (a <= c.upper + 1e-9)
    assert ok.any(), "brute force found no feasible point"
    vals = vals[ok]
    m = problem.is_free & ~np.isnan(problem.target)
    w = problem.weights[m]
    dev = vals[:, m] - problem.target[m]
    if problem.objective == "l2":
        return float((w * dev ** 2).sum(1).min())
    if problem.objective == "l1":
        return float((w * np.abs(dev)).sum(1).min())
    g = problem.groups()[m]
    per = np.stack([(w * np.abs(dev))[:, g == k].max(1) for k in np.unique(g)], 1)
    return float(per.sum(1).min())
