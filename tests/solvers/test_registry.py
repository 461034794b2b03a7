"""Solver registry: lookup, refusal, third-party registration (direct and entry points), failures."""

import itertools

import numpy as np
import pytest

import hierdp
from hierdp.models import Problem
from hierdp.solvers import Capabilities, Solution, Solver, SolverFailed, UnsupportedProblem, registry


class BruteForceL1(Solver):
    """A tiny exact third-party solver: enumerates integer level problems (tests only)."""

    name = "bruteforce-l1"
    capabilities = Capabilities(objectives=frozenset({"l1"}), integer=True, continuous=False,
                                structures=frozenset({"level"}), description="enumeration")

    def solve_problem(self, problem, *, time_limit=None, **options):
        _parents, offsets, child_index, totals = problem.level_groups()
        values = np.nan_to_num(problem.fixed).copy()
        for g, total in enumerate(totals.astype(int)):
            idx = child_index[offsets[g]:offsets[g + 1]]
            best = min((c for c in itertools.product(range(total + 1), repeat=idx.size) if sum(c) == total),
                       key=lambda c: np.abs(np.array(c) - problem.target[idx]).sum())
            values[idx] = best
        return Solution(values, problem.objective_value(values), "optimal", self.name, 0.0)


class Broken(BruteForceL1):
    name = "broken"

    def solve_problem(self, problem, *, time_limit=None, **options):
        sol = super().solve_problem(problem)
        sol.values[-1] += 1  # breaks consistency
        return sol


class TimesOut(BruteForceL1):
    name = "timesout"

    def solve_problem(self, problem, *, time_limit=None, **options):
        return Solution(np.zeros(problem.n), np.nan, "time_limit", self.name, 0.0)


@pytest.fixture
def clean_registry(monkeypatch):
    monkeypatch.setattr(registry, "_EXTRA", {})
    monkeypatch.setattr(registry, "_ENTRY_POINTS_SCANNED", True)


def test_unknown_solver_name(clean_registry):
    with pytest.raises(KeyError, match="unknown solver 'nope'"):
        hierdp.solve(Problem.from_groups([1.0], [0, 1], [1]), solver="nope")


def test_register_and_solve_third_party(clean_registry):
    registry.register(BruteForceL1)
    p = Problem.from_groups([2.6, -1.0, 0.4], [0, 3], [3], objective="l1")
    sol = hierdp.solve(p, solver="bruteforce-l1")
    assert sol.termination == "optimal" and sol.values.dtype == np.int64
    assert sol.values[1:].sum() == 3 and sol.objective == pytest.approx(p.objective_value(sol.values))
    assert "bruteforce-l1" in hierdp.available()
    with pytest.raises(ValueError, match="already registered"):
        registry.register(BruteForceL1)


def test_refusal_explains(clean_registry):
    registry.register(BruteForceL1)
    p = Problem.from_groups([1.0, 2.0], [0, 2], [3], objective="l2")
    with pytest.raises(UnsupportedProblem, match="objective 'l2' not supported"):
        hierdp.solve(p, solver="bruteforce-l1")
    p = Problem.from_groups([1.0, 2.0], [0, 2], [3], objective="l1").add_linear({1: 1}, lower=1)
    with pytest.raises(UnsupportedProblem, match="linear constraints"):
        hierdp.solve(p, solver="bruteforce-l1")


def test_failures_are_never_returned_as_optimal(clean_registry):
    registry.register(Broken)
    registry.register(TimesOut)
    p = Problem.from_groups([1.0, 2.0], [0, 2], [3], objective="l1")
    with pytest.raises(SolverFailed, match="sum of their children"):
        hierdp.solve(p, solver="broken")
    with pytest.raises(SolverFailed, match="time_limit") as info:
        hierdp.solve(p, solver="timesout")
    assert info.value.termination == "time_limit"


def test_entry_point_discovery(monkeypatch):
    class FakeEntryPoint:
        name = "bruteforce-l1"

        def load(self):
            return BruteForceL1

    monkeypatch.setattr(registry, "_EXTRA", {})
    monkeypatch.setattr(registry, "_ENTRY_POINTS_SCANNED", False)
    monkeypatch.setattr(registry, "entry_points", lambda group: [FakeEntryPoint()] if group == "hierdp.solvers" else [])
    assert "bruteforce-l1" in registry.names()
    p = Problem.from_groups([0.2, 0.9], [0, 2], [1], objective="l1")
    assert hierdp.solve(p, solver="bruteforce-l1").values.tolist() == [1, 0, 1]


class WrongButFeasible(BruteForceL1):
    """Feasible but not optimal: puts the whole total on the first child."""

    name = "wrong"

    def solve_problem(self, problem, *, time_limit=None, **options):
        _parents, offsets, child_index, totals = problem.level_groups()
        values = np.nan_to_num(problem.fixed).copy()
        values[child_index] = 0
        values[child_index[offsets[:-1]]] = totals
        return Solution(values, problem.objective_value(values), "optimal", self.name, 0.0)


def test_cross_check_records_agreement_and_refuses_disagreement(clean_registry):
    registry.register(BruteForceL1)
    registry.register(WrongButFeasible)
    p = Problem.from_groups([2.6, -1.0, 0.4, 3.0, 3.0], [0, 3, 5], [3, 6], objective="l1")
    sol = hierdp.solve(p, solver="bruteforce-l1", cross_check="highs")
    assert sol.stats["cross_check"]["solver"] == "highs"
    assert sol.stats["cross_check"]["difference"] <= 1e-9
    with pytest.raises(SolverFailed, match=r"independent check \(cross_check\)"):
        hierdp.solve(p, solver="wrong", cross_check="bruteforce-l1")
