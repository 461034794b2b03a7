"""The redistricting (PL 94-171) shape: the production strategy's numbers (typed here from the DAS's
public configuration), the synthetic data's own invariants, a small PL94-shaped release checked
cell by cell, constraint data honoured by the level solver, the solver door before any noise, and
issue 20's C12 (HiGHS's QP at small epsilon with geometric noise)."""

from __future__ import annotations

from fractions import Fraction as F

import numpy as np
import pandas as pd
import pytest
from scipy import sparse

from hierdp.datasets.pl94 import (
    CENRACE_LEVELS,
    PL94_LEVELS,
    pl94_blocks,
    pl94_constraints,
    pl94_histograms,
    pl94_persons,
    pl94_units,
)
from hierdp.mechanisms import MechanismParameterError, create
from hierdp.mechanisms.census import CensusTopDown, QueryStrategy, SpineHistograms
from hierdp.mechanisms.census.level_solver import DEFAULT_TIME_LIMIT, CensusLevelSolver
from hierdp.mechanisms.census.pl94 import PL94_RHO, pl94_geolevel_proportions, pl94_strategy
from hierdp.models.histogram import HistogramWLS, LevelChunk
from hierdp.privacy.budget import Accountant, Budget
from hierdp.spines import Spine

NAMES = {"US": "US", "State": "state", "County": "county", "Tract": "tract", "Block_Group": "block_group",
         "Block": "block"}


def test_strategy_is_the_production_configuration():
    S = pl94_strategy()
    assert S.shape == (8, 2, 2, 63) and S.n_cells == 2016
    assert len(CENRACE_LEVELS) == 63 and CENRACE_LEVELS[6] == "white-black" and CENRACE_LEVELS[-1].count("-") == 5
    # ProductionCandidate20210527US_mult8_add02_dsepJune3 (strategies.py), typed from the DAS code
    assert S.shares_at("Block")["detailed"] == F(3945, 4097) and S.shares_at("Block")["total"] == F(5, 4097)
    assert S.shares_at("US")["total"] == 0 and S.shares_at("US")["detailed"] == F(189, 241)
    assert S.shares_at("Tract")["hispanic * cenrace"] == F(1933, 4102)
    assert S.shares_at("Block_Group")["total"] == F(1705, 4099)
    for lev in NAMES:
        assert sum(S.shares_at(lev).values()) == 1
    props = pl94_geolevel_proportions()
    assert props["US"] == F(104, 4099) and props["Block"] == F(165, 4099) and sum(props.values()) == 1
    assert F(542, 339) ** 2 == PL94_RHO  # global_scale = 339/542
    # hhinstlevels: household / institutional GQ (1-4) / non-institutional GQ (5-7)
    m = S.group_matrix("hhinstlevels").reshape(3, 8, 2, 2, 63)[:, :, 0, 0, 0]
    assert m.tolist() == [[1, 0, 0, 0, 0, 0, 0, 0], [0, 1, 1, 1, 1, 0, 0, 0], [0, 0, 0, 0, 0, 1, 1, 1]]


def test_synthetic_data_meet_their_own_constraints_and_are_seeded():
    blocks = pl94_blocks(1500, seed=3)
    units = pl94_units(blocks, seed=3)
    persons = pl94_persons(blocks, units, seed=3)
    h = pl94_histograms(persons, len(blocks)).reshape(-1, 8, 2, 2, 63)
    assert len(blocks) == 1500 and blocks["block"].is_unique
    assert blocks.groupby("block_group")["tract"].nunique().max() == 1  # nested geography
    con = pl94_constraints(units)
    by_type = h.sum((2, 3, 4))  # (blocks, 8)
    assert (by_type[con["upper_zero"]] == 0).all()  # no household without housing, no GQ without facility
    assert (by_type >= con["gq_lower"]).all()
    assert h[:, 3, 0].sum() == 0  # nursing facilities hold no minors (nurse_nva_0)
    flat = h.reshape(len(blocks), -1)
    assert (flat[:, con["structural_zero_cells"]] == 0).all()
    # realistic sparsity: most of a block's 2,016 cells are 0, and ~40 persons per block
    assert 20 < flat.sum() / len(blocks) < 70 and (flat > 0).sum(1).mean() < 40
    again = pl94_persons(blocks, units, seed=3)
    assert again.equals(persons)


def _pl94_release_data(n_blocks):
    blocks = pl94_blocks(n_blocks, seed=1)
    h = pl94_histograms(pl94_persons(blocks, pl94_units(blocks, seed=1), seed=1), n_blocks)
    props = pl94_geolevel_proportions()
    spine = Spine.from_frame(blocks, PL94_LEVELS, [props[k] for k in NAMES], root="US")
    return SpineHistograms(spine, h), h


def test_pl94_shaped_release_is_consistent_and_keeps_the_state_totals():
    data, _ = _pl94_release_data(250)
    mech = CensusTopDown(rho=float(PL94_RHO), strategy=pl94_strategy(NAMES), invariant_levels=["US", "state"])
    rel = mech.release(data, seed=0)
    v, spine = rel.values, data.spine
    assert np.issubdtype(v.dtype, np.integer) and (v >= 0).all() and v.shape == (spine.n, 2016)
    for u in np.flatnonzero(np.bincount(spine.parent[spine.parent >= 0], minlength=spine.n)):
        kids = np.flatnonzero(spine.parent == u)
        assert np.array_equal(v[kids].sum(0), v[u])
    truth = data.geounit_histograms()
    states = np.flatnonzero(spine.level == 1)
    assert np.array_equal(v[states].sum(1), truth[states].sum(1))  # invariant state totals
    stats = pd.DataFrame(rel.params["post_processing"])
    assert stats.wls_general.sum() == 0  # every WLS parent certified by the structured plug-in


def test_the_solver_door_refuses_before_any_noise():
    data, _ = _pl94_release_data(120)
    acc = Accountant(Budget.zcdp(10.0))
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    with pytest.raises(MechanismParameterError, match=r"intopt.*query-term"):
        CensusTopDown(rho=1.0, strategy=pl94_strategy(NAMES), solver="intopt").release(data, rng=rng, accountant=acc)
    with pytest.raises(MechanismParameterError, match="nonzeros"):  # every parent would go to HiGHS: too large
        CensusTopDown(rho=1.0, strategy=pl94_strategy(NAMES), fast_path=False).release(data, rng=rng, accountant=acc)
    assert rng.bit_generator.state == state and acc.ledger == []
    with pytest.raises(MechanismParameterError, match="unknown solver"):
        CensusTopDown(rho=1.0, solver="no_such_solver")


def test_level_solver_honours_das_style_constraint_data():
    """Structural zeros (no housing unit, no facility of a type, no minors in nursing facilities)
    as upper bounds and the group-quarters lower bounds as rows, from pl94_constraints: every one
    holds in the solution, which is certified by the structured plug-in and equals HiGHS on the
    translated Problem on a small histogram of the same kind."""
    blocks = pl94_blocks(200, seed=5)
    units = pl94_units(blocks, gq_share=0.2, seed=5)
    h = pl94_histograms(pl94_persons(blocks, units, seed=5), len(blocks)).astype(float)
    con = pl94_constraints(units)
    bg = blocks["block_group"].to_numpy()
    _, cp = np.unique(bg, return_inverse=True)
    keep = cp < 3
    h, cp, upper_zero, lower = h[keep], cp[keep], con["upper_zero"][keep], con["gq_lower"][keep]
    # collapse CENRACE to 2 levels (white alone / other) to keep HiGHS's model small: 64 cells
    h4 = h.reshape(-1, 8, 2, 2, 63)
    small = np.stack([h4[..., 0], h4[..., 1:].sum(-1)], -1).reshape(len(h), -1)
    S = QueryStrategy.marginals((8, 2, 2, 2), groups={"total": (), "hhgq": (0,), "vhr": (1, 2, 3),
                                                      "detailed": (0, 1, 2, 3)})
    others = [g for g in S.groups if g != "detailed"]
    mq = S.query_structure(others)
    rng = np.random.default_rng(0)
    C, K = small.shape
    pv = np.zeros((3, K))
    np.add.at(pv, cp, small)
    upper = np.full((C, K), np.inf)
    cell_type = np.repeat(np.arange(8), 8)
    upper[:, :] = np.where(upper_zero[:, cell_type], 0.0, np.inf)
    upper[:, (cell_type == 3) & (np.tile(np.repeat([0, 1], 4), 8) == 0)] = 0.0  # nursing x under 18
    need = np.argwhere(lower > 0)
    rows = sparse.lil_matrix((len(need), C * K))
    for r, (c, t) in enumerate(need):
        rows[r, c * K + np.flatnonzero(cell_type == t)] = 1.0
    chunk = LevelChunk(pv, cp, small + rng.normal(0, 3, small.shape), np.full(C, 0.1),
                       [mq.matrix(q) for q in range(mq.n_groups)],
                       [mq.answer(q, small) + rng.normal(0, 3, (C, mq.n_answers(q))) for q in range(mq.n_groups)],
                       [np.full(C, 0.1) for _ in others], None, queries=mq, upper=upper, rows=rows.tocsr(),
                       row_lower=lower[need[:, 0], need[:, 1]].astype(float), row_upper=np.full(len(need), np.inf))
    stats: dict = {}
    y = CensusLevelSolver().solve(chunk, np.arange(3), stats)
    assert stats["wls_fast"] == 3
    assert (y[upper == 0] == 0).all() and (y >= 0).all()
    assert np.array_equal(np.stack([y[cp == p].sum(0) for p in range(3)]), pv.astype(np.int64))
    assert (rows.tocsr() @ y.ravel() >= lower[need[:, 0], need[:, 1]]).all()
    from hierdp.solvers import solve

    x = solve(HistogramWLS(chunk), "histogram_wls").values
    xh = solve(HistogramWLS(chunk), "highs").values
    np.testing.assert_allclose(x, xh, atol=1e-4)


def test_c12_highs_qp_at_small_epsilon_with_geometric_noise_is_solved_and_has_a_default_limit():
    """Issue 20 C12: with geometric noise at small epsilon the weights (1/variance) are ~1e-6 and
    HiGHS's QP stalled (time limit or error in most releases); the translated QP now scales its
    weights, and the general solvers have a default time limit."""
    rows = [["s1" if t < 2 else "s2", f"c{t // 2}{t % 2}", f"t{t}", f"t{t}b{b}"]
            for t, nb in enumerate((3, 1, 2, 4)) for b in range(nb)]
    levels = ["state", "county", "tract", "block"]
    spine = Spine.from_frame(pd.DataFrame(rows, columns=levels), levels, [F(1, 5)] * 5, root="US")
    counts = np.random.default_rng(0).poisson(100, (spine.n_blocks, 4))
    for seed in range(6):
        rel = create("census_topdown", epsilon=0.1, noise="geometric", strategy=QueryStrategy.marginals((2, 2)),
                     fast_path=False).release(SpineHistograms(spine, counts), seed=seed)
        assert rel.values[0].sum() == counts.sum()
    assert CensusLevelSolver().time_limit is None and DEFAULT_TIME_LIMIT == 120.0
