"""Exact budgets of HTF and the tree baselines: eq. (17) made exact, the height rule, and the
accounting identity eps_height + eps_prt * h + eps_data = eps_tot over many settings.

Oracles: eq. (17) evaluated in 50-digit mpmath, the paper's reported heights (15/16/17 for the Los
Angeles data's 3.5 M points at eps_tot = 0.1/0.3/0.5), the notes' shares (h = 15: 0.211546 and
0.006611), and exact Fraction sums."""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest

from hierdp.hierarchy.spatial import SpatialGrid
from hierdp.mechanisms import MechanismParameterError, create
from hierdp.mechanisms.spatial.budgets import geometric_level_budgets, path_remainders, uniform_level_budgets
from hierdp.mechanisms.spatial.htf import HTF, estimate_height


def _eq17(h, i):
    with mpmath.workdps(50):
        c = mpmath.cbrt(2)
        return 2 ** (mpmath.mpf(h - i) / 3) * (c - 1) / (2 ** (mpmath.mpf(h + 1) / 3) - 1)


@pytest.mark.parametrize("eps", [1e-4, 0.1, Fraction(3, 10), 1.0, 7.25])
def test_geometric_budgets_sum_exactly_and_follow_eq17(eps):
    for h in range(0, 41):
        parts = geometric_level_budgets(eps, h)
        assert len(parts) == h + 1 and all(isinstance(p, Fraction) and p > 0 for p in parts)
        assert sum(parts) == Fraction(eps)  # exactly, not within a tolerance
        assert all(parts[i] >= parts[i + 1] for i in range(h))  # leaves get the most
        for i, p in enumerate(parts):
            # levels >= 1 are rounded down to 2^-60 (relative error < 2^-60 * h / eps_i < 1e-15 here);
            # the leaf takes the remainder: off by at most the sum of the others' rounding
            assert abs(float(p / Fraction(eps)) - float(_eq17(h, i))) <= 1e-14


def test_paper_shares_for_height_15():
    parts = geometric_level_budgets(1.0, 15)
    assert round(float(parts[0]), 6) == 0.211546 and round(float(parts[15]), 6) == 0.006611


def test_uniform_budgets_and_remainders():
    parts = uniform_level_budgets(0.3, 4)
    assert sum(parts) == Fraction(0.3) and len(set(parts)) == 1
    g = geometric_level_budgets(0.3, 6)
    rem = path_remainders(g)
    assert rem[0] == 0 and all(rem[i] + sum(g[i:]) == Fraction(0.3) for i in range(7))


def test_height_rule_gives_the_papers_heights():
    for eps, want in ((0.1, 15), (0.3, 16), (0.5, 17)):
        h, raw = estimate_height(3_500_000, Fraction(eps), Fraction(10), 40)
        assert (h, raw) == (want, want)
    assert estimate_height(-5, Fraction(1, 10), Fraction(10), 20) == (1, None)  # |D| + noise <= 0
    assert estimate_height(10 ** 9, Fraction(10), Fraction(10), 20) == (20, 29)  # clamped to the grid
    assert estimate_height(50, Fraction(1, 10), Fraction(10), 20) == (1, -1)  # log2(0.5) = -1 -> 1
    # exactly a power of two: floor(log2(2^k)) = k
    assert estimate_height(1024 * 10, Fraction(1), Fraction(10), 40) == (10, 10)
    assert estimate_height(1024 * 10 - 1, Fraction(1), Fraction(10), 40) == (9, 9)


def _grid(seed):
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.normal(9, 2, 600), rng.uniform(0, 32, 200)]).clip(0, 32)
    y = np.concatenate([rng.normal(20, 4, 600), rng.uniform(0, 32, 200)]).clip(0, 32)
    return SpatialGrid.from_points(x, y, shape=(32, 32), box=(0, 32, 0, 32))


def test_budget_parts_sum_exactly_for_many_settings():
    rng = np.random.default_rng(5)
    grid = _grid(0)
    seen_heights = set()
    for t in range(60):
        eps = float(rng.choice([0.05, 0.1, 0.3, 0.5, 1.0, 3.0]))
        prt = eps * float(rng.uniform(0.001, 0.05))
        fixed = int(rng.integers(1, 9)) if rng.random() < 0.3 else None
        kw = dict(epsilon=eps, eps_prt_per_level=prt, T=int(rng.integers(0, 5)),
                  stop_count=None if rng.random() < 0.2 else float(rng.uniform(0, 60)),
                  stop_cells=int(rng.integers(0, 9)), data_budgets=str(rng.choice(["geometric", "uniform"])),
                  combine_pruned=bool(rng.random() < 0.3), height=fixed)
        if fixed is None:
            kw["eps_height"] = eps * float(rng.uniform(1e-4, 0.01))
        try:
            mech = HTF(**kw)
        except MechanismParameterError:
            continue  # budgets that cannot cover a height-1 partition are refused (tested below)
        rel = mech.release(grid, seed=t)
        acc = rel.accounting
        ex = rel.details["exact"]
        h = rel.details["height"]
        seen_heights.add(h)
        assert acc.spent == acc.total == mech.spec.budget
        assert ex["epsilon_height"] + h * ex["epsilon_prt_per_level"] + ex["epsilon_data"] == Fraction(eps)
        assert sum(ex["epsilon_data_levels"]) == ex["epsilon_data"]
        labels = [s.label for s in acc.spends]
        assert sum(1 for lab in labels if lab.startswith("partition")) == h
        assert sum(1 for lab in labels if lab.startswith("data")) == h + 1
        data = sum(s.budget.exact_parameters["epsilon"] for s in acc.spends if s.label.startswith("data"))
        assert data == ex["epsilon_data"]
        # a leaf at height i (i > 0) was drawn with everything its path had left: sum_{j<i} eps_j
        for i in set(rel.details["leaf_heights"].tolist()):
            assert ex["remainders"][i] + sum(ex["epsilon_data_levels"][i:]) == ex["epsilon_data"]
        assert rel.check_consistency() == []
    assert len(seen_heights) >= 4


@pytest.mark.parametrize("kwargs, match", [
    ({"epsilon": 0.01, "eps_prt_per_level": 0.005, "eps_height": 0.005}, "do not cover the partitioning"),
    ({"epsilon": 0.01, "eps_prt_per_level": 0.002, "height": 5}, "do not cover the partitioning"),
    ({"epsilon": 0.01, "eps_prt": 0.0099, "eps_height": 0.0001}, "do not cover the partitioning"),
    ({"epsilon": 1.0, "eps_prt": 0.1, "eps_prt_per_level": 0.01}, "not both"),
    ({"epsilon": 1.0, "stop_count": -1}, "stop_count"),
    ({"epsilon": 1.0, "stop_count": float("nan")}, "stop_count"),
    ({"epsilon": 1.0, "stop_count": float("inf")}, "stop_count"),
    ({"epsilon": 1.0, "stop_cells": -2}, "stop_cells"),
    ({"epsilon": 1.0, "stop_cells": 2.5}, "stop_cells"),
    ({"epsilon": 1.0, "T": -1}, "T"),
    ({"epsilon": 1.0, "eps_height": 0.0}, "eps_height"),
    ({"epsilon": 1.0, "height": 4, "eps_height": 0.01}, "eps_height"),
    ({"epsilon": 1.0, "bounded": True, "eps_height": 0.01}, "eps_height"),
    ({"epsilon": 1.0, "eps_prt_per_level": -0.1}, "eps_prt_per_level"),
    ({"epsilon": 1.0, "split": "median"}, "split"),
    ({"epsilon": 1.0, "data_budgets": "linear"}, "data_budgets"),
    ({"epsilon": 1.0, "height": 0}, "height"),
    ({"epsilon": 1.0, "solver": "highs"}, "does not use a solver"),
])
def test_bad_htf_parameters_are_refused_at_construction(kwargs, match):
    with pytest.raises(MechanismParameterError, match=match):
        HTF(**kwargs)


def test_heights_beyond_the_grid_are_refused_before_noise():
    grid = _grid(1)
    rng = np.random.default_rng(0)
    state = dict(rng.bit_generator.state)
    with pytest.raises(MechanismParameterError, match="exceeds"):
        HTF(epsilon=1.0, height=11, eps_prt_per_level=0.01).release(grid, rng=rng)  # 32 x 32: at most 10
    assert rng.bit_generator.state == state


def test_tree_baselines_split_their_budget_exactly():
    grid = _grid(2)
    for name, kw in (("quadtree", {"height": 4, "budgets": "geometric"}),
                     ("quadtree", {"height": 3, "budgets": "uniform"}), ("kdtree", {"height": 5}),
                     ("kdtree", {"height": 6, "hybrid": True, "budgets": "uniform"})):
        rel = create(name, epsilon=0.7, **kw).release(grid, seed=1)
        assert rel.accounting.spent == rel.accounting.total
        if name == "kdtree":
            med = sum(s.budget.exact_parameters["epsilon"] for s in rel.accounting.spends
                      if s.label.startswith("median"))
            assert med == Fraction(0.7) * Fraction(0.15)
