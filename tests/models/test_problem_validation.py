"""Bad problems refused when stated, frozen arrays, deep trees, from_hierarchy (issues 7 and 15)."""

import networkx as nx
import numpy as np
import pandas as pd
import pytest

import hierdp
from hierdp.hierarchy import Hierarchy
from hierdp.models import Problem, ProblemError

from exact_oracles import groups_by_walk

nan, inf = np.nan, np.inf


@pytest.mark.parametrize("kwargs, match", [
    # r6: NaN bounds
    (dict(parent=[-1, 0, 0], target=[3.0, 1.0, 1.0], lower=[nan, nan, nan]), "node 0: lower bound is NaN"),
    (dict(parent=[-1, 0, 0], target=[3.0, 1.0, 1.0], upper=[1, nan, 2]), "node 1: upper bound is NaN"),
    # r7: a node fixed outside its own bounds
    (dict(parent=[-1, 0], target=[6.5, 8.0], fixed=[6, nan], upper=[5, inf]), "node 0 is fixed at 6 outside"),
    (dict(parent=[-1, 0], target=[1.0, 1.0], fixed=[nan, 1], lower=[0, 2]), "node 1 is fixed at 1 outside"),
    # float / NaN parent indices
    (dict(parent=[-1, 0.5, 0], target=[1.0, 1, 1]), "node 1: parent index 0.5 is not an integer"),
    (dict(parent=[-1, nan, 0], target=[1.0, 1, 1]), "node 1: parent index nan"),
    (dict(parent=["a", "b"], target=[1.0, 1]), "integers"),
    # fixed values the tree cannot reconcile, deeper than direct children
    (dict(parent=[-1, 0, 1, 1], target=[3.0, 1, 1, 1], fixed=[5, nan, 2, 2]), "node 0 is fixed at 5"),
    (dict(parent=[-1, 0, 0, 1], target=[1.0] * 4, fixed=[nan, nan, nan, 7], upper=[inf, 3, inf, inf]),
     "node 1 is determined by its fixed descendants to be 7"),
    (dict(parent=[-1, 0], target=[1.0, 1.0], lower=[inf, 0]), "wrong side"),
])
def test_refused_at_construction_naming_the_node(kwargs, match):
    with pytest.raises(ProblemError, match=match):
        Problem(**kwargs)


def test_arrays_are_frozen_and_changes_revalidate():
    p = Problem([-1, 0, 0], [5.0, 2.0, 3.0], fixed=[5, nan, nan], upper=[inf, 4, 4])
    for name in ("parent", "target", "fixed", "weights", "lower", "upper"):
        with pytest.raises(ValueError, match="read-only"):
            getattr(p, name)[0] = 1
    user_parent = np.array([-1, 0, 0])
    Problem(user_parent, [1.0, 1, 1])
    user_parent[0] = -1  # the caller's array is not frozen
    p.fix(1, 2)
    assert p.fixed[1] == 2 and p.groups().tolist() == [-1, -1, 0]
    with pytest.raises(ProblemError, match="node 2 is fixed at 9 outside"):
        p.fix(2, 9)
    assert np.isnan(p.fixed[2])  # a refused change leaves the problem as it was
    with pytest.raises(ProblemError):
        p.add_bounds(1, upper=1)  # fixed at 2
    assert p.upper[1] == 4
    p.fix([1, 2], [3, 2])  # several at once
    assert p.fixed[1:].tolist() == [3, 2]
    with pytest.raises(ProblemError, match="node 1 is fixed at a non-integer"):
        q = Problem([-1, 0], [1.0, 1.0], fixed=[nan, 1.5], integer=False)
        q.integer = True


def _chain_groups_oracle(parent, fixed):
    p = Problem(parent, np.zeros(len(parent)), fixed=fixed)
    return p, groups_by_walk(p)


@pytest.mark.parametrize("depth", [70, 200, 1000])
def test_groups_at_any_depth_match_a_plain_walk(depth):
    # r1: a chain deeper than the old 64-step cap, with a few fixed nodes splitting it
    parent = np.arange(-1, depth)
    fixed = np.full(depth + 1, nan)
    fixed[[0, depth // 3]] = 0
    p, anchors = _chain_groups_oracle(parent, fixed)
    g = p.groups()
    free = np.isnan(fixed)
    a = np.array(anchors)[free]
    # same partition: equal anchors <=> equal group ids
    assert np.array_equal(a[:, None] == a[None, :], g[free][:, None] == g[free][None, :])
    assert p.n_groups == 2
    np.testing.assert_array_equal(p.depth(), np.arange(depth + 1))


def test_groups_and_depth_on_random_forests_match_networkx():
    rng = np.random.default_rng(1)
    for _ in range(30):
        n = int(rng.integers(2, 60))
        parent = np.array([-1] + [int(rng.integers(0, i)) for i in range(1, n)])
        # fix some leaves at 0 (always consistent) and some internal nodes at 0 with all-zero subtrees
        kids = np.bincount(parent[parent >= 0], minlength=n)
        fixed = np.where((kids == 0) & (rng.random(n) < 0.3), 0.0, nan)
        p = Problem(parent, np.ones(n), fixed=fixed)
        anchors = np.array(groups_by_walk(p))
        free = np.isnan(p.fixed)
        g = p.groups()
        assert np.array_equal(anchors[free][:, None] == anchors[free][None, :],
                              g[free][:, None] == g[free][None, :])
        graph = nx.DiGraph((int(pp), i) for i, pp in enumerate(parent) if pp >= 0)
        graph.add_nodes_from(range(n))
        assert p.depth().tolist() == [len(nx.ancestors(graph, i)) for i in range(n)]


def test_deep_chain_solved_exactly_r1():
    # r1: chain of 301 nodes, all values equal; 291 want 0, the 10 deepest want 10
    d = 300
    parent = np.arange(-1, d)
    target = np.zeros(d + 1)
    target[-10:] = 10.0
    for obj in ("linf", "l1", "l2"):
        p = Problem(parent, target, objective=obj, upper=np.full(d + 1, 50.0))
        # independent optimum: every node takes the same value v; minimise over v = 0..50
        dev = np.abs(np.arange(51)[:, None] - target[None, :])
        cost = {"linf": dev.max(1), "l1": dev.sum(1), "l2": (dev ** 2).sum(1)}[obj]
        for s in ("highs", "ortools") if obj == "linf" else ("highs",):
            sol = hierdp.solve(p, solver=s)
            assert sol.objective == pytest.approx(cost.min())
    p = Problem(parent, target, fixed=np.r_[37.0, np.full(d, nan)], objective="l2")
    assert np.all(hierdp.solve(p, solver="highs").values == 37)


def test_from_hierarchy_fixes_root_and_levels():
    df = pd.DataFrame({"region": ["N", "N", "S", "S", "S"], "city": ["a", "b", "c", "d", "e"],
                       "n": [3, 4, 1, 1, 5]})
    h = Hierarchy.from_frame(df, levels=["region", "city"], count="n")
    noisy = pd.Series(h.counts.astype(float) + 0.4, index=h.names)
    p = Problem.from_hierarchy(h, noisy.drop(h.names[1]), fix_levels=["region"], objective="l1")
    assert p.names.tolist() == list(h.names)
    fixed = ~np.isnan(p.fixed)
    assert fixed.tolist() == (h.level <= 1).tolist()
    np.testing.assert_array_equal(p.fixed[fixed], h.counts[fixed])
    assert np.isnan(p.target[1]) and p.target[2] == pytest.approx(h.counts[2] + 0.4)
    sol = hierdp.solve(p, solver="highs")
    assert p.violations(sol.values) == []
    q = Problem.from_hierarchy(h, noisy, fix_root=False)
    assert not np.any(~np.isnan(q.fixed))
    with pytest.raises(ProblemError, match="unknown level"):
        Problem.from_hierarchy(h, noisy, fix_levels=["county"])
    with pytest.raises(ProblemError, match="unknown node"):
        Problem.from_hierarchy(h, pd.Series({"nowhere": 1.0}))
