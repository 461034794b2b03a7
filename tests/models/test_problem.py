"""The declarative Problem: structure, groups, objective, violations, bad input."""

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hierdp.models import Problem, ProblemError


def test_from_groups_layout_and_level_structure():
    p = Problem.from_groups([3.2, -1.0, 2.0, 5.5, 5.0], [0, 3, 5], [4, 7], objective="linf")
    assert p.n == 7 and p.structure == "level"
    parents, offsets, child_index, totals = p.level_groups()
    assert parents.tolist() == [0, 1] and offsets.tolist() == [0, 3, 5]
    assert child_index.tolist() == [2, 3, 4, 5, 6] and totals.tolist() == [4.0, 7.0]
    assert p.groups().tolist() == [-1, -1, 0, 0, 0, 1, 1]


def test_tree_structure_and_groups_follow_nearest_fixed_ancestor():
    # 0 fixed root; 1, 2 free; 3, 4 under 1; 5 under 2 fixed; 6 under 5
    nan = np.nan
    p = Problem([-1, 0, 0, 1, 1, 2, 5], np.ones(7), fixed=[10, nan, nan, nan, nan, 4, nan])
    assert p.structure == "tree"
    g = p.groups()
    assert g[0] == -1 and g[5] == -1
    assert g[1] == g[2] == g[3] == g[4] != g[6]


def test_objective_values_by_hand():
    p = Problem.from_groups([1.0, 2.0, 3.0, 4.0], [0, 2, 4], [3, 7], objective="linf")
    y = np.array([3, 7, 2, 1, 3, 4])  # deviations: group0 1,1 ; group1 0,0
    assert p.objective_value(y) == pytest.approx(1.0)
    p.objective = "l1"
    assert p.objective_value(y) == pytest.approx(2.0)
    p.objective = "l2"
    assert p.objective_value(y) == pytest.approx(2.0)
    w = Problem.from_groups([1.0, 2.0], [0, 2], [3], objective="linf", weights=[2.0, 1.0])
    assert w.objective_value(np.array([3, 0, 3])) == pytest.approx(2.0)  # max(2*1, 1*1)


def test_violations_name_what_is_wrong():
    p = Problem.from_groups([1.0, 2.0], [0, 2], [3])
    assert p.violations(np.array([3, 1, 2])) == []
    assert any("sum of their children" in v for v in p.violations(np.array([3, 1, 1])))
    assert any("below" in v for v in p.violations(np.array([3, -1, 4])))
    assert any("non-integer" in v for v in p.violations(np.array([3, 1.5, 1.5])))
    assert any("fixed" in v for v in p.violations(np.array([4, 2, 2])))
    p.add_linear({1: 1.0}, upper=0)
    assert any("linear constraint" in v for v in p.violations(np.array([3, 1, 2])))


def test_named_linear_constraints_and_bounds():
    p = Problem([-1, 0, 0], [10, 4, 5], fixed=[10, np.nan, np.nan], names=["T", "A", "B"])
    p.add_linear({"A": 1, "B": -1}, lower=2, name="A ahead")
    p.add_bounds("B", upper=3)
    assert p.linear[0].index.tolist() == [1, 2] and p.upper[2] == 3
    assert p.violations(np.array([10, 7, 3])) == []
    with pytest.raises(ProblemError, match="'C'"):
        p.add_linear({"C": 1}, lower=0)
    with pytest.raises(ProblemError, match="lower"):
        p.add_linear({"A": 1}, lower=5, upper=1)
    with pytest.raises(ProblemError, match="'B'"):
        p.add_bounds("B", lower=4)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(parent=[1, 2, 0], target=[1, 1, 1]), "cycle"),
        (dict(parent=[-1, 5], target=[1, 1]), "out of range"),
        (dict(parent=[-1, 1], target=[1, 1]), "own parent"),
        (dict(parent=[-1, 0], target=[1, 1, 1]), "target has 3"),
        (dict(parent=[-1, 0], target=[1, 1], fixed=[1.5, np.nan]), "non-integer"),
        (dict(parent=[-1, 0], target=[1, 1], fixed=[-2, np.nan]), "negative"),
        (dict(parent=[-1, 0, 0], target=[1, 1, 1], fixed=[5, 2, 2]), "sum to 4"),
        (dict(parent=[-1], target=[1], objective="l3"), "objective"),
        (dict(parent=[-1, 0], target=[1, 1], weights=[1, -1]), "weights"),
        (dict(parent=[], target=[]), "at least one node"),
    ],
)
def test_bad_problems_raise(kwargs, match):
    with pytest.raises(ProblemError, match=match):
        Problem(**kwargs)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(-1, 11), min_size=1, max_size=12))
def test_cycle_detection_agrees_with_networkx(raw):
    n = len(raw)
    parent = [p if p < n and p != i else -1 for i, p in enumerate(raw)]
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from((p, i) for i, p in enumerate(parent) if p >= 0)
    has_cycle = not nx.is_directed_acyclic_graph(g)
    if has_cycle:
        with pytest.raises(ProblemError, match="cycle"):
            Problem(parent, np.ones(n))
    else:
        p = Problem(parent, np.ones(n))
        depth = p.depth()
        for i in range(n):
            assert depth[i] == len(nx.ancestors(g, i))
