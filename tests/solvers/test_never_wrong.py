"""Never a wrong "optimal": the regression tests of reproducers n1, n2, n9, n10
(../shared/repro/solvers/) and of their classes - exact integer checks, magnitude-scaled continuous
checks, numbers quoted exactly. Oracles: Python integers and fractions, written here."""

from __future__ import annotations

import re
from fractions import Fraction

import numpy as np
import pytest
from scipy.sparse import csr_matrix

import hierdp
from hierdp.errors import exact_number
from hierdp.models import Problem
from hierdp.models.arrays import ModelInfeasible, model_arrays
from hierdp.models.feasibility import row_violations
from hierdp.solvers import SolverFailed, UnsupportedProblem, get

nan = np.nan


def _n2_problem(B: float) -> Problem:
    p = Problem([-1, -1, -1], [B, 2 * B, 4.0], fixed=[B, 2 * B, nan], objective="l1", integer=True,
                upper=[np.inf, np.inf, 10])
    p.add_linear({0: 1, 1: -1}, lower=-B + 2)  # y0 - y1 is fixed at -B; the row needs >= -B + 2
    return p


@pytest.mark.parametrize("B", [1e9, 4e9, 1e12, 2.0 ** 50])
def test_n2_row_over_fixed_nodes_is_checked_exactly(B):
    p = _n2_problem(B)
    # the model refuses it before any solver runs, and verify would too
    with pytest.raises(ModelInfeasible, match="over fixed nodes only"):
        model_arrays(p)
    assert any("linear constraint" in v for v in p.violations(np.array([B, 2 * B, 4.0])))
    for name in ("highs", "ortools", "auto"):
        try:
            hierdp.solve(p, solver=name)
        except SolverFailed as exc:
            assert exc.termination == "infeasible"
        except UnsupportedProblem:
            pass
        else:
            pytest.fail(f"{name} returned an infeasible problem as solved")


def test_violations_are_exact_in_integers_at_every_magnitude():
    for B in (10 ** 9, 10 ** 12, 2 ** 52, 2 ** 60):
        p = Problem([-1, 0, 0], [nan, 1.0, 1.0], fixed=[float(B), nan, nan], objective="l1")
        cap = B // 2 - 1024  # a float64 bound at every B here
        p.add_linear({1: 1}, upper=cap)
        good = np.array([B, cap, B - cap], dtype=np.int64)
        assert p.violations(good) == []
        off = good.copy()
        off[2] += 1  # one unit: a relative tolerance would pass it
        assert any("sum of their children" in v for v in p.violations(off))
        row = good.copy()
        row[1] += 1
        row[2] -= 1
        assert any("linear constraint" in v for v in p.violations(row))


def test_row_violations_exact_against_fractions():
    rng = np.random.default_rng(0)
    for _ in range(300):
        m, n = 3, 5
        dense = rng.choice([0.0, 1.0, -1.0, 2.0, 0.5, 0.1, 3.0], (m, n))
        dense[:, 0] = np.where(dense[:, 0] == 0, 1.0, dense[:, 0])  # every row has a node
        y = rng.integers(-(2 ** 40), 2 ** 40, n) * rng.choice([1, 2 ** 10], n)
        act = [sum((Fraction(float(a)) * int(v) for a, v in zip(r, y, strict=True)), Fraction(0)) for r in dense]
        shift = rng.choice([-1, 0, 1], m)
        lower = np.array([float(a) + s for a, s in zip(act, shift, strict=True)])  # float64 rounds big bounds
        bad = row_violations(csr_matrix(dense), lower, np.full(m, np.inf), y, integer=True)
        expect = [a < Fraction(float(lo)) for a, lo in zip(act, lower, strict=True)]
        assert bad.tolist() == expect


def test_n10_continuous_checks_scale_with_the_magnitude():
    t = 1e12 + np.array([0.5, 0.5, 2.5, -3.5, -4.0])
    p = Problem([-1] * 5, t, objective="l2", integer=False)
    p.add_monotone_chains(np.array([[0, 1, 2, 3, 4]]))
    # two pooled values one float64 ulp (1.2e-4) apart in the wrong order: rounding, not a violation
    ulp = np.spacing(1e12)
    y = np.full(5, 1e12 - 0.8)
    y[2:] -= ulp
    assert p.violations(y) == []
    y[2:] -= 1e4  # a violation beyond the tolerance (1e-9 of the row's 2e12) is still caught
    assert any("chain" in v for v in p.violations(y))
    # every solver's answer passes verify; objectives agree to what float64 resolves at 1e12: values
    # to 1.2e-4, so a sum of 5 squared deviations of ~4 to 5 * 2 * 4 * 1.2e-4 = 5e-3
    ref = hierdp.solve(p, solver="chain").objective
    for name in ("highs", "chain", "auto"):
        assert hierdp.solve(p, solver=name).objective == pytest.approx(ref, abs=1e-2)


def test_n9_refusals_quote_counts_exactly():
    p = Problem([-1, -1, -1], [1000012.0, 1000012.5, 1000013.0], fixed=[1000012, nan, 1000013], objective="l2")
    p.add_constraints(np.array([[1, -1, 0], [0, 1, -1]]), lower=[0, 0], upper=[0, 0])
    why = " ".join(get("chain").unsupported(p))
    assert "1000012" in why and "1000013" in why


def test_magnitude_refusals_quote_counts_exactly():
    p = Problem.from_groups([2.0 ** 52 + 2, 1.0], [0, 2], [2.0 ** 52 + 4], objective="linf")
    why = " ".join(get("intopt").unsupported(p))
    assert str(2 ** 52 + 4) in why or str(2 ** 52 + 2) in why
    assert not re.search(r"\de[+-]\d", why)  # no %g-style exponent anywhere


@pytest.mark.parametrize("value, text", [(1000012.0, "1000012"), (1000013, "1000013"), (np.int64(2 ** 62 + 1),
                                         str(2 ** 62 + 1)), (0.1, "0.1"), (-np.inf, "-inf"), (2.0 ** 70, str(2 ** 70))])
def test_exact_number(value, text):
    assert exact_number(value) == text


@pytest.mark.parametrize("name", ["highs", "ortools", "auto"])
def test_a_problem_without_a_free_node_is_decided_by_checking_its_point(name):
    """The fuzz suite's fixed_rows family (long profile, seeds 162 and 195): every node fixed, a row
    over them missed by two units at 1e9: 'infeasible', never 'optimal'."""
    B = 1_667_697_617
    p = Problem([-1, -1], [float(B), 1.0], fixed=[float(B - 1000), 1000.0], objective="l1")
    p.add_linear({0: -1, 1: -1}, upper=float(-B - 2))
    with pytest.raises(SolverFailed) as info:
        hierdp.solve(p, solver=name)
    assert info.value.termination == "infeasible" and info.value.refuted_by is None
    q = Problem([-1, -1], [float(B), 1.0], fixed=[float(B - 1000), 1000.0], objective="l1")
    q.add_linear({0: -1, 1: -1}, upper=float(-B))
    sol = hierdp.solve(q, solver=name)
    assert sol.values.tolist() == [B - 1000, 1000] and sol.objective == 0.0  # fixed nodes carry no term
