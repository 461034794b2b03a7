"""Hierarchy: builders against independent oracles (pandas groupby, networkx descendants),
canonical-order invariants, views, and conversion to a Problem."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hierdp.models import Problem
from hierdp.hierarchy import Hierarchy, InconsistentCountError, UnknownLevelError, UnknownNodeError

LEVELS = ["region", "province", "city"]


def assert_canonical(h: Hierarchy) -> None:
    """The compiled arrays satisfy every invariant promised by the Hierarchy docstring."""
    n = h.n
    assert h.parent[0] == -1 and np.all(h.parent[1:] >= 0)
    assert np.all(h.parent[1:] < np.arange(1, n))
    assert np.all(np.diff(h.parent[1:]) >= 0)  # siblings grouped, in parent order
    assert np.array_equal(h.level[1:], h.level[h.parent[1:]] + 1)
    assert h.level_ptr[0] == 0 and h.level_ptr[-1] == n and h.level_ptr.size == h.n_levels + 1
    for lev in range(h.n_levels):  # each level is one contiguous range
        sl = h.level_slice(lev)
        assert np.all(h.level[sl] == lev)
    assert h.child_ptr.size == n + 1 and h.child_ptr[-1] == n
    for i in range(n):  # children of i are exactly the range child_ptr[i]:child_ptr[i+1]
        kids = np.flatnonzero(h.parent == i)
        assert np.array_equal(kids, np.arange(h.child_ptr[i], h.child_ptr[i + 1]))
        assert h.is_leaf[i] == (kids.size == 0)
        if kids.size:
            assert h.counts[i] == h.counts[kids].sum()
    assert h.counts.dtype == np.int64 and np.all(h.counts >= 0)
    assert len(set(h.names)) == n


def descendant_oracle(edges: list[tuple], leaf_counts: dict) -> dict:
    """Count of every node = sum of the counts of the leaves among itself and its descendants."""
    g = nx.DiGraph(edges)
    return {v: sum(leaf_counts.get(d, 0) for d in nx.descendants(g, v) | {v}) for v in g.nodes}


def random_frame(rng: np.random.Generator, m: int, with_count: bool) -> pd.DataFrame:
    df = pd.DataFrame({
        "region": rng.choice(["North", "South", "Centre"], m),
        "province": rng.choice(["P1", "P2", "P3", "P4"], m),
        "city": rng.choice(["a", "b", "c", "d", "e"], m),
    })
    if with_count:
        df["n"] = rng.integers(0, 50, m)
    return df


@pytest.mark.parametrize("with_count", [False, True])
def test_from_frame_matches_groupby_per_level(with_count: bool) -> None:
    df = random_frame(np.random.default_rng(1), 400, with_count)
    h = Hierarchy.from_frame(df, LEVELS, count="n" if with_count else None)
    assert_canonical(h)
    assert h.level_names == ["total", *LEVELS]
    weight = df["n"] if with_count else pd.Series(1, index=df.index)
    assert h.counts[0] == weight.sum()
    for k in range(1, len(LEVELS) + 1):
        ref = weight.groupby([df[c] for c in LEVELS[:k]]).sum()
        ref.index = ["/".join(map(str, t if isinstance(t, tuple) else (t,))) for t in ref.index]
        got = h.level_counts(LEVELS[k - 1])
        pd.testing.assert_series_equal(got.sort_index(), ref.sort_index(), check_names=False,
                                       check_index_type=False, check_dtype=False)


def test_from_frame_paths_disambiguate_and_sum_duplicate_leaves() -> None:
    # the same city string under two regions are two nodes; duplicate leaf rows are summed
    df = pd.DataFrame({"r": ["A", "B", "A", "A"], "c": ["x", "x", "x", "y"], "n": [1, 2, 3, 4]})
    h = Hierarchy.from_frame(df, ["r", "c"], count="n", root_name="all")
    assert list(h.names) == ["all", "A", "B", "A/x", "A/y", "B/x"]
    assert list(h.counts) == [10, 8, 2, 4, 4, 2]
    assert h.children("A") == ["A/x", "A/y"]
    assert h.parent_of("B/x") == "B" and h.parent_of("all") is None


def test_from_frame_numeric_levels_and_single_level() -> None:
    df = pd.DataFrame({"zone": [3, 1, 3, 2]})
    h = Hierarchy.from_frame(df, ["zone"])
    assert list(h.names) == ["total", "1", "2", "3"]
    assert list(h.counts) == [4, 1, 1, 2]


def test_from_edges_leaf_counts_match_descendant_oracle() -> None:
    edges = [("W", "EU"), ("W", "AS"), ("EU", "IT"), ("EU", "FR"), ("IT", "Rome"), ("IT", "Milan"),
             ("AS", "JP"), ("FR", "Paris")]
    leaf = {"Rome": 5, "Milan": 7, "JP": 11, "Paris": 0}
    h = Hierarchy.from_edges(edges, counts=leaf, level_names=["world", "continent", "country", "city"])
    assert_canonical(h)
    oracle = descendant_oracle(edges, leaf)
    assert {nm: int(c) for nm, c in zip(h.names, h.counts, strict=False)} == oracle
    # a leaf (JP) can sit above the deepest level
    assert h.level[h.index_of("JP")] == 2 and h.is_leaf[h.index_of("JP")]
    assert h.level_counts("continent").to_dict() == {"EU": 12, "AS": 11}


def test_from_edges_frame_and_full_counts_checked() -> None:
    edges = pd.DataFrame({"p": ["r", "r", "a", "a"], "c": ["a", "b", "x", "y"]})
    full = pd.Series({"r": 6, "a": 3, "b": 3, "x": 1, "y": 2})
    h = Hierarchy.from_edges(edges, counts=full)
    assert dict(zip(h.names, h.counts, strict=False)) == full.to_dict()
    with pytest.raises(InconsistentCountError, match=r"'a' has count 4 but its children sum to 3"):
        Hierarchy.from_edges(edges, counts={"r": 7, "a": 4, "b": 3, "x": 1, "y": 2})
    # check=False trusts the caller
    h2 = Hierarchy.from_edges(edges, counts={"r": 7, "a": 3, "b": 3, "x": 1, "y": 2}, check=False)
    assert h2.counts[0] == 7


def test_structure_only_and_repeated_edges() -> None:
    h = Hierarchy.from_edges([("r", "a"), ("r", "a"), ("a", "b")])
    assert list(h.names) == ["r", "a", "b"] and list(h.counts) == [0, 0, 0]


def test_graph_round_trip_and_attributes() -> None:
    df = random_frame(np.random.default_rng(2), 200, True)
    h = Hierarchy.from_frame(df, LEVELS, count="n")
    g = h.graph
    assert g.number_of_nodes() == h.n and g.number_of_edges() == h.n - 1
    root = h.names[0]
    for v in g.nodes:  # networkx view agrees with the arrays
        assert g.nodes[v]["level"] == nx.shortest_path_length(g, root, v)
        assert g.nodes[v]["count"] == h.counts[h.index_of(v)]
    h2 = Hierarchy.from_graph(g)
    assert list(h2.names) == list(h.names) and np.array_equal(h2.counts, h.counts)
    assert h2.level_names == h.level_names


def test_from_graph_internal_counts_optional() -> None:
    g = nx.DiGraph([("r", "a"), ("r", "b"), ("a", "c"), ("a", "d")])
    nx.set_node_attributes(g, {"b": 2, "c": 3, "d": 4, "a": 7}, "count")
    h = Hierarchy.from_graph(g)
    assert dict(zip(h.names, h.counts, strict=False)) == {"r": 9, "a": 7, "b": 2, "c": 3, "d": 4}


def test_from_arrays_any_order_gives_same_canonical_hierarchy() -> None:
    names = ["r", "a", "b", "x", "y", "z"]
    parent = [-1, 0, 0, 1, 1, 2]
    counts = [np.nan, np.nan, np.nan, 1, 2, 3]
    h = Hierarchy.from_arrays(names, parent, counts)
    perm = np.random.default_rng(0).permutation(6)
    inv = np.argsort(perm)
    p2 = [int(inv[parent[k]]) if parent[k] >= 0 else -1 for k in perm]
    h2 = Hierarchy.from_arrays([names[k] for k in perm], p2, [counts[k] for k in perm])
    assert_canonical(h2)
    assert dict(zip(h.names, h.counts, strict=False)) == dict(zip(h2.names, h2.counts, strict=False)) == {
        "r": 6, "a": 3, "b": 3, "x": 1, "y": 2, "z": 3}


def test_tuple_names_stay_single_nodes() -> None:
    edges = [(("IT", "IT"), ("RM", "MI")), (("IT", "IT"), ("RM", "RM"))]
    h = Hierarchy.from_edges(edges, counts={("RM", "MI"): 4, ("RM", "RM"): 1})
    assert h.names[0] == ("IT", "IT") and h.counts[0] == 5
    assert h.index_of(("RM", "RM")) == 2


def test_views_and_lookup() -> None:
    h = Hierarchy.from_edges([("r", "a"), ("r", "b"), ("a", "c")], counts={"b": 1, "c": 2},
                             level_names=["total", "mid", "low"])
    assert len(h) == 4 and h.n_levels == 3
    assert repr(h) == "Hierarchy(n=4, total=3, levels: total=1, mid=2, low=1)"
    assert h.level_index("mid") == 1 and h.level_index(-1) == 2
    assert h.level_slice("low") == slice(3, 4)
    assert list(h.levels()) == ["total", "mid", "low"]
    f = h.to_frame()
    assert list(f.columns) == ["node", "parent", "level", "level_name", "count"]
    assert f["parent"].tolist() == [None, "r", "r", "a"] and f["level_name"].tolist() == ["total", "mid", "mid", "low"]
    assert "c" in h and "zz" not in h
    with pytest.raises(UnknownNodeError, match="'zz'"):
        h.index_of("zz")
    with pytest.raises(KeyError):  # also a KeyError, like a mapping
        h.children("zz")
    with pytest.raises(UnknownLevelError, match="'nope'"):
        h.level_slice("nope")
    with pytest.raises(UnknownLevelError, match="out of range"):
        h.level_index(3)
    with pytest.raises(ValueError):  # arrays are read-only: a Hierarchy is immutable
        h.counts[0] = 9


def test_with_counts_and_aggregate() -> None:
    df = random_frame(np.random.default_rng(3), 300, True)
    h = Hierarchy.from_frame(df, LEVELS, count="n")
    new_leaves = np.random.default_rng(4).integers(0, 9, int(h.is_leaf.sum()))
    full = h.aggregate(new_leaves)
    assert full.dtype == np.int64
    h2 = h.with_counts(full)
    assert_canonical(h2)
    assert h2.parent is h.parent and np.array_equal(h2.counts[h.leaves], new_leaves)
    assert np.array_equal(h.aggregate(h.counts), h.counts)  # length-n input, internal ignored
    noisy = h.aggregate(h.counts[h.leaves] + 0.5)
    assert noisy.dtype == np.float64
    assert np.allclose(noisy, h.counts + 0.5 * h.aggregate(np.ones(h.leaves.size, np.int64)))
    bad = full.copy()
    bad[1] += 1
    with pytest.raises(InconsistentCountError, match=repr(h.names[1])):
        h.with_counts(bad)
    assert h.with_counts(bad, check=False).counts[1] == full[1] + 1
    by_name = pd.Series(h.counts[h.leaves], index=h.names[h.leaves])
    assert np.array_equal(h.aggregate(by_name), h.counts)


def test_problem_from_hierarchy_true_counts_feasible() -> None:
    df = random_frame(np.random.default_rng(5), 300, True)
    h = Hierarchy.from_frame(df, LEVELS, count="n")
    rng = np.random.default_rng(6)
    noisy = h.counts + rng.normal(0, 3, h.n)
    p = Problem.from_hierarchy(h, noisy, objective="l1")
    assert p.violations(h.counts) == []
    assert p.fixed[0] == h.counts[0] and np.isnan(p.fixed[1:]).all()
    assert list(p.names) == list(h.names) and np.array_equal(p.parent, h.parent)
    assert p.objective_value(h.counts) == pytest.approx(np.abs(noisy - h.counts)[1:].sum())
    p2 = Problem.from_hierarchy(h, pd.Series(noisy, index=h.names), fix_root=False, weights=np.full(h.n, 2.0))
    assert np.isnan(p2.fixed).all() and p2.violations(h.counts) == []
    assert p2.objective_value(h.counts) == pytest.approx(2 * ((noisy - h.counts) ** 2).sum())
    # a wrong root violates the fixed root
    wrong = h.counts.astype(float)
    wrong[0] += 1
    assert any("fixed" in v for v in p.violations(wrong))


@st.composite
def random_trees(draw):
    n = draw(st.integers(1, 40))
    parent = [-1] + [draw(st.integers(0, i - 1)) for i in range(1, n)]
    perm = draw(st.permutations(range(n)))  # shuffle so the input is not in canonical order
    inv = np.argsort(perm)
    shuffled = [int(inv[parent[k]]) if parent[k] >= 0 else -1 for k in perm]
    counts = draw(st.lists(st.integers(0, 10**12), min_size=n, max_size=n))
    return [f"v{k}" for k in perm], shuffled, counts


@settings(max_examples=150, deadline=None)
@given(random_trees())
def test_aggregate_equals_descendant_sum_oracle(tree) -> None:
    names, parent, raw = tree
    edges = [(names[p], names[k]) for k, p in enumerate(parent) if p >= 0]
    has_kids = {p for p, _ in edges}
    leaf_counts = {nm: c for nm, c in zip(names, raw, strict=False) if nm not in has_kids}
    counts = [leaf_counts.get(nm, np.nan) for nm in names]
    h = Hierarchy.from_arrays(names, parent, np.array(counts, dtype=object))
    assert_canonical(h)
    oracle = descendant_oracle(edges, leaf_counts) if edges else {names[0]: leaf_counts[names[0]]}
    assert {nm: int(c) for nm, c in zip(h.names, h.counts, strict=False)} == oracle
    leaves = np.array([leaf_counts[nm] for nm in h.names[h.leaves]], dtype=np.int64)
    assert np.array_equal(h.aggregate(leaves), h.counts)
    if edges:
        h2 = Hierarchy.from_edges(edges, counts=leaf_counts)
        assert {nm: int(c) for nm, c in zip(h2.names, h2.counts, strict=False)} == oracle


def test_large_counts_stay_exact() -> None:
    big = 2**60
    h = Hierarchy.from_edges([("r", "a"), ("r", "b")], counts={"a": big + 1, "b": big + 3})
    assert int(h.counts[0]) == 2 * big + 4 and int(h.counts[1]) == big + 1
