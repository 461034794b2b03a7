"""The ``chain`` plug-in (paper 001 eq. 8) against brute force, an explicit cost-table dynamic program, HiGHS and
CP-SAT; its certificate and exact fallback; its refusals."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.sparse import csr_matrix

import hierdp
from hierdp.models import Problem
from hierdp.solvers import UnsupportedProblem
from hierdp.solvers._isotonic import certify_runs, exact_integer_run, integer_runs


def _chain(targets, equal, G, weights=None, integer=True):
    """Variables 0..n-1 free, n fixed at G; edge i -> i+1 is '=' where equal[i] else '>='."""
    n = len(targets)
    p = Problem(np.full(n + 1, -1), np.concatenate([targets, [np.nan]]),
                fixed=np.concatenate([np.full(n, np.nan), [G]]), objective="l2", integer=integer,
                weights=None if weights is None else np.concatenate([weights, [1.0]]))
    a = np.arange(n)
    eq = np.asarray(equal, bool)
    if (~eq).any():
        p.add_monotone_chains(np.stack([a[~eq], a[~eq] + 1], 1))
    if eq.any():
        m = int(eq.sum())
        p.add_constraints(csr_matrix((np.tile([-1.0, 1.0], m), np.stack([a[eq], a[eq] + 1], 1).ravel(),
                                      np.arange(0, 2 * m + 1, 2)), shape=(m, n + 1)), 0.0, 0.0, name="eq")
    return p


def _table_dp(t, w, equal, G):
    """Eq. (8a)/(8b) with explicit tables over 0..G (independent of the plug-in)."""
    n = len(t)
    v = np.arange(G + 1, dtype=float)
    C = w[0] * (v - t[0]) ** 2
    for i in range(1, n):
        prev = C if equal[i - 1] else np.minimum.accumulate(C)
        C = w[i] * (v - t[i]) ** 2 + prev
    return C[G] if equal[n - 1] else np.minimum.accumulate(C)[G]


def test_matches_brute_force_and_the_table_dp():
    rng = np.random.default_rng(0)
    for _ in range(250):
        n, G = int(rng.integers(1, 6)), int(rng.integers(0, 6))
        t = rng.integers(-3, G + 4, n).astype(float)
        w = rng.integers(1, 4, n).astype(float)
        eq = rng.random(n) < 0.3
        sol = hierdp.solve(_chain(t, eq, G, w), solver="chain")
        best = np.inf
        for v in itertools.product(range(G + 1), repeat=n):
            x = np.array(v + (G,))
            if np.all(np.where(eq, x[1:] == x[:-1], x[1:] >= x[:-1])):
                best = min(best, float((w * (x[:n] - t) ** 2).sum()))
        assert sol.objective == pytest.approx(best, abs=1e-9)
        assert sol.objective == pytest.approx(_table_dp(t, w, eq, G), abs=1e-9)


def test_matches_highs_and_cpsat_on_longer_chains():
    rng = np.random.default_rng(1)
    for trial in range(30):
        n, G = int(rng.integers(5, 30)), int(rng.integers(0, 25))
        t = rng.integers(-5, G + 6, n).astype(float)
        eq = rng.random(n) < 0.25
        p = _chain(t, eq, G)
        p_bounded = _chain(t, eq, G)
        p_bounded = Problem(p.parent, p.target, fixed=p.fixed, objective="l2", upper=np.full(n + 1, float(G)))
        for blk_a, blk_b in ((~eq, eq),):
            a = np.arange(n)
            if blk_a.any():
                p_bounded.add_monotone_chains(np.stack([a[blk_a], a[blk_a] + 1], 1))
            if blk_b.any():
                m = int(blk_b.sum())
                p_bounded.add_constraints(csr_matrix((np.tile([-1.0, 1.0], m), np.stack([a[blk_b], a[blk_b] + 1], 1).ravel(),
                                                      np.arange(0, 2 * m + 1, 2)), shape=(m, n + 1)), 0.0, 0.0)
        mine = hierdp.solve(p, solver="chain").objective
        assert mine == pytest.approx(_table_dp(t, np.ones(n), eq, G), abs=1e-9)
        other = hierdp.solve(p_bounded, solver="highs" if trial % 2 else "ortools").objective
        assert mine == pytest.approx(other, abs=1e-6)


def test_continuous_matches_highs_qp():
    rng = np.random.default_rng(2)
    for _ in range(10):
        n, G = int(rng.integers(3, 15)), float(rng.integers(1, 20))
        t = rng.normal(G / 2, G, n)
        eq = rng.random(n) < 0.2
        mine = hierdp.solve(_chain(t, eq, G, integer=False), solver="chain")
        ref = hierdp.solve(_chain(t, eq, G, integer=False), solver="highs")
        # HiGHS QP stops at 1e-7 feasibility/optimality tolerances
        assert mine.objective == pytest.approx(ref.objective, rel=1e-6, abs=1e-6)


def test_certificate_and_exact_fallback():
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(1, 12))
        S = rng.integers(-20, 40, n).astype(float)
        W = rng.integers(1, 4, n).astype(float)
        lo, hi = np.array([0.0]), np.array([float(rng.integers(5, 30))])
        off = np.array([0, n])
        v, stats = integer_runs(S, W, off, lo, hi)
        exact = exact_integer_run(S, W, lo[0], hi[0])
        cost = lambda x: float((W * x * x - 2 * S * x).sum())  # noqa: E731
        assert cost(v) == pytest.approx(cost(exact), abs=1e-9)
        ok, arith = certify_runs(v.astype(float), S, W, off, lo, hi)
        assert ok.all() and arith == "exact int64"
        # a point that is not optimal fails the certificate
        worse = v.astype(float).copy()
        i = int(rng.integers(0, n))
        worse[i:] += 1
        if worse[-1] <= hi[0] and cost(worse) > cost(v) + 1e-9:
            assert not certify_runs(worse, S, W, off, lo, hi)[0].all()


def test_half_integer_ties_are_optimal_either_way():
    # targets 0.5 apart: every rounding of a tie must still be certified optimal
    S = np.array([1.0, 1.0, 3.0])  # means 0.5, 0.5, 1.5 with W = 2
    W = np.array([2.0, 2.0, 2.0])
    v, stats = integer_runs(S, W, np.array([0, 3]), np.array([0.0]), np.array([np.inf]))
    assert stats["exact_resolves"] == 0
    assert float((W * v * v - 2 * S * v).sum()) == pytest.approx(float((W * np.array([1, 1, 2]) ** 2 - 2 * S * np.array([1, 1, 2])).sum()))


@pytest.mark.parametrize("build, reason", [
    (lambda: Problem([-1, 0, 0], [np.nan, 1, 2], fixed=[3, np.nan, np.nan]), "has a parent"),
    (lambda: Problem([-1] * 3, [1, 2, 3]).add_monotone_chains([[0, 1], [0, 2]]), "two successors"),
    (lambda: Problem([-1] * 3, [1, 2, 3]).add_monotone_chains([[0, 1, 2, 0]]), "cycle"),
    (lambda: Problem([-1] * 3, [1, 2, 3]).add_linear({0: 1, 1: 1}, upper=4), "not a difference"),
    (lambda: Problem([-1] * 3, [1, 2, 3]).add_linear({0: 1, 1: -1}, lower=2), "bounds"),
    (lambda: Problem([-1] * 3, [1, 2, 3]).add_linear({0: 2, 1: -2}, lower=0), "not a difference"),
    (lambda: Problem([-1] * 3, [1, np.nan, 3]).add_monotone_chains([[0, 1, 2]]), "no target"),
    (lambda: Problem([-1] * 3, [1, 2, 3], weights=[1, 0, 1]).add_monotone_chains([[0, 1, 2]]), "weight 0"),
    (lambda: Problem([-1] * 3, [1, 2, 3], upper=[5, 5, 5]), "bounds not supported"),
    (lambda: Problem([-1] * 3, [1, 2, 3]).add_query_terms(np.ones((1, 3)), [3.0]), "query-term"),
    (lambda: Problem([-1] * 3, [1, 2, 3], objective="linf"), "objective"),
    (lambda: Problem([-1] * 3, [1, 2, 3], fixed=[5, np.nan, 2]).add_monotone_chains([[0, 1, 2]]), "infeasible"),
])
def test_refuses_what_is_not_a_chain(build, reason):
    p = build()
    with pytest.raises(UnsupportedProblem, match=reason):
        hierdp.solve(p, solver="chain")


def test_auto_never_picks_chain_for_trees_and_picks_it_for_chains():
    p = _chain(np.array([3.0, 1.0, 2.0]), [False, False, True], 4)
    assert hierdp.solvers.choose(p).name == "chain"
    tree = Problem([-1, 0, 0], [np.nan, 1.2, 2.7], fixed=[3, np.nan, np.nan])
    assert hierdp.solvers.choose(tree).name != "chain"
