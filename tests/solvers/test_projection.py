"""Simplex projection and exact integer L2: KKT / SLSQP / brute-force / exchange-argument oracles,
batch == per group, and the ``projection`` solver plug-in."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.optimize import minimize

import hierdp
from hierdp.models.problem import Problem
from hierdp.solvers.base import UnsupportedProblem
from hierdp.solvers.projection import (
    integer_l2,
    integer_l2_batch,
    project,
    project_batch,
)


def random_group(rng: np.random.Generator, b_max: int = 12) -> tuple[np.ndarray, int]:
    b = int(rng.integers(1, b_max + 1))
    true = rng.poisson(rng.choice([0.5, 3, 20]), b)
    kind = rng.integers(0, 3)
    if kind == 0:
        x = true + rng.normal(0, 4, b)
    elif kind == 1:
        x = (true + np.rint(rng.normal(0, 4, b))).astype(float)  # integer noisy values, ties
    else:
        x = np.round(true + rng.normal(0, 4, b), 1)
    c = int(true.sum()) if rng.random() < 0.7 else int(rng.integers(0, 4 * b))
    return x, c


def bisection_projection(x: np.ndarray, c: float) -> np.ndarray:
    """Independent oracle: tau by bisection on sum(max(x - tau, 0)) = c."""
    lo, hi = x.min() - c - 1.0, x.max()
    for _ in range(200):
        mid = (lo + hi) / 2
        if np.maximum(x - mid, 0).sum() > c:
            lo = mid
        else:
            hi = mid
    return np.maximum(x - (lo + hi) / 2, 0)


def l2(y, x) -> float:
    return float(np.sum((np.asarray(y, float) - x) ** 2))


# ------------------------------------------------------------------------------------ projection
def test_projection_kkt_and_bisection():
    rng = np.random.default_rng(0)
    for _ in range(1000):
        x, c = random_group(rng)
        c = float(c) + (rng.random() if rng.random() < 0.5 else 0.0)  # real totals too
        y = project(x, c)
        assert y.min() >= 0 and y.sum() == pytest.approx(c, abs=1e-9)
        # KKT: y = max(x - tau, 0) for one tau
        pos = y > 1e-12
        if pos.any():
            tau = x[pos] - y[pos]
            assert np.ptp(tau) < 1e-9
            assert np.all(x[~pos] <= tau[0] + 1e-9)
        np.testing.assert_allclose(y, bisection_projection(x, c), atol=1e-6)


def test_projection_against_slsqp():
    rng = np.random.default_rng(1)
    for _ in range(40):
        x, c = random_group(rng, b_max=6)
        res = minimize(lambda y, x=x: np.sum((y - x) ** 2), np.full(x.size, c / x.size),
                       jac=lambda y, x=x: 2 * (y - x), method="SLSQP", bounds=[(0, None)] * x.size,
                       constraints=[{"type": "eq", "fun": lambda y, c=c: y.sum() - c}],
                       options={"ftol": 1e-12, "maxiter": 500})
        y = project(x, c)
        # SLSQP stops at its own precision (sometimes with status 8): the exact projection must
        # be at least as good and agree to solver precision
        assert l2(y, x) <= res.fun + 1e-9
        np.testing.assert_allclose(y, res.x, atol=1e-5)


def test_projection_simple_cases():
    np.testing.assert_allclose(project([1.0, 2.0, 3.0], 6), [1, 2, 3])
    np.testing.assert_allclose(project([0.0, 0.0], 1), [0.5, 0.5])
    np.testing.assert_allclose(project([-5.0, 1.0], 1), [0, 1])
    np.testing.assert_allclose(project([3.0, 1.0], 0), [0, 0])


def test_project_batch_equals_per_group():
    rng = np.random.default_rng(2)
    groups = [random_group(rng) for _ in range(3000)]
    groups[5] = (np.array([]), 0)
    values = np.concatenate([x for x, _ in groups])
    offsets = np.concatenate([[0], np.cumsum([x.size for x, _ in groups])])
    totals = np.array([c for _, c in groups], dtype=float)
    y = project_batch(values, offsets, totals)
    for g, (x, c) in enumerate(groups):
        if x.size:
            # batch sums run over the whole level: equal up to rounding
            np.testing.assert_allclose(y[offsets[g]:offsets[g + 1]], project(x, c), rtol=1e-12, atol=1e-9)


# ------------------------------------------------------------------------------------ integer L2
def test_integer_l2_against_brute_force():
    rng = np.random.default_rng(3)
    for _ in range(700):
        b = int(rng.integers(1, 5))
        c = int(rng.integers(0, 9))
        x = rng.normal(c / b, 3, b)
        if rng.random() < 0.4:
            x = np.round(x * 2) / 2  # half-integers: many exact ties
        y = integer_l2(x, c)
        assert y.dtype == np.int64 and y.sum() == c and y.min() >= 0
        best = min(l2(comp, x) for comp in itertools.product(range(c + 1), repeat=b) if sum(comp) == c)
        assert l2(y, x) == pytest.approx(best, abs=1e-9), (x, c, y)


def test_integer_l2_exchange_certificate():
    # separable convex: optimal iff no single-unit move i -> j lowers the cost
    rng = np.random.default_rng(4)
    for _ in range(500):
        x, c = random_group(rng, b_max=30)
        y = integer_l2(x, c).astype(float)
        assert y.sum() == c and y.min() >= 0
        down = (y - 1 - x) ** 2 - (y - x) ** 2  # change of cost when removing one unit
        up = (y + 1 - x) ** 2 - (y - x) ** 2
        down = np.where(y > 0, down, np.inf)
        # best move i -> j (i != j; for i == j the change is +2, never negative)
        assert down.min() + up.min() >= -1e-9, (x, c, y)


def test_integer_l2_tie_rule_and_alias():
    # x = (0.5, 0.5), c = 1: (1, 0) and (0, 1) are both optimal; the earlier position wins.
    # (2.2, 0.4, 1.4), c = 4: floor (2, 0, 1), one unit left, entries 1 and 2 tie (cost 0.2) -> entry 1
    assert integer_l2([0.5, 0.5], 1).tolist() == [1, 0]
    assert integer_l2([2.2, 0.4, 1.4], 4).tolist() == [2, 1, 1]


def test_integer_l2_batch_equals_per_group():
    rng = np.random.default_rng(5)
    groups = [random_group(rng) for _ in range(3000)]
    groups[7] = (np.array([]), 0)
    values = np.concatenate([x for x, _ in groups])
    offsets = np.concatenate([[0], np.cumsum([x.size for x, _ in groups])])
    totals = np.array([c for _, c in groups])
    y = integer_l2_batch(values, offsets, totals)
    for g, (x, c) in enumerate(groups):
        if x.size:
            np.testing.assert_array_equal(y[offsets[g]:offsets[g + 1]], integer_l2(x, c))


def test_bad_input():
    with pytest.raises(ValueError, match="integers"):
        integer_l2([1.0, 2.0], 1.5)
    with pytest.raises(ValueError, match="non-negative"):
        project([1.0, 2.0], -1.0)
    with pytest.raises(ValueError, match="no entries but total"):
        project_batch([1.0], [0, 1, 1], [1.0, 2.0])


# ------------------------------------------------------------------------------------ plug-in
def _level_problem(rng, n_groups=200, **kw):
    groups = [random_group(rng, b_max=8) for _ in range(n_groups)]
    values = np.concatenate([x for x, _ in groups])
    offsets = np.concatenate([[0], np.cumsum([x.size for x, _ in groups])])
    totals = np.array([c for _, c in groups], dtype=float)
    return Problem.from_groups(values, offsets, totals, **kw), values, offsets, totals


@pytest.mark.parametrize("integer", [True, False])
def test_solver_plugin(integer):
    rng = np.random.default_rng(6)
    problem, values, offsets, totals = _level_problem(rng, objective="l2", integer=integer)
    sol = hierdp.solve(problem, solver="projection")
    g = totals.size
    expected = integer_l2_batch(values, offsets, totals) if integer else project_batch(values, offsets, totals)
    np.testing.assert_array_equal(sol.values[g:], expected)
    np.testing.assert_allclose(sol.values[:g], totals)
    assert sol.values.dtype == (np.int64 if integer else np.float64)
    assert sol.objective == pytest.approx(l2(expected, values))
    assert sol.termination == "optimal" and sol.stats["n_groups"] == g


def test_solver_refusals():
    rng = np.random.default_rng(7)
    p_linf, *_ = _level_problem(rng, 5, objective="linf")
    with pytest.raises(UnsupportedProblem, match="objective"):
        hierdp.solve(p_linf, solver="projection")
    _, values, offsets, totals = _level_problem(rng, 5)
    p_w = Problem.from_groups(values, offsets, totals, objective="l2", weights=np.linspace(1, 2, values.size))
    with pytest.raises(UnsupportedProblem, match="weights"):
        hierdp.solve(p_w, solver="projection")
    p_lin, *_ = _level_problem(rng, 5, objective="l2")
    p_lin.add_linear({5: 1.0}, upper=2)
    with pytest.raises(UnsupportedProblem, match="linear"):
        hierdp.solve(p_lin, solver="projection")
    tree = Problem([-1, 0, 0, 1, 1], [np.nan, 3, 4, 1, 2], fixed=[7, np.nan, np.nan, np.nan, np.nan], objective="l2")
    with pytest.raises(UnsupportedProblem, match="structure"):
        hierdp.solve(tree, solver="projection")
