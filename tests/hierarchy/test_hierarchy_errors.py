"""Every bad hierarchy input raises its own HierarchyError subclass naming the culprit."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pandas as pd
import pytest

from hierdp.hierarchy import (
    CountError,
    CycleError,
    EmptyInputError,
    Hierarchy,
    HierarchyError,
    InconsistentCountError,
    MissingValueError,
    MultipleParentsError,
    NotATreeError,
    UnknownColumnError,
    UnknownNodeError,
)

FRAME = pd.DataFrame({"r": ["A", "A", "B"], "c": ["x", "y", "z"], "n": [1, 2, 3]},
                     index=["row0", "row1", "row2"])


def test_family_is_value_error() -> None:
    for cls in (CycleError, MultipleParentsError, CountError, InconsistentCountError,
                UnknownColumnError, EmptyInputError, NotATreeError, MissingValueError, UnknownNodeError):
        assert issubclass(cls, HierarchyError) and issubclass(cls, ValueError)


# ---------------------------------------------------------------- from_frame
def test_frame_unknown_level_column() -> None:
    with pytest.raises(UnknownColumnError, match="'province'"):
        Hierarchy.from_frame(FRAME, ["r", "province"], count="n")


def test_frame_unknown_count_column() -> None:
    with pytest.raises(UnknownColumnError, match="'people'"):
        Hierarchy.from_frame(FRAME, ["r", "c"], count="people")


def test_frame_empty() -> None:
    with pytest.raises(EmptyInputError, match="no rows"):
        Hierarchy.from_frame(FRAME.iloc[:0], ["r", "c"], count="n")


def test_frame_nan_in_level_column_names_column_and_row() -> None:
    df = FRAME.copy()
    df.loc["row1", "c"] = None
    with pytest.raises(MissingValueError, match=r"'c'.*'row1'"):
        Hierarchy.from_frame(df, ["r", "c"], count="n")


@pytest.mark.parametrize("value, what", [(np.nan, "missing"), (-4, "negative count -4"),
                                         (2.5, "non-integer count 2.5"), (np.inf, "infinite")])
def test_frame_bad_count_names_row(value, what) -> None:
    df = FRAME.copy()
    df["n"] = df["n"].astype(float)
    df.loc["row2", "n"] = value
    with pytest.raises(CountError, match=rf"{what}.*row 'row2'"):
        Hierarchy.from_frame(df, ["r", "c"], count="n")


def test_frame_non_numeric_count() -> None:
    df = FRAME.astype({"n": object})
    df.loc["row0", "n"] = "seven"
    with pytest.raises(CountError, match=r"'seven'.*'row0'"):
        Hierarchy.from_frame(df, ["r", "c"], count="n")


def test_frame_paths_that_collide() -> None:
    # "A/x" + "y" and "A" + "x/y" spell the same leaf name under different parents
    df = pd.DataFrame({"r": ["A/x", "A"], "c": ["y", "x/y"]})
    with pytest.raises(MultipleParentsError, match=r"'A/x/y'.*parents '(A|A/x)' and '(A|A/x)'"):
        Hierarchy.from_frame(df, ["r", "c"])


def test_frame_root_name_clash() -> None:
    with pytest.raises(HierarchyError, match="'r'"):
        Hierarchy.from_frame(FRAME, ["r", "c"], count="n", root_name="r")


# ---------------------------------------------------------------- from_edges
def test_edges_cycle_names_a_node_on_it() -> None:
    edges = [("root", "a"), ("b", "c"), ("c", "d"), ("d", "b")]
    with pytest.raises(CycleError, match=r"node '[bcd]'"):
        Hierarchy.from_edges(edges)


def test_edges_cycle_without_root() -> None:
    with pytest.raises(CycleError, match=r"node '[ab]'"):
        Hierarchy.from_edges([("a", "b"), ("b", "a")])


def test_edges_self_loop() -> None:
    with pytest.raises(CycleError, match="'a'"):
        Hierarchy.from_edges([("r", "a"), ("a", "a")])


def test_edges_two_parents_names_node_and_both_parents() -> None:
    with pytest.raises(MultipleParentsError, match=r"'Rome'.*'Lazio'.*'Tuscany'|'Rome'.*'Tuscany'.*'Lazio'"):
        Hierarchy.from_edges([("IT", "Lazio"), ("IT", "Tuscany"), ("Lazio", "Rome"), ("Tuscany", "Rome")])


def test_edges_several_roots() -> None:
    with pytest.raises(NotATreeError, match=r"'r1'.*'r2'"):
        Hierarchy.from_edges([("r1", "a"), ("r2", "b")])


def test_edges_missing_leaf_count() -> None:
    with pytest.raises(CountError, match="leaf 'b'"):
        Hierarchy.from_edges([("r", "a"), ("r", "b")], counts={"a": 3})


@pytest.mark.parametrize("value, what", [(-1, "negative"), (1.5, "non-integer"), (np.nan, "missing")])
def test_edges_bad_count_names_node(value, what) -> None:
    with pytest.raises(CountError, match=rf"{what}.*'b'"):
        Hierarchy.from_edges([("r", "a"), ("r", "b")], counts={"a": 3, "b": value})


def test_edges_inconsistent_counts_name_parent_and_numbers() -> None:
    with pytest.raises(InconsistentCountError, match=r"'r' has count 10 but its children sum to 7"):
        Hierarchy.from_edges([("r", "a"), ("r", "b")], counts={"r": 10, "a": 3, "b": 4})


def test_edges_count_for_unknown_node() -> None:
    with pytest.raises(UnknownNodeError, match="'ghost'"):
        Hierarchy.from_edges([("r", "a")], counts={"a": 1, "ghost": 2})


def test_edges_empty_and_malformed() -> None:
    with pytest.raises(EmptyInputError):
        Hierarchy.from_edges([])
    with pytest.raises(HierarchyError, match="edge 1"):
        Hierarchy.from_edges([("r", "a"), ("a", "b", "c")])
    with pytest.raises(MissingValueError, match="edge 0"):
        Hierarchy.from_edges([("r", None)])


# ---------------------------------------------------------------- from_graph / from_arrays
def test_graph_errors() -> None:
    g = nx.DiGraph([("r", "a"), ("r", "b")])
    g.nodes["a"]["count"] = 1
    with pytest.raises(CountError, match="leaf 'b'"):
        Hierarchy.from_graph(g)
    g.nodes["b"]["count"] = 2
    g.nodes["r"]["count"] = 4
    with pytest.raises(InconsistentCountError, match="'r' has count 4 but its children sum to 3"):
        Hierarchy.from_graph(g)
    del g.nodes["r"]["count"]
    g.add_node("lonely", count=1)
    with pytest.raises(NotATreeError, match="'lonely'"):
        Hierarchy.from_graph(g)
    g.remove_node("lonely")
    g.nodes["b"]["level"] = 2
    with pytest.raises(HierarchyError, match="'b' has level attribute 2 but is at depth 1"):
        Hierarchy.from_graph(g)
    g2 = nx.DiGraph([("r", "a"), ("q", "a")])
    with pytest.raises(MultipleParentsError, match="'a'"):
        Hierarchy.from_graph(g2)
    with pytest.raises(EmptyInputError):
        Hierarchy.from_graph(nx.DiGraph())
    with pytest.raises(HierarchyError, match="DiGraph"):
        Hierarchy.from_graph(nx.Graph([("r", "a")]))


def test_arrays_errors() -> None:
    with pytest.raises(HierarchyError, match=r"'b'.*out of range"):
        Hierarchy.from_arrays(["a", "b"], [-1, 5], [1, 1])
    with pytest.raises(MultipleParentsError, match="'x'"):
        Hierarchy.from_arrays(["r", "x", "x"], [-1, 0, 0], [2, 1, 1])
    with pytest.raises(CycleError, match=r"'[bc]'"):
        Hierarchy.from_arrays(["a", "b", "c"], [-1, 2, 1], [0, 0, 0])
    with pytest.raises(HierarchyError, match="level_names"):
        Hierarchy.from_arrays(["a", "b"], [-1, 0], [1, 1], level_names=["only one"])
    with pytest.raises(EmptyInputError):
        Hierarchy.from_arrays([], [], [])


def test_with_counts_and_aggregate_errors() -> None:
    h = Hierarchy.from_edges([("r", "a"), ("r", "b")], counts={"a": 1, "b": 2})
    with pytest.raises(CountError, match="negative count -1 for node 'a'"):
        h.with_counts([2, -1, 3])
    with pytest.raises(HierarchyError, match="shape"):
        h.aggregate([1, 2, 3, 4])
    with pytest.raises(CountError, match="leaf 'b'"):
        h.aggregate(pd.Series({"a": 1}))


# ---------------------------------------------------------------- levels given fine to coarse (issue 20, item 12)
ITALY = pd.DataFrame({"region": ["North", "North", "North", "South", "South"],
                      "province": ["Turin", "Turin", "Milan", "Naples", "Naples"],
                      "city": ["Turin", "Ivrea", "Milan", "Naples", "Pozzuoli"],
                      "people": [870_000, 23_000, 1_370_000, 910_000, 76_000]})


@pytest.mark.parametrize("levels, coarser, finer", [
    (["city", "province", "region"], "province", "city"),    # wholly reversed
    (["region", "city", "province"], "province", "city"),    # the last two swapped
    (["province", "region"], "region", "province"),
])
def test_levels_given_fine_to_coarse_are_refused_naming_the_levels(levels, coarser, finer) -> None:
    from hierdp.scale import LevelTree

    for build in (Hierarchy.from_frame, LevelTree.from_frame):
        with pytest.raises(MultipleParentsError, match=f"level column '{coarser}' is coarser than '{finer}'") as info:
            build(ITALY, levels, count="people", observed_domain_public=True)
        message = str(info.value)
        assert "coarse to fine" in message
        for value in ("Turin", "Ivrea", "Naples", "North", "870000"):  # no value of the data is quoted
            assert value not in message
    # the same rows coarse to fine build the tree; a value under two parents is normal there
    tree = Hierarchy.from_frame(ITALY, ["region", "province", "city"], count="people", observed_domain_public=True)
    assert "North/Turin/Turin" in tree.names


def test_the_bundled_world_cities_build_coarse_to_fine_and_are_refused_reversed() -> None:
    from hierdp.datasets.bundled import load_world_cities

    df = load_world_cities()
    # 1,203 city names sit under several admin1 areas: legal in a tree of paths
    assert (df.groupby("city")["admin1"].nunique() > 1).sum() > 1000
    tree = Hierarchy.from_frame(df, ["continent", "country", "admin1", "city"], count="population",
                                observed_domain_public=True)
    assert tree.n_levels == 5
    with pytest.raises(MultipleParentsError, match="level column 'country' is coarser than 'admin1'"):
        Hierarchy.from_frame(df, ["city", "admin1", "country", "continent"], count="population",
                             observed_domain_public=True)
