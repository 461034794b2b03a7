"""Independent oracles for constraint sets on small trees: enumeration of every tree, and scipy MILPs.

Nothing here uses hierdp.constraints: a constraint set is given as plain Python data over node
names, the tree as its parent array and names, and every answer is recomputed from definitions.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

from hierdp.privacy.noise import DiscreteGaussianNoise


@dataclass
class Spec:
    """A constraint set as plain data: rows ``(terms {name: coef}, lo, hi)``, bounds ``{name: (lo, hi)}``."""

    rows: list[tuple[dict[str, int], float, float]] = field(default_factory=list)
    bounds: dict[str, tuple[float, float]] = field(default_factory=dict)

    def to_constraints(self):
        import hierdp

        c = hierdp.Constraints()
        for i, (terms, lo, hi) in enumerate(self.rows):
            c.add_linear(terms, lower=None if lo == -np.inf else lo, upper=None if hi == np.inf else hi,
                         name=f"r{i}")
        for name, (lo, hi) in self.bounds.items():
            if lo == hi:
                c.add_invariant(name, lo, name=f"b:{name}")
            else:
                c.add_bounds(name, lower=None if lo == -np.inf else lo, upper=None if hi == np.inf else hi,
                             name=f"b:{name}")
        return c


def subtree_matrix(tree) -> np.ndarray:
    """``A[node, leaf] = 1`` when the leaf is in the node's subtree (leaves: nodes without children)."""
    parent = np.asarray(tree.parent)
    n = parent.size
    has_child = np.zeros(n, bool)
    has_child[parent[parent >= 0]] = True
    leaves = np.flatnonzero(~has_child)
    a = np.zeros((n, leaves.size), np.int64)
    for j, leaf in enumerate(leaves):
        v = leaf
        while v >= 0:
            a[v, j] = 1
            v = parent[v]
    return a


def all_trees(tree, total: int) -> np.ndarray:
    """Every non-negative integer tree with root ``total``: one row of node values per tree."""
    a = subtree_matrix(tree)
    k = a.shape[1]
    rows = []
    for bars in itertools.combinations(range(total + k - 1), k - 1):  # stars and bars
        cuts = (-1, *bars, total + k - 1)
        rows.append([cuts[i + 1] - cuts[i] - 1 for i in range(k)])
    leaves = np.array(rows, dtype=np.int64).reshape(-1, k)
    return leaves @ a.T


def satisfies(values: np.ndarray, tree, spec: Spec) -> np.ndarray:
    """Mask of the trees (rows of ``values``) that satisfy every entry of ``spec``."""
    index = {name: i for i, name in enumerate(tree.names)}
    ok = np.ones(values.shape[0], bool)
    for terms, lo, hi in spec.rows:
        act = sum(c * values[:, index[n]] for n, c in terms.items())
        ok &= (act >= lo) & (act <= hi)
    for name, (lo, hi) in spec.bounds.items():
        v = values[:, index[name]]
        ok &= (v >= lo) & (v <= hi)
    return ok


def level_objective(y: np.ndarray, x: np.ndarray, groups: np.ndarray, objective: str) -> np.ndarray:
    """Objective of level vectors ``y`` (rows) against targets ``x``, groups per child."""
    d = np.abs(y - x)
    if objective == "l1":
        return d.sum(axis=1)
    if objective == "l2":
        return (d.astype(float) ** 2).sum(axis=1)
    out = np.zeros(y.shape[0])
    for g in np.unique(groups):
        out += d[:, groups == g].max(axis=1)
    return out


def released_vector(release, tree) -> np.ndarray:
    """Every node's released value (0 for nodes TopDown did not release)."""
    v = np.zeros(np.asarray(tree.parent).size, np.int64)
    for lv in release.levels:
        v[np.asarray(lv.keys)] = lv.values
    return v


class RecordingNoise(DiscreteGaussianNoise):
    """Discrete Gaussian noise that keeps every draw (to rebuild the noisy targets in a test)."""

    def __init__(self) -> None:
        self.draws: list[np.ndarray] = []

    def draw(self, parameter, size, rng):
        out = super().draw(parameter, size, rng)
        self.draws.append(np.array(out))
        return out


def noisy_levels(release, tree, draws: list[np.ndarray]) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per measured level L >= 1: ``(child node indices, noisy targets, group per child)``, rebuilt
    from the release's alive parents, the tree's structure and the recorded draws (one draw per
    level, bounded DP)."""
    out = {}
    child_ptr = np.asarray(tree.child_ptr)
    counts = np.asarray(tree.counts)
    k = 0
    for L in range(1, tree.n_levels):
        parents = np.asarray(release.levels[L - 1].keys)
        kids = [np.arange(child_ptr[p], child_ptr[p + 1]) for p in parents]
        sizes = [len(c) for c in kids]
        if not sum(sizes):
            continue
        child = np.concatenate(kids)
        out[L] = (child, counts[child] + draws[k], np.repeat(np.arange(len(parents)), sizes))
        k += 1
    return out


def brute_level_optimum(tree, spec: Spec, release, L: int, child: np.ndarray, x: np.ndarray, groups: np.ndarray,
                        objective: str, trees: np.ndarray) -> float | None:
    """The best level-L objective over the level vectors that extend to a whole tree satisfying
    ``spec`` with every coarser level as released (None when no tree does)."""
    level = np.asarray(tree.level)
    rel = released_vector(release, tree)
    coarse = np.flatnonzero(level < L)
    ok = satisfies(trees, tree, spec) & np.all(trees[:, coarse] == rel[coarse], axis=1)
    if not ok.any():
        return None
    y = np.unique(trees[ok][:, child], axis=0)
    return float(level_objective(y, x, groups, objective).min())


def milp_level_optimum(tree, spec: Spec, release, L: int, child: np.ndarray, x: np.ndarray, groups: np.ndarray,
                       objective: str) -> float | None:
    """The same optimum as :func:`brute_level_optimum` (L1 or L∞) as one scipy MILP over the whole tree."""
    parent = np.asarray(tree.parent)
    level = np.asarray(tree.level)
    n = parent.size
    rel = released_vector(release, tree)
    index = {name: i for i, name in enumerate(tree.names)}
    m = child.size
    n_aux = m if objective == "l1" else int(groups.max()) + 1
    nv = n + n_aux
    lo = np.zeros(nv)
    hi = np.full(nv, np.inf)
    coarse = level < L
    lo[:n][coarse] = rel[coarse]
    hi[:n][coarse] = rel[coarse]
    for name, (b_lo, b_hi) in spec.bounds.items():
        i = index[name]
        lo[i], hi[i] = max(lo[i], b_lo), min(hi[i], b_hi)
    if np.any(lo > hi):
        return None
    a_rows, r_lo, r_hi = [], [], []
    for v in range(n):  # consistency: a parent equals the sum of its children
        kids = np.flatnonzero(parent == v)
        if kids.size:
            row = np.zeros(nv)
            row[v], row[kids] = -1, 1
            a_rows.append(row)
            r_lo.append(0)
            r_hi.append(0)
    for terms, t_lo, t_hi in spec.rows:
        row = np.zeros(nv)
        for name, c in terms.items():
            row[index[name]] += c
        a_rows.append(row)
        r_lo.append(t_lo)
        r_hi.append(t_hi)
    for j in range(m):  # aux >= |y - x|
        aux = n + (j if objective == "l1" else int(groups[j]))
        for sign in (1, -1):
            row = np.zeros(nv)
            row[child[j]], row[aux] = sign, -1
            a_rows.append(row)
            r_lo.append(-np.inf)
            r_hi.append(sign * x[j])
    c = np.concatenate([np.zeros(n), np.ones(n_aux)])
    integrality = np.concatenate([np.ones(n), np.zeros(n_aux)])
    res = milp(c, constraints=LinearConstraint(np.array(a_rows), r_lo, r_hi), integrality=integrality,
               bounds=Bounds(lo, hi), options={"mip_rel_gap": 0})
    if res.status == 2:  # infeasible
        return None
    assert res.status == 0, res.message
    return float(res.fun)


def milp_feasible(tree, spec: Spec, root_total: int | None) -> bool:
    """Whether some non-negative integer tree (root fixed when given) satisfies ``spec`` (scipy MILP)."""
    parent = np.asarray(tree.parent)
    n = parent.size
    index = {name: i for i, name in enumerate(tree.names)}
    lo, hi = np.zeros(n), np.full(n, np.inf)
    if root_total is not None:
        lo[0] = hi[0] = root_total
    for name, (b_lo, b_hi) in spec.bounds.items():
        i = index[name]
        lo[i], hi[i] = max(lo[i], b_lo), min(hi[i], b_hi)
    if np.any(lo > hi):
        return False
    a_rows, r_lo, r_hi = [], [], []
    for v in range(n):
        kids = np.flatnonzero(parent == v)
        if kids.size:
            row = np.zeros(n)
            row[v], row[kids] = -1, 1
            a_rows.append(row)
            r_lo.append(0)
            r_hi.append(0)
    for terms, t_lo, t_hi in spec.rows:
        row = np.zeros(n)
        for name, c in terms.items():
            row[index[name]] += c
        a_rows.append(row)
        r_lo.append(t_lo)
        r_hi.append(t_hi)
    res = milp(np.zeros(n), constraints=LinearConstraint(np.array(a_rows), r_lo, r_hi), integrality=np.ones(n),
               bounds=Bounds(lo, hi))
    assert res.status in (0, 2), res.message
    return res.status == 0


def level_problem_optimum(p, *, time_limit: float = 120.0, max_rounds: int = 200) -> float:
    """The exact optimum of an integer level ``Problem`` (roots fixed, each child's parent a root,
    bounds, rows), by scipy MILPs written here from the problem's arrays - another formulation than
    any plug-in's: L1 with one auxiliary per child, L∞ with one per group (the objective is the sum
    of the groups' largest deviations), integer L2 by cutting planes (minimise ``sum t`` with
    ``t_i`` above the secants of ``(y - x_i)^2`` between consecutive integers, adding the secant
    at the incumbent wherever ``t_i`` is below the parabola; at convergence the bound is the value:
    exact, since the secants are exact at integers)."""
    from scipy.sparse import coo_matrix, csr_matrix, hstack, vstack

    parent = np.asarray(p.parent)
    fixed = np.asarray(p.fixed)
    roots = np.flatnonzero(parent < 0)
    assert np.all(~np.isnan(fixed[roots])) and np.all(np.isnan(fixed[parent >= 0])), "a level: roots fixed"
    kids = np.flatnonzero(parent >= 0)
    n = kids.size
    x = np.asarray(p.target)[kids]
    pos = np.full(parent.size, -1)
    pos[kids] = np.arange(n)
    lo = np.maximum(np.asarray(p.lower)[kids], 0.0)
    hi = np.asarray(p.upper)[kids].copy()
    group = np.searchsorted(roots, parent[kids])
    totals = fixed[roots]
    hi = np.minimum(hi, totals[group])  # a child is at most its parent
    sums = csr_matrix((np.ones(n), (group, np.arange(n))), shape=(roots.size, n))
    rows = [sums]
    r_lo, r_hi = [totals], [totals]
    if p.n_constraints:
        cons = p.constraints
        m = csr_matrix(cons.matrix)
        assert m[:, roots].nnz == 0, "rows over the children only"
        rows.append(m[:, kids])
        r_lo.append(np.asarray(cons.lower))
        r_hi.append(np.asarray(cons.upper))
    A = vstack(rows).tocsr()
    b_lo, b_hi = np.concatenate(r_lo), np.concatenate(r_hi)
    obj = p.objective
    if obj in ("l1", "linf"):
        k = n if obj == "l1" else roots.size
        aux = np.arange(n) if obj == "l1" else group
        dev = coo_matrix((np.ones(n), (np.arange(n), aux)), shape=(n, k)).tocsr()
        eye = csr_matrix((np.ones(n), (np.arange(n), np.arange(n))), shape=(n, n))
        A_full = vstack([hstack([A, csr_matrix((A.shape[0], k))]), hstack([eye, -dev]), hstack([-eye, -dev])]).tocsr()
        c = np.concatenate([np.zeros(n), np.ones(k)])
        res = milp(c, constraints=LinearConstraint(A_full, np.concatenate([b_lo, np.full(2 * n, -np.inf)]),
                                                   np.concatenate([b_hi, x, -x])),
                   integrality=np.concatenate([np.ones(n), np.zeros(k)]),
                   bounds=Bounds(np.concatenate([lo, np.zeros(k)]), np.concatenate([hi, np.full(k, np.inf)])),
                   options={"time_limit": time_limit, "mip_rel_gap": 0})
        assert res.status == 0, res.message
        return float(res.fun)
    # integer L2 by secant cuts: t_i >= (2(a - x) + 1)(y - a) + (a - x)^2 for integer a
    cuts: list[tuple[int, float]] = []
    start = np.rint(x)
    steps = [0, -1] + [s * 2 ** e for e in range(0, 26) for s in (1, -1)]  # geometric: within 2x everywhere
    for i in range(n):
        cuts += [(i, float(start[i] + d)) for d in steps]
    for _ in range(max_rounds):
        ci = np.array([i for i, _ in cuts])
        ca = np.array([a for _, a in cuts])
        slope = 2 * (ca - x[ci]) + 1
        const = (ca - x[ci]) ** 2 - slope * ca
        # slope * y_i - t_i <= -const
        C = csr_matrix((np.concatenate([slope, -np.ones(ci.size)]),
                        (np.concatenate([np.arange(ci.size)] * 2), np.concatenate([ci, n + ci]))), shape=(ci.size, 2 * n))
        A_full = vstack([hstack([A, csr_matrix((A.shape[0], n))]), C]).tocsr()
        res = milp(np.concatenate([np.zeros(n), np.ones(n)]),
                   constraints=LinearConstraint(A_full, np.concatenate([b_lo, np.full(ci.size, -np.inf)]),
                                                np.concatenate([b_hi, -const])),
                   integrality=np.concatenate([np.ones(n), np.zeros(n)]),
                   bounds=Bounds(np.concatenate([lo, np.zeros(n)]), np.concatenate([hi, np.full(n, np.inf)])),
                   options={"time_limit": time_limit, "mip_rel_gap": 0})
        assert res.status == 0, res.message
        y = np.rint(res.x[:n])
        t = res.x[n:]
        f = (y - x) ** 2
        short = np.flatnonzero(t < f - 1e-6 * np.maximum(1.0, f))
        if not short.size:
            return float(f.sum())
        # secants at the incumbent and at points between it and the target, and as far beyond it
        # (any integer points give valid cuts; these make the loop converge in few rounds)
        for i in short:
            d = float(x[i] - y[i])
            for a in {y[i], y[i] - 1, *(np.floor(y[i] + f * d) for f in (0.25, 0.5, 0.75, -0.5, -1.0))}:
                cuts.append((int(i), float(a)))
    raise AssertionError("the cutting planes did not converge")
