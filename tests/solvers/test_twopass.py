"""Hay et al.'s consistency posed as a Problem and solved by the ``twopass`` plug-in.

Oracles: dense weighted least squares (``numpy.linalg.lstsq`` on the leaf parametrisation of the
consistent trees), the HiGHS QP on the same Problem, a 3-node closed form derived by hand, and
Qardaji et al.'s AG inference formula (an independent closed form for two-level trees)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import hierdp
from hierdp.mechanisms.spatial.consistency import consistent_tree, tree_problem
from hierdp.models.problem import Problem
from hierdp.solvers import UnsupportedProblem, registry


def _random_tree(rng, n):
    parent = np.array([-1] + [int(rng.integers(0, i)) for i in range(1, n)])
    return parent, np.bincount(parent[1:], minlength=n)


def _dense_wls(parent, y, w):
    """argmin sum w (x - y)^2 over consistent x: x = A z with z the leaf values, A[v, leaf] = 1 if leaf is
    under v; unmeasured rows (NaN) dropped."""
    n = parent.size
    nch = np.bincount(parent[1:], minlength=n)
    leaves = np.flatnonzero(nch == 0)
    A = np.zeros((n, leaves.size))
    for j, leaf in enumerate(leaves):
        v = leaf
        while v >= 0:
            A[v, j] = 1
            v = parent[v]
    m = ~np.isnan(y)
    sw = np.sqrt(w[m])
    z = np.linalg.lstsq(A[m] * sw[:, None], y[m] * sw, rcond=None)[0]
    return A @ z


def test_twopass_equals_dense_least_squares_on_random_trees():
    rng = np.random.default_rng(0)
    for _ in range(150):
        n = int(rng.integers(2, 40))
        parent, nch = _random_tree(rng, n)
        y = rng.normal(20, 10, n)
        var = rng.uniform(0.1, 30, n)
        y[(rng.random(n) < 0.3) & (nch > 0)] = np.nan  # internal nodes without a measurement
        got, sol = consistent_tree(parent, y, var)
        assert sol.solver == "twopass"
        want = _dense_wls(parent, y, 1 / var)
        # lstsq on a well-conditioned (n <= 40) system: agreement to ~1e-10 of the values' scale
        np.testing.assert_allclose(got, want, atol=1e-8 * max(1.0, np.abs(want).max()))


def test_twopass_equals_the_highs_qp_with_fixed_nodes():
    rng = np.random.default_rng(1)
    for _ in range(25):
        n = int(rng.integers(3, 25))
        parent, nch = _random_tree(rng, n)
        y = rng.normal(5, 3, n)
        w = rng.uniform(0.5, 4, n)
        fixed = np.full(n, np.nan)
        fixed[0] = round(float(np.nansum(y[nch == 0])))  # an invariant root total
        p = Problem(parent, y, fixed=fixed, weights=w, objective="l2", integer=False, nonnegative=False)
        sol = hierdp.solve(p, solver="twopass", cross_check="highs", cross_check_tolerance=1e-7)
        assert abs(sol.values[0] - fixed[0]) < 1e-9 and sol.stats["cross_check"]["difference"] < 1e-6


def test_three_node_closed_form():
    # min (x1-y1)^2 + (x2-y2)^2 + (x1+x2-y0)^2  =>  x1 = (2 y1 - y2 + y0) / 3
    y0, y1, y2 = 1.0, 0.0, 0.0
    got, _ = consistent_tree(np.array([-1, 0, 0]), np.array([y0, y1, y2]), np.ones(3))
    assert got[1] == pytest.approx(float(Fraction(2 * 0 - 0 + 1, 3)), abs=1e-15)
    assert got[0] == pytest.approx(2 / 3, abs=1e-15)


def test_ag_inference_equals_qardajis_formula():
    """AG (Qardaji et al. 2013): for a level-1 cell with noisy N' (budget alpha eps) and m2^2 children u
    (budget (1-alpha) eps): v' = (a^2 m2^2 N' + (1-a)^2 sum u) / (a^2 m2^2 + (1-a)^2), u += (v' - sum u)/m2^2."""
    rng = np.random.default_rng(2)
    for _ in range(30):
        alpha = float(rng.uniform(0.1, 0.9))
        eps = float(rng.uniform(0.05, 2))
        cells = int(rng.integers(1, 6))
        m2 = rng.integers(1, 5, cells)
        n1 = rng.normal(100, 30, cells)
        u = [rng.normal(100 / k ** 2, 5, k ** 2) for k in m2]
        parent = np.concatenate([[-1], np.zeros(cells, int)] + [np.full(k ** 2, 1 + j) for j, k in enumerate(m2)])
        noisy = np.concatenate([[np.nan], n1, *u])
        var = np.concatenate([[1.0], np.full(cells, 2 / (alpha * eps) ** 2)]
                             + [np.full(k ** 2, 2 / ((1 - alpha) * eps) ** 2) for k in m2])
        got, _ = consistent_tree(parent, noisy, var)
        pos = 1 + cells
        for j, k in enumerate(m2):
            a2, b2, k2 = alpha ** 2, (1 - alpha) ** 2, int(k) ** 2
            v = (a2 * k2 * n1[j] + b2 * u[j].sum()) / (a2 * k2 + b2)
            want = u[j] + (v - u[j].sum()) / k2
            np.testing.assert_allclose(got[pos:pos + k2], want, rtol=1e-12, atol=1e-9)
            assert got[1 + j] == pytest.approx(v, rel=1e-12)
            pos += k2


def test_twopass_refuses_what_it_cannot_solve_exactly():
    s = registry.get("twopass")
    base = dict(objective="l2", integer=False, nonnegative=False)
    parent = np.array([-1, 0, 0])
    assert "non-negativity" in " ".join(s.unsupported(Problem(parent, [3.0, 1.0, 1.0], objective="l2", integer=False)))
    assert any("integer" in w for w in s.unsupported(Problem(parent, [3.0, 1.0, 1.0], objective="l2")))
    why = s.unsupported(Problem(parent, [3.0, 1.0, np.nan], **base))
    assert any("free leaf" in w for w in why)
    from hierdp.models.problem import ProblemError

    with pytest.raises(ProblemError, match="fixed at 10"):  # infeasible fixed values: refused when posed
        Problem([-1, 0, 1, 1], [np.nan] * 4, fixed=[10, np.nan, 2, 3], **base)
    assert any("objective" in w for w in s.unsupported(Problem(parent, [3.0, 1.0, 1.0], objective="l1",
                                                                integer=False, nonnegative=False)))
    with pytest.raises(UnsupportedProblem, match="twopass"):
        hierdp.solve(Problem(parent, [3.0, 1.0, np.nan], **base), solver="twopass")


def test_auto_picks_twopass_for_a_continuous_signed_tree_and_integer_variants_go_elsewhere():
    parent = np.array([-1, 0, 0, 1, 1])
    y = np.array([10.0, 6.2, 4.4, 3.1, -0.4])
    sol = hierdp.solve(tree_problem(parent, y, np.ones(5)), solver="auto")
    assert sol.solver == "twopass"
    vals, sol2 = consistent_tree(parent, y, np.ones(5), integer=True, nonnegative=True)
    assert sol2.solver != "twopass" and vals.dtype == np.int64 and vals.min() >= 0
    assert vals[0] == vals[1] + vals[2] and vals[1] == vals[3] + vals[4]
