"""Resolving a constraint set against a tree: names, levels, numbers, tree types."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import hierdp
from hierdp.constraints import ConstraintError, Constraints
from hierdp.hierarchy import ODTree
from hierdp.hierarchy.geography import Geography


@pytest.fixture
def frame_tree():
    df = pd.DataFrame({"state": ["IL", "IL", "IL", "IN", "IN"], "county": ["COOK", "LAKE", "DU PAGE", "LAKE", "CASS"],
                       "pop": [5105, 516, 782, 475, 38]})
    return hierdp.Hierarchy.from_frame(df, levels=["state", "county"], count="pop", domain=df[["state", "county"]])


def test_three_spellings_of_a_node_bind_to_the_same_key(frame_tree):
    c = (Constraints().add_bounds("IL/LAKE", upper=900, name="a").add_bounds(("IL", "LAKE"), upper=800, name="b")
         .add_bounds({"state": "IL", "county": "LAKE"}, upper=700, name="c"))
    r = c.resolve(frame_tree)
    level, key, _lo, _hi, _item = r.user_intervals
    assert np.all(level == 2) and len(set(key.tolist())) == 1
    assert frame_tree.names[key[0]] == "IL/LAKE"
    _lo2, hi2 = r.intervals.lookup(2, key[:1])
    assert hi2[0] == 700  # several bounds of a node intersect


@pytest.mark.parametrize("node, match", [
    ("IL/COOKK", "unknown node 'IL/COOKK'"),
    (("IL", "NOWHERE"), r"unknown node \('IL', 'NOWHERE'\)"),
    ({"state": "IL", "countyy": "COOK"}, "unknown level 'countyy'; the levels below the root are"),
    ({"county": "COOK"}, r"level columns \['county'\] must be the first 1 levels below the root"),
])
def test_unknown_nodes_and_levels_name_the_entry(frame_tree, node, match):
    c = Constraints().add_linear([("IL/COOK", 1), (node, 1)], upper=6000, name="cap")
    with pytest.raises(ConstraintError, match="linear 'cap': " + match):
        c.resolve(frame_tree)


def test_errors_name_the_line_of_a_file(frame_tree, tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"kind": "bounds", "name": "ok", "node": "IL", "upper": 99999}\n'
                    '{"kind": "linear", "name": "typo", "terms": {"IN/LAKEE": 1}, "upper": 3}\n', encoding="utf-8")
    with pytest.raises(ConstraintError, match=r"linear 'typo' \(line 2\): unknown node 'IN/LAKEE'"):
        Constraints.read(path).resolve(frame_tree)


@pytest.mark.parametrize("build, match", [
    (lambda c: c.add_linear({"IL/COOK": 0.5}, upper=10, name="x"), "coefficient 0.5 of 'IL/COOK' is not an integer"),
    (lambda c: c.add_linear({"IL/COOK": 1}, upper=10.5, name="x"), "upper bound 10.5 is not an integer"),
    (lambda c: c.add_bounds("IL/COOK", lower=2.5, name="x"), "lower bound 2.5 is not an integer"),
    (lambda c: c.add_invariant("IL", 3.25, name="x"), "value 3.25 is not an integer"),
    (lambda c: c.add_linear({"IL/COOK": 2 ** 40}, upper=10, name="x"), "beyond ±2\\^31"),
    (lambda c: c.add_bounds("IL", upper=2 ** 60, name="x"), "beyond ±2\\^52"),
    (lambda c: c.add_cell_rule({"gq": 1}, lower=0, levels=["county"], name="x"), "about histogram cells"),
    (lambda c: c.add_zero("IL", cells=["gq"], name="x"), "about histogram cells"),
])
def test_numbers_must_fit_integer_counts(frame_tree, build, match):
    with pytest.raises(ConstraintError, match=match):
        build(Constraints()).resolve(frame_tree)


def test_edges_tree_names_and_tuples():
    edges = [("W", "A"), ("W", "B"), ("A", "a1"), ("A", "a2"), ("B", "b1")]
    tree = hierdp.Hierarchy.from_edges(edges, counts={"a1": 3, "a2": 4, "b1": 5})
    r = Constraints().add_linear({"a1": 1, "b1": 1}, upper=7, name="x").resolve(tree)
    assert r.rows.n_rows == 1 and set(tree.names[r.rows.key].tolist()) == {"a1", "b1"}
    with pytest.raises(ConstraintError, match="unknown node"):
        Constraints().add_bounds(("A", "a1"), upper=3).resolve(tree)  # edge names are not paths


def test_od_tree_names_and_pairs():
    geo = Geography.from_frame(pd.DataFrame({"region": ["N", "N", "S"], "city": ["Turin", "Milan", "Naples"]}),
                               ["region", "city"])
    trips = pd.DataFrame({"o": ["Turin", "Milan", "Naples", "Turin"], "d": ["Milan", "Turin", "Turin", "Naples"]})
    tree = ODTree.from_trips(trips, origin="o", destination="d", origin_geo=geo)
    r = (Constraints().add_linear({"N->Milan": 1, ("S", "Turin"): 1}, upper=5, name="x")
         .add_bounds("Turin->Naples", lower=1, name="y").resolve(tree))
    level, key = r.user_rows.level, r.user_rows.key
    got = sorted(str(tree.key_names(int(L), np.array([k]))[0]) for L, k in zip(level, key, strict=True))
    assert got == ["N->Milan", "S->Turin"]
    lv, ky = r.user_intervals[0], r.user_intervals[1]
    assert str(tree.key_names(int(lv[0]), ky[:1])[0]) == "Turin->Naples" and lv[0] == tree.n_levels - 1
    with pytest.raises(ConstraintError, match="unknown node 'Rome->Milan'"):
        Constraints().add_bounds("Rome->Milan", upper=3).resolve(tree)


def test_level_tree_binds_like_the_hierarchy(frame_tree):
    from hierdp.scale.tree import LevelTree

    df = frame_tree.to_frame()
    leaves = df[df.level == 2]
    lt = LevelTree.from_frame(pd.DataFrame({"state": [n.split("/")[0] for n in leaves.node],
                                            "county": [n.split("/")[1] for n in leaves.node],
                                            "pop": leaves["count"].to_numpy()}),
                              ["state", "county"], "pop", observed_domain_public=True)
    c = Constraints().add_linear({"IL/COOK": 1, "IN/LAKE": 1}, upper=9000, name="x")
    assert np.array_equal(c.resolve(lt).rows.key, c.resolve(frame_tree).rows.key)


def test_resolution_reads_no_count(frame_tree):
    """The same constraints resolve identically on trees with other counts (public structure only)."""
    other = frame_tree.with_counts(np.where(np.asarray(frame_tree.n_children) == 0, 1, 0), check=False)
    c = (Constraints().add_linear({"IL/COOK": 1, "IN/LAKE": 1}, upper=9, name="x")
         .add_bounds("IN/CASS", upper=4, name="y"))
    a, b = c.resolve(frame_tree, root_public=False), c.resolve(other, root_public=False)
    assert np.array_equal(a.rows.key, b.rows.key)
    for L in range(3):
        assert np.array_equal(a.intervals.keys.get(L, []), b.intervals.keys.get(L, []))
