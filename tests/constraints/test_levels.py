"""The engine seam: one level's rows with fixed nodes moved to the bounds, coupling, chunk blocks."""

from __future__ import annotations

import numpy as np
import pytest

import hierdp
from hierdp.constraints import Constraints
from hierdp.release import ReleaseLevel


@pytest.fixture
def tree():
    edges = [("R", p) for p in "ABC"] + [(p, f"{p}{i}") for p in "ABC" for i in range(2)]
    return hierdp.Hierarchy.from_edges(edges, counts={f"{p}{i}": 10 for p in "ABC" for i in range(2)})


def released(tree, level1: dict[str, int]) -> list[ReleaseLevel]:
    keys = np.array([tree.index_of(n) for n in level1], np.int64)
    return [ReleaseLevel(np.array([0]), np.array([-1]), np.array([int(tree.counts[0])])),
            ReleaseLevel(keys, np.zeros(keys.size, np.int64), np.array(list(level1.values()), np.int64))]


def test_fixed_nodes_move_to_the_bounds_and_dead_children_are_zero(tree):
    c = (Constraints().add_linear({"A0": 1, "B": 2, "C0": 1}, lower=5, upper=50, name="mixed")
         .add_linear({"A1": 1, "B0": 1}, upper=7, name="cross"))
    r = c.resolve(tree, check=False)
    plan = r.at_level(2, released(tree, {"A": 20, "B": 9}))  # C released 0: C0 = 0
    names = [str(n) for n in plan.rows.name]
    i = names.index("mixed")
    assert plan.lower[i] == 5 - 18 and plan.upper[i] == 50 - 18  # B fixed at 9 moved over; C0 is 0
    block = plan.block(np.array([tree.index_of(n) for n in ["A0", "A1", "B0", "B1"]]))
    rows = {str(n): (block.matrix[j].toarray().ravel().tolist(), block.lower[j], block.upper[j])
            for j, n in enumerate(block.names)}
    assert rows["mixed"] == ([1, 0, 0, 0], -13.0, 32.0)
    assert rows["cross"] == ([0, 1, 1, 0], -np.inf, 7.0)


def test_coupling_and_chunks(tree):
    c = Constraints().add_linear({"A1": 1, "B0": 1}, upper=7, name="cross").add_bounds("C1", upper=9, name="c1")
    plan = c.resolve(tree, check=False).at_level(2, released(tree, {"A": 20, "B": 9, "C": 1}))
    keys = np.array([tree.index_of(n) for n in "ABC"])
    lab = plan.coupling(keys)
    assert lab[0] == lab[1] >= 0 and lab[2] == -1 and plan.couples_parents
    with pytest.raises(RuntimeError, match="only part of the nodes of row 'cross'"):
        plan.block(np.array([tree.index_of("A0"), tree.index_of("A1")]))
    only_c = plan.block(np.array([tree.index_of("C0"), tree.index_of("C1")]))
    assert only_c.n_rows == 0 and list(only_c.child_upper) == [np.inf, 9]
    assert only_c.touched_groups(np.array([0, 2])).tolist() == [True]


def test_rows_over_fixed_nodes_only_are_checked_once(tree):
    c = Constraints().add_linear({"A0": 1, "B0": 1}, lower=3, name="low")
    plan = c.resolve(tree, check=False).at_level(2, released(tree, {"C": 60}))  # A and B released 0
    assert plan.fixed_violations == [(0, 0.0)]
    assert plan.block(np.array([tree.index_of("C0"), tree.index_of("C1")])) is None


def test_exact_constants_beyond_int64_products(tree):
    big = 2 ** 31
    c = Constraints().add_linear({"A": big, "A0": 1, "A1": 1}, upper=2 ** 52, name="huge")
    r = c.resolve(tree, check=False)
    plan = r.at_level(2, released(tree, {"A": 2 ** 40}))
    assert plan.upper[0] == 2 ** 52 - big * 2 ** 40  # exact: the product is far beyond 2^53
