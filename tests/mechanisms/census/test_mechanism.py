"""The Census-style TopDown: release invariants (checked here cell by cell, independently of the
release's own check), the continuous stage against an exact KKT solve and scipy's SLSQP, bypassed
(unmeasured) geounits, bad input, and a solver failure named by its parent geounit.
"""

from __future__ import annotations

from fractions import Fraction as F
from itertools import product

import numpy as np
import pandas as pd
import pytest

from hierdp.mechanisms import MechanismParameterError, ReleaseAborted, create
from hierdp.mechanisms.census import CensusTopDown, LevelChunk, QueryStrategy, SpineHistograms, continuous_problem
from hierdp.solvers import solve
from hierdp.solvers.base import Capabilities, Solution, Solver, Status
from hierdp.spines import Spine, SpineError, bypass

STRATEGY = QueryStrategy.marginals((2, 2))  # total, m0, m1, detailed: 4 cells


def _spine(rng, blocks_per_tract=(3, 1, 2, 4)):
    rows = []
    for t, nb in enumerate(blocks_per_tract):
        for b in range(nb):
            rows.append(["s1" if t < 2 else "s2", f"c{t // 2}{t % 2}", f"t{t}", f"t{t}b{b}"])
    levels = ["state", "county", "tract", "block"]
    return Spine.from_frame(pd.DataFrame(rows, columns=levels), levels, [F(1, 5)] * 5, root="US")


def _check_release(rel, spine, counts):
    """Independent checks: cells sum to parents, non-negative integers, totals equal the truth."""
    v = rel.values
    assert np.issubdtype(v.dtype, np.integer) and (v >= 0).all()
    for u in range(spine.n):
        kids = np.flatnonzero(spine.parent == u)
        if kids.size:
            assert np.array_equal(v[kids].sum(0), v[u]), spine.names[u]
    assert v[0].sum() == counts.sum()


@pytest.mark.parametrize("noise", ["discrete_gaussian", "geometric"])
def test_release_is_consistent_nonnegative_integer_and_keeps_invariants(noise):
    rng = np.random.default_rng(0)
    spine = bypass(_spine(rng), privacy="zcdp")
    counts = rng.poisson(2.0, (spine.n_blocks, 4))
    data = SpineHistograms(spine, counts)
    kw = {"rho": 0.5} if noise == "discrete_gaussian" else {"epsilon": 1.0}
    rel = CensusTopDown(**kw, noise=noise, strategy=STRATEGY, invariant_levels=["US", "state"]).release(data, seed=1)
    _check_release(rel, spine, counts)
    assert rel.check_consistency() == []
    truth = data.geounit_histograms()
    states = spine.level == 1
    assert np.array_equal(rel.values[states].sum(1), truth[states].sum(1))  # invariant state totals
    assert any("'state' are invariant" in a for a in rel.accounting.assumptions)
    # unmeasured geounits (single children after bypass) equal their parent
    for u in np.flatnonzero(~spine.measured):
        assert np.array_equal(rel.values[u], rel.values[spine.parent[u]])
    assert rel.accounting.spent == rel.accounting.total


def test_the_ledger_follows_path_sums_per_geolevel():
    rng = np.random.default_rng(2)
    spine = bypass(_spine(rng), privacy="zcdp")
    rel = CensusTopDown(rho=1.0, strategy=STRATEGY).release(SpineHistograms(spine, np.ones((spine.n_blocks, 4), int)),
                                                            seed=0)
    # by hand: largest path sum reached at each geolevel, from the exact gammas
    best, prev, parts = {}, 0, []
    for u in range(spine.n):
        p = spine.parent[u]
        best[u] = spine.gamma(u) + (best[p] if p >= 0 else 0)
    for lev in range(spine.n_levels):
        cur = max(best[u] for u in np.flatnonzero(spine.level == lev))
        parts.append(cur - prev)
        prev = cur
    got = [s.budget.exact_parameters["rho"] for s in rel.accounting.spends]
    assert got == parts and sum(got) == 1


def _chunk(rng, C=3, K=4, big=False, totals=False):
    true = rng.poisson(200.0 if big else 1.0, (C, K))
    mats = [STRATEGY.group_matrix(g) for g in STRATEGY.groups if g != "detailed"]
    sig = 2.0
    return LevelChunk(true.sum(0)[None, :], np.zeros(C, np.int64), true + rng.normal(0, sig, true.shape),
                      np.full(C, 1 / sig ** 2), mats, [true @ m.T + rng.normal(0, sig, (C, m.shape[0])) for m in mats],
                      [rng.uniform(0.1, 1.0, C) for _ in mats], true.sum(1) if totals else None), mats


def _objective(chunk, mats, y):
    y = y.reshape(chunk.targets.shape)
    val = np.sum(chunk.target_weight[:, None] * (y - chunk.targets) ** 2)
    for m, a, w in zip(mats, chunk.query_answers, chunk.query_weight, strict=False):
        val += np.sum(w[:, None] * (y @ m.T - a) ** 2)
    return val


@pytest.mark.parametrize("seed", range(4))
def test_continuous_stage_equals_an_exact_kkt_solve_when_interior(seed):
    rng = np.random.default_rng(seed)
    chunk, mats = _chunk(rng, big=True)
    C, K = chunk.targets.shape
    sol = solve(continuous_problem(chunk), "highs").values[K:].reshape(C, K)
    # KKT of min sum w (Ay - t)^2 s.t. sum_c y_c = p (counts ~200: no bound is active)
    n = C * K
    H, g = np.zeros((n, n)), np.zeros(n)
    for c in range(C):
        rows = [np.eye(K), *list(mats)]
        ws = [chunk.target_weight[c]] + [w[c] for w in chunk.query_weight]
        ts = [chunk.targets[c]] + [a[c] for a in chunk.query_answers]
        for A, w, t in zip(rows, ws, ts, strict=False):
            H[c * K:(c + 1) * K, c * K:(c + 1) * K] += 2 * w * A.T @ A
            g[c * K:(c + 1) * K] += 2 * w * A.T @ t
    E = np.kron(np.ones((1, C)), np.eye(K))
    kkt = np.block([[H, E.T], [E, np.zeros((K, K))]])
    x = np.linalg.solve(kkt, np.r_[g, chunk.parent_values[0]])[:n].reshape(C, K)
    assert (x > 0).all()
    # HiGHS meets 1e-7 feasibility/optimality tolerances on values of ~200
    np.testing.assert_allclose(sol, x, atol=1e-5)


def _qp_matrices(chunk, mats):
    C, K = chunk.targets.shape
    n = C * K
    H, g = np.zeros((n, n)), np.zeros(n)
    for c in range(C):
        rows = [np.eye(K), *list(mats)]
        ws = [chunk.target_weight[c]] + [w[c] for w in chunk.query_weight]
        ts = [chunk.targets[c]] + [a[c] for a in chunk.query_answers]
        for A, w, t in zip(rows, ws, ts, strict=False):
            H[c * K:(c + 1) * K, c * K:(c + 1) * K] += 2 * w * A.T @ A
            g[c * K:(c + 1) * K] += 2 * w * A.T @ t
    E = [np.kron(np.ones((1, C)), np.eye(K))]
    rhs = [chunk.parent_values[0].astype(float)]
    if chunk.totals is not None:
        E.append(np.kron(np.eye(C), np.ones((1, K))))
        rhs.append(chunk.totals.astype(float))
    return H, g, np.vstack(E), np.concatenate(rhs)


@pytest.mark.parametrize("seed", range(3))
def test_continuous_stage_matches_active_set_enumeration_and_scipy(seed):
    """Oracle: every set of variables at 0 (2^12), the equality-constrained QP on the rest solved with
    scipy's lstsq; the best feasible candidate is the optimum (the optimum's own active set is one)."""
    from itertools import product

    from scipy.linalg import lstsq

    rng = np.random.default_rng(10 + seed)
    chunk, mats = _chunk(rng, big=False, totals=True)
    C, K = chunk.targets.shape
    y = solve(continuous_problem(chunk), "highs").values[K:]
    H, g, E, rhs = _qp_matrices(chunk, mats)
    n = C * K
    best = np.inf
    for mask in product((False, True), repeat=n):
        free = np.array(mask)
        if not free.any():
            continue
        Hf, Ef = H[np.ix_(free, free)], E[:, free]
        m = E.shape[0]
        kkt = np.block([[Hf, Ef.T], [Ef, np.zeros((m, m))]])
        sol = lstsq(kkt, np.r_[g[free], rhs])[0]
        x = np.zeros(n)
        x[free] = sol[:free.sum()]
        if np.abs(E @ x - rhs).max() > 1e-9 or x.min() < -1e-12 or np.abs(kkt @ sol - np.r_[g[free], rhs]).max() > 1e-8:
            continue
        best = min(best, _objective(chunk, mats, x))
    # HiGHS stops at 1e-7 relative optimality/feasibility; the enumeration is exact to ~1e-12
    assert _objective(chunk, mats, y) == pytest.approx(best, rel=1e-6)


class _Failing(Solver):
    name = "failing_for_test"
    capabilities = Capabilities(objectives={"l2", "l1", "linf"}, integer=True, continuous=True,
                                structures={"level", "tree"},
                                features={"weights", "bounds", "linear_constraints", "query_terms", "missing_targets",
                                          "free_sign"})

    def solve_problem(self, problem, *, time_limit=None, **options):
        grp = problem.groups()
        last = int(grp.max())
        return Solution(values=np.where(problem.is_fixed, problem.fixed, 0.0), objective=float("nan"),
                        status=Status.TIME_LIMIT, solver=self.name, wall_time=0.0,
                        stats={"failed_groups": np.array([last]), "message": "test failure"})


def test_a_solver_failure_names_the_parent_and_returns_no_release():
    rng = np.random.default_rng(3)
    spine = _spine(rng)
    data = SpineHistograms(spine, rng.poisson(2.0, (spine.n_blocks, 4)))
    mech = CensusTopDown(rho=1.0, strategy=STRATEGY, solver=_Failing(), fast_path=False)
    with pytest.raises(ReleaseAborted) as info:
        mech.release(data, seed=0)
    err = info.value
    assert err.partial is None and err.level == 0 and "US" in str(err) and "continuous stage" in str(err)
    assert err.spent == err.spends[0].budget  # the root's spend is recorded (its noise was drawn)
    # a failure below the root names that level's parent (highs for the root, failing below)

    class _FailBelowRoot(_Failing):
        def solve_problem(self, problem, **kw):
            if problem.n <= 2 * 4 + 1:
                from hierdp.solvers.registry import get
                return get("highs").solve_problem(problem)
            return super().solve_problem(problem, **kw)

    with pytest.raises(ReleaseAborted) as info:
        CensusTopDown(rho=1.0, strategy=STRATEGY, solver=_FailBelowRoot(), fast_path=False).release(data, seed=0)
    assert info.value.level >= 1 and any(str(p) in str(info.value) for p in info.value.parents)


def test_bad_input_is_refused_before_noise():
    rng = np.random.default_rng(4)
    spine = _spine(rng)
    bad = np.ones((spine.n_blocks, 4), int)
    bad[2, 1] = -1
    with pytest.raises(MechanismParameterError, match="cell 1 has -1"):
        SpineHistograms(spine, bad)
    with pytest.raises(MechanismParameterError, match="sum to exactly 1"):
        QueryStrategy((2, 2), {"total": (), "detailed": (0, 1)}, {"total": 0.5, "detailed": 0.4})
    # one attribute: its marginal is the detailed query, so it is not listed twice
    assert dict(QueryStrategy.marginals((3,)).groups) == {"total": (), "detailed": (0,)}
    with pytest.raises(MechanismParameterError, match="do not determine every cell"):
        QueryStrategy((2, 2), {"m0": (0,), "m1": (1,)}, {"m0": 0.5, "m1": 0.5})
    with pytest.raises(MechanismParameterError, match="has 4 cells; the data has 3"):
        CensusTopDown(rho=1.0, strategy=STRATEGY).release(SpineHistograms(spine, np.ones((spine.n_blocks, 3), int)),
                                                           seed=0)
    with pytest.raises(MechanismParameterError, match="prefix"):
        CensusTopDown(rho=1.0, strategy=STRATEGY, invariant_levels=["US", "county"]).release(
            SpineHistograms(spine, np.ones((spine.n_blocks, 4), int)), seed=0)


def test_registered_and_built_by_name():
    rng = np.random.default_rng(5)
    spine = _spine(rng)
    rel = create("census_topdown", rho=1.0, strategy=STRATEGY).release(
        SpineHistograms(spine, rng.poisson(1.0, (spine.n_blocks, 4))), seed=0)
    assert rel.mechanism == "CensusTopDown" and rel.check_consistency() == []
    frame = rel.to_frame()
    assert len(frame) == spine.n * 4 and set(frame.level_name) == set(spine.level_names)


def test_rounding_over_every_query_is_the_das_objective():
    rng = np.random.default_rng(6)
    spine = _spine(rng, blocks_per_tract=(2, 1, 2, 1))
    counts = rng.poisson(1.0, (spine.n_blocks, 4))
    rel = CensusTopDown(rho=2.0, strategy=STRATEGY, rounding="queries").release(SpineHistograms(spine, counts),
                                                                              seed=0)
    _check_release(rel, spine, counts)
    with pytest.raises(SpineError):
        Spine.from_frame(pd.DataFrame({"c": ["a"], "block": ["x"]}), ["c", "block"], [0.5, 0.25, 0.2])


@pytest.mark.parametrize("noise", ["discrete_gaussian", "geometric"])
def test_lemma4_sensitivity_by_enumerating_bounded_neighbours(noise):
    """Move one record from any (block, cell) to any other on a tiny spine with a 2 x 2 histogram:
    for every geolevel and query group, the change of the level's answers has L1 norm and squared
    L2 norm at most what the mechanism calibrates to (both 2: Lemma 4), the bound is reached, and
    the root's total (invariant) never changes."""
    spine = _spine(np.random.default_rng(0), blocks_per_tract=(2, 1, 1, 2))
    kw = {"rho": 1.0} if noise == "discrete_gaussian" else {"epsilon": 1.0}
    mech = CensusTopDown(**kw, noise=noise, strategy=STRATEGY)
    sens = mech.noise.sensitivity(mech.unit, finest=False)
    nb, K = spine.n_blocks, 4
    # which geounits contain each block, by walking parents (independent of SpineHistograms)
    A = np.zeros((spine.n, nb), int)
    for j, b in enumerate(spine.blocks):
        u = int(b)
        while u >= 0:
            A[u, j] = 1
            u = int(spine.parent[u])
    mats = {g: STRATEGY.group_matrix(g) for g in STRATEGY.groups}
    worst = 0
    for (b0, k0), (b1, k1) in product(product(range(nb), range(K)), repeat=2):
        if (b0, k0) == (b1, k1):
            continue
        e = np.zeros((nb, K), int)  # x' - x: one record moved (x >= 1 everywhere, so it exists)
        e[b0, k0] -= 1
        e[b1, k1] += 1
        d = A @ e
        assert d[0].sum() == 0  # the invariant total
        for lev in range(spine.n_levels):
            rows = d[spine.level == lev]
            for _g, Q in mats.items():
                delta = rows @ Q.T
                norm = np.abs(delta).sum() if noise == "geometric" else (delta ** 2).sum()
                assert norm <= sens
                worst = max(worst, norm)
    assert worst == sens == 2
