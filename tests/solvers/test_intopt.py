"""IntOpt (paper 000, Algorithm 4): same output as a plain transcription, optimal against brute
force and a MIP, batch == per group, and the ``intopt`` solver plug-in."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.optimize import Bounds, LinearConstraint, milp

import hierdp
from hierdp.models.problem import Problem
from hierdp.solvers.base import UnsupportedProblem
from hierdp.solvers.intopt import intopt, intopt_batch, linf_optimum


# ------------------------------------------------------------------------------------ oracles
def algorithm4_literal(x: list[int], c: int, order: str = "ascending") -> list[int]:
    """Algorithm 4 of paper 000 line by line, in the paper's z = y - x form (integer x only)."""
    b = len(x)
    sx = sum(x)
    u = -((sx - c) // b)  # ceil((c - sum x) / b), exactly, for integers
    z = [max(u, -xi) for xi in x]  # line 2
    t = max(abs(zi) for zi in z)  # line 3
    idx = sorted(range(b), key=(lambda i: x[i]) if order == "ascending" else (lambda i: -x[i]))  # line 4
    I = [i for i in idx if z[i] > -x[i]]  # line 5
    j = 0  # line 6
    while sum(z) > c - sx:  # line 7
        delta = sum(z) - c + sx  # line 8
        i = I[j]
        z[i] = max(z[i] - delta, -x[i], -t)  # line 9
        j = (j + 1) % len(I)  # line 10
        if j == 0:  # line 11
            I = [i for i in I if z[i] > -x[i]]  # line 12
            if I:  # (empty I means sum(z) = -sum(x) <= c - sum(x): the loop is over)
                r = (sum(z) - c + sx) // len(I)  # line 13
                t = t + max(1, r)  # line 14
    return [xi + zi for xi, zi in zip(x, z, strict=False)]  # line 15


def _tol(x: list[float], c: int) -> float:
    return 1e-12 * max(1.0, max(abs(v) for v in x), float(c))


def _feasible(x: list[float], c: int, a: float, tol: float) -> bool:
    lo = [max(0, math.ceil(v - a - tol)) for v in x]
    hi = [math.floor(v + a + tol) for v in x]
    return all(l <= h for l, h in zip(lo, hi, strict=False)) and sum(lo) <= c <= sum(hi)


def alpha_by_search(x: list[float], c: int) -> float:
    """The integer L-inf optimum by bisection over all candidate tolerances |k - x_i|."""
    tol = _tol(x, c)
    top = int(max(abs(v) for v in x)) + c + 2
    cands = sorted({abs(k - v) for v in x for k in range(0, top + 1)} | {0.0})
    lo, hi = 0, len(cands) - 1
    while lo < hi:  # feasibility is monotone in the tolerance
        mid = (lo + hi) // 2
        if _feasible(x, c, cands[mid], tol):
            hi = mid
        else:
            lo = mid + 1
    return cands[lo]


def intopt_reference(x: list[float], total: int, order: str = "ascending") -> list[int]:
    """Plain per-node transcription of Algorithm 4 in y = x + z form, with the documented
    extension to real x (start clipped to floor(x + a*), tolerance capped at a*)."""
    b, c = len(x), total
    tol = _tol(x, c)
    a_star = alpha_by_search(x, c)
    d = c - sum(x)
    y = [min(max(0, math.ceil(xi + d / b - tol)), math.floor(xi + a_star + tol)) for xi in x]  # line 2
    t = max(abs(yi - xi) for yi, xi in zip(y, x, strict=False))  # line 3
    idx = sorted(range(b), key=(lambda i: x[i]) if order == "ascending" else (lambda i: -x[i]))  # line 4
    I = [i for i in idx if y[i] > 0]  # line 5
    j = 0
    while sum(y) > c:  # line 7
        delta = sum(y) - c  # line 8
        i = I[j]
        y[i] = max(y[i] - delta, 0, math.ceil(x[i] - t - tol))  # line 9
        j = (j + 1) % len(I)
        if j == 0:
            I = [i for i in I if y[i] > 0]  # line 12
            if I:
                r = (sum(y) - c) // len(I)  # line 13
                t = min(t + max(1, r), a_star)  # line 14 (cap: a no-op on integer x)
    return y


def brute_linf(x: list[float], c: int) -> float:
    best = math.inf
    for comp in itertools.product(range(c + 1), repeat=len(x)):
        if sum(comp) == c:
            best = min(best, max(abs(ci - xi) for ci, xi in zip(comp, x, strict=False)))
    return best


def mip_linf(x: np.ndarray, c: int) -> float:
    """Independent oracle: min alpha s.t. |y - x| <= alpha, sum y = c, y integer >= 0 (HiGHS via scipy)."""
    b = x.size
    cost = np.zeros(b + 1)
    cost[-1] = 1.0
    eye = np.eye(b)
    a_up = np.hstack([eye, -np.ones((b, 1))])  # y - alpha <= x
    a_dn = np.hstack([-eye, -np.ones((b, 1))])  # -y - alpha <= -x
    a_sum = np.hstack([np.ones((1, b)), np.zeros((1, 1))])
    cons = [LinearConstraint(a_up, -np.inf, x), LinearConstraint(a_dn, -np.inf, -x), LinearConstraint(a_sum, c, c)]
    integrality = np.concatenate([np.ones(b), [0]])
    res = milp(cost, constraints=cons, integrality=integrality, bounds=Bounds(0, np.inf),
               options={"mip_rel_gap": 0})
    assert res.success
    return float(res.fun)


def random_group(rng: np.random.Generator, b_max: int = 12) -> tuple[list[float], int]:
    """Noisy group: true counts + noise (integer or real), total from the truth or random."""
    b = int(rng.integers(1, b_max + 1))
    true = rng.poisson(rng.choice([0.5, 3, 10]), b)
    kind = rng.integers(0, 4)
    if kind == 0:
        x = true + np.rint(rng.normal(0, 3, b))  # discrete-Gaussian-like integers
    elif kind == 1:
        x = true + rng.normal(0, 3, b)  # real noise
    elif kind == 2:
        x = np.round(true + rng.normal(0, 3, b), 1)  # reals with ties
    else:
        x = rng.choice([-2.0, 0.0, 0.5, 1.0, 3.0], b)  # many ties
    c = int(true.sum()) if rng.random() < 0.7 else int(rng.integers(0, 3 * b))
    return [float(v) for v in x], c


# ------------------------------------------------------------------------------------ tests
def test_paper_example_orders():
    # paper 000 §4.2: x = (0, -1, 1), c = 2 has optima (1, 0, 1) and (0, 0, 2)
    assert intopt([0, -1, 1], 2).tolist() == [0, 0, 2]  # ascending zeroes the small noisy value
    assert intopt([0, -1, 1], 2, order="descending").tolist() == [1, 0, 1]


@pytest.mark.parametrize("order", ["ascending", "descending"])
def test_same_output_as_reference(order):
    rng = np.random.default_rng(1234 if order == "ascending" else 99)
    for _ in range(1200):
        x, c = random_group(rng)
        got = intopt(x, c, order=order).tolist()
        assert got == intopt_reference(x, c, order), (x, c)
        if all(v == round(v) for v in x):
            assert got == algorithm4_literal([int(v) for v in x], c, order), (x, c)


@pytest.mark.parametrize("order", ["ascending", "descending"])
def test_literal_algorithm4_on_integers(order):
    rng = np.random.default_rng(7)
    for _ in range(800):
        b = int(rng.integers(1, 11))
        x = [int(v) for v in rng.integers(-6, 15, b)]
        c = int(rng.integers(0, 40))
        assert intopt(x, c, order=order).tolist() == algorithm4_literal(x, c, order), (x, c)


def test_optimal_against_brute_force():
    rng = np.random.default_rng(5)
    for _ in range(600):
        b = int(rng.integers(1, 5))
        c = int(rng.integers(0, 9))
        if rng.random() < 0.5:
            x = [float(v) for v in rng.integers(-3, 8, b)]
        else:
            x = [round(float(v), int(rng.integers(1, 3))) for v in rng.normal(c / b, 3, b)]
        best = brute_linf(x, c)
        for order in ("ascending", "descending"):
            y = intopt(x, c, order=order)
            assert y.sum() == c and y.min() >= 0
            assert max(abs(yi - xi) for yi, xi in zip(y, x, strict=False)) == pytest.approx(best, abs=1e-9), (x, c)
        assert linf_optimum(np.array(x), np.array([0, b]), np.array([c]))[0] == pytest.approx(best, abs=1e-9)


def test_optimal_against_mip():
    rng = np.random.default_rng(11)
    for _ in range(500):
        x, c = random_group(rng, b_max=10)
        xa = np.array(x)
        y = intopt(xa, c)
        assert y.sum() == c and y.min() >= 0
        assert np.max(np.abs(y - xa)) == pytest.approx(mip_linf(xa, c), abs=1e-6), (x, c)


@pytest.mark.parametrize("order", ["ascending", "descending"])
def test_batch_equals_per_group(order):
    rng = np.random.default_rng(21)
    groups = [random_group(rng) for _ in range(5000)]
    groups[10] = ([], 0)  # empty groups are allowed with total 0
    groups[4000] = ([], 0)
    values = np.concatenate([np.array(x, dtype=float) for x, _ in groups])
    offsets = np.concatenate([[0], np.cumsum([len(x) for x, _ in groups])])
    totals = np.array([c for _, c in groups])
    y = intopt_batch(values, offsets, totals, order=order)
    assert y.dtype == np.int64
    for g, (x, c) in enumerate(groups):
        if x:
            np.testing.assert_array_equal(y[offsets[g]:offsets[g + 1]], intopt(x, c, order=order))


def test_total_zero_gives_zeros():
    assert intopt([3.2, -1.0, 7.0], 0).tolist() == [0, 0, 0]
    assert intopt([5.0], 3).tolist() == [3]


@pytest.mark.parametrize(
    "values, offsets, totals, match",
    [
        ([1.0, 2.0], [0, 1, 2, 2], [1, 1, 4], "no entries but total"),
        ([1.0, 2.0], [0, 2], [-1], "non-negative"),
        ([1.0, 2.0], [0, 2], [1.5], "integers"),
        ([1.0, np.nan], [0, 2], [1], "finite"),
        ([1.0, 2.0], [0, 1], [1], "end at len"),
        ([1.0, 2.0], [0, 2, 1, 2], [1, 0, 1], "non-decreasing"),
        ([1.0, 2.0], [0, 2], [1, 2], "len\\(totals\\)\\+1"),
    ],
)
def test_bad_input(values, offsets, totals, match):
    with pytest.raises(ValueError, match=match):
        intopt_batch(values, offsets, totals)


def test_bad_order():
    with pytest.raises(ValueError, match="order"):
        intopt([1.0], 1, order="random")


# ------------------------------------------------------------------------------------ plug-in
def _level_problem(rng, n_groups=300, **kw):
    groups = [random_group(rng, b_max=8) for _ in range(n_groups)]
    values = np.concatenate([np.array(x) for x, _ in groups])
    offsets = np.concatenate([[0], np.cumsum([len(x) for x, _ in groups])])
    totals = np.array([c for _, c in groups], dtype=float)
    return Problem.from_groups(values, offsets, totals, **kw), values, offsets, totals


@pytest.mark.parametrize("order", [None, "descending"])
def test_solver_plugin(order):
    rng = np.random.default_rng(3)
    problem, values, offsets, totals = _level_problem(rng)
    opts = {} if order is None else {"order": order}
    sol = hierdp.solve(problem, solver="intopt", **opts)
    g = totals.size
    expected = intopt_batch(values, offsets, totals, order=order or "ascending")
    np.testing.assert_array_equal(sol.values[g:], expected)
    np.testing.assert_array_equal(sol.values[:g], totals.astype(np.int64))  # fixed parents unchanged
    assert sol.termination == "optimal" and sol.solver == "intopt"
    assert sol.objective == pytest.approx(linf_optimum(values, offsets, totals).sum(), abs=1e-6)
    assert sol.stats["n_groups"] == g and sol.stats["order"] == (order or "ascending")


def test_solver_refusals():
    rng = np.random.default_rng(4)
    p_l2, *_ = _level_problem(rng, 5, objective="l2")
    with pytest.raises(UnsupportedProblem, match="objective"):
        hierdp.solve(p_l2, solver="intopt")
    p_w, values, offsets, totals = _level_problem(rng, 5)
    p_w = Problem.from_groups(values, offsets, totals, weights=np.linspace(1, 2, values.size))
    with pytest.raises(UnsupportedProblem, match="weights"):
        hierdp.solve(p_w, solver="intopt")
    p_lin, *_ = _level_problem(rng, 5)
    p_lin.add_linear({5: 1.0, 6: 1.0}, lower=1)
    with pytest.raises(UnsupportedProblem, match="linear"):
        hierdp.solve(p_lin, solver="intopt")
    p_cont, *_ = _level_problem(rng, 5, integer=False)
    with pytest.raises(UnsupportedProblem, match="continuous"):
        hierdp.solve(p_cont, solver="intopt")
    p_sign, *_ = _level_problem(rng, 5, nonnegative=False)
    with pytest.raises(UnsupportedProblem, match="non-negativity"):
        hierdp.solve(p_sign, solver="intopt")
    p_nan = Problem.from_groups([1.0, np.nan], [0, 2], [3.0])
    with pytest.raises(UnsupportedProblem, match="finite target"):
        hierdp.solve(p_nan, solver="intopt")
    tree = Problem([-1, 0, 0, 1, 1, 2], [np.nan, 3, 4, 1, 2, 4], fixed=[7, np.nan, np.nan, np.nan, np.nan, np.nan],
                   objective="linf")
    with pytest.raises(UnsupportedProblem, match="structure"):
        hierdp.solve(tree, solver="intopt")
