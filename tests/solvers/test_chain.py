"""The ``chain`` plug-in (paper 001 eq. 8) against brute force, an explicit cost-table dynamic program, HiGHS and
CP-SAT; its certificate and exact fallback; its refusals."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from scipy.sparse import csr_matrix

import hierdp
from hierdp.models import Problem
from hierdp.solvers import UnsupportedProblem
from hierdp.solvers._isotonic import Runs, certify_runs, exact_integer_run, integer_runs


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
            x = np.array((*v, G))
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
        runs = Runs.single_nodes(S / W, W, off, lo, hi)  # one node per position: t = S / W
        v, _stats = integer_runs(runs)
        exact = exact_integer_run(runs, 0)
        def cost(x, W=W, S=S):
            return float((W * x * x - 2 * S * x).sum())

        assert cost(v) == pytest.approx(cost(exact), abs=1e-9)
        ok, arithmetic = certify_runs(v.astype(float), runs)
        # exact arithmetic proves every optimum (ties included); float bounds may leave a tie
        # unproven (the run is then solved exactly), never pass a worse point (below)
        assert ok.all() or arithmetic != "exact int64"
        # a point that is not optimal fails the certificate
        worse = v.astype(float).copy()
        i = int(rng.integers(0, n))
        worse[i:] += 1
        if worse[-1] <= hi[0] and cost(worse) > cost(v) + 1e-9:
            assert not certify_runs(worse, runs)[0].all()


def test_half_integer_ties_are_optimal_either_way():
    # targets 0.5 apart: every rounding of a tie must still be certified optimal
    runs = Runs.single_nodes(np.array([0.5, 0.5, 1.5]), np.array([2.0, 2.0, 2.0]), np.array([0, 3]),
                             np.array([0.0]), np.array([np.inf]))
    v, stats = integer_runs(runs)
    assert stats["exact_resolves"] == 0 and stats["certificate"] == "exact int64"
    cost = lambda y: float((2.0 * (np.asarray(y) - np.array([0.5, 0.5, 1.5])) ** 2).sum())
    assert cost(v) == pytest.approx(cost([1, 1, 2]))


def _exact_cost(y, t, w):
    return sum(Fraction(float(wi)) * (int(yi) - Fraction(float(ti))) ** 2 for yi, ti, wi in zip(y, t, w, strict=True))


def _brute_monotone(t, w, lo, hi):
    """Exact optimum of sum w (y - t)^2 over integers lo <= y_1 <= ... <= y_n <= hi (rational costs)."""
    base = int(np.floor(min(t))) - 2
    top = int(np.ceil(max(t))) + 2
    best = None
    for y in itertools.combinations_with_replacement(range(max(base, lo), min(top, hi) + 1), len(t)):
        c = _exact_cost(y, t, w)
        if best is None or c < best:
            best = c
    return best


@pytest.mark.parametrize("exponent", [40, 43, 44, 45, 46, 47, 48, 49])
def test_real_targets_at_2_40_to_2_50_match_exact_brute_force(exponent):
    """Reproducer n1's class: real targets near 2^43-2^47 once rounded the pooled means in float64;
    every answer must equal the exact (rational) optimum, including targets off any binary grid."""
    rng = np.random.default_rng(exponent)
    B = 2.0 ** exponent
    for trial in range(30):
        n = int(rng.integers(2, 5))
        frac = rng.uniform(-2.5, 2.5, n)
        if trial % 3 == 0:
            frac = np.round(frac * 128) / 128  # on a binary grid: the int64 certificate
        t = B + frac  # float64 rounds B + frac to the grid of 2^(exponent - 52)
        w = np.ones(n) if trial % 2 else rng.choice([1.0, 0.5, 3.0, 0.1], n)
        p = Problem(np.full(n, -1), t, objective="l2", integer=True, weights=w)
        p.add_monotone_chains(np.arange(n)[None, :])
        sol = hierdp.solve(p, solver="chain")
        best = _brute_monotone(t, w, -(2 ** 60), 2 ** 60)
        assert _exact_cost(sol.values, t, w) == best, (exponent, trial, t - B, sol.values - int(B))


def test_reproducer_n1():
    B = 2.0 ** 46
    t = np.array([B + 1.28125, B - 0.265625])
    p = Problem([-1, -1], t, objective="l2", integer=True)
    p.add_monotone_chains(np.array([[0, 1]]))
    for s in ("chain", "auto"):
        sol = hierdp.solve(p, solver=s)
        assert [int(v) - int(B) for v in sol.values] == [1, 1]


def test_float_certificate_is_used_and_sound_for_weights_off_the_grid():
    # weights 1/3 are off every short binary grid: the float certificate with error bounds decides,
    # and an uncertain run is solved exactly
    rng = np.random.default_rng(5)
    for _ in range(50):
        n = int(rng.integers(2, 6))
        t = rng.normal(1e6, 3, n)
        w = np.full(n, 1 / 3)
        runs = Runs.single_nodes(t, w, np.array([0, n]), np.array([-np.inf]), np.array([np.inf]))
        v, stats = integer_runs(runs)
        assert stats["certificate"] == "float64 with error bounds"
        assert _exact_cost(v, t, w) == _brute_monotone(t, w, -(2 ** 60), 2 ** 60)


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
