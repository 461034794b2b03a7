"""The Census-style TopDown's exact per-parent plug-ins (the dense oracle histogram_wls_dense, the
cell rounder histogram_cells) against independent oracles: enumeration of active sets, HiGHS, an
exact rational KKT solve at 1e9-scale counts, a sparse KKT re-solve on a parent with 10^4 children,
and brute force for the rounder.

The oracles build the quadratic objective from the query matrices directly (not from the fast
path's information matrices) and solve with other code (fractions, scipy's lstsq / spsolve).
"""

from __future__ import annotations

from fractions import Fraction as F
from itertools import product

import numpy as np
import pandas as pd
import pytest
from scipy import sparse
from scipy.linalg import lstsq
from scipy.sparse.linalg import spsolve

from hierdp.mechanisms import MechanismParameterError, ReleaseAborted
from hierdp.mechanisms.census import CensusTopDown, LevelChunk, QueryStrategy, SpineHistograms, continuous_problem
from hierdp.mechanisms.census.problems import HistogramRounding, rounding_problem
from hierdp.solvers.histogram_dense import wls_fast
from hierdp.solvers.histogram_rounding import round_cells


def round_cells_fast(chunk, x):
    y, reason = round_cells(HistogramRounding(chunk, x))
    return y, reason == 0
from hierdp.solvers import solve
from hierdp.spines import Spine, bypass

S4 = QueryStrategy.marginals((2, 2))  # total, m0, m1, detailed
S6 = QueryStrategy.marginals((2, 3))
S24 = QueryStrategy.marginals((2, 3, 4))


def _chunk(rng, strategy, counts, lam, sig=2.0, totals=False, weights="random"):
    """Children of ``len(counts)`` parents, true cells ~ Poisson(lam) plus Gaussian noise."""
    mats = [strategy.group_matrix(g) for g in strategy.groups if g != strategy.detailed]
    C, K = int(np.sum(counts)), strategy.n_cells
    true = rng.poisson(lam, (C, K)).astype(float)
    cp = np.repeat(np.arange(len(counts)), counts)
    pv = np.zeros((len(counts), K))
    np.add.at(pv, cp, true)
    w = (lambda: rng.uniform(0.2, 2.0, C) / sig ** 2) if weights == "random" else (lambda: np.full(C, 1 / sig ** 2))
    return LevelChunk(pv, cp, true + rng.normal(0, sig, true.shape), w(), mats,
                      [true @ m.T + rng.normal(0, sig, (C, m.shape[0])) for m in mats], [w() for _ in mats],
                      true.sum(1) if totals else None)


def _dense_qp(chunk):
    """Objective sum w (Q y - a)^2 as (1/2) yᵀ H y - gᵀ y, and the equality rows, built directly."""
    P, C, K = chunk.shape
    n = C * K
    H, g = np.zeros((n, n)), np.zeros(n)
    for c in range(C):
        blocks = [(np.eye(K), chunk.target_weight[c], chunk.targets[c])]
        blocks += [(m, w[c], a[c]) for m, a, w in zip(chunk.query_mats, chunk.query_answers, chunk.query_weight, strict=False)]
        sl = slice(c * K, (c + 1) * K)
        for A, w, t in blocks:
            H[sl, sl] += 2 * w * A.T @ A
            g[sl] += 2 * w * A.T @ t
    E = np.zeros((P * K, n))
    for c in range(C):
        E[chunk.child_parent[c] * K + np.arange(K), c * K + np.arange(K)] = 1
    rows, rhs = [E], [chunk.parent_values.ravel()]
    if chunk.totals is not None:
        rows.append(np.kron(np.eye(C), np.ones((1, K))))
        rhs.append(chunk.totals.astype(float))
    return H, g, np.vstack(rows), np.concatenate(rhs)


def _objective(chunk, y):
    y = y.reshape(chunk.targets.shape)
    val = np.sum(chunk.target_weight[:, None] * (y - chunk.targets) ** 2)
    for m, a, w in zip(chunk.query_mats, chunk.query_answers, chunk.query_weight, strict=False):
        val += np.sum(w[:, None] * (y @ m.T - a) ** 2)
    return val


@pytest.mark.parametrize("seed,totals", [(0, False), (1, True), (2, False), (3, True)])
def test_fast_wls_equals_the_best_active_set_by_enumeration(seed, totals):
    """Oracle: every set of cells at 0 (2^8 for two children of four cells), the equality-constrained
    QP on the rest by lstsq; the optimum is the best feasible candidate (its own active set is among
    them)."""
    rng = np.random.default_rng(seed)
    chunk = _chunk(rng, S4, [2], lam=0.8, totals=totals)
    H, g, E, rhs = _dense_qp(chunk)
    n = H.shape[0]
    best, arg = np.inf, None
    for mask in product((False, True), repeat=n):
        free = np.array(mask)
        if not free.any():
            continue
        m = E.shape[0]
        kkt = np.block([[H[np.ix_(free, free)], E[:, free].T], [E[:, free], np.zeros((m, m))]])
        sol = lstsq(kkt, np.r_[g[free], rhs])[0]
        x = np.zeros(n)
        x[free] = sol[:free.sum()]
        if np.abs(E @ x - rhs).max() > 1e-9 or x.min() < -1e-12 or \
                np.abs(kkt @ sol - np.r_[g[free], rhs]).max() > 1e-8:
            continue
        val = _objective(chunk, x)
        if val < best:
            best, arg = val, x
    res = wls_fast(chunk)
    assert res.certified.all()
    # both are exact solves of the same small linear system: agreement to ~1e-12 on values ~1
    np.testing.assert_allclose(res.values.ravel(), arg, atol=1e-9)
    assert (arg == 0).any()  # the instance does exercise non-negativity


@pytest.mark.parametrize("totals", [False, True])
def test_fast_wls_equals_highs_on_many_parents_with_24_cells(totals):
    rng = np.random.default_rng(20 + totals)
    chunk = _chunk(rng, S24, rng.integers(2, 7, 6), lam=0.7, sig=3.0, totals=totals)
    _P, C, K = chunk.shape
    res = wls_fast(chunk)
    assert res.certified.all() and res.iterations.max() >= 1  # active sets had to be updated
    y = solve(continuous_problem(chunk), "highs").values[chunk.n_parent_nodes:].reshape(C, K)
    # HiGHS meets 1e-7 relative feasibility/optimality tolerances on values of ~1-10
    np.testing.assert_allclose(res.values, y, atol=1e-5)
    assert _objective(chunk, res.values) <= _objective(chunk, y) * (1 + 1e-9)
    assert (res.values >= 0).all()
    np.testing.assert_allclose(np.add.reduceat(res.values, np.r_[0, np.cumsum(np.bincount(chunk.child_parent))[:-1]]),
                               chunk.parent_values, atol=1e-9 * max(1, chunk.parent_values.max()))


def _solve_fraction(A, b):
    """Exact Gauss-Jordan elimination over the rationals."""
    n = len(A)
    M = [[*list(row), bi] for row, bi in zip(A, b, strict=False)]
    for col in range(n):
        piv = next(r for r in range(col, n) if M[r][col] != 0)
        M[col], M[piv] = M[piv], M[col]
        inv = 1 / M[col][col]
        M[col] = [v * inv for v in M[col]]
        for r in range(n):
            if r != col and M[r][col] != 0:
                f = M[r][col]
                M[r] = [a - f * c for a, c in zip(M[r], M[col], strict=False)]
    return [M[r][n] for r in range(n)]


def test_fast_wls_at_magnitude_equals_an_exact_rational_solve():
    """Counts ~1e9 (no bound active): the KKT system solved exactly in fractions from the exact
    binary values of the float inputs."""
    rng = np.random.default_rng(5)
    chunk = _chunk(rng, S6, [4], lam=1e9, sig=3e4)
    H, g, E, rhs = _dense_qp(chunk)
    n, m = H.shape[0], E.shape[0]
    kkt = np.block([[H, E.T], [E, np.zeros((m, m))]])
    exact = _solve_fraction([[F(v) for v in row] for row in kkt], [F(v) for v in np.r_[g, rhs]])[:n]
    res = wls_fast(chunk)
    assert res.certified.all()
    err = max(abs(F(v) - e) for v, e in zip(res.values.ravel(), exact, strict=False))
    # double precision on values ~1e9 resolves ~1e-7 per operation; the Schur-complement solve plus
    # one refinement step stays within a few hundred ulps of the largest value
    assert float(err) < 1e-4, float(err)
    assert min(exact) > 0


def test_fast_wls_on_a_parent_with_ten_thousand_children_passes_an_independent_kkt_check():
    """One parent, 10^4 children with sparse counts (many cells at 0). Oracle: with the fast path's
    zero set Z, the equality-constrained QP on the other cells is re-solved as one sparse KKT system
    (scipy spsolve): it must give the same values, and the multipliers of the cells in Z (from the
    objective's gradient, built from the query matrices) must be >= 0 — KKT conditions, sufficient
    for this strictly convex QP."""
    rng = np.random.default_rng(6)
    chunk = _chunk(rng, S4, [10_000], lam=0.3, sig=2.0, weights="equal")
    _P, C, K = chunk.shape
    res = wls_fast(chunk)
    assert res.certified.all()
    x = res.values.ravel()
    blocks, g = [], np.zeros(C * K)
    for c in range(C):
        Hc = 2 * chunk.target_weight[c] * np.eye(K)
        gc = 2 * chunk.target_weight[c] * chunk.targets[c]
        for m, a, w in zip(chunk.query_mats, chunk.query_answers, chunk.query_weight, strict=False):
            Hc = Hc + 2 * w[c] * m.T @ m
            gc = gc + 2 * w[c] * m.T @ a[c]
        blocks.append(Hc)
        g[c * K:(c + 1) * K] = gc
    H = sparse.block_diag(blocks, format="csr")
    E = sparse.csr_matrix(np.tile(np.eye(K), (1, C)))
    zero = x == 0
    assert zero.mean() > 0.2  # non-negativity binds on many cells
    free = np.flatnonzero(~zero)
    Hf, Ef = H[free][:, free], E[:, free]
    kkt = sparse.bmat([[Hf, Ef.T], [Ef, None]], format="csc")
    sol = spsolve(kkt, np.r_[g[free], chunk.parent_values[0]])
    xf, lam = sol[:free.size], sol[free.size:]
    # both solve the same well-conditioned system in double precision, values ~1
    np.testing.assert_allclose(x[free], xf, atol=1e-7)
    y = np.zeros(C * K)
    y[free] = xf
    nu = (H @ y - g + E.T @ lam)[zero]  # multipliers of x >= 0 on the zero set
    assert nu.min() > -1e-7 * np.abs(g).max()


def test_fast_wls_reports_uncertified_parents_instead_of_guessing():
    rng = np.random.default_rng(7)
    chunk = _chunk(rng, S4, [4, 5], lam=0.3)
    res = wls_fast(chunk, max_iter=0)  # the first guess (no cell at 0) is infeasible here
    assert not res.certified.all()
    chunk.targets[0] = np.nan  # an unmeasured child: singular; left to the general solver
    chunk.target_weight[0] = 0
    for a in chunk.query_answers:
        a[0] = np.nan
    assert not wls_fast(chunk).certified[0]


def _l1(y, x):
    return np.abs(y - x).sum()


@pytest.mark.parametrize("seed", range(3))
def test_cell_rounder_is_optimal_by_brute_force_and_equals_the_mip(seed):
    rng = np.random.default_rng(30 + seed)
    chunk = _chunk(rng, S4, [2, 1, 3], lam=1.5)
    x = wls_fast(chunk).values
    y, ok = round_cells_fast(chunk, x)
    assert ok.all()
    cp = chunk.child_parent
    # consistency, exactly in integers
    for p in range(3):
        assert np.array_equal(y[cp == p].sum(0), chunk.parent_values[p].astype(np.int64))
    lo = np.floor(x + 1e-7)
    assert ((y >= lo) & (y <= lo + 1)).all()
    # brute force over every increment pattern of the box of the two multi-child parents (2^8, 2^12)
    for p in (0, 2):
        xs, los = x[cp == p].ravel(), lo[cp == p].ravel()
        n = xs.size
        bits = (np.arange(2 ** n)[:, None] >> np.arange(n)[None, :]) & 1
        cand = los[None, :] + bits
        sums = cand.reshape(-1, n // 4, 4).sum(1)
        feasible = (sums == chunk.parent_values[p][None, :]).all(1)
        best = np.abs(cand[feasible] - xs[None, :]).sum(1).min()
        assert _l1(y[cp == p], x[cp == p]) == pytest.approx(best, abs=1e-9)
    mip = solve(rounding_problem(chunk, x, queries=False), "highs").values[chunk.n_parent_nodes:].reshape(x.shape)
    assert _l1(y, x) == pytest.approx(_l1(mip, x), abs=1e-6)


def _spine(blocks_per_tract=(3, 1, 2, 4)):
    rows = [["s1" if t < 2 else "s2", f"c{t // 2}{t % 2}", f"t{t}", f"t{t}b{b}"]
            for t, nb in enumerate(blocks_per_tract) for b in range(nb)]
    levels = ["state", "county", "tract", "block"]
    return Spine.from_frame(pd.DataFrame(rows, columns=levels), levels, [F(1, 5)] * 5, root="US")


def test_release_reports_its_paths_and_falls_back_to_the_general_solver():
    rng = np.random.default_rng(8)
    spine = bypass(_spine((5, 1, 6, 4)), privacy="zcdp")
    counts = rng.poisson(0.5, (spine.n_blocks, 4))
    data = SpineHistograms(spine, counts)
    rel = CensusTopDown(rho=0.5, strategy=S4).release(data, seed=0)
    stats = pd.DataFrame(rel.params["post_processing"])
    assert stats.wls_general.sum() == 0 and stats.rounding_general.sum() == 0 and stats.parents.sum() > 0
    # no active-set update allowed: parents where non-negativity binds go to HiGHS; the release is
    # still consistent, non-negative and keeps the total (checked independently)
    rel0 = CensusTopDown(rho=0.5, strategy=S4, max_active_set_updates=0).release(data, seed=0)
    st0 = pd.DataFrame(rel0.params["post_processing"])
    assert st0.wls_general.sum() > 0
    v = rel0.values
    for u in range(spine.n):
        kids = np.flatnonzero(spine.parent == u)
        if kids.size:
            assert np.array_equal(v[kids].sum(0), v[u])
    assert (v >= 0).all() and v[0].sum() == counts.sum()


def test_a_failure_of_the_fallback_solver_names_the_parent():
    from hierdp.solvers.base import Capabilities, Solution, Solver, Status

    class Failing(Solver):
        name = "failing_fallback_for_test"
        capabilities = Capabilities(objectives={"l2", "l1"}, integer=True, continuous=True,
                                    structures={"level", "tree"},
                                    features={"weights", "bounds", "linear_constraints", "query_terms",
                                              "missing_targets", "free_sign"})

        def solve_problem(self, problem, *, time_limit=None, **options):
            return Solution(values=np.where(problem.is_fixed, problem.fixed, 0.0), objective=float("nan"),
                            status=Status.TIME_LIMIT, solver=self.name, wall_time=0.0,
                            stats={"failed_groups": np.array([int(problem.groups().max())]), "message": "x"})

    rng = np.random.default_rng(8)
    spine = bypass(_spine((5, 1, 6, 4)), privacy="zcdp")
    data = SpineHistograms(spine, rng.poisson(0.5, (spine.n_blocks, 4)))
    with pytest.raises(ReleaseAborted) as info:
        CensusTopDown(rho=0.5, strategy=S4, solver=Failing(), max_active_set_updates=0).release(data, seed=0)
    assert "continuous stage" in str(info.value) and any(str(p) in str(info.value) for p in info.value.parents)
    with pytest.raises(MechanismParameterError, match="max_active_set_updates"):
        CensusTopDown(rho=1.0, max_active_set_updates=-1)
    with pytest.raises(MechanismParameterError, match="batch_children"):
        CensusTopDown(rho=1.0, batch_children=0)


def test_general_fast_path_plugins_refuse_the_per_parent_model_with_the_reason():
    """The per-parent WLS model has query-term blocks: every registered plug-in except the general
    QP solver says so in unsupported() before solving (issue 11, item 3); the histogram plug-ins
    say they take their own problem kinds only."""
    from hierdp.solvers import registry

    chunk = _chunk(np.random.default_rng(9), S4, [3], lam=2.0)
    problem = continuous_problem(chunk)
    reasons = {name: registry.get(name).unsupported(problem) for name in registry.names()}
    assert reasons["highs"] == []
    for name, why in reasons.items():
        if name.startswith("histogram_"):
            assert any("histogram level chunks" in r for r in why), (name, why)
        elif name != "highs":
            assert why, name
            assert any("query-term" in r for r in why), (name, why)
