"""TopDown mechanisms (paper 000 §4, App. B): invariants over random trees and budgets,
calibration against Alg. 1, the rounding rule against a plain per-group implementation."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hierdp.hierarchy import Hierarchy
from hierdp.hierarchy.od import ODTree
from hierdp.hierarchy.topdown_tree import HierarchyTree
from hierdp.solvers.paper_round import paper_round_batch
from hierdp.mechanisms.topdown import TDA, InfTDA
from hierdp.privacy.unit import PrivacyUnit
from hierdp.solvers import UnsupportedProblem
from hierdp.privacy.errors import PrivacyParameterError


def _random_hierarchy(rng: np.random.Generator, depth: int, max_fan: int, sparsity: float) -> Hierarchy:
    rows = []
    paths = [[]]
    for _lev in range(depth):
        paths = [[*p, f"{'.'.join(p)}>{k}"] for p in paths for k in range(int(rng.integers(1, max_fan + 1)))]
    for p in paths:
        c = 0 if rng.random() < sparsity else int(rng.integers(1, 60))
        rows.append([*p, c])
    df = pd.DataFrame(rows, columns=[f"l{i}" for i in range(depth)] + ["n"])
    return Hierarchy.from_frame(df, levels=[f"l{i}" for i in range(depth)], count="n",
                                observed_domain_public=True)  # synthetic data: its domain is public


def _random_od(rng: np.random.Generator, g: int, max_fan: int, n_trips: int, kind: str) -> ODTree:
    paths = [[]]
    for lev in range(g):
        paths = [[*p, f"{'.'.join(p)}>{k}"] for p in paths
                 for k in range(int(rng.integers(2 if lev == 0 else 1, max_fan + 1)))]
    geo = pd.DataFrame(paths, columns=[f"L{i}" for i in range(g)])
    leaves = geo.iloc[:, -1].to_numpy()
    # concentrated flows: a few popular pairs
    trips = pd.DataFrame({"o": rng.choice(leaves, n_trips), "d": rng.choice(leaves[: max(1, len(leaves) // 3)], n_trips)})
    return ODTree.from_trips(trips, origin="o", destination="d", origin_geo=geo, kind=kind)


def _check_release(rel, tree, bounded: bool) -> None:
    assert rel.check_consistency() == []
    for lev in rel.levels:
        assert lev.values.dtype == np.int64
        assert np.all(lev.values >= 0)
        assert np.unique(lev.keys).size == lev.keys.size
    for L in range(1, rel.n_levels):
        lv, prev = rel.levels[L], rel.levels[L - 1]
        # released nodes are children of released positive nodes (zero nodes are never expanded)
        assert np.all(prev.values[lv.parent] > 0)
        assert np.array_equal(tree.parent_of(L, lv.keys), prev.keys[lv.parent])
        assert np.all(lv.values > 0)
        # every positive parent above the last level has its children released (they sum to it)
        sums = np.bincount(lv.parent, weights=lv.values, minlength=len(prev))
        assert np.array_equal(sums.astype(np.int64), prev.values)
    if bounded:
        assert rel.total == tree.root_count


MECHS = [
    lambda **kw: InfTDA(**kw),
    lambda **kw: TDA("l2", **kw),
    lambda **kw: TDA("l2", rounding="exact", **kw),
]


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), depth=st.integers(1, 3), eps=st.sampled_from([0.1, 1.0, 10.0]),
       bounded=st.booleans(), which=st.integers(0, len(MECHS) - 1), sparsity=st.sampled_from([0.0, 0.5, 0.9]))
def test_release_invariants_on_random_hierarchies(seed, depth, eps, bounded, which, sparsity) -> None:
    rng = np.random.default_rng(seed)
    h = _random_hierarchy(rng, depth, 4, sparsity)
    rel = MECHS[which](epsilon=eps, delta=1e-8, bounded=bounded).release(h, seed=seed)
    _check_release(rel, HierarchyTree(h), bounded)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), g=st.integers(1, 3), rho=st.floats(0.001, 5.0),
       bounded=st.booleans(), kind=st.sampled_from(["destination", "origin"]), which=st.integers(0, len(MECHS) - 1))
def test_release_invariants_on_random_od_trees(seed, g, rho, bounded, kind, which) -> None:
    rng = np.random.default_rng(seed)
    tree = _random_od(rng, g, 3, int(rng.integers(1, 400)), kind)
    rel = MECHS[which](rho=rho, bounded=bounded).release(tree, seed=seed)
    _check_release(rel, tree, bounded)
    assert rel.n_levels == tree.n_levels


def test_general_solvers_give_consistent_releases() -> None:
    rng = np.random.default_rng(3)
    tree = _random_od(rng, 2, 3, 300, "destination")
    for mech in (InfTDA(epsilon=1.0, delta=1e-8, solver="highs"), TDA("linf", epsilon=1.0, delta=1e-8)):
        rel = mech.release(tree, seed=5)
        _check_release(rel, tree, True)
        assert rel.solver == "highs"
        assert all("solver" in s for s in rel.solver_stats[1:] if s.get("children"))


def test_budget_matches_algorithm_1() -> None:
    """Bounded, m = 1: per-level sigma^2 = T / rho (Alg. 1 line 6); rho from Lemma 3."""
    rng = np.random.default_rng(0)
    tree = _random_od(rng, 2, 3, 50, "destination")
    T = tree.n_levels - 1
    eps, delta = 1.0, 1e-8
    # Lemma 3 inverted, (sqrt(L + eps) - sqrt(L))^2, in its cancellation-free form (a few ulps)
    rho = (eps / (math.sqrt(math.log(1 / delta) + eps) + math.sqrt(math.log(1 / delta)))) ** 2
    rel = InfTDA(epsilon=eps, delta=delta).release(tree, seed=0)
    acc = rel.accounting
    assert acc.total.rho == pytest.approx(rho, rel=1e-12)  # the library also rounds rho down by ulps
    analytic = next(g for g in acc.guarantees if g.calculus == "approx" and g.method.startswith("zCDP, analytic"))
    assert analytic.parameters["epsilon"] == pytest.approx(eps, rel=1e-9)  # Lemma 3 round trip (a few ulps)
    levels = acc.spends  # bounded: the root is public, so one spend per level below it
    assert [s.label for s in levels] == [f"level {L} ({tree.level_names[L]})" for L in range(1, T + 1)]
    for item in levels:  # sigma2 is rounded up by at most an ulp: 1e-12 relative is wide
        assert item.details["sigma2"] == pytest.approx(T / rho, rel=1e-12)
    assert sum(item.budget.rho for item in levels) == pytest.approx(rho, rel=1e-12)  # T float roundings
    assert "zCDP" in rel.guarantee and "1e-08" in rel.guarantee
    # unbounded (Alg. 3): T + 1 equal shares, the root's with sensitivity m
    rel_u = InfTDA(rho=rho, delta=delta, bounded=False, contributions=2).release(tree, seed=0)
    items = rel_u.accounting.spends
    # closed forms, sigma2 rounded up by at most an ulp: default (1e-6) tolerances below are loose
    assert items[0].details["sigma2"] == pytest.approx(2 ** 2 / (2 * rho / (T + 1)))
    share = 2 * rho / (T + 1)
    assert all(i.details["sigma2"] == pytest.approx(2 ** 2 / share) for i in items[1:])  # GS2^2 = m^2
    assert sum(i.budget.rho for i in items) == pytest.approx(rho)
    # declared distinct pairs: GS2^2 = m at the finest level only (coarser cells merge pairs)
    items_d = InfTDA(rho=rho, delta=delta, bounded=False, contributions=2, distinct=True).release(
        tree, seed=0).accounting.spends
    assert all(i.details["sigma2"] == pytest.approx(4 / share) for i in items_d[1:-1])
    assert items_d[-1].details["sigma2"] == pytest.approx(2 / share)


def level_sensitivity_sq(bounded: bool, contributions: int, distinct: bool = False, *, finest: bool = True) -> int:
    return PrivacyUnit(bounded, contributions, distinct).l2_sensitivity_sq(finest=finest)


def test_sensitivities() -> None:
    assert level_sensitivity_sq(True, 1) == 2 and level_sensitivity_sq(False, 1) == 1
    # distinct finest pairs: 2m / m at the finest level only; coarser levels merge pairs (2m², m²)
    assert level_sensitivity_sq(True, 3, distinct=True) == 6 and level_sensitivity_sq(True, 3) == 18
    assert level_sensitivity_sq(False, 3, distinct=True) == 3 and level_sensitivity_sq(False, 3) == 9
    assert level_sensitivity_sq(True, 3, distinct=True, finest=False) == 18
    assert level_sensitivity_sq(False, 3, distinct=True, finest=False) == 9
    with pytest.raises(PrivacyParameterError):
        level_sensitivity_sq(True, 0)
    with pytest.raises(PrivacyParameterError):
        InfTDA(epsilon=1.0)  # no delta
    with pytest.raises(PrivacyParameterError):
        InfTDA(epsilon=1.0, delta=1e-8, rho=0.1)


def test_seed_reproducible_and_zero_subtrees_not_expanded() -> None:
    rng = np.random.default_rng(7)
    tree = _random_od(rng, 3, 3, 100, "destination")
    a = InfTDA(epsilon=0.5, delta=1e-8).release(tree, seed=11)
    b = InfTDA(epsilon=0.5, delta=1e-8).release(tree, seed=11)
    assert all(np.array_equal(x.values, y.values) and np.array_equal(x.keys, y.keys) for x, y in zip(a.levels, b.levels, strict=False))
    # children generated per level = children of the positive nodes of the level above only
    for L in range(1, a.n_levels):
        parents = a.levels[L - 1]
        ck, _off, _ = tree.expand(L - 1, parents.keys[parents.values > 0])
        assert a.solver_stats[L]["children"] == ck.size


def _paper_round_one(x: np.ndarray, c: int) -> np.ndarray:
    """The rule of paper 000 §5 for one group, written plainly: round, then fix the sum."""
    y = np.rint(x).astype(int)
    diff = c - y.sum()
    while diff != 0:
        if diff > 0:
            idx = sorted(range(len(y)), key=lambda i: (-y[i], i))[:diff]
            for i in idx:
                y[i] += 1
        else:
            nz = [i for i in range(len(y)) if y[i] > 0]
            idx = sorted(nz, key=lambda i: (y[i], i))[: -diff]
            for i in idx:
                y[i] -= 1
        diff = c - y.sum()
    return y


@settings(max_examples=60, deadline=None)
@given(groups=st.lists(st.tuples(st.lists(st.floats(0, 30), min_size=1, max_size=8), st.integers(0, 60)),
                       min_size=1, max_size=6))
def test_paper_rounding_matches_plain_rule(groups) -> None:
    from hierdp.solvers.projection import project_batch

    sizes = [len(v) for v, _ in groups]
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    totals = np.array([c for _, c in groups])
    noisy = np.concatenate([np.array(v) - 5.0 for v, _ in groups])
    cont = project_batch(noisy, offsets, totals.astype(float))
    got = paper_round_batch(cont, offsets, totals)
    for g in range(len(groups)):
        seg = slice(offsets[g], offsets[g + 1])
        assert np.array_equal(got[seg], _paper_round_one(cont[seg], int(totals[g])))
        assert got[seg].sum() == totals[g] and np.all(got[seg] >= 0)


def test_chunked_levels_and_secure_mode() -> None:
    rng = np.random.default_rng(2)
    tree = _random_od(rng, 2, 4, 500, "origin")
    mech = InfTDA(epsilon=1.0, delta=1e-8)
    mech.chunk_children = 5  # many tiny batches: groups are independent, invariants must hold
    rel = mech.release(tree, seed=4)
    _check_release(rel, tree, True)
    assert max(s.get("chunks", 0) for s in rel.solver_stats) > 1
    rel_s = InfTDA(epsilon=1.0, delta=1e-8, secure=True).release(tree)
    _check_release(rel_s, tree, True)
    with pytest.raises(PrivacyParameterError):
        InfTDA(epsilon=1.0, delta=1e-8, secure=True).release(tree, seed=1)  # a seeded release is not private


def test_release_frame_and_hierarchy_round_trip() -> None:
    rng = np.random.default_rng(5)
    h = _random_hierarchy(rng, 3, 3, 0.3)
    rel = InfTDA(epsilon=2.0, delta=1e-8).release(h, seed=0)
    f = rel.to_frame()
    assert len(f) == rel.n_nodes and f.loc[0, "parent"] == ""
    child = f[f["parent"] != ""]  # parents by name: children sum to their parent
    sums = child.groupby("parent")["value"].sum()
    assert np.array_equal(f.set_index("node").loc[sums.index, "value"].to_numpy(), sums.to_numpy())
    h2 = rel.to_hierarchy()
    assert int(h2.counts[0]) == int(h.counts[0])
    assert set(map(str, h2.names)) <= set(map(str, h.names))
    assert "InfTDA" in rel.accounting_text() and "level" in rel.accounting_text()


def test_secure_mechanism_refuses_a_numpy_generator() -> None:
    tree = _random_od(np.random.default_rng(1), 2, 2, 20, "destination")
    with pytest.raises(PrivacyParameterError, match="secure=True"):
        InfTDA(rho=1.0, secure=True).release(tree, rng=np.random.default_rng(0))
    with pytest.raises(PrivacyParameterError, match="seed"):
        InfTDA(rho=1.0, secure=True).release(tree, seed=3)


@pytest.mark.parametrize("make", [
    lambda: InfTDA(rho=1.0, solver="projection"),      # cannot do integer L-inf
    lambda: InfTDA(rho=1.0, solver="nosuch"),
    lambda: InfTDA(rho=1.0, order="sideways"),
    lambda: TDA("l2", rho=1.0, solver="intopt"),        # cannot do L2
])
def test_bad_solver_choices_fail_before_any_noise(make) -> None:
    with pytest.raises((KeyError, ValueError, UnsupportedProblem)):
        make()
