"""Vectorized constraint blocks and query-term objectives: posing, honouring, refusing."""

import numpy as np
import pytest
from scipy.sparse import csr_matrix

import hierdp
from hierdp.models import Problem, ProblemError
from hierdp.solvers import get

from exact_oracles import enumerate_optimum, feasible, objective_at


def small_tree(objective: str = "l1", integer: bool = True) -> Problem:
    """Root fixed at 6 -> a, b; a -> a1, a2 (4 free nodes)."""
    return Problem([-1, 0, 0, 1, 1], [np.nan, 3.3, 2.4, 1.2, 2.6], fixed=[6, np.nan, np.nan, np.nan, np.nan],
                   objective=objective, integer=integer, names=["r", "a", "b", "a1", "a2"])


def test_add_constraints_is_add_linear_vectorized():
    one = small_tree().add_linear({"a1": 1, "b": -1}, lower=1, name="x").add_linear({"a2": 2}, upper=3)
    a = csr_matrix(np.array([[0, 0, -1, 1, 0], [0, 0, 0, 0, 2.0]]))
    many = small_tree().add_constraints(a, [1, -np.inf], [np.inf, 3], name="blk")
    for p in (one, many):
        rows = p.constraints
        np.testing.assert_array_equal(rows.matrix.toarray(), a.toarray())
        np.testing.assert_array_equal(rows.lower, [1, -np.inf])
    assert one.constraints.name(0) == "x" and one.constraints.name(1) == "#1"
    assert many.constraints.name(1) == "blk[1]"
    assert [c.index.tolist() for c in one.linear] == [[2, 3], [4]]
    for s in ("highs", "ortools"):
        assert hierdp.solve(one, solver=s).objective == pytest.approx(hierdp.solve(many, solver=s).objective)


def test_nodes_argument_maps_columns_by_name():
    p = small_tree().add_constraints(np.array([[1.0, 1.0]]), lower=5, nodes=["a1", "b"])
    np.testing.assert_array_equal(p.constraints.matrix.toarray(), [[0, 0, 1, 1, 0]])


@pytest.mark.parametrize("objective", ["linf", "l1", "l2"])
def test_user_rows_honoured_against_enumeration(objective):
    p = small_tree(objective).add_constraints(np.array([[0, 1, -1, 0, 0.0], [0, 0, 0, 1, 1.0]]), [-np.inf, 2], [2, 5])
    best = enumerate_optimum(p, 0, 6)
    for s in ("highs", "ortools"):
        if get(s).unsupported(p):
            continue
        sol = hierdp.solve(p, solver=s)
        assert feasible(p, sol.values)
        assert objective_at(p, sol.values) == pytest.approx(best, abs=1e-9)


def test_monotone_chains_vectorized_and_named():
    rng = np.random.default_rng(0)
    # 40 groups of 5 "cumulative counts" each; every chain must be non-decreasing
    x = rng.normal(5, 3, 200)
    p = Problem.from_groups(x, np.arange(0, 201, 5), np.full(40, 25.0), objective="l1")
    chains = (40 + np.arange(200)).reshape(40, 5)
    p.add_monotone_chains(chains)
    rows = p.constraints
    assert len(rows) == 40 * 4 and "cumulative" in p.features() and "linear_constraints" not in p.features()
    assert rows.name(5) == "chain[5]"
    np.testing.assert_array_equal(rows.matrix[0].toarray().ravel()[40:42], [-1, 1])
    sol = hierdp.solve(p, solver="highs")
    v = sol.values[40:].reshape(40, 5)
    assert np.all(np.diff(v, axis=1) >= 0) and np.all(v.sum(1) == 25)
    # decreasing chains from names; a ragged list
    q = small_tree("l2").add_monotone_chains([["a2", "a1"], ["a", "b"]], increasing=False)
    np.testing.assert_array_equal(q.constraints.upper, [0, 0])
    sol = hierdp.solve(q, solver="highs")
    assert sol.values[4] >= sol.values[3] and sol.values[1] >= sol.values[2]


def test_bad_blocks_are_refused_naming_the_row():
    p = small_tree()
    with pytest.raises(ProblemError, match="row 1 has lower"):
        p.add_constraints(np.eye(5)[:2], [0, 3], [1, 2])
    with pytest.raises(ProblemError, match="row 0 needs a finite"):
        p.add_constraints(np.eye(5)[:1])
    with pytest.raises(ProblemError, match="row 1 has no node"):
        p.add_constraints(np.array([[1.0, 0, 0, 0, 0], [0, 0, 0, 0, 0]]), 0)
    with pytest.raises(ProblemError, match="non-finite"):
        p.add_constraints(np.array([[np.nan, 1, 0, 0, 0]]), 0)
    with pytest.raises(ProblemError, match="NaN bound"):
        p.add_constraints(np.eye(5)[:1], np.nan, 3)
    with pytest.raises(ProblemError, match="5 nodes"):
        p.add_constraints(np.eye(4), 0)
    with pytest.raises(ProblemError, match="repeats node"):
        p.add_monotone_chains(np.array([[1, 1, 2]]))
    with pytest.raises(ProblemError, match="non-finite target"):
        p.add_query_terms(np.eye(5)[:1], [np.nan])
    with pytest.raises(ProblemError, match="weight"):
        p.add_query_terms(np.eye(5)[:1], [1.0], [-1.0])
    assert p.n_constraints == 0 and p.n_query_terms == 0  # nothing half-added


@pytest.mark.parametrize("objective", ["linf", "l1", "l2"])
@pytest.mark.parametrize("integer", [True, False])
def test_query_terms_against_independent_oracles(objective, integer):
    p = small_tree(objective, integer)
    # "a1 + a2 + b should be 5.5" and "a - b should be 2" (a prefix sum and a difference)
    p.add_query_terms(np.array([[0, 0, 1, 1, 1.0], [0, 1, -1, 0, 0]]), [5.5, 2.0], [2.0, 1.0], name="q")
    assert "query_terms" in p.features()
    for s in ("intopt", "projection", "costtable", "ortools"):
        assert any("query-term" in w for w in get(s).unsupported(p))
    sol = hierdp.solve(p, solver="highs")
    assert feasible(p, sol.values, 1e-9 if integer else 1e-6)
    if integer:
        best = enumerate_optimum(p, 0, 6)
    else:
        from exact_oracles import continuous_optimum

        best = continuous_optimum(p)
    assert objective_at(p, sol.values) == pytest.approx(best, rel=1e-6, abs=1e-7)
    assert sol.objective == pytest.approx(objective_at(p, sol.values), abs=1e-9)
    pyo = hierdp.solve(p, solver="highs", path="pyomo")
    assert pyo.objective == pytest.approx(sol.objective, rel=1e-7, abs=1e-7)


def test_query_terms_on_fixed_nodes_are_constants():
    p = small_tree("l2").add_query_terms(np.array([[1.0, 1, 0, 0, 0]]), [10.0])  # r (fixed 6) + a
    sol = hierdp.solve(p, solver="highs")
    assert objective_at(p, sol.values) == pytest.approx(enumerate_optimum(p, 0, 6), abs=1e-9)


def test_integer_l2_query_terms_need_integer_coefficients():
    p = small_tree("l2").add_query_terms(np.array([[0, 0.5, 0, 0, 0]]), [1.0])
    assert any("integer coefficients" in w for w in get("highs").unsupported(p))


def test_three_million_chain_rows_pose_without_python_loops():
    # the posing path is vectorized: 10^5 rows here (the benchmark shows 3 * 10^6)
    n = 200_000
    p = Problem(np.full(n, -1), np.zeros(n))
    chains = np.arange(n).reshape(-1, 2)
    p.add_monotone_chains(chains)
    assert p.n_constraints == n // 2 and p.constraints.matrix.nnz == n
