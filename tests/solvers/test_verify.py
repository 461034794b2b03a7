"""verify=True catches what it claims: structure recomputed independently, L∞ optimality certified."""

import itertools

import numpy as np
import pytest

import hierdp
from hierdp.models import Problem
from hierdp.solvers import Capabilities, Solver, SolverFailed, Termination, _verify
from hierdp.solvers.base import finish

from exact_oracles import feasible, groups_by_walk


class FirstChild(Solver):
    """Feasible, usually not optimal: each group's total on its first child (tests only)."""

    name = "first-child"
    capabilities = Capabilities({"linf", "l1", "l2"}, True, True, {"level"})

    def solve_problem(self, problem, *, time_limit=None, **options):
        values = np.nan_to_num(problem.fixed).copy()
        _, offsets, child_index, totals = problem.level_groups()
        values[child_index[offsets[:-1]]] = totals
        return finish(problem, values, Termination.OPTIMAL, self.name, 0.0, {})


@pytest.mark.parametrize("integer", [True, False])
def test_suboptimal_linf_levels_are_caught(integer):
    p = Problem.from_groups([3.2, 2.9, 3.1, 0.2, 5.0], [0, 3, 5], [9, 5], objective="linf", integer=integer)
    with pytest.raises(SolverFailed) as info:
        hierdp.solve(p, solver=FirstChild())
    assert info.value.refuted_by == "certificate" and info.value.termination == "optimal"
    if integer:  # both groups are improvable, and the error says which
        assert sorted(info.value.groups.tolist()) == [0, 1]
    assert hierdp.solve(p, solver=FirstChild(), verify=False).termination == "optimal"  # unchecked: believed


class TreeFixedPoint(Solver):
    """Returns a fixed, feasible, suboptimal tree point (tests only)."""

    name = "tree-fixed"
    capabilities = Capabilities({"linf"}, True, True, {"tree", "level"}, features={"missing_targets", "bounds"})

    def solve_problem(self, problem, *, time_limit=None, **options):
        v = np.array([6.0, 3, 3, 3, 0, 3])  # a1 = 3, a2 = 0: deviation 1.5 where 0.5 is possible
        return finish(problem, v, Termination.OPTIMAL, self.name, 0.0, {})


def test_suboptimal_linf_trees_are_caught_by_the_lp_certificate():
    p = Problem([-1, 0, 0, 1, 1, 2], [np.nan, 3.0, 3.0, 1.5, 1.5, 3.0], fixed=[6, np.nan, np.nan, np.nan, np.nan,
                                                                          np.nan], objective="linf")
    sol = hierdp.solve(p, solver="highs")
    assert "certified" in sol.stats["certificate"]
    with pytest.raises(SolverFailed, match="strict-box certificate"):
        hierdp.solve(p, solver=TreeFixedPoint())


def test_wrong_group_structure_is_caught(monkeypatch):
    # the 64-step defect: groups() splitting a deep free chain; verification must not share it
    d = 120
    p = Problem(np.arange(-1, d), np.r_[np.zeros(d - 9), np.full(10, 10.0)], objective="linf",
                upper=np.full(d + 1, 50.0))
    real = Problem.groups

    def capped(self):
        g = real(self).copy()
        g[np.arange(self.n) > 64] = 1  # a second, spurious group below depth 64
        return g

    monkeypatch.setattr(Problem, "groups", capped)
    monkeypatch.setattr(Problem, "group_anchors", lambda self: np.array([0, 65]))
    with pytest.raises(SolverFailed, match="independent component"):
        hierdp.solve(p, solver="highs")


def _random_level_points(rng):
    sizes = rng.integers(1, 4, 2)
    offsets = np.r_[0, np.cumsum(sizes)]
    totals = rng.integers(0, 5, 2).astype(float)
    x = np.repeat(totals / sizes, sizes) + rng.normal(0, 1.5, offsets[-1])
    if rng.random() < 0.4:
        x = np.round(x * 2) / 2  # ties on half-integers
    return Problem.from_groups(x, offsets, totals, objective="linf")


def test_strict_box_certificate_agrees_with_enumeration():
    """For every feasible point of small problems: certified optimal iff every group attains its
    enumerated optimum (levels: closed form; trees: the LP path)."""
    rng = np.random.default_rng(5)
    cases = [_random_level_points(rng) for _ in range(12)]
    for _ in range(8):
        parent = np.array([-1, 0, 0, 1, 1, 2])
        z = np.array([5.0, 3, 2, 1, 2, 2])
        x = z + np.round(rng.normal(0, 1.2, 6) * 2) / 2
        fixed = np.r_[5.0, np.full(5, np.nan)]
        if rng.random() < 0.5:
            fixed[2] = 2.0
        cases.append(Problem(parent, x, fixed=fixed, objective="linf", upper=np.r_[np.inf, rng.integers(2, 6, 5)]))
    checked = 0
    for p in cases:
        free = np.flatnonzero(np.isnan(p.fixed))
        anchors = np.array(groups_by_walk(p))
        top = int(np.nanmax(p.fixed))
        points = []
        for combo in itertools.product(range(top + 1), repeat=free.size):
            v = np.nan_to_num(p.fixed).copy()
            v[free] = combo
            if feasible(p, v):
                points.append(v)
        if not points:
            continue
        dev = [np.abs(v - np.nan_to_num(p.target)) * p.weights for v in points]
        term = np.isnan(p.fixed) & ~np.isnan(p.target)
        keys = sorted(set(anchors[term]))
        per = np.array([[d[term & (anchors == k)].max() for k in keys] for d in dev])
        best = per.min(0)
        labels = _verify.independent_groups(p)
        for v, row in zip(points, per, strict=False):
            optimal = np.all(row <= best + 1e-12)
            failing = _verify.integer_linf_uncertified(p, v, labels)
            assert (failing.size == 0) == optimal
            checked += 1
    assert checked > 100


def test_continuous_certificate_catches_a_wrong_lp_and_passes_the_right_one():
    p = Problem.from_groups([4.0, 1.0, 1.0], [0, 3], [9.0], objective="linf", integer=False)
    gap = _verify.continuous_linf_gap(p, 1.0)  # optimum: every child up by 1
    assert gap == pytest.approx(0.0, abs=1e-12)
    assert _verify.continuous_linf_gap(p, 1.5) == pytest.approx(0.5, abs=1e-12)
    q = Problem.from_groups([4.0, 1.0, 1.0], [0, 3], [9.0], objective="linf", integer=False)
    q.add_linear({3: 1.0}, lower=3.0)  # rows: the LP path
    assert _verify.continuous_linf_gap(q, 2.0) == pytest.approx(0.0, abs=1e-7)


def test_problems_without_free_nodes_verify():
    # found by the long fuzz profile: the independent LP had no variables
    for integer in (True, False):
        p = Problem([-1, 0, 0], [4.0, 1.5, 2.5], fixed=[4, 2, 2], objective="linf", integer=integer)
        sol = hierdp.solve(p, solver="highs")
        assert sol.objective == 0.0 and sol.values.tolist() == [4, 2, 2]
