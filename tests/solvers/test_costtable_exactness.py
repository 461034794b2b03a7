"""The ``costtable`` DP against independent exact oracles, at every depth and magnitude.

Oracles (none shares code with the solver):

* ``enumerate_leaves``: every assignment of the leaves in a box (internal nodes are sums);
* ``table_dp``: an explicit-table DP — every node's full cost table over ``0..B`` by brute
  min-plus convolution of its children's tables (numpy broadcasting, O(B^2) per child), exact
  for problems whose every value is at most ``B``;
* the ``highs`` plug-in (QP centre + PWL-epigraph MIP) and the ``ortools`` plug-in (CP-SAT on
  chords), both exact integer-L2 formulations of their own;
* the ``projection`` plug-in (sort-based simplex projection + optimal rounding) for one level;
* closed forms (a chain takes the integer nearest the weighted mean) and the exchange
  certificate of a star (no unit move between two children lowers the cost).

Instance counts scale with ``HIERDP_COSTTABLE_FUZZ`` (default 1; e.g. 20 for a long run).
"""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest

import hierdp
from hierdp.models.problem import Problem, ProblemError
from hierdp.solvers import UnsupportedProblem, get, solve, solve_groups
from hierdp.solvers._costtable_dp import Forest, compile_domains, solve_compiled

SCALE = max(1, int(os.environ.get("HIERDP_COSTTABLE_FUZZ", "1")))


# ---------------------------------------------------------------------- oracles
def enumerate_leaves(problem: Problem, lo: int, hi: int) -> float:
    """Least objective over every leaf assignment in ``[lo, hi]`` (internal nodes = sums).

    Feasibility checks the problem's own constraints (non-negativity only if the problem has it)."""
    n = problem.n
    kids = np.flatnonzero(problem.parent >= 0)
    has_kids = np.zeros(n, bool)
    has_kids[problem.parent[kids]] = True
    leaves = np.flatnonzero(~has_kids)
    below = np.zeros((n, leaves.size))
    for j, leaf in enumerate(leaves):
        i = leaf
        while i >= 0:
            below[i, j] = 1.0
            i = problem.parent[i]
    combos = np.array(list(itertools.product(range(lo, hi + 1), repeat=leaves.size)), dtype=float)
    vals = combos @ below.T
    fx = ~np.isnan(problem.fixed)
    ok = np.all(vals[:, fx] == problem.fixed[fx], axis=1)
    lower = np.maximum(problem.lower, 0.0) if problem.nonnegative else problem.lower
    ok &= np.all(vals >= lower - 1e-9, axis=1) & np.all(vals <= problem.upper + 1e-9, axis=1)
    m = ~fx & ~np.isnan(problem.target)
    obj = (problem.weights[m] * (vals[:, m] - problem.target[m]) ** 2).sum(axis=1)
    assert ok.any(), "the oracle's box holds no feasible point"
    return float(obj[ok].min())


def table_dp(problem: Problem, big: int) -> float:
    """Exact optimum by explicit cost tables over ``0..big`` (every value of the problem must be
    at most ``big``): leaves get their cost or inf, a parent the min-plus convolution of its
    children plus its own cost; fixed values and bounds put inf outside the allowed range."""
    n = problem.n
    v = np.arange(big + 1, dtype=float)
    lower = np.maximum(problem.lower, 0.0)
    children = [[] for _ in range(n)]
    for i, p in enumerate(problem.parent):
        if p >= 0:
            children[p].append(i)
    order = []
    stack = [i for i in range(n) if problem.parent[i] < 0]
    while stack:  # parents before children; reversed below
        i = stack.pop()
        order.append(i)
        stack.extend(children[i])
    table = [None] * n
    for i in reversed(order):
        if children[i]:
            acc = table[children[i][0]]
            for c in children[i][1:]:
                # min-plus convolution truncated to 0..big
                grid = acc[:, None] + table[c][None, :]
                s = np.add.outer(np.arange(big + 1), np.arange(big + 1))
                out = np.full(big + 1, np.inf)
                keep = s <= big
                np.minimum.at(out, s[keep], grid[keep])
                acc = out
            t = acc.copy()
        else:
            t = np.zeros(big + 1)
        if not np.isnan(problem.fixed[i]):
            t = np.where(v == problem.fixed[i], t, np.inf)
        else:
            if not np.isnan(problem.target[i]):
                t = t + problem.weights[i] * (v - problem.target[i]) ** 2
            t = np.where((v >= lower[i] - 1e-9) & (v <= problem.upper[i] + 1e-9), t, np.inf)
        table[i] = t
    return float(sum(table[r].min() for r in range(n) if problem.parent[r] < 0))


def chain_optimum(x: np.ndarray, w: np.ndarray) -> float:
    """A chain forces one common value: the best integer >= 0 near the weighted mean."""
    m = np.sum(w * x) / np.sum(w)
    cands = np.unique(np.maximum([np.floor(m), np.ceil(m), 0.0], 0.0))
    return float(min(np.sum(w * (c - x) ** 2) for c in cands))


def star_certificate(values: np.ndarray, x: np.ndarray, w: np.ndarray) -> bool:
    """A fixed-total star is optimal iff no unit moves from one child to another profitably:
    the largest saving of lowering a child (> 0 only) is at most the least cost of raising one."""
    up = w * (2 * (values - x) + 1)
    down = np.where(values > 0, w * (2 * (values - x) - 1), -np.inf)
    return bool(down.max() <= up.min() + 1e-9 * max(1.0, abs(up.min())))


def check(problem: Problem, expected: float) -> np.ndarray:
    """Solve with costtable; feasible, integer, fixed nodes kept, objective = oracle's."""
    sol = solve(problem, solver="costtable")
    y = sol.values
    assert y.dtype == np.int64 and y.shape == (problem.n,)
    assert problem.violations(y) == []
    fx = problem.is_fixed
    assert np.array_equal(y[fx], problem.fixed[fx].astype(np.int64))
    assert np.all(y >= 0)
    # oracles sum the same float terms in another order: 1e-9 relative covers that rounding
    assert sol.objective == pytest.approx(expected, rel=1e-9, abs=1e-9)
    return y


# ---------------------------------------------------------------------- random instances
def random_tree(rng: np.random.Generator, depth: int, fanout: int, max_nodes: int) -> np.ndarray:
    """Random forest: 1-2 roots, every node above ``depth`` gets 0..fanout children (at least one
    path reaches ``depth``), at most ``max_nodes`` nodes."""
    parent = []
    frontier = []
    for _ in range(int(rng.integers(1, 3))):
        parent.append(-1)
        frontier.append(len(parent) - 1)
    for _level in range(depth):
        nxt = []
        for j, p in enumerate(frontier):
            k = int(rng.integers(1 if j == 0 else 0, fanout + 1))
            for _ in range(k):
                if len(parent) >= max_nodes:
                    break
                parent.append(p)
                nxt.append(len(parent) - 1)
        frontier = nxt
        if not frontier:
            break
    return np.array(parent, dtype=np.int64)


def random_problem(rng: np.random.Generator, depth: int, fanout: int, max_nodes: int, box: int,
                   grid: bool = False) -> Problem | None:
    """Noisy targets (negative, fractional, NaN), maybe weights, bounds, fixed internal nodes;
    every node bounded above by ``box`` (so enumeration and tables are exact)."""
    parent = random_tree(rng, depth, fanout, max_nodes)
    n = parent.size
    target = rng.integers(-3, box + 3, n).astype(float)
    if rng.random() < 0.6:
        target += np.round(rng.normal(0, 0.8, n) * 4) / 4 if grid else rng.normal(0, 0.8, n)
    target[rng.random(n) < 0.15] = np.nan
    weights = None
    if rng.random() < 0.5:
        weights = rng.choice([0.0, 0.5, 1.0, 2.0, 3.0] if grid else [0.0, 0.3, 1.0, 2.0, 3.7], n)
    upper = np.full(n, float(box))
    upper[rng.random(n) < 0.1] = rng.integers(0, box + 1)
    lower = np.where(rng.random(n) < 0.15, rng.integers(0, 3, n), 0).astype(float) if rng.random() < 0.4 else None
    fixed = np.full(n, np.nan)
    if rng.random() < 0.4:
        fixed[0] = rng.integers(0, box + 1)
    internal = np.flatnonzero(np.bincount(parent[parent >= 0], minlength=n) > 0)
    if internal.size and rng.random() < 0.4:
        fixed[rng.choice(internal)] = rng.integers(0, box // 2 + 1)
    try:
        p = Problem(parent, target, fixed=fixed, weights=weights, lower=lower, upper=upper)
    except ProblemError:
        return None
    return p if not get("costtable").unsupported(p) else None


@pytest.mark.parametrize("seed", range(4))
def test_tiny_trees_against_enumeration(seed):
    rng = np.random.default_rng(1000 + seed)
    done = 0
    while done < 40 * SCALE:
        p = random_problem(rng, int(rng.integers(1, 4)), 3, 9, box=5)
        if p is None or (p.n_children == 0).sum() > 5:
            continue
        check(p, enumerate_leaves(p, 0, 5))
        done += 1


@pytest.mark.parametrize("seed", range(4))
def test_deeper_trees_against_table_dp(seed):
    """Depth up to 8, forests, bounded values: the explicit-table DP is exact and independent."""
    rng = np.random.default_rng(2000 + seed)
    done = 0
    while done < 25 * SCALE:
        box = int(rng.integers(3, 9))
        p = random_problem(rng, int(rng.integers(2, 9)), 2, 30, box=box)
        if p is None:
            continue
        big = int(min(np.nansum(np.minimum(p.upper, box)), 60))
        # every value is at most the sum of the leaves' bounds; keep tables small
        leaves_sum = float(np.minimum(p.upper, box)[p.n_children == 0].sum())
        if leaves_sum > big:
            continue
        check(p, table_dp(p, int(leaves_sum)))
        done += 1


@pytest.mark.parametrize("seed", range(3))
def test_random_trees_against_highs_mip(seed):
    rng = np.random.default_rng(3000 + seed)
    done = 0
    while done < 40 * SCALE:
        p = random_problem(rng, int(rng.integers(1, 9)), 3, 25, box=int(rng.integers(5, 40)))
        if p is None:
            continue
        check(p, solve(p, solver="highs").objective)
        done += 1


@pytest.mark.parametrize("seed", range(2))
def test_random_trees_against_cpsat(seed):
    rng = np.random.default_rng(4000 + seed)
    done = 0
    while done < 30 * SCALE:
        p = random_problem(rng, int(rng.integers(1, 7)), 3, 20, box=int(rng.integers(5, 25)), grid=True)
        if p is None or get("ortools").unsupported(p):
            continue
        check(p, solve(p, solver="ortools").objective)
        done += 1


# ---------------------------------------------------------------------- depth
@pytest.mark.parametrize("depth", [100, 250])
def test_deep_chains(depth):
    rng = np.random.default_rng(depth)
    x = rng.normal(40, 15, depth + 1)
    w = rng.choice([0.5, 1.0, 2.0], depth + 1)
    p = Problem(np.arange(-1, depth), x, weights=w)
    y = check(p, chain_optimum(x, w))
    assert np.all(y == y[0])


def test_deep_narrow_tree_against_table_dp():
    """A caterpillar of depth 120 (every spine node has a leaf and the next spine node), bounded
    leaves: the explicit-table DP is exact."""
    rng = np.random.default_rng(5)
    parent = [-1]
    spine = 0
    for _ in range(120):
        parent.append(spine)
        parent.append(spine)
        spine = len(parent) - 1
    parent = np.array(parent)
    n = parent.size
    leaf = np.bincount(parent[1:], minlength=n) == 0
    upper = np.where(leaf, 2.0, np.inf)
    for trial in range(2):
        depth = Problem(parent, np.zeros(n)).depth()
        x = (2 * (121 - depth) * rng.random(n) + rng.normal(0, 1, n)).round(2)
        fixed = np.full(n, np.nan)
        if trial:
            fixed[0] = 150
            fixed[parent.size // 2 + 1] = np.nan
        p = Problem(parent, x, fixed=fixed, upper=upper, weights=rng.choice([0.5, 1.0, 3.0], n))
        check(p, table_dp(p, int(upper[leaf].sum())))


# ---------------------------------------------------------------------- magnitude and size
@pytest.mark.parametrize("shift", [10**6, 10**9, 10**12])
def test_huge_counts_equal_the_shifted_small_problem(shift):
    """Adding ``shift`` to every leaf (and the implied sums to internal nodes and the fixed root)
    moves the optimum by exactly that shift when non-negativity cannot bind; the small problem,
    allowed to go negative, is solved by enumeration. Integer and quarter targets are exact in
    float64 at 1e12, so the objectives must agree to the last unit of the small problem."""
    rng = np.random.default_rng(shift % 1000)
    for _ in range(6):
        parent = random_tree(rng, int(rng.integers(1, 4)), 3, 9)
        n = parent.size
        if (np.bincount(parent[parent >= 0], minlength=n) == 0).sum() > 4:
            continue
        x_small = np.round(rng.normal(0, 3, n) * 4) / 4
        leaves = np.bincount(parent[parent >= 0], minlength=n) == 0
        n_leaves_below = np.zeros(n)
        for leaf in np.flatnonzero(leaves):
            i = leaf
            while i >= 0:
                n_leaves_below[i] += 1
                i = parent[i]
        fixed_small = np.full(n, np.nan)
        if rng.random() < 0.5:
            fixed_small[0] = float(rng.integers(-3, 4))
        small = Problem(parent, x_small, fixed=fixed_small, nonnegative=False)
        expected = enumerate_leaves(small, -7, 7)  # the optimum is within 2 of the targets here
        big = Problem(parent, x_small + shift * n_leaves_below, fixed=fixed_small + shift * n_leaves_below)
        y = check(big, expected)
        assert y.min() >= shift - 7


def test_magnitude_limit_is_refused_before_solving():
    s = get("costtable")
    p = Problem([-1, 0, 0], [np.nan, 1.0, 2.0], fixed=[2.0**52, np.nan, np.nan])
    why = s.unsupported(p)
    assert why and "2^50" in why[0]
    with pytest.raises(UnsupportedProblem, match="2\\^50"):
        solve(p, solver="costtable")
    assert s.unsupported(Problem([-1, 0], [3e15, np.nan]))
    assert s.unsupported(Problem([-1, 0, 0], [1.0, 2.0, 3.0], weights=[1.0, 1e-40, 1.0]))


def test_one_group_of_ten_thousand_children():
    rng = np.random.default_rng(9)
    k = 10_000
    x = rng.normal(100, 40, k)
    w = rng.choice([1.0, 2.0, 0.5], k)
    total = 1_000_000
    p = Problem(np.r_[-1, np.zeros(k, np.int64)], np.r_[np.nan, x], fixed=np.r_[total, np.full(k, np.nan)],
                weights=np.r_[1.0, w])
    y = solve(p, solver="costtable").values
    assert p.violations(y) == [] and y[0] == total
    assert star_certificate(y[1:].astype(float), x, w)
    # unweighted: the projection plug-in (sort-based) gives the same optimum
    pu = Problem(np.r_[-1, np.zeros(k, np.int64)], np.r_[np.nan, x], fixed=np.r_[total, np.full(k, np.nan)])
    assert solve(pu, solver="costtable").objective == pytest.approx(solve(pu, solver="projection").objective,
                                                                    rel=1e-12)


def test_many_solves_in_one_process():
    rng = np.random.default_rng(77)
    for _ in range(300):
        p = random_problem(rng, 2, 2, 7, box=4)
        if p is None or (p.n_children == 0).sum() > 4:
            continue
        check(p, enumerate_leaves(p, 0, 4))


# ---------------------------------------------------------------------- certification
def test_far_start_and_zero_windows_still_reach_the_optimum():
    """Oracle 11: windows of radius 0 around a far-away feasible point (all mass on one leaf per
    node) touch their edges; the certificate must widen them until the optimum is inside."""
    rng = np.random.default_rng(13)
    done = 0
    while done < 30:
        p = random_problem(rng, int(rng.integers(2, 5)), 3, 20, box=12)
        if p is None or p.is_fixed.any():
            continue
        # a feasible point: every root at 0 (free roots, non-negative, no fixed nodes)
        if np.any(np.maximum(p.lower, 0) > 0):
            continue
        forest = Forest.from_parent(p.parent)
        dom = compile_domains(forest, p.target, p.weights, p.fixed, p.effective_lower, p.upper)
        res = solve_compiled(forest, dom, radius=0, internal_radius=0, start=np.zeros(p.n, np.int64))
        assert p.violations(res.values) == []
        assert p.objective_value(res.values) == pytest.approx(solve(p, solver="highs").objective, rel=1e-9, abs=1e-9)
        assert res.stats["rounds"] > 1 or p.objective_value(np.zeros(p.n)) == pytest.approx(
            p.objective_value(res.values))
        done += 1


# ---------------------------------------------------------------------- level batches
def test_solve_groups_matches_the_default_path():
    rng = np.random.default_rng(21)
    for trial in range(20):
        g = int(rng.integers(1, 30))
        sizes = rng.integers(0 if trial % 3 else 1, 12, g)
        offsets = np.r_[0, np.cumsum(sizes)]
        x = rng.normal(5, 6, offsets[-1])
        x[rng.random(x.size) < 0.1] = np.nan
        totals = np.where(sizes > 0, rng.integers(0, 60, g), 0).astype(float)
        w = rng.choice([0.0, 1.0, 2.5], x.size) if trial % 2 else None
        fast = solve_groups(x, offsets, totals, solver="costtable", objective="l2", weights=w)
        ref = solve_groups(x, offsets, totals, solver="highs", objective="l2", weights=w)
        assert fast.objective == pytest.approx(ref.objective, rel=1e-9, abs=1e-9)
        assert np.all(fast.values >= 0) and fast.values.dtype == np.int64
        assert np.array_equal(np.add.reduceat(np.r_[fast.values, 0], offsets[:-1])[sizes > 0], totals[sizes > 0])
        if w is None and not np.isnan(x).any():
            proj = solve_groups(x, offsets, totals, solver="projection", objective="l2")
            assert fast.objective == pytest.approx(proj.objective, rel=1e-9, abs=1e-9)


def test_solve_groups_refuses_like_the_default_path():
    s = get("costtable")
    with pytest.raises(ProblemError):
        s.solve_groups([1.0, np.inf], [0, 2], [3.0], objective="l2")
    with pytest.raises(ProblemError):
        s.solve_groups([1.0, 2.0], [0, 2], [3.5], objective="l2")
    with pytest.raises(ProblemError):
        s.solve_groups([1.0, 2.0], [0, 1], [3.0], objective="l2")
    with pytest.raises(UnsupportedProblem, match="group 1"):
        s.solve_groups([1.0, 2.0], [0, 2, 2], [3.0, 4.0], objective="l2")
    with pytest.raises(UnsupportedProblem):  # linf: the default path refuses it
        s.solve_groups([1.0, 2.0], [0, 2], [3.0], objective="linf")


# ---------------------------------------------------------------------- refusals are complete
def test_unsupported_is_the_single_source_of_truth():
    """Every problem that ``unsupported()`` accepts is solved (feasible, optimal per highs on
    small ones); every one it refuses names a reason. Infeasible and odd inputs included."""
    rng = np.random.default_rng(31)
    s = get("costtable")
    accepted = refused = 0
    for _ in range(150):
        parent = random_tree(rng, int(rng.integers(1, 4)), 3, 12)
        n = parent.size
        target = rng.normal(3, 4, n)
        lower = np.where(rng.random(n) < 0.3, rng.integers(0, 6, n), -np.inf)
        upper = np.where(rng.random(n) < 0.3, rng.integers(0, 6, n), np.inf)
        upper = np.maximum(upper, lower)
        fixed = np.where(rng.random(n) < 0.2, rng.integers(0, 8, n), np.nan)
        try:
            p = Problem(parent, target, fixed=fixed, lower=lower, upper=upper)
        except ProblemError:
            continue
        why = s.unsupported(p)
        if why:
            refused += 1
            assert all(isinstance(r, str) and r for r in why)
            with pytest.raises(UnsupportedProblem):
                solve(p, solver="costtable")
            continue
        accepted += 1
        y = solve(p, solver="costtable").values
        assert p.violations(y) == []
    assert accepted > 30 and refused > 10


def test_nan_bounds_are_refused_naming_the_node():
    # refused where the problem is built, so no plug-in ever sees a NaN bound
    from hierdp.models.problem import ProblemError

    with pytest.raises(ProblemError, match=r"node 1: upper bound is NaN"):
        Problem([-1, 0, 0], [np.nan, 1.4, 2.2], fixed=[5, np.nan, np.nan], upper=[np.inf, np.nan, np.inf])


def test_public_entry_point_is_exact():
    rng = np.random.default_rng(41)
    for _ in range(10):
        p = random_problem(rng, 2, 3, 8, box=5)
        if p is None or (p.n_children == 0).sum() > 5:
            continue
        y = hierdp.solvers.costtable.costtable_solve(p.parent, p.target, weights=p.weights, fixed=p.fixed,
                                                     lower=p.lower, upper=p.upper)
        assert p.objective_value(y) == pytest.approx(enumerate_leaves(p, 0, 5), rel=1e-9, abs=1e-9)


# ---------------------------------------------------------------------- time limits, caching
def test_time_limit_returns_a_feasible_point_or_fails_cleanly():
    import time

    from hierdp.solvers import SolverFailed
    from hierdp.solvers._costtable_dp import TimeLimitReached

    rng = np.random.default_rng(3)
    k = 2000
    p = Problem(np.r_[-1, np.zeros(k, np.int64)], np.r_[np.nan, rng.normal(10, 3, k)],
                fixed=np.r_[30_000, np.full(k, np.nan)])
    with pytest.raises(SolverFailed) as info:
        solve(p, solver="costtable", time_limit=0.0)
    assert info.value.termination == "time_limit"
    # a deadline after a feasible start: that start comes back, feasible, flagged as not optimal
    forest = Forest.from_parent(p.parent)
    dom = compile_domains(forest, p.target, p.weights, p.fixed, np.maximum(p.lower, 0), p.upper)
    start = np.r_[30_000, 30_000, np.zeros(k - 1, np.int64)]
    with pytest.raises(TimeLimitReached) as reached:
        solve_compiled(forest, dom, start=start, radius=0, deadline=time.perf_counter())
    assert np.array_equal(reached.value.values, start)


def test_problem_edited_after_the_refusal_check_is_recompiled():
    s = get("costtable")
    p = Problem([-1, 0, 0], [np.nan, 4.0, 4.0], fixed=[8, np.nan, np.nan])
    assert s.unsupported(p) == []
    p.fix(0, 2)
    assert tuple(s.solve_problem(p).values) == (2, 1, 1)
    p.add_bounds(1, upper=0)
    assert tuple(s.solve_problem(p).values) == (2, 0, 2)
