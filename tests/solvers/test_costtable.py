"""The ``costtable`` plug-in (paper 001's cost-table DP) against independent oracles.

Oracles: exhaustive enumeration on tiny trees; a MIP of our own (scipy ``milp`` with the convex
cost as a piecewise-linear epigraph over integer breakpoints); the ``highs`` plug-in when present;
and an exact optimality certificate for separable convex costs on a tree (no residual cycle of
negative cost: no unit move between two sibling subtrees, nor of the total of a free root, lowers
the cost), whose subtree marginals are computed by a greedy recursion independent of the solver.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

import hierdp.solvers
from hierdp.models.problem import Problem, ProblemError
from hierdp.solvers import UnsupportedProblem, solve
from hierdp.solvers.costtable import CostTableSolver, InfeasibleTree, costtable_solve

HAVE_HIGHS_PLUGIN = (Path(hierdp.solvers.__file__).parent / "highs.py").exists()


# ---------------------------------------------------------------------- helpers / oracles
def random_tree(rng: np.random.Generator, depth: int, fanout: int) -> np.ndarray:
    """Parent array of a random tree: every node above ``depth`` gets 1..fanout children."""
    parent = [-1]
    frontier = [0]
    for _ in range(depth):
        nxt = []
        for p in frontier:
            for _ in range(int(rng.integers(1, fanout + 1))):
                parent.append(p)
                nxt.append(len(parent) - 1)
        frontier = nxt
    return np.array(parent, dtype=np.int64)


def brute_force(problem: Problem, box: int) -> float:
    """Least objective over every leaf assignment in ``[0, box]`` (internal nodes = sums)."""
    n = problem.n
    leaves = np.flatnonzero(problem.n_children == 0)
    below = np.zeros((n, leaves.size))
    for j, leaf in enumerate(leaves):
        i = leaf
        while i >= 0:
            below[i, j] = 1.0
            i = problem.parent[i]
    combos = np.array(list(itertools.product(range(box + 1), repeat=leaves.size)), dtype=float)
    vals = combos @ below.T
    fx = problem.is_fixed
    ok = np.all(vals[:, fx] == problem.fixed[fx], axis=1)
    ok &= np.all(vals >= problem.effective_lower - 1e-9, axis=1)
    ok &= np.all(vals <= problem.upper + 1e-9, axis=1)
    m = problem.is_free & ~np.isnan(problem.target)
    obj = (problem.weights[m] * (vals[:, m] - problem.target[m]) ** 2).sum(axis=1)
    obj[~ok] = np.inf
    return float(obj.min())


def milp_oracle(problem: Problem, box: int) -> float:
    """Exact integer L2 optimum with every value in ``[0, box]`` via scipy's MIP (HiGHS inside).

    The convex cost of node i is the epigraph ``z_i >= f_i(k) + (f_i(k+1) - f_i(k)) (y_i - k)`` for
    every integer ``k``: exact at integer ``y_i``.
    """
    n = problem.n
    m = problem.is_free & ~np.isnan(problem.target) & (problem.weights > 0)
    costed = np.flatnonzero(m)
    nz = costed.size
    rows, cols, data, ub = [], [], [], []
    r = 0
    for j, i in enumerate(costed):
        w, x = problem.weights[i], problem.target[i]
        for k in range(box):
            d = w * ((k + 1 - x) ** 2 - (k - x) ** 2)
            rows += [r, r]
            cols += [i, n + j]
            data += [d, -1.0]
            ub.append(d * k - w * (k - x) ** 2)
            r += 1
    epi = LinearConstraint(coo_matrix((data, (rows, cols)), shape=(r, n + nz)), -np.inf, np.array(ub))
    kids = np.flatnonzero(problem.parent >= 0)
    internal = np.flatnonzero(problem.n_children > 0)
    row_of = {int(p): q for q, p in enumerate(internal)}
    erows = [row_of[int(p)] for p in internal] + [row_of[int(problem.parent[c])] for c in kids]
    ecols = list(internal) + list(kids)
    edata = [1.0] * internal.size + [-1.0] * kids.size
    cons = [epi]
    if internal.size:
        eq = coo_matrix((edata, (erows, ecols)), shape=(internal.size, n + nz))
        cons.append(LinearConstraint(eq, 0.0, 0.0))
    lo = np.concatenate([np.maximum(problem.effective_lower, 0), np.full(nz, -np.inf)])
    hi = np.concatenate([np.minimum(problem.upper, box), np.full(nz, np.inf)])
    fx = problem.is_fixed
    lo[:n][fx] = problem.fixed[fx]
    hi[:n][fx] = problem.fixed[fx]
    c = np.concatenate([np.zeros(n), np.ones(nz)])
    integrality = np.concatenate([np.ones(n), np.zeros(nz)])
    res = milp(c, constraints=cons, bounds=Bounds(lo, hi), integrality=integrality,
               options={"mip_rel_gap": 0.0, "presolve": True})
    assert res.status == 0, res.message
    return float(res.fun) + 0.0


def optimality_violations(problem: Problem, values: np.ndarray) -> list[str]:
    """Exact optimality certificate for separable convex costs on a tree.

    ``up[i]`` / ``down[i]``: least cost of raising / greatest saving of lowering node i by one
    unit, its subtree following along the cheapest path (greedy recursion; inf when the move is
    blocked by a fixed value or a bound). The solution is optimal iff at every internal node the
    cheapest child raise costs at least the dearest child lowering, and a free root cannot move.
    """
    y = np.asarray(values, dtype=float)
    m = problem.is_free & ~np.isnan(problem.target)
    w = np.where(m, problem.weights, 0.0)
    x = np.where(m, np.nan_to_num(problem.target), 0.0)
    up = w * (2 * (y - x) + 1)
    down = w * (2 * (y - 1 - x) + 1)
    child_ptr, child_idx = problem.children_csr()
    depth = problem.depth()
    out = []
    for d in range(int(depth.max()), -1, -1):
        for i in np.flatnonzero(depth == d):
            kids = child_idx[child_ptr[i]:child_ptr[i + 1]]
            if kids.size:
                if up[kids].min() < down[kids].max() - 1e-9 * max(1.0, abs(down[kids].max())):
                    out.append(f"node {i}: moving a unit between children lowers the cost")
                up[i] += up[kids].min()
                down[i] += down[kids].max()
            if problem.is_fixed[i] or y[i] + 1 > problem.upper[i]:
                up[i] = np.inf
            if problem.is_fixed[i] or y[i] - 1 < problem.effective_lower[i]:
                down[i] = -np.inf
            if problem.parent[i] < 0 and (up[i] < -1e-9 or down[i] > 1e-9):
                out.append(f"root {i}: moving the total lowers the cost")
    return out


def check_optimal(problem: Problem, expected_objective: float | None = None) -> np.ndarray:
    """Solve with costtable; assert feasibility, the certificate, and the oracle's objective."""
    sol = solve(problem, solver="costtable")
    assert sol.values.dtype == np.int64 and sol.values.shape == (problem.n,)
    assert problem.violations(sol.values) == []
    assert optimality_violations(problem, sol.values) == []
    assert sol.objective == pytest.approx(problem.objective_value(sol.values))
    if expected_objective is not None:
        assert sol.objective == pytest.approx(expected_objective, rel=1e-9, abs=1e-9)
    return sol.values


def random_problem(rng: np.random.Generator, depth: int, fanout: int, box: int) -> Problem | None:
    """Random small tree problem: noisy (possibly negative, fractional, NaN) targets, maybe
    weights, fixed nodes and bounds; every leaf bounded by ``box`` so enumeration is exact."""
    parent = random_tree(rng, depth, fanout)
    n = parent.size
    target = rng.integers(-3, box + 2, n).astype(float)
    if rng.random() < 0.5:
        target += rng.normal(0, 0.8, n)
    target[rng.random(n) < 0.15] = np.nan
    weights = rng.choice([0.0, 0.5, 1.0, 2.0, 3.0], n) if rng.random() < 0.4 else None
    upper = np.full(n, float(box))
    lower = None
    if rng.random() < 0.3:
        lower = np.where(rng.random(n) < 0.2, rng.integers(0, 2, n), 0).astype(float)
    fixed = np.full(n, np.nan)
    if rng.random() < 0.4:
        fixed[0] = rng.integers(0, box + 1)
    if rng.random() < 0.3 and n > 1:
        fixed[rng.integers(1, n)] = rng.integers(0, 3)
    try:
        return Problem(parent, target, fixed=fixed, weights=weights, lower=lower, upper=upper)
    except ProblemError:  # e.g. a fixed node whose children are all fixed inconsistently
        return None


def feasible(problem: Problem | None) -> bool:
    return problem is not None and not CostTableSolver().extra_checks(problem)


# ---------------------------------------------------------------------- oracles
@pytest.mark.parametrize("seed", range(6))
def test_matches_brute_force_on_tiny_trees(seed):
    rng = np.random.default_rng(seed)
    done = 0
    while done < 15:
        depth = int(rng.integers(1, 4))
        prob = random_problem(rng, depth, 3, box=5)
        if not feasible(prob) or (prob.n_children == 0).sum() > 5:
            continue
        check_optimal(prob, brute_force(prob, 5))
        done += 1


def test_unbounded_free_root_matches_brute_force():
    """No upper bounds: the solver searches a window of its own. The certificate proves global
    optimality; enumeration over a box holding the solution must then find the same objective."""
    rng = np.random.default_rng(11)
    for _ in range(40):
        parent = random_tree(rng, int(rng.integers(1, 3)), 2)
        n = parent.size
        target = rng.integers(-3, 6, n) + rng.normal(0, 0.5, n)
        prob = Problem(parent, target)
        values = check_optimal(prob)
        leaves = prob.n_children == 0
        box = 9
        assert values[leaves].max() <= box
        assert prob.objective_value(values) == pytest.approx(brute_force(prob, box), rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_matches_own_milp_on_random_trees(seed):
    rng = np.random.default_rng(100 + seed)
    done = 0
    while done < 3:
        box = 30
        prob = random_problem(rng, 3, 5, box=box)
        if not feasible(prob):
            continue
        check_optimal(prob, milp_oracle(prob, box))
        done += 1


@pytest.mark.skipif(not HAVE_HIGHS_PLUGIN, reason="hierdp/solvers/highs.py not written yet")
@pytest.mark.parametrize("seed", range(3))
def test_matches_highs_plugin(seed):
    rng = np.random.default_rng(200 + seed)
    done = 0
    while done < 2:
        prob = random_problem(rng, 3, 4, box=25)
        if not feasible(prob):
            continue
        other = solve(prob, solver="highs")
        check_optimal(prob, other.objective)
        done += 1


# ---------------------------------------------------------------------- specific features
def test_fixed_internal_node_and_bounds():
    #        0
    #     1     2(fixed 10)
    #    3 4    5 6
    parent = [-1, 0, 0, 1, 1, 2, 2]
    target = [30.0, 12.0, 7.0, 3.0, 4.0, 9.0, 8.0]
    fixed = [np.nan, np.nan, 10, np.nan, np.nan, np.nan, np.nan]
    upper = [np.inf, np.inf, np.inf, np.inf, np.inf, 4, np.inf]
    prob = Problem(parent, target, fixed=fixed, upper=upper)
    values = check_optimal(prob, brute_force(prob, 20))
    assert values[2] == 10 and values[5] <= 4 and values[5] + values[6] == 10


def test_weights_and_nan_targets():
    parent = [-1, 0, 0, 0]
    # 3 (a - 10)^2 + (b - 10)^2 with a + b + c = 12 and c cost-free: c = 0, a = 8, b = 4
    prob = Problem(parent, [np.nan, 10.0, 10.0, np.nan], fixed=[12, np.nan, np.nan, np.nan], weights=[1, 3, 1, 1])
    values = check_optimal(prob, brute_force(prob, 12))
    assert tuple(values) == (12, 8, 4, 0)
    # a larger total: the cost-free child absorbs the surplus, the others sit on their targets
    prob2 = Problem(parent, [np.nan, 10.0, 10.0, np.nan], fixed=[30, np.nan, np.nan, np.nan], weights=[1, 3, 1, 1])
    assert tuple(check_optimal(prob2, 0.0)) == (30, 10, 10, 10)
    # weight 0 acts like a NaN target
    prob3 = Problem(parent, [np.nan, 10.0, 10.0, 50.0], fixed=[30, np.nan, np.nan, np.nan], weights=[1, 3, 1, 0])
    assert tuple(check_optimal(prob3, 0.0)) == (30, 10, 10, 10)


def test_forest_solves_each_tree():
    parent = [-1, 0, 0, -1, 3, 3, 3, -1]
    target = [5.0, 4.0, 4.0, 1.0, -2.0, 0.4, 2.6, -7.0]
    prob = Problem(parent, target)
    values = check_optimal(prob, brute_force(prob, 6))
    assert values[7] == 0
    single = Problem([-1, 0, 0], target[:3])
    assert np.array_equal(values[:3], costtable_solve([-1, 0, 0], target[:3]))
    assert prob.objective_value(values) >= single.objective_value(values[:3])


def test_negative_noise_and_root_fixed_at_zero():
    parent = [-1, 0, 0, 1, 1, 2]
    target = [-4.0, -1.5, 2.0, -3.0, 0.7, 5.0]
    prob = Problem(parent, target, fixed=[0, np.nan, np.nan, np.nan, np.nan, np.nan])
    values = check_optimal(prob, 0.0 + brute_force(prob, 3))
    assert np.all(values == 0)
    free = Problem(parent, target)
    check_optimal(free, brute_force(free, 8))


def test_level_structure_problem():
    values = np.array([3.2, -1.0, 4.9, 10.0, 0.0, 2.5])
    prob = Problem.from_groups(values, [0, 3, 6], [6, 7], objective="l2")
    assert prob.structure == "level"
    check_optimal(prob, brute_force(prob, 7))


def test_equal_to_plain_numpy_entry_point():
    rng = np.random.default_rng(5)
    prob = random_problem(rng, 3, 4, box=20)
    while not feasible(prob):
        prob = random_problem(rng, 3, 4, box=20)
    a = solve(prob, solver="costtable").values
    b = costtable_solve(prob.parent, prob.target, weights=prob.weights, fixed=prob.fixed,
                        lower=prob.lower, upper=prob.upper)
    assert np.array_equal(a, b)


# ---------------------------------------------------------------------- refusals
def test_refuses_unsupported_and_infeasible():
    s = CostTableSolver()
    base = dict(parent=[-1, 0, 0], target=[5.0, 2.0, 2.0])
    assert s.unsupported(Problem(**base, objective="l1"))
    assert s.unsupported(Problem(**base, integer=False))
    assert s.unsupported(Problem(**base, nonnegative=False))
    assert s.unsupported(Problem(**base).add_linear({1: 1, 2: 1}, lower=1))
    infeasible = Problem(**base, fixed=[5, np.nan, np.nan], upper=[np.inf, 2, 2])
    why = s.unsupported(infeasible)
    assert why and "infeasible" in why[0] and "node 0" in why[0]
    with pytest.raises(UnsupportedProblem, match="infeasible"):
        solve(infeasible, solver="costtable")
    with pytest.raises(InfeasibleTree, match="node 0"):
        costtable_solve([-1, 0, 0], [5.0, 2.0, 2.0], fixed=[5, np.nan, np.nan], upper=[np.inf, 2, 2])
    deep = Problem([-1, 0, 1, 1], [1.0, 1.0, 1.0, 1.0], lower=[0, 8, 0, 0], upper=[9, 9, 3, 4])
    assert "node 1" in s.unsupported(deep)[0]
    with pytest.raises(ProblemError, match="node 1"):  # refused when stated (issue 15, item 4)
        Problem([-1, 0], [1.0, 1.0], fixed=[np.nan, 5], upper=[np.inf, 4])


# ---------------------------------------------------------------------- scale (kept fast)
@pytest.mark.parametrize("fix_root", [False, True])
def test_three_level_tree_with_large_counts(fix_root):
    rng = np.random.default_rng(7)
    n_mid, per = 40, 50  # 2,000 leaves
    leaf_true = rng.integers(0, 10**6, n_mid * per)
    leaf_true[rng.random(leaf_true.size) < 0.1] = 0
    mid_true = leaf_true.reshape(n_mid, per).sum(axis=1)
    parent = np.concatenate([[-1], np.zeros(n_mid, np.int64), 1 + np.repeat(np.arange(n_mid), per)])
    true = np.concatenate([[mid_true.sum()], mid_true, leaf_true]).astype(float)
    target = true + rng.normal(0, 300, true.size)  # some small counts go negative
    fixed = np.full(true.size, np.nan)
    if fix_root:
        fixed[0] = true[0]
    prob = Problem(parent, target, fixed=fixed)
    values = check_optimal(prob)
    assert values.max() >= 10**6
    # float64 price path (non-integral data) and integer path agree with the certificate too
    prob_int = Problem(parent, np.round(target), fixed=fixed, weights=np.where(np.arange(true.size) % 3 == 0, 2.0, 1.0))
    check_optimal(prob_int)


def test_certificate_flags_suboptimal_solutions():
    """The certificate is an oracle only if it rejects worse solutions: perturb optimal ones."""
    rng = np.random.default_rng(21)
    flagged = 0
    for _ in range(30):
        prob = random_problem(rng, 3, 3, box=12)
        if not feasible(prob):
            continue
        values = solve(prob, solver="costtable").values
        best = prob.objective_value(values)
        free_leaves = np.flatnonzero((prob.n_children == 0) & prob.is_free)
        for a, b in itertools.permutations(free_leaves, 2):
            moved = values.copy()
            # move one unit from leaf a to leaf b along their paths (keeps consistency)
            for leaf, step in ((a, -1), (b, 1)):
                i = leaf
                while i >= 0:
                    moved[i] += step
                    i = prob.parent[i]
            if prob.violations(moved):
                continue
            worse = prob.objective_value(moved) > best + 1e-9
            assert bool(optimality_violations(prob, moved)) == worse
            flagged += worse
    assert flagged > 20


def test_deeper_tree_passes_certificate():
    rng = np.random.default_rng(31)
    parent = random_tree(rng, 4, 3)  # five levels
    n = parent.size
    depth = Problem(parent, np.zeros(n)).depth()
    target = rng.integers(0, 1000, n) * (5 - depth) + rng.normal(0, 20, n)
    for fixed_root in (np.nan, 5000.0):
        fixed = np.full(n, np.nan)
        fixed[0] = fixed_root
        check_optimal(Problem(parent, target, fixed=fixed, weights=rng.choice([1.0, 2.0, 0.25], n)))
