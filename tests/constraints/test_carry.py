"""Carrying constraints up: valid on every tree the set allows, exact where the docs say so.

Oracle: enumeration of every non-negative integer tree (tests/constraints/oracles.py).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import hierdp
from hierdp.constraints import Constraints

from .oracles import Spec, all_trees, satisfies, subtree_matrix
from .test_topdown_oracles import tiny_instance


def _values_of_rows(rows, tree, trees):
    """Activity of every resolved row on every enumerated tree (rows over (level, key) = node index)."""
    out = np.zeros((trees.shape[0], rows.n_rows), np.int64)
    for r in range(rows.n_rows):
        s, e = rows.ptr[r], rows.ptr[r + 1]
        out[:, r] = trees[:, rows.key[s:e]] @ rows.coef[s:e]
    return out


@pytest.mark.parametrize("seed", range(12))
def test_carried_rows_and_intervals_hold_on_every_allowed_tree(seed):
    tree, spec = tiny_instance(seed)
    # add a complete-sibling row so that something is carried
    region = str(tree.names[1])
    kids = [str(tree.names[k]) for k in range(tree.child_ptr[1], tree.child_ptr[2])]
    spec.rows.append(({k: 2 for k in kids}, -np.inf, 2.0 * int(tree.counts[1]) + 2))
    c = spec.to_constraints()
    try:
        r = c.resolve(tree)
    except hierdp.constraints.ConstraintsInfeasible:
        pytest.skip("infeasible instance (the feasibility check is tested elsewhere)")
    trees = all_trees(tree, int(tree.counts[0]))
    ok = trees[satisfies(trees, tree, spec)]
    assert ok.size
    act = _values_of_rows(r.rows, tree, ok)
    assert np.all((act >= r.rows.lo) & (act <= r.rows.hi))
    _lv, ky, lo, hi = r.intervals.as_arrays()
    v = ok[:, ky]
    assert np.all((v >= lo) & (v <= hi))
    # the complete-sibling row 2 * (children) <= 2 n + 2 reached the region as its interval
    assert r.intervals.lookup(1, np.array([1]))[1][0] <= int(tree.counts[1]) + 1, region


def test_complete_sibling_rows_become_parent_rows_and_incomplete_ones_do_not():
    edges = [("R", "A"), ("R", "B"), ("R", "C")] + [(p, f"{p}{i}") for p in "ABC" for i in range(2)]
    tree = hierdp.Hierarchy.from_edges(edges, counts={f"{p}{i}": 1 for p in "ABC" for i in range(2)})
    c = (Constraints().add_linear({"A0": 3, "A1": 3, "B0": 3, "B1": 3, "C0": 1, "C1": 1}, upper=9, name="complete")
         .add_linear({"A0": 1, "A1": 2}, upper=9, name="unequal")
         .add_linear({"A0": 1, "B0": 1}, upper=9, name="incomplete"))
    r = c.resolve(tree, check=False)
    names = [str(n) for n in r.rows.name]
    assert "complete (carried to level1)" in names  # 3A + 3B + C; not further (unequal coefficients under R)
    i = names.index("complete (carried to level1)")
    s, e = r.rows.ptr[i], r.rows.ptr[i + 1]
    terms = {(int(L), str(tree.names[k])): int(cf) for L, k, cf in
             zip(r.rows.level[s:e], r.rows.key[s:e], r.rows.coef[s:e], strict=True)}
    assert terms == {(1, "A"): 3, (1, "B"): 3, (1, "C"): 1}
    assert not any("unequal (carried" in n or "incomplete (carried" in n or "level0" in n for n in names)
    # one incomplete set stops the whole row
    r1 = Constraints().add_linear({"A0": 1, "A1": 1, "B0": 1}, upper=9, name="x").resolve(tree, check=False)
    assert [str(n) for n in r1.rows.name] == ["x"]
    # a row that aggregates all the way up becomes an interval of the root
    r2 = Constraints().add_linear({f"{p}{i}": 1 for p in "ABC" for i in range(2)}, upper=4, name="all").resolve(
        tree, check=False)
    assert r2.root_interval == (-np.inf, 4.0)


def test_single_node_rows_are_exact_intervals():
    tree = hierdp.Hierarchy.from_edges([("R", "A"), ("R", "B")], counts={"A": 7, "B": 3})
    r = Constraints().add_linear({"A": 3}, lower=4, upper=20, name="x").add_linear({"B": -2}, lower=-9,
                                                                                   name="y").resolve(tree)
    lo, hi = r.intervals.lookup(1, np.array([1, 2]))
    assert list(lo) == [2, -np.inf] and list(hi) == [6, 4]  # 3A in [4, 20] <=> A in [2, 6]; -2B >= -9 <=> B <= 4
    assert r.rows.n_rows == 0


@pytest.mark.parametrize("seed", range(8))
def test_intervals_are_the_exact_projection_of_the_subtree_bounds(seed):
    """Bounds only: a node's carried interval is exactly the range of values its subtree's bounds
    allow (enumerated over leaf boxes 0..K)."""
    rng = np.random.default_rng(seed)
    edges, counts = [], {}
    for p in "AB":
        edges.append(("R", p))
        for i in range(2):
            edges.append((p, f"{p}{i}"))
            counts[f"{p}{i}"] = 1
    tree = hierdp.Hierarchy.from_edges(edges, counts=counts)
    names = [str(n) for n in tree.names]
    spec = Spec()
    for j in rng.choice(range(1, len(names)), size=3, replace=False):
        lo = int(rng.integers(0, 3))
        hi = lo + int(rng.integers(0, 3)) if rng.random() < 0.7 else np.inf
        spec.bounds[names[j]] = (float(lo), float(hi))
    r = spec.to_constraints().resolve(tree, check=False)
    K = 8
    a = subtree_matrix(tree)
    leaves = np.array(list(itertools.product(range(K + 1), repeat=a.shape[1])))
    vals = leaves @ a.T
    for v in range(len(names)):
        sub = [w for w in range(len(names)) if a[v] @ a[w] == a[w].sum() and a[w].sum()]  # w in v's subtree
        sub_spec = Spec(bounds={names[w]: spec.bounds[names[w]] for w in sub if names[w] in spec.bounds})
        allowed = vals[satisfies(vals, tree, sub_spec)][:, v]
        lv = int(np.asarray(tree.level)[v])
        lo, hi = r.intervals.lookup(lv, np.array([v]))
        if not allowed.size:
            assert lo[0] > hi[0]
            continue
        assert max(lo[0], 0) == allowed.min()
        if np.isfinite(hi[0]):
            assert hi[0] == allowed.max()
        else:
            assert allowed.max() >= K  # unbounded: only the enumeration's box stops it
