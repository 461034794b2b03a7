"""Fast solve_groups overrides (intopt, projection) and the default path's failure reporting."""

import numpy as np
import pytest

import hierdp
from hierdp.models import Problem
from hierdp.solvers import SolverFailed, UnsupportedProblem, solve_groups
from hierdp.solvers.intopt import IntOptSolver
from hierdp.solvers.projection import ProjectionSolver


def level(seed: int, groups: int = 200):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 9, groups)  # empty groups included
    offsets = np.r_[0, np.cumsum(sizes)]
    totals = np.where(sizes > 0, rng.integers(0, 40, groups), 0).astype(float)
    x = np.repeat(totals / np.maximum(sizes, 1), sizes) + rng.normal(0, 3, offsets[-1])
    return x, offsets, totals


def _per_group_check(y, x, offsets, totals, integer):
    sums = np.add.reduceat(np.r_[y, 0], offsets[:-1])[np.diff(offsets) > 0]
    if integer:
        assert y.dtype == np.int64
        assert np.array_equal(sums, totals[np.diff(offsets) > 0].astype(np.int64))
    else:
        np.testing.assert_allclose(sums, totals[np.diff(offsets) > 0], atol=1e-9)
    assert np.all(y >= 0)


@pytest.mark.parametrize("objective, integer, solver", [("linf", True, "intopt"), ("l2", True, "projection"),
                                                        ("l2", False, "projection")])
def test_fast_overrides_equal_the_problem_path(objective, integer, solver):
    x, offsets, totals = level(1)
    fast = solve_groups(x, offsets, totals, solver=solver, objective=objective, integer=integer)
    p = Problem.from_groups(x, offsets, totals, objective=objective, integer=integer)
    slow = hierdp.solve(p, solver="highs")  # an independent solver on the general Problem
    _per_group_check(fast.values, x, offsets, totals, integer)
    assert fast.solver == solver
    assert fast.objective == pytest.approx(slow.objective, rel=1e-7, abs=1e-7)
    if objective == "linf":  # and the same vector as the plug-in on the Problem (Algorithm 4)
        np.testing.assert_array_equal(fast.values, hierdp.solve(p, solver="intopt").values[totals.size:])


def test_fast_overrides_refuse_before_solving():
    x = np.array([2.0 ** 45, 1.0])
    with pytest.raises(UnsupportedProblem, match="2\\^44"):
        IntOptSolver().solve_groups(x + 0.5, np.array([0, 2]), np.array([2.0 ** 45]), objective="linf")
    with pytest.raises(UnsupportedProblem, match="2\\^44"):
        ProjectionSolver().solve_groups(x, np.array([0, 2]), np.array([2.0 ** 45]), objective="l2")
    with pytest.raises(UnsupportedProblem, match="objective"):
        IntOptSolver().solve_groups(x[:1], np.array([0, 1]), np.array([1.0]), objective="l2")
    with pytest.raises(UnsupportedProblem, match="weights"):
        ProjectionSolver().solve_groups(np.ones(2), np.array([0, 2]), np.array([2.0]), objective="l2",
                                        weights=np.array([1.0, 2.0]))
    with pytest.raises(UnsupportedProblem, match="NaN"):
        IntOptSolver().solve_groups(np.array([np.nan]), np.array([0, 1]), np.array([1.0]), objective="linf")
    with pytest.raises(TypeError, match="unknown option"):
        IntOptSolver().solve_groups(np.ones(2), np.array([0, 2]), np.array([2.0]), objective="linf", oder="x")
    # integer targets up to 2^52 are fine for intopt
    big = solve_groups(np.array([2.0 ** 50, 3.0]), np.array([0, 2]), np.array([2.0 ** 50 + 1]), objective="linf")
    assert big.solver == "intopt" and int(big.values.sum()) == 2 ** 50 + 1


def test_auto_uses_the_real_values():
    x, offsets, totals = level(2, 30)
    assert solve_groups(x, offsets, totals, objective="linf").solver == "intopt"
    assert solve_groups(x, offsets, totals, objective="l2").solver == "projection"
    assert solve_groups(x, offsets, totals, objective="l1").solver == "highs"
    far = solve_groups(x + 2.0 ** 45, offsets, totals + 2.0 ** 45 * np.diff(offsets), objective="l2")
    assert far.solver not in ("projection",)


def test_default_path_reports_failing_groups_in_caller_numbering(monkeypatch):
    # groups 0 and 2 are empty: the Problem renumbers groups; the error must not
    offsets = np.array([0, 0, 2, 2, 4])
    x = np.array([1.0, 2.0, 3.0, 4.0])
    totals = np.array([0.0, 3.0, 0.0, 7.0])
    from hierdp.solvers import highs as highs_mod

    real_run = highs_mod._DirectRunner.run

    def fail_second(self, problem, arr, settings, deadline):
        if 3 in problem.parent[arr.nodes]:  # the batch holding caller group 3
            from hierdp.solvers.highs import _RunResult
            from hierdp.solvers import Termination

            return _RunResult(Termination.INFEASIBLE, message="simulated")
        return real_run(self, problem, arr, settings, deadline)

    monkeypatch.setattr(highs_mod._DirectRunner, "run", fail_second)
    with pytest.raises(SolverFailed) as info:
        solve_groups(x, offsets, totals, solver="highs", objective="l1", batch_size=1)
    assert info.value.termination == "infeasible" and info.value.groups.tolist() == [3]


def test_time_limit_best_point_comes_back_in_the_callers_layout(monkeypatch):
    from hierdp.solvers import Termination
    from hierdp.solvers import highs as highs_mod

    x, offsets, totals = level(3, 6)
    real_run = highs_mod._DirectRunner.run

    def stop_with_incumbent(self, problem, arr, settings, deadline):
        out = real_run(self, problem, arr, settings, deadline)
        return highs_mod._RunResult(Termination.TIME_LIMIT, incumbent=out.x, message="simulated")

    monkeypatch.setattr(highs_mod._DirectRunner, "run", stop_with_incumbent)
    with pytest.raises(SolverFailed) as info:
        solve_groups(x, offsets, totals, solver="highs", objective="l1")  # one batch: complete
    best = info.value.best
    assert info.value.termination == "time_limit" and best is not None and best.values.shape == x.shape
    _per_group_check(best.values.astype(np.int64), x, offsets, totals, True)
