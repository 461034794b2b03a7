"""The ``highs`` plug-in against brute-force enumeration, closed forms, and its own two paths."""

import numpy as np
import pytest

import hierdp
from hierdp.models import Problem
from hierdp.solvers import SolverFailed, UnsupportedProblem

from oracles import brute_force


def small_tree(objective: str, integer: bool = True, seed: int = 0) -> Problem:
    """Root (fixed 5) -> a, b; a -> a1, a2; b -> b1: 5 free nodes."""
    rng = np.random.default_rng(seed)
    parent = [-1, 0, 0, 1, 1, 2]
    target = np.r_[np.nan, rng.normal(2.5, 2.0, 5)]
    fixed = [5, np.nan, np.nan, np.nan, np.nan, np.nan]
    return Problem(parent, target, fixed=fixed, objective=objective, integer=integer,
                   names=["r", "a", "b", "a1", "a2", "b1"])


@pytest.mark.parametrize("objective", ["linf", "l1", "l2"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tree_matches_brute_force(objective, seed):
    p = small_tree(objective, seed=seed)
    sol = hierdp.solve(p, solver="highs")
    assert sol.objective == pytest.approx(brute_force(p, 0, 5), abs=1e-7)


@pytest.mark.parametrize("objective", ["linf", "l1", "l2"])
def test_level_with_weights_and_bounds_matches_brute_force(objective):
    rng = np.random.default_rng(3)
    p = Problem.from_groups(rng.normal(2, 3, 5), [0, 3, 5], [6, 4], objective=objective,
                            weights=None if objective == "linf" else rng.uniform(0.5, 2, 5))
    p.add_bounds(3, upper=2).add_bounds(5, lower=1)
    sol = hierdp.solve(p, solver="highs")
    assert sol.objective == pytest.approx(brute_force(p, 0, 6), abs=1e-7)


def test_integer_l2_tree_without_fixed_root_uses_window():
    # no fixed node at all and no non-negativity: only the proven window bounds the epigraph
    p = Problem([-1, 0, 0, 1, 1], [10.3, 4.9, 6.2, 2.6, 1.1], objective="l2", nonnegative=False)
    sol = hierdp.solve(p, solver="highs")
    assert sol.objective == pytest.approx(brute_force(p, -2, 13), abs=1e-7)


def test_continuous_weighted_l2_closed_form():
    # one group, no sign constraint: y_i = x_i + (T - sum x) / (w_i * sum(1/w))
    rng = np.random.default_rng(4)
    x = rng.normal(0, 5, 7)
    w = rng.uniform(0.5, 3, 7)
    p = Problem.from_groups(x, [0, 7], [10.0], objective="l2", integer=False, nonnegative=False, weights=w)
    sol = hierdp.solve(p, solver="highs")
    expect = x + (10.0 - x.sum()) / (w * np.sum(1 / w))
    np.testing.assert_allclose(sol.values[1:], expect, atol=1e-7)


@pytest.mark.parametrize("objective,integer", [("linf", True), ("l1", True), ("l2", True), ("l2", False),
                                               ("linf", False)])
def test_direct_and_pyomo_paths_and_batching_agree(objective, integer):
    rng = np.random.default_rng(5)
    sizes = rng.integers(1, 6, 40)
    off = np.r_[0, np.cumsum(sizes)]
    tot = rng.integers(0, 20, 40).astype(float)
    x = np.repeat(tot / sizes, sizes) + rng.normal(0, 3, off[-1])
    p = Problem.from_groups(x, off, tot, objective=objective, integer=integer)
    one = hierdp.solve(p, solver="highs", batch_size=10_000, qp_batch_size=10_000)
    many = hierdp.solve(p, solver="highs", batch_size=7, qp_batch_size=7)
    pyo = hierdp.solve(p, solver="highs", path="pyomo", batch_size=13, qp_batch_size=13)
    assert many.stats["batches"] == 6
    assert many.objective == pytest.approx(one.objective, rel=1e-9)
    assert pyo.objective == pytest.approx(one.objective, rel=1e-9)


def test_linear_constraint_couples_groups_in_one_batch():
    p = Problem.from_groups([5.0, 5.0, 1.0, 9.0], [0, 2, 4], [10, 10], objective="l1")
    p.add_linear({2: 1, 4: 1}, lower=15)  # child 0 of group 0 + child 0 of group 1 >= 15
    sol = hierdp.solve(p, solver="highs", batch_size=1)
    assert sol.values[2] + sol.values[4] >= 15
    assert sol.objective == pytest.approx(brute_force(p, 0, 10))


def test_infeasible_linear_constraint_fails():
    p = Problem.from_groups([3.0, 4.0], [0, 2], [10])
    p.add_linear({1: 1, 2: 1}, lower=100)
    with pytest.raises(SolverFailed, match="infeasible"):
        hierdp.solve(p, solver="highs")


def test_constraint_over_fixed_nodes_only_fails():
    p = Problem.from_groups([3.0, 4.0], [0, 2], [10])
    p.add_linear({0: 1}, upper=5)  # the fixed parent is 10
    with pytest.raises(SolverFailed, match="infeasible"):
        hierdp.solve(p, solver="highs")


def test_time_limit_fails_with_status():
    rng = np.random.default_rng(6)
    g = 3000
    sizes = rng.integers(2, 11, g)
    off = np.r_[0, np.cumsum(sizes)]
    tot = rng.integers(0, 200, g).astype(float)
    p = Problem.from_groups(np.repeat(tot / sizes, sizes) + rng.normal(0, 10, off[-1]), off, tot)
    with pytest.raises(SolverFailed, match="time limit"):
        hierdp.solve(p, solver="highs", time_limit=1e-4, batch_size=3000)


def test_unbounded_integer_l2_with_user_constraint_is_solved_exactly():
    # user constraints void the proximity window and the domain is unbounded: the lazy chord cuts
    # need neither (issue 19); brute force over a box that holds the optimum is the oracle
    from exact_oracles import enumerate_optimum

    p = Problem([-1, 0, 0], [4.2, 1.1, 2.9], objective="l2", nonnegative=False)
    p.add_linear({1: 1, 2: -1}, upper=0)
    assert hierdp.solvers.get("highs").unsupported(p) == []
    sol = hierdp.solve(p, solver="highs")
    assert sol.objective == pytest.approx(enumerate_optimum(p, -6, 12), abs=1e-9)
    assert sol.bound is not None and sol.bound <= sol.objective + 1e-9


def test_unknown_option_is_an_error():
    with pytest.raises(TypeError, match="unknown option"):
        hierdp.solve(Problem.from_groups([1.0], [0, 1], [1]), solver="highs", gap=0.1)


def test_hooks_force_pyomo_path_and_direct_refuses_them():
    p = Problem.from_groups([3.0, 4.0], [0, 2], [7])
    p.on_pyomo_model(lambda m, prob: None)
    assert hierdp.solve(p, solver="highs").stats["path"] == "pyomo"
    with pytest.raises(UnsupportedProblem, match="direct path"):
        hierdp.solve(p, solver="highs", path="direct")


def test_regression_highs_mip_presolve_bug():
    # found by the property test: HiGHS 1.14 MIP presolve returned 12.6875 as "optimal" here;
    # the plug-in turns MIP presolve off by default
    nan, inf = np.nan, np.inf
    p = Problem([-1, 0, 0, 2, 0, 0, 3, 0, 1], [2.25, nan, 0.25, -2.25, 1.0, -0.0, 0.25, 1.25, 1.5],
                fixed=[2, 0, nan, nan, nan, 0, 1, nan, 0], objective="l2",
                upper=[2, inf, inf, inf, inf, inf, inf, 1, inf])
    assert brute_force(p, 0, 2) == pytest.approx(12.1875)
    assert hierdp.solve(p, solver="highs").objective == pytest.approx(12.1875)
    assert hierdp.solve(p, solver="highs", path="pyomo").objective == pytest.approx(12.1875)


def test_regression_highs_mip_presolve_bug_l1():
    # found by a stress run: with MIP presolve on, HiGHS 1.14 returns 9.0 as "optimal" here
    nan, inf = np.nan, np.inf
    p = Problem([-1, 0, 1, 1, 3, 0], [3.0, 3.0, 2.0, -0.0, -1.0, 2.0], fixed=[9, nan, 5, nan, nan, nan],
                objective="l1", upper=[inf, 8, inf, inf, inf, inf])
    assert brute_force(p, 0, 9) == pytest.approx(5.0)
    assert hierdp.solve(p, solver="highs").objective == pytest.approx(5.0)
