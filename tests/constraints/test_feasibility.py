"""The feasibility check before any noise, and the irreducible subsets it names (oracle: scipy MILP)."""

from __future__ import annotations

import numpy as np
import pytest

import hierdp
from hierdp.constraints import ConstraintsInfeasible

from .oracles import Spec, milp_feasible


def random_instance(seed: int) -> tuple[hierdp.Hierarchy, Spec]:
    """Root -> 3 regions -> 2-3 leaves; counts up to 50; 2-4 rows and 1-3 bounds, often conflicting."""
    rng = np.random.default_rng(1000 + seed)
    edges, counts = [], {}
    for r in "ABC":
        edges.append(("R", r))
        for i in range(int(rng.integers(2, 4))):
            edges.append((r, f"{r}{i}"))
            counts[f"{r}{i}"] = int(rng.integers(0, 50))
    tree = hierdp.Hierarchy.from_edges(edges, counts=counts)
    names = [str(n) for n in tree.names][1:]
    total = int(tree.counts[0])
    spec = Spec()
    for _ in range(int(rng.integers(2, 5))):
        pick = rng.choice(len(names), size=int(rng.integers(1, 4)), replace=False)
        terms = {names[j]: int(rng.choice([1, 1, 2, -1, 3])) for j in pick}
        mid = int(rng.integers(-total // 2, total))
        width = int(rng.integers(0, total // 3 + 1))
        side = rng.integers(0, 3)
        spec.rows.append((terms, float(mid) if side != 1 else -np.inf, float(mid + width) if side != 0 else np.inf))
    for j in rng.choice(len(names), size=int(rng.integers(1, 4)), replace=False):
        lo = int(rng.integers(0, total // 2 + 1))
        spec.bounds[names[j]] = (float(lo), float(lo + rng.integers(0, total // 2 + 1)))
    return tree, spec


@pytest.mark.parametrize("root_public", [True, False])
def test_the_check_agrees_with_an_independent_milp(root_public):
    seen = {True: 0, False: 0}
    for seed in range(24):
        tree, spec = random_instance(seed)
        expected = milp_feasible(tree, spec, int(tree.counts[0]) if root_public else None)
        seen[expected] += 1
        c = spec.to_constraints()
        if expected:
            c.resolve(tree, root_public=root_public)
            continue
        with pytest.raises(ConstraintsInfeasible) as info:
            c.resolve(tree, root_public=root_public)
        named = set(info.value.entries)
        assert named, info.value
        sub = Spec(rows=[row for i, row in enumerate(spec.rows) if f"r{i}" in named],
                   bounds={n: b for n, b in spec.bounds.items() if f"b:{n}" in named})
        root = int(tree.counts[0]) if root_public else None
        assert not milp_feasible(tree, sub, root), "the named subset must be infeasible"
        for drop in named:  # and irreducible: without any one of its entries it is feasible
            fewer = Spec(rows=[row for i, row in enumerate(spec.rows) if f"r{i}" in named - {drop}],
                         bounds={n: b for n, b in spec.bounds.items() if f"b:{n}" in named - {drop}})
            assert milp_feasible(tree, fewer, root), (seed, drop)
    assert seen[True] >= 4 and seen[False] >= 4


def test_integer_infeasibility_with_a_feasible_relaxation_is_found():
    """2 * A0 == 5 has a real solution, no integer one: an LP check would pass it."""
    tree = hierdp.Hierarchy.from_edges([("R", "A"), ("A", "A0"), ("A", "A1")], counts={"A0": 3, "A1": 4})
    c = hierdp.Constraints().add_linear({"A0": 2, "A1": 2}, lower=5, upper=5, name="odd")
    with pytest.raises(ConstraintsInfeasible, match="'odd'"):
        c.resolve(tree, root_public=False)


def test_the_public_root_total_counts_under_bounded_dp_only():
    tree = hierdp.Hierarchy.from_edges([("R", "A"), ("R", "B")], counts={"A": 30, "B": 20})
    c = hierdp.Constraints().add_bounds("A", upper=10, name="a").add_bounds("B", upper=10, name="b")
    with pytest.raises(ConstraintsInfeasible, match=r"public root total 50 .*'a'.*'b'"):
        c.resolve(tree)
    r = c.resolve(tree, root_public=False)  # unbounded DP: the root is measured, and will fit [0, 20]
    assert r.root_interval == (0.0, 20.0)
