"""The histogram plug-ins through the registry: the cell rounder against brute force and HiGHS's
MIP (L1 objectives equal), refusals with the true reason, verification that catches a wrong
answer, cross-checks, chains per parent, and ``hierdp solvers`` listing them."""

from __future__ import annotations

from itertools import product

import numpy as np
import pytest
from scipy import sparse

from hierdp.models.histogram import HistogramRounding, HistogramWLS, LevelChunk
from hierdp.models.marginals import MarginalQueries
from hierdp.solvers import registry, solve
from hierdp.solvers.base import Capabilities, Solution, Solver, SolverFailed, Status, UnsupportedProblem
from hierdp.solvers.histogram_rounding import round_cells
from hierdp.solvers.histogram_wls import solve_structured
from hierdp.solvers.kinds import solve_parents

from tests.solvers.test_histogram_wls import make_chunk

MQ4 = MarginalQueries.from_kept((2, 2), [(), (0,), (1,)])


def _l1(y, x):
    return float(np.abs(np.asarray(y, float) - x).sum())


@pytest.mark.parametrize("seed", range(4))
def test_cell_rounder_is_optimal_by_brute_force_and_equals_the_mip_with_bounds(seed):
    rng = np.random.default_rng(60 + seed)
    chunk, true = make_chunk(rng, MQ4, [2, 3], lam=1.5)
    C, K = chunk.targets.shape
    upper = np.where(true == 0, np.where(rng.random((C, K)) < 0.4, 0.0, np.inf), np.inf)
    chunk.upper = upper
    x = solve_structured(chunk).values
    problem = HistogramRounding(chunk, x)
    y, reason = round_cells(problem)
    assert (reason == 0).all()
    assert problem.violations(y) == []
    lo = np.floor(x + 1e-7)
    hi = np.minimum(lo + 1, upper)
    # brute force per parent over the box
    for p in range(2):
        kids = np.flatnonzero(chunk.child_parent == p)
        xs, los, his = x[kids].ravel(), lo[kids].ravel(), hi[kids].ravel()
        room = np.flatnonzero(his > los)
        best = np.inf
        for bits in product((0, 1), repeat=room.size):
            cand = los.copy()
            cand[room] += bits
            if np.array_equal(cand.reshape(-1, K).sum(0), chunk.parent_values[p]):
                best = min(best, np.abs(cand - xs).sum())
        assert _l1(y[kids], x[kids]) == pytest.approx(best, abs=1e-9)
    mip = solve(problem, "highs")  # the translated MIP: another solver
    assert _l1(y, x) == pytest.approx(_l1(mip.values, x), abs=1e-9)


def test_rounding_queries_objective_is_certified_only_when_a_lower_bound_meets_it():
    rng = np.random.default_rng(5)
    chunk, _ = make_chunk(rng, MQ4, [3, 2, 4], lam=2.0)
    x = solve_structured(chunk).values
    problem = HistogramRounding(chunk, x, "queries")
    y, reason = round_cells(problem)
    mip = solve(problem, "highs")
    obj = problem.parent_objectives(y)
    best = problem.parent_objectives(mip.values)
    for p in range(3):
        if reason[p] == 0:  # certified: equal to the MIP's optimum
            assert obj[p] == pytest.approx(best[p], abs=1e-6)
        else:
            assert reason[p] == 3
    # through the chain the uncertified parents reach the MIP and every parent ends optimal
    res = solve_parents(problem, ["histogram_cells", "highs"])
    assert problem.parent_objectives(res.values) == pytest.approx(best, abs=1e-6)


def test_refusals_say_the_true_reason_before_solving():
    rng = np.random.default_rng(1)
    chunk, _ = make_chunk(rng, MQ4, [3], lam=2.0)
    wls = HistogramWLS(chunk)
    why = registry.get("intopt").unsupported(wls)
    assert any("as a general Problem" in r and "query-term" in r for r in why)
    with pytest.raises(UnsupportedProblem, match="query-term"):
        solve(wls, "intopt")
    # a PL94-sized chunk is too large to translate for a general solver, and too large for the oracle
    big = MarginalQueries.from_kept((8, 2, 2, 63), [(), (3,)])
    from hierdp.mechanisms.census.level_solver import probe_chunk

    probe = HistogramWLS(probe_chunk(big, children=30))
    assert any("nonzeros" in r for r in registry.get("highs").unsupported(probe))
    assert any("2,016 cells" in r for r in registry.get("histogram_wls_dense").unsupported(probe))
    assert registry.get("histogram_wls").unsupported(probe) == []
    # the histogram plug-ins refuse what is not their kind
    assert registry.get("histogram_cells").unsupported(wls)
    assert registry.get("histogram_wls").unsupported(HistogramRounding(chunk, np.ones(chunk.targets.shape)))


class _Liar(Solver):
    """Claims every parent certified and returns the children's targets clipped at 0."""

    name = "liar_for_test"
    problem_kinds = frozenset({"histogram_wls"})
    capabilities = Capabilities(objectives={"l2"}, integer=False, continuous=True, structures={"histogram"},
                                features={"weights", "query_terms"})

    def unsupported(self, problem):
        return []

    def solve_problem(self, problem, *, time_limit=None, **options):
        v = np.maximum(np.nan_to_num(problem.chunk.targets), 0.0)
        return Solution(values=v, objective=0.0, status=Status.OPTIMAL, solver=self.name, wall_time=0.0,
                        stats={"certified": np.ones(problem.n_parents, bool)})


def test_verify_catches_a_plug_in_that_lies():
    rng = np.random.default_rng(2)
    chunk, _ = make_chunk(rng, MQ4, [3, 2], lam=2.0)
    with pytest.raises(SolverFailed, match="do not sum"):
        solve(HistogramWLS(chunk), _Liar())


class _Nudged(Solver):
    """Returns the optimum moved along a feasible direction: feasible, but not optimal."""

    name = "nudged_for_test"
    problem_kinds = frozenset({"histogram_wls"})
    capabilities = _Liar.capabilities

    def unsupported(self, problem):
        return []

    def solve_problem(self, problem, *, time_limit=None, **options):
        v = solve_structured(problem.chunk).values.copy()
        kids = np.flatnonzero(problem.chunk.child_parent == 0)
        k = int(np.argmax(v[kids].min(0)))
        v[kids[0], k] += 1e-3
        v[kids[1], k] -= 1e-3
        return Solution(values=v, objective=0.0, status=Status.OPTIMAL, solver=self.name, wall_time=0.0,
                        stats={"certified": np.ones(problem.n_parents, bool)})


def test_verify_demotes_a_feasible_non_optimal_answer_and_the_chain_takes_it():
    rng = np.random.default_rng(3)
    chunk, _ = make_chunk(rng, MQ4, [3, 2], lam=4.0)
    problem = HistogramWLS(chunk)
    with pytest.raises(SolverFailed, match="parent"):
        solve(problem, _Nudged())
    res = solve_parents(problem, [_Nudged(), "histogram_wls_dense"])
    assert res.solved_by.tolist() == [1, 0]  # parent 0 re-solved by the oracle, parent 1 accepted
    want = solve_structured(chunk).values
    np.testing.assert_allclose(res.values, want, atol=1e-9)


def test_registry_solve_cross_check_and_chain_per_parent():
    rng = np.random.default_rng(4)
    chunk, _ = make_chunk(rng, MQ4, [3, 2, 4], lam=1.0)
    problem = HistogramWLS(chunk)
    sol = solve(problem, "histogram_wls", cross_check="histogram_wls_dense", cross_check_tolerance=1e-9)
    assert sol.status == "optimal" and sol.values.shape == chunk.targets.shape
    assert sol.stats["cross_check"]["difference"] <= 1e-9 * max(1.0, sol.objective)
    assert solve(problem, "auto").solver == "histogram_wls"  # natives first
    # no working-set update allowed: the parents where non-negativity binds go to the oracle
    res = solve_parents(problem, ["histogram_wls", "histogram_wls_dense"],
                        options={"histogram_wls": {"max_rounds": 0}})
    assert (res.solved_by >= 0).all() and (res.solved_by == 1).any()
    np.testing.assert_allclose(res.values, sol.values, atol=1e-9)


def test_rows_coupling_two_parents_are_solved_together():
    """A row over children of two parents couples them: the structured path solves them as one
    unit; HiGHS on the translated Problem agrees."""
    rng = np.random.default_rng(9)
    chunk, true = make_chunk(rng, MQ4, [2, 2], lam=3.0)
    C, K = chunk.targets.shape
    rows = sparse.lil_matrix((1, C * K))
    rows[0, [0 * K + 0, 2 * K + 0]] = 1.0  # child 0 (parent 0) and child 2 (parent 1), cell 0
    cap = float(true[0, 0] + true[2, 0])
    chunk = LevelChunk(chunk.parent_values, chunk.child_parent, chunk.targets, chunk.target_weight, chunk.query_mats,
                       chunk.query_answers, chunk.query_weight, None, queries=MQ4, rows=rows.tocsr(),
                       row_lower=np.array([-np.inf]), row_upper=np.array([cap]))
    assert chunk.coupled_parents().tolist() == [0, 0]
    res = solve_structured(chunk)
    assert res.certified.all()
    highs = solve(HistogramWLS(chunk), "highs")
    np.testing.assert_allclose(res.values, highs.values, atol=1e-5)


def test_hierdp_solvers_lists_the_histogram_plug_ins(capsys):
    from hierdp.cli import main

    assert main(["solvers"]) == 0
    out = capsys.readouterr().out
    for name in ("histogram_wls", "histogram_wls_dense", "histogram_cells"):
        assert any(line.split()[0] == name for line in out.splitlines()[1:]), name
    assert main(["solvers", "--limits"]) == 0
    limits = capsys.readouterr().out
    assert "histogram_wls: structured per-parent WLS" in limits
    assert "KKT certified per parent" in limits
