"""The plug-in contract: the two status axes (Termination, SolutionStatus), Capabilities as feature
sets with a stated tolerance, typed options, SolverFailed's fields, describe_limits()."""

import numpy as np
import pytest

import hierdp
from hierdp.models import Problem
from hierdp.solvers import (
    Capabilities,
    Solution,
    SolutionStatus,
    Solver,
    SolverFailed,
    Termination,
    UnsupportedProblem,
    registry,
)
from hierdp.solvers.base import finish


def test_two_status_axes_are_str_enums():
    assert Termination.OPTIMAL == "optimal" and Termination.TIME_LIMIT == "time_limit"
    assert f"{Termination.INFEASIBLE}" == "infeasible" and str(Termination.ERROR) == "error"
    assert Termination.coerce("time limit") is Termination.TIME_LIMIT
    assert Termination.coerce("time limit (feasible, not proven optimal)") is Termination.TIME_LIMIT
    assert Termination.coerce("something odd") is Termination.ERROR
    assert SolutionStatus.coerce("feasible") is SolutionStatus.FEASIBLE
    assert {str(s) for s in SolutionStatus} == {"optimal", "feasible", "infeasible", "none"}
    # the point's status follows the termination unless stated
    assert Solution(np.zeros(1), 0.0, "optimal", "x", 0.0).solution_status is SolutionStatus.OPTIMAL
    assert Solution(np.zeros(1), 0.0, Termination.COMPLETED, "x", 0.0).solution_status is SolutionStatus.FEASIBLE
    assert Solution(np.zeros(1), 0.0, Termination.ERROR, "x", 0.0).solution_status is SolutionStatus.NONE


def test_finish_derives_the_point_status_from_an_independent_check():
    p = Problem.from_groups([1.0, 2.0], [0, 2], [3], objective="l1")
    good = finish(p, np.array([3, 1, 2]), Termination.TIME_LIMIT, "x", 0.0, {})
    assert good.solution_status == "feasible" and good.objective == 0.0
    bad = finish(p, np.array([3, 1, 1]), Termination.TIME_LIMIT, "x", 0.0, {})
    assert bad.solution_status == "infeasible" and np.isnan(bad.objective)
    none = finish(p, None, Termination.ERROR, "x", 0.0, {})
    assert none.solution_status == "none" and np.isnan(none.objective)


def test_solver_failed_carries_what_callers_need():
    best = Solution(np.array([3, 1, 2]), 1.0, Termination.TIME_LIMIT, "highs", 1.0,
                    solution_status=SolutionStatus.FEASIBLE)
    exc = SolverFailed("highs", "time limit", "gap 3%", groups=[4, 7], best=best)
    assert exc.solver == "highs" and exc.termination is Termination.TIME_LIMIT and exc.message == "gap 3%"
    assert exc.solution_status is SolutionStatus.FEASIBLE and exc.refuted_by is None
    assert exc.groups.tolist() == [4, 7] and exc.best is best
    assert "time_limit" in str(exc) and "time limit reached" in str(exc) and "groups 4, 7" in str(exc)
    plain = SolverFailed("x", Termination.INFEASIBLE)
    assert plain.groups is None and plain.best is None and plain.message == ""
    assert plain.solution_status is SolutionStatus.NONE
    refuted = SolverFailed("x", Termination.OPTIMAL, "row 3", solution_status="infeasible", refuted_by="feasibility")
    assert "claimed an optimum" in str(refuted) and "feasibility" in str(refuted)


def test_capabilities_feature_sets_and_tolerance():
    cap = Capabilities({"l2"}, True, False, {"tree"}, features={"weights", "bounds", "missing_targets"},
                       description="d")
    assert cap.supports("weights") and not cap.supports("free_sign")
    assert cap.tolerance == 1e-7  # the default stated tolerance of continuous answers
    assert Capabilities({"l2"}, True, True, {"tree"}, tolerance=1e-9).tolerance == 1e-9
    with pytest.raises(ValueError, match="tolerance"):
        Capabilities({"l2"}, True, True, {"tree"}, tolerance=0.5)
    chains = Capabilities({"l1"}, True, False, {"level"}, features={"linear_constraints"})
    assert chains.supports("cumulative")  # general rows include chain rows
    with pytest.raises(ValueError, match="unknown capability feature"):
        Capabilities({"l1"}, True, False, {"level"}, features={"telepathy"})
    with pytest.raises(AttributeError):
        cap.integer = False  # type: ignore[misc]
    with pytest.raises(TypeError):  # the old boolean form is gone
        Capabilities({"l2"}, True, False, {"tree"}, weights=True)  # type: ignore[call-arg]
    assert cap.as_dict()["features"] == ["bounds", "missing_targets", "weights"]


class ChainOnly(Solver):
    """Honours cumulative chains but no general rows: the feature sets decide, no plug-in code."""

    name = "chain-only"
    capabilities = Capabilities({"l1"}, True, False, {"level", "tree"}, features={"cumulative", "missing_targets"})

    def solve_problem(self, problem, *, time_limit=None, **options):
        return hierdp.solvers.get("highs").solve_problem(problem)


def test_feature_refusals_are_declarative():
    p = Problem.from_groups([1.0, 2.0, 3.0], [0, 3], [6], objective="l1")
    assert ChainOnly().unsupported(p) == []
    p.add_monotone_chains(np.array([[1, 2, 3]]))
    assert ChainOnly().unsupported(p) == []
    p.add_linear({1: 1}, lower=1)
    assert ChainOnly().unsupported(p) == ["user linear constraints not supported"]
    q = Problem.from_groups([1.0, 2.0], [0, 2], [3], objective="l1").add_query_terms(np.eye(3)[1:2], [1.0])
    assert ChainOnly().unsupported(q) == ["query-term objectives not supported"]


def test_options_are_typed_and_typos_refused():
    p = Problem.from_groups([1.0, 2.0], [0, 2], [3])
    for s, bad in (("highs", {"batchsize": 3}), ("ortools", {"workers": 2}), ("intopt", {"oder": "x"}),
                   ("projection", {"anything": 1})):
        with pytest.raises(TypeError, match="unknown option"):
            hierdp.solve(p if s != "projection" else Problem.from_groups([1.0, 2.0], [0, 2], [3], objective="l2"),
                         solver=s, **bad)
    with pytest.raises(ValueError, match="batch_size"):
        hierdp.solve(p, solver="highs", batch_size=0)
    with pytest.raises(ValueError, match="order"):
        hierdp.solve(p, solver="intopt", order="sideways")
    opts = hierdp.solvers.get("highs").parse_options({"batch_size": 7, "presolve": None})
    assert opts.batch_size == 7 and opts.presolve is None


class PublicOverride(Solver):
    name = "public"
    capabilities = Capabilities({"l1"}, True, False, {"level"})

    def solve_problem(self, problem, *, time_limit=None, **options):
        values = np.nan_to_num(problem.fixed).copy()
        _, offsets, child_index, totals = problem.level_groups()
        values[child_index[offsets[:-1]]] = totals  # feasible: everything on the first child
        return finish(problem, values, Termination.OPTIMAL, self.name, 0.0, {})


@pytest.fixture
def clean_registry(monkeypatch):
    monkeypatch.setattr(registry, "_EXTRA", {})
    monkeypatch.setattr(registry, "_ENTRY_POINTS_SCANNED", True)


def test_solve_problem_is_the_override_point(clean_registry):
    p = Problem.from_groups([1.0, 2.0, 0.5], [0, 2, 3], [3, 1], objective="l1")
    assert hierdp.solve(p, solver=PublicOverride()).values.tolist() == [3, 1, 3, 0, 1]

    class Neither(Solver):
        name = "neither"
        capabilities = Capabilities({"l1"}, True, False, {"level"})

    with pytest.raises(NotImplementedError):
        Neither().solve_problem(p)


def test_non_optimal_results_become_solver_failed_with_best(clean_registry):
    class Stops(PublicOverride):
        name = "stops"

        def solve_problem(self, problem, *, time_limit=None, **options):
            sol = super().solve_problem(problem)
            sol.termination = Termination.TIME_LIMIT
            sol.stats["failed_groups"] = np.array([1])
            return sol

    p = Problem.from_groups([1.0, 2.0, 0.5], [0, 2, 3], [3, 1], objective="l1")
    with pytest.raises(SolverFailed) as info:
        hierdp.solve(p, solver=Stops())
    exc = info.value
    assert exc.termination == "time_limit" and exc.solution_status == "feasible" and exc.groups.tolist() == [1]
    assert exc.best is not None and exc.best.values.tolist() == [3, 1, 3, 0, 1]
    assert exc.best.objective == pytest.approx(p.objective_value(exc.best.values))


def test_describe_limits_is_generated_from_capabilities():
    frame = hierdp.solvers.describe_limits()
    assert list(frame["solver"]) == hierdp.solvers.names()  # one row per registered plug-in, in order
    assert {"intopt", "projection", "costtable", "highs", "ortools"} <= set(frame["solver"])
    row = frame.set_index("solver")
    for name in ("intopt", "projection", "highs", "ortools"):
        cap = hierdp.solvers.get(name).capabilities
        assert row.loc[name, "max_magnitude"] == cap.limits["max_magnitude"]
        assert row.loc[name, "features"] == ", ".join(sorted(cap.features))
    assert row.loc["intopt", "max_magnitude"] == 2.0 ** 52 and row.loc["projection", "max_magnitude"] == 2.0 ** 44
    assert frame.columns[-1] == "description"


def test_solutions_carry_bounds_where_known():
    p = Problem.from_groups([1.2, 2.7, 0.5], [0, 2, 3], [3, 1], objective="linf")
    for s in ("intopt", "highs"):
        sol = hierdp.solve(p, solver=s)
        assert sol.bound == pytest.approx(sol.objective, abs=1e-9) and sol.gap == pytest.approx(0, abs=1e-9)


def test_unsupported_is_raised_before_solving(clean_registry):
    class Refuses(PublicOverride):
        name = "refuses"

        def extra_checks(self, problem):
            return ["never"]

        def solve_problem(self, problem, *, time_limit=None, **options):
            raise AssertionError("solve must not run")

    with pytest.raises(UnsupportedProblem, match="never"):
        hierdp.solve(Problem.from_groups([1.0], [0, 1], [1], objective="l1"), solver=Refuses())


def test_auto_never_picks_a_heuristic(clean_registry, monkeypatch):
    class Greedy(PublicOverride):
        """Accepts every level problem and returns a feasible, not optimal, point."""

        name = "greedy"
        exact = False
        capabilities = Capabilities({"l1", "l2", "linf"}, True, True, {"level"})

    hierdp.solvers.register(Greedy())
    monkeypatch.setattr(registry, "names", lambda: ["greedy", *list(registry._BUILTIN)])  # first in line
    p = Problem.from_groups([1.0, 2.0, 0.5], [0, 2, 3], [3, 1], objective="l1")
    assert Greedy().unsupported(p) == []
    chosen = hierdp.solvers.choose(p)
    assert chosen.name != "greedy" and chosen.exact
    # the optimum by hand: group 1 gives (1, 2) for total 3 at cost 0; group 2 gives 1 (cost 0.5)
    assert hierdp.solve(p).objective == pytest.approx(0.5)
    assert hierdp.solvers.solve_groups(np.array([1.0, 2.0, 0.5]), np.array([0, 2, 3]), np.array([3.0, 1.0]),
                                       objective="l1").solver != "greedy"
    frame = hierdp.solvers.describe_limits().set_index("solver")
    assert not frame.loc["greedy", "exact"] and frame.loc["intopt", "exact"]


def test_paper_round_is_named_only_and_refuses_beyond_its_continuous_step():
    # integer L2 at 2^53: every exact plug-in refuses; the heuristic used to be auto's answer
    x = np.array([2.0**53 + 0.4, 2.0**53 - 0.3, 2.0**53 + 1.7])
    p = Problem.from_groups(x, [0, 3], [3 * 2.0**53], objective="l2")
    assert hierdp.solvers.get("paper_round").unsupported(p)
    with pytest.raises(UnsupportedProblem, match="no registered solver"):
        hierdp.solvers.choose(p)
    small = Problem.from_groups([1.2, 3.4, 0.4], [0, 3], [5], objective="l2")
    assert hierdp.solvers.choose(small).name == "projection"
