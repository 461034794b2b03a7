"""The spatial baselines: grid sizes, Haar transform, private medians, trees, consistency.

Oracles: the formulas of Qardaji et al. evaluated by hand for N = 3.5 M, eps = 0.1 (notes: UG
sqrt(N eps / 10) = 187.08, AG m1 = 47); exact reconstruction of the Haar transform and a count of the
coefficients one cell touches; enumeration of neighbours for the median utility; the exact EM law
(chi-square); the HiGHS QP for the tree consistency; tiling and sums of every released tree."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from hierdp.hierarchy.spatial import SpatialGrid, prefix_sums_2d
from hierdp.mechanisms import MechanismParameterError, create
from hierdp.mechanisms.spatial.baselines import (
    ag_level1_size,
    ag_level2_size,
    grid_edges,
    haar_forward,
    haar_inverse,
    ug_grid_size,
)
from hierdp.mechanisms.spatial.trees import build_tree, exponential_median, midpoint_split, quad_split
from hierdp.solvers import UnsupportedProblem
from hierdp.privacy.rng import SecureRandom


def _grid(seed=0, side=32):
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.normal(side * 0.3, side * 0.08, 1500), rng.uniform(0, side, 300)]).clip(0, side)
    y = np.concatenate([rng.normal(side * 0.6, side * 0.1, 1500), rng.uniform(0, side, 300)]).clip(0, side)
    return SpatialGrid.from_points(x, y, shape=(side, side), box=(0, side, 0, side))


def test_grid_sizes_follow_qardaji():
    assert math.sqrt(3.5e6 * 0.1 / 10) == pytest.approx(187.08, abs=0.01)
    assert ug_grid_size(3.5e6, 0.1) == 187
    assert ag_level1_size(3.5e6, 0.1) == 47 and ag_level1_size(100, 0.1) == 10
    assert ag_level2_size(np.array([-5.0, 0.0, 10.0, 1000.0]), 0.05).tolist() == [1, 1, 1, 4]  # ceil(sqrt(10)) = 4
    e = grid_edges(1024, 187)
    assert e[0] == 0 and e[-1] == 1024 and set(np.diff(e).tolist()) <= {5, 6}


def test_haar_transform_is_exactly_invertible_and_each_cell_touches_1_plus_log_coefficients():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 100, (8, 16))
    coef = haar_forward(haar_forward(x, 0), 1)
    assert np.array_equal(haar_inverse(haar_inverse(coef, 1), 0), x)
    for i in range(8):
        for j in range(16):
            unit = np.zeros((8, 16), np.int64)
            unit[i, j] = 1
            c = haar_forward(haar_forward(unit, 0), 1)
            assert set(np.unique(np.abs(c)).tolist()) == {0, 1} and np.abs(c).sum() == (1 + 3) * (1 + 4)


def test_privelet_pads_to_powers_of_two_and_accounts_the_sensitivity():
    g = SpatialGrid.from_counts(np.random.default_rng(1).integers(0, 5, (12, 20)))
    rel = create("privelet", epsilon=1.0).release(g, seed=0)
    assert rel.details["padded"] == (16, 32) and rel.details["coefficient_sensitivity"] == (1 + 4) * (1 + 5)
    assert rel.n_leaves == 240 and rel.check_consistency() == []


def test_median_utility_moves_by_at_most_one_per_point():
    """U(k) = -|L_k - R_k|: adding or removing one point moves it by at most 1 (unbounded, m = 1)."""
    rng = np.random.default_rng(2)
    for _ in range(100):
        u, v = (int(s) for s in rng.integers(2, 5, 2))
        c = rng.integers(0, 4, (u, v))

        def util(cc, u=u):
            tot = cc.sum()
            return np.array([-abs(2 * cc[:k].sum() - tot) for k in range(1, u)])
        base = util(c)
        for i in range(u):
            for j in range(v):
                for d in (1, -1):
                    if c[i, j] + d < 0:
                        continue
                    nb = c.copy()
                    nb[i, j] += d
                    assert np.abs(util(nb) - base).max() <= 1


def _em_law(util, beta):
    w = np.exp(beta * (util - util.max()))
    return w / w.sum()


@pytest.mark.parametrize("secure", [False, True])
def test_private_median_follows_the_exponential_mechanism(secure):
    counts = np.zeros((1, 6), np.int64)
    counts[0] = [5, 1, 0, 2, 4, 3]
    prefix = prefix_sums_2d(counts)
    rects = np.array([[0, 1, 0, 6]])
    eps = Fraction(1, 2)
    left = np.cumsum(counts[0])[:-1]
    util = -np.abs(2 * left - counts.sum()).astype(float)
    law = _em_law(util, float(eps) / 2)
    n = 400 if secure else 20000
    rng = SecureRandom() if secure else np.random.default_rng(3)
    if secure:
        draws = [int(exponential_median(prefix, rects, np.array([False]), eps, 1, rng)[0]) for _ in range(n)]
    else:
        many = np.repeat(rects, n, axis=0)
        draws = exponential_median(prefix, many, np.zeros(n, bool), eps, 1, rng).tolist()
    obs = np.bincount(np.array(draws) - 1, minlength=5)
    assert stats.chisquare(obs, n * law).pvalue > 1e-4


def test_quad_and_midpoint_splits_tile_their_parents():
    parent, rects, depth = build_tree((5, 8), 4, quad_split)
    assert parent[0] == -1 and np.all(parent[1:] < np.arange(1, parent.size))
    for d in range(1, depth.max() + 1):
        kids = np.flatnonzero(depth == d)
        area = (rects[kids, 1] - rects[kids, 0]) * (rects[kids, 3] - rects[kids, 2])
        per_parent = np.bincount(parent[kids], weights=area, minlength=parent.size)
        p = np.unique(parent[kids])
        assert np.array_equal(per_parent[p], (rects[p, 1] - rects[p, 0]) * (rects[p, 3] - rects[p, 2]))
    _, r2, d2 = build_tree((8, 8), 3, midpoint_split)
    assert np.array_equal(np.sort((r2[d2 == 3, 1] - r2[d2 == 3, 0]) * (r2[d2 == 3, 3] - r2[d2 == 3, 2])), np.full(8, 8))


@pytest.mark.parametrize("name, kw", [("quadtree", {"height": 3}), ("quadtree", {"height": 4, "budgets": "uniform"}),
                                      ("kdtree", {"height": 5}), ("kdtree", {"height": 6, "hybrid": True}),
                                      ("ag", {})])
def test_released_trees_are_consistent_and_equal_the_highs_qp(name, kw):
    g = _grid(3, 16)
    rel = create(name, epsilon=0.5, cross_check="highs", **kw).release(g, seed=4)
    assert rel.check_consistency() == [] and rel.tree is not None and rel.solver == "twopass"
    t = rel.tree
    kids = t.parent >= 0
    sums = np.bincount(t.parent[kids], weights=t.values[kids], minlength=t.n)
    internal = ~t.is_leaf
    np.testing.assert_allclose(sums[internal], t.values[internal], rtol=1e-9, atol=1e-9)
    assert np.array_equal(np.sort(rel.values), np.sort(t.values[t.is_leaf]))


def test_hybrid_kd_tree_halves_below_the_switch():
    g = _grid(4, 32)
    rel = create("kdtree", epsilon=1.0, height=6, hybrid=True, switch=2).release(g, seed=0)
    t = rel.tree
    # below depth 2 every split halves its parent along the depth's axis
    for v in np.flatnonzero(t.level >= 3):
        p = t.parent[v]
        pr, cr = t.rects[p], t.rects[v]
        halves = {(pr[1] - pr[0]) // 2, (pr[1] - pr[0]) - (pr[1] - pr[0]) // 2,
                  (pr[3] - pr[2]) // 2, (pr[3] - pr[2]) - (pr[3] - pr[2]) // 2}
        assert (cr[1] - cr[0]) in halves | {pr[1] - pr[0]} and (cr[3] - cr[2]) in halves | {pr[3] - pr[2]}


def test_raw_releases_without_consistency():
    g = _grid(5, 16)
    rel = create("quadtree", epsilon=1.0, height=3, consistency=None).release(g, seed=0)
    assert rel.tree is None and rel.values.dtype == np.int64 and rel.check_consistency() == []


def test_n_public_is_an_assumption_and_bounded_makes_it_free():
    g = _grid(6, 16)
    rel = create("ug", epsilon=1.0, eps_n=0).release(g, seed=0)
    assert any("number of points N is assumed public" in a for a in rel.accounting.assumptions)
    assert rel.details["n_used"] == g.n_points
    rel_b = create("ag", epsilon=1.0, bounded=True).release(g, seed=0)
    assert rel_b.accounting.assumptions == () and not any(s.label == "N estimate" for s in rel_b.accounting.spends)
    with pytest.raises(MechanismParameterError, match="eps_n"):
        create("ug", epsilon=1.0, bounded=True, eps_n=0.1)
    with pytest.raises(MechanismParameterError, match="eps_n"):
        create("ug", epsilon=0.1, eps_n=0.2)
    with pytest.raises(MechanismParameterError, match="bounded"):
        create("uniform", epsilon=1.0, bounded=True)


@pytest.mark.parametrize("name, kw, match", [
    ("quadtree", {"height": -1}, "height"), ("quadtree", {"budgets": "log"}, "budgets"),
    ("kdtree", {"prt_share": 1.5}, "prt_share"), ("kdtree", {"switch": 3}, "switch"),
    ("kdtree", {"hybrid": True, "height": 4, "switch": 9}, "switch"), ("ag", {"alpha": 0}, "alpha"),
    ("ag", {"consistency": "l1"}, "consistency"), ("ug", {"c": -1}, "c"),
    ("identity", {"solver": "highs"}, "does not use a solver"),
])
def test_bad_baseline_parameters_are_refused(name, kw, match):
    with pytest.raises(MechanismParameterError, match=match):
        create(name, epsilon=1.0, **kw)


@pytest.mark.parametrize("name", ["quadtree", "kdtree", "ag"])
def test_consistency_solvers_are_checked_before_any_noise(name):
    """A consistency solver is refused at construction exactly when it would refuse the real
    problem after the noise: each registered solver is tried both ways (the oracle is the solver's
    own refusal on a released tree's Problem, raised by the registry)."""
    from hierdp.mechanisms.spatial.consistency import tree_problem
    from hierdp.solvers import names as solver_names
    from hierdp.solvers import registry as solver_registry

    grid = SpatialGrid.from_counts(np.arange(64, dtype=np.int64).reshape(8, 8))
    kw = {} if name == "ag" else {"height": 2}
    raw = create(name, epsilon=1.0, consistency=None, **kw).release(grid, seed=3)
    tree = create(name, epsilon=1.0, **kw).release(grid, seed=3).tree  # the structure the real problem has
    noisy = np.full(tree.n, np.nan) if name == "ag" else np.zeros(tree.n)
    if name == "ag":
        noisy[1:] = 1.0 + np.arange(tree.n - 1)  # AG's root is not measured
    else:
        noisy[:] = tree.values + np.linspace(-3, 3, tree.n)  # signed, inconsistent targets
    problem = tree_problem(tree.parent, noisy, np.linspace(1.0, 4.0, tree.n))
    assert raw.tree is None
    for solver in [*solver_names(), "no_such_solver"]:
        refuses_real = solver == "no_such_solver" or bool(solver_registry.get(solver).unsupported(problem))
        try:
            create(name, epsilon=1.0, consistency_solver=solver, **kw)
            refused = False
        except UnsupportedProblem:  # the registry's one error type of a refusal before noise
            refused = True
        assert refused == refuses_real, solver


def test_identity_noise_scale():
    """Identity on an all-zero grid: the released cells are pure noise of scale 1/eps (variance
    2q/(1-q)^2, q = exp(-eps)); 65,536 draws give the variance to about 1.5 % (4 sd < 6 %)."""
    g = SpatialGrid.from_counts(np.zeros((256, 256), np.int64))
    v = create("identity", epsilon=0.5).release(g, seed=1).values
    q = math.exp(-0.5)
    assert abs(v.var() / (2 * q / (1 - q) ** 2) - 1) < 0.06 and abs(v.mean()) < 0.1
