"""The ``ortools`` plug-in: exact encodings against brute force, GLOP against HiGHS, clear refusals."""

import numpy as np
import pytest

import hierdp
from hierdp.models import Problem
from hierdp.solvers import SolverFailed, UnsupportedProblem
from hierdp.solvers.ortools import grid_scale

from oracles import brute_force


@pytest.mark.parametrize("seed", range(6))
def test_linf_rank_encoding_is_exact_for_real_targets(seed):
    rng = np.random.default_rng(seed)
    # fractions chosen to collide (r and 1 - r) plus arbitrary reals and negatives
    x = np.r_[rng.choice([0.25, 0.5, 0.75, -0.25, 1.75], 3), rng.normal(1, 2, 3)]
    p = Problem.from_groups(x, [0, 3, 6], [2, 4], objective="linf")
    sol = hierdp.solve(p, solver="ortools")
    assert sol.objective == pytest.approx(brute_force(p, 0, 4), abs=1e-12)


def test_linf_group_weights_and_tree():
    parent = [-1, 0, 0, 1, 1, 2]
    p = Problem(parent, [np.nan, 3.3, 1.4, 0.6, 2.2, 1.9], fixed=[5] + [np.nan] * 5, objective="linf",
                weights=[1, 2.5, 2.5, 2.5, 2.5, 2.5])
    sol = hierdp.solve(p, solver="ortools")
    assert sol.objective == pytest.approx(brute_force(p, 0, 5), abs=1e-12)


def test_l1_grid_targets_weights_and_linear_constraint():
    p = Problem.from_groups([1.25, 3.5, 0.75, 2.0], [0, 2, 4], [5, 3], objective="l1",
                            weights=np.array([1.0, 0.5, 2.0, 1.5]))
    p.add_linear({2: 1, 4: 2}, lower=5.5)  # integer lhs: means >= 6
    sol = hierdp.solve(p, solver="ortools")
    assert sol.values[2] + 2 * sol.values[4] >= 6
    assert sol.objective == pytest.approx(brute_force(p, 0, 5), abs=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_integer_l2_grid_targets_tree_and_weights(seed):
    rng = np.random.default_rng(seed)
    parent = [-1, 0, 0, 1, 1, 2]
    p = Problem(parent, np.r_[np.nan, np.round(rng.normal(2, 2, 5) * 2) / 2], fixed=[6] + [np.nan] * 5,
                objective="l2", weights=[1, 1, 0.5, 2, 1.25, 1])
    sol = hierdp.solve(p, solver="ortools")
    assert sol.objective == pytest.approx(brute_force(p, 0, 6), abs=1e-12)


def test_continuous_glop_matches_highs():
    rng = np.random.default_rng(8)
    sizes = rng.integers(1, 8, 60)
    off = np.r_[0, np.cumsum(sizes)]
    tot = rng.integers(0, 30, 60).astype(float)
    x = np.repeat(tot / sizes, sizes) + rng.normal(0, 4, off[-1])
    for objective in ("linf", "l1"):
        p = Problem.from_groups(x, off, tot, objective=objective, integer=False)
        a = hierdp.solve(p, solver="ortools")
        b = hierdp.solve(p, solver="highs")
        assert a.stats["backend"] == "glop"
        assert a.objective == pytest.approx(b.objective, rel=1e-8)


def test_grid_scale():
    assert grid_scale(np.array([1.0, -3.0])) == 1
    assert grid_scale(np.array([0.5, 0.25])) == 4
    assert grid_scale(np.array([0.1, 2.35])) == 100
    assert grid_scale(np.array([np.pi])) is None


@pytest.mark.parametrize("make,why", [
    (lambda: Problem.from_groups([np.pi, 1.0], [0, 2], [4], objective="l1"), "grid"),
    (lambda: Problem.from_groups([1.0, 2.0], [0, 2], [3], objective="l2", integer=False), "QP"),
    (lambda: Problem.from_groups([np.e, 2.0], [0, 2], [3], objective="l2"), "grid"),
    (lambda: Problem.from_groups([1.1, np.pi], [0, 2], [3], weights=np.array([1.0, 2.0])), "unequal weights"),
    (lambda: Problem.from_groups([1.0, 2.0], [0, 2], [3]).on_pyomo_model(lambda m, p: None), "hooks"),
    (lambda: Problem.from_groups([1.0, 2.0], [0, 2], [3]).add_linear({1: 0.5}, lower=1), "integer coefficients"),
    (lambda: Problem.from_groups([1.0, np.pi, 3.0], [0, 1, 3], [1, 5]).add_linear({2: 1, 3: 1}, lower=1),
     "coupled by a row"),
    (lambda: Problem([-1, 0], [3.0, 2.0], objective="linf"), "finite domains"),
])
def test_refusals(make, why):
    with pytest.raises(UnsupportedProblem, match=why):
        hierdp.solve(make(), solver="ortools")


def test_infeasible_and_time_limit():
    p = Problem.from_groups([3.0, 4.0], [0, 2], [10]).add_linear({1: 1, 2: 1}, lower=100)
    with pytest.raises(SolverFailed, match="infeasible"):
        hierdp.solve(p, solver="ortools")
    rng = np.random.default_rng(9)
    sizes = rng.integers(2, 11, 400)
    off = np.r_[0, np.cumsum(sizes)]
    tot = rng.integers(0, 200, 400).astype(float)
    big = Problem.from_groups(np.repeat(tot / sizes, sizes) + rng.normal(0, 10, off[-1]), off, tot)
    with pytest.raises(SolverFailed, match="time limit"):
        hierdp.solve(big, solver="ortools", time_limit=1e-3, batch_size=400)
