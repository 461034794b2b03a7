"""``solver="auto"`` walks on: when the chosen exact plug-in stops without a verified optimum it tries
the next one that accepts the problem, within the caller's overall time limit, and says which it
tried. Oracle for the answers: enumeration (exact_oracles)."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

import hierdp
from hierdp.models import Problem
from hierdp.solvers import Capabilities, Solver, SolverFailed, Termination, registry
from hierdp.solvers.base import finish

from exact_oracles import enumerate_optimum


class Enumerate(Solver):
    """Exact integer L1 on small levels by enumeration (tests only)."""

    name = "enumerate-l1"
    capabilities = Capabilities({"l1"}, True, False, {"level"})

    def solve_problem(self, problem, *, time_limit=None, **options):
        t0 = time.perf_counter()
        _, offsets, child_index, totals = problem.level_groups()
        values = np.nan_to_num(problem.fixed).copy()
        for g, total in enumerate(totals.astype(int)):
            idx = child_index[offsets[g]:offsets[g + 1]]
            best = min((c for c in itertools.product(range(total + 1), repeat=idx.size) if sum(c) == total),
                       key=lambda c, idx=idx: np.abs(np.array(c) - problem.target[idx]).sum())
            values[idx] = best
        return finish(problem, values, Termination.OPTIMAL, self.name, t0, {})


class Sleeps(Enumerate):
    """Runs until its time limit, then stops with a feasible point it cannot prove optimal."""

    name = "sleeps"

    def solve_problem(self, problem, *, time_limit=None, **options):
        t0 = time.perf_counter()
        time.sleep(min(time_limit if time_limit is not None else 0.05, 5.0))
        _, offsets, child_index, totals = problem.level_groups()
        values = np.nan_to_num(problem.fixed).copy()
        values[child_index[offsets[:-1]]] = totals  # feasible: everything on the first child
        return finish(problem, values, Termination.TIME_LIMIT, self.name, t0, {"slept": time_limit})


class Lies(Enumerate):
    """Says "optimal" for an infeasible point: verification must refute it."""

    name = "lies"

    def solve_problem(self, problem, *, time_limit=None, **options):
        sol = super().solve_problem(problem)
        sol.values = sol.values.copy()
        sol.values[-1] += 1
        return sol


class Infeasible(Enumerate):
    """Proves infeasibility (wrongly here): auto takes a proof at its word and stops."""

    name = "says-infeasible"

    def solve_problem(self, problem, *, time_limit=None, **options):
        raise SolverFailed(self.name, Termination.INFEASIBLE, "no point")


@pytest.fixture
def order(monkeypatch):
    """Register plug-ins and make them auto's whole order for the test."""
    monkeypatch.setattr(registry, "_EXTRA", {})
    monkeypatch.setattr(registry, "_ENTRY_POINTS_SCANNED", True)

    def use(*plugins):
        for p in plugins:
            registry.register(p)
        monkeypatch.setattr(registry, "preference", lambda cls=None: [p.name for p in plugins])

    return use


def _level():
    return Problem.from_groups([2.6, -1.0, 0.4, 3.2, 0.9], [0, 3, 5], [3, 4], objective="l1")


def test_time_limit_hands_the_problem_to_the_next_plug_in(order):
    order(Sleeps(), Enumerate())
    p = _level()
    t0 = time.perf_counter()
    sol = hierdp.solve(p, solver="auto", time_limit=2.0)
    elapsed = time.perf_counter() - t0
    assert sol.solver == "enumerate-l1" and sol.termination == "optimal"
    assert sol.objective == pytest.approx(enumerate_optimum(p, 0, 4))
    tried = sol.stats["auto"]["tried"]
    assert [t["solver"] for t in tried] == ["sleeps", "enumerate-l1"]
    assert tried[0]["termination"] == "time_limit" and tried[0]["time_limit"] == pytest.approx(1.0, abs=0.05)
    assert elapsed < 2.0 + 0.5  # within the caller's overall limit (the first try had half of it)


def test_a_refuted_optimum_hands_the_problem_on(order):
    order(Lies(), Enumerate())
    sol = hierdp.solve(_level(), solver="auto")
    tried = sol.stats["auto"]["tried"]
    assert tried[0]["solver"] == "lies" and tried[0]["refuted_by"] == "feasibility"
    assert tried[0]["solution_status"] == "infeasible" and sol.solver == "enumerate-l1"


def test_a_proof_of_infeasibility_ends_the_walk(order):
    order(Infeasible(), Enumerate())
    with pytest.raises(SolverFailed) as info:
        hierdp.solve(_level(), solver="auto")
    assert info.value.termination == "infeasible" and "auto tried says-infeasible" in str(info.value)


def test_when_every_plug_in_fails_the_error_lists_the_tries(order):
    order(Sleeps(), Lies())
    with pytest.raises(SolverFailed) as info:
        hierdp.solve(_level(), solver="auto", time_limit=0.4)
    msg = str(info.value)
    assert "auto tried sleeps (time_limit)" in msg and "lies (optimal, refuted by feasibility)" in msg


def test_no_time_left_is_said(order):
    class SleepsAll(Sleeps):
        name = "sleeps-all"

        def solve_problem(self, problem, *, time_limit=None, **options):
            return super().solve_problem(problem, time_limit=2 * time_limit)  # overruns its share

    order(SleepsAll(), Enumerate())
    with pytest.raises(SolverFailed, match="no time left for enumerate-l1"):
        hierdp.solve(_level(), solver="auto", time_limit=0.3)


def test_solve_groups_walks_on_too(order):
    order(Sleeps(), Enumerate())
    sol = hierdp.solvers.solve_groups(np.array([2.6, -1.0, 0.4]), np.array([0, 3]), np.array([3]), solver="auto",
                                      objective="l1", time_limit=1.0)
    assert sol.solver == "enumerate-l1" and [t["solver"] for t in sol.stats["auto"]["tried"]] == ["sleeps",
                                                                                                 "enumerate-l1"]


def test_auto_picks_the_measured_order_per_class():
    # the fast paths come first for every class; the general solvers follow in GENERAL_ORDER
    for cls in [("linf", True, False), ("l2", True, True), ("l1", False, True)]:
        order = hierdp.solvers.preference(cls)
        assert order[:5] == ["intopt", "projection", "costtable", "twopass", "chain"]
        general = registry.GENERAL_ORDER.get(cls, registry._DEFAULT_GENERAL)
        assert set(general) == {"highs", "ortools", "pdlp"} and tuple(order[5:8]) == general
    # the measured order: CP-SAT leads integer L∞ (docs/solvers.md, "The researchers' table")
    assert hierdp.solvers.preference(("linf", True, True))[5] == "ortools"


def test_auto_skips_plug_ins_that_do_not_take_the_options():
    # ortools leads integer L-inf with rows (measured order) but has no presolve option: auto skips
    # it for highs rather than failing on the option
    p = Problem.from_groups([2.6, -1.0, 0.4, 3.2, 0.9], [0, 3, 5], [3, 4], objective="linf")
    p.add_linear({2: 1, 3: 1}, upper=2)  # two children of group 0
    assert hierdp.solvers.choose(p).name == "ortools"
    sol = hierdp.solve(p, solver="auto", presolve="off")
    assert sol.solver == "highs"
    assert sol.objective == pytest.approx(hierdp.solve(p, solver="ortools").objective)
    with pytest.raises(hierdp.solvers.UnsupportedProblem, match="does not take the options"):
        hierdp.solve(p, solver="auto", telepathy=True)
