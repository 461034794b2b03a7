"""census_topdown with DAS-style constraints (issue 19): a structural zero, an edit constraint between
two cells in every block, an invariant on a chosen geounit - every constraint holds in every geounit.

Oracles: each constraint evaluated here directly on the released integer histograms with numpy (no
code of the mechanism or of hierdp.constraints); consistency cell by cell; the release without the
constraints (same seed) for the noise and the ledger, and to show the constraints changed something.
"""

from __future__ import annotations

from fractions import Fraction as F

import numpy as np
import pandas as pd
import pytest

import hierdp
from hierdp.constraints import ConstraintsInfeasible
from hierdp.mechanisms import ReleaseAborted
from hierdp.mechanisms.census import CensusTopDown, QueryStrategy, SpineHistograms
from hierdp.privacy import Accountant, Budget
from hierdp.spines import Spine, bypass

STRATEGY = QueryStrategy((2, 3), {"total": (), "hh": (0,), "age": (1,), "detailed": (0, 1)},
                         {g: F(1, 4) for g in ("total", "hh", "age", "detailed")}, attribute_names=("hh", "age"))
LABELS = list(STRATEGY.cell_labels())  # 'hh=0|age=0' ... 'hh=1|age=2'
GQ_KID, GQ_ADULT = LABELS.index("hh=1|age=0"), LABELS.index("hh=1|age=2")
GQ = [LABELS.index(f"hh=1|age={a}") for a in range(3)]


def census(seed=0):
    rng = np.random.default_rng(seed)
    rows = [[f"s{s}", f"s{s}c{c}", f"s{s}c{c}b{b}"] for s in range(2) for c in range(3)
            for b in range(int(rng.integers(2, 5)))]
    levels = ["state", "county", "block"]
    spine = bypass(Spine.from_frame(pd.DataFrame(rows, columns=levels), levels, [F(1, 4)] * 4, root="US"),
                   privacy="zcdp")
    counts = rng.poisson(3.0, (spine.n_blocks, len(LABELS)))
    counts[:, GQ_ADULT] = np.maximum(counts[:, GQ_ADULT], counts[:, GQ_KID])  # the data meet the edit
    counts[3, GQ] = 0  # and the structural zero
    return SpineHistograms(spine, counts)


def das_constraints(data):
    spine = data.spine
    county = int(np.flatnonzero(np.asarray(spine.names) == "s1c2")[0])
    total = int(data.geounit_histograms()[county].sum())
    return (hierdp.Constraints()
            .add_cell_rule({"hh=1|age=2": 1, "hh=1|age=0": -1}, lower=0, levels=["block"],
                           name="gq adults >= gq children")
            .add_zero(str(spine.block_names[3]), cells=[LABELS[k] for k in GQ], name="no group quarters")
            .add_invariant("s1c2", total, name="county total")), county, total


def _holds(rel, data, county, total):
    v, spine = rel.values, data.spine
    blocks = np.asarray(spine.blocks)
    assert (v[blocks, GQ_ADULT] >= v[blocks, GQ_KID]).all()  # the edit, in every block
    assert (v[blocks[3], GQ] == 0).all()  # the structural zero
    assert v[county].sum() == total  # the invariant
    assert v.dtype.kind == "i" and (v >= 0).all() and v[0].sum() == data.counts.sum()
    for u in np.flatnonzero(spine.n_children > 0):
        assert np.array_equal(v[spine.parent == u].sum(0), v[u])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_das_style_constraints_hold_in_every_geounit(seed):
    data = census()
    c, county, total = das_constraints(data)
    rel = CensusTopDown(rho=0.5, strategy=STRATEGY, constraints=c).release(data, seed=seed)
    _holds(rel, data, county, total)
    base = CensusTopDown(rho=0.5, strategy=STRATEGY).release(data, seed=seed)
    # the same noise and ledger: the constraints are post-processing
    assert rel.accounting.spends == base.accounting.spends
    assert rel.accounting.guarantees == base.accounting.guarantees
    d = rel.accounting.details["constraints"]
    assert d["sha256"] == c.digest() and d["entries"] == 3
    assert any("post-processed under public constraints" in n for n in rel.accounting.notes)
    assert rel.params["constraints"] == c.digest()
    # and they mattered: without them some block breaks the edit or the invariant moves
    blocks = np.asarray(data.spine.blocks)
    broken = (base.values[blocks, GQ_ADULT] < base.values[blocks, GQ_KID]).sum()
    assert broken > 0 or base.values[county].sum() != total


def test_an_infeasible_set_is_refused_before_any_noise():
    data = census()
    block = str(data.spine.block_names[3])
    bad = (hierdp.Constraints().add_zero(block, name="empty block")
           .add_invariant(block, 5, cells=[LABELS[0]], name="five people"))
    acct = Accountant(Budget.zcdp(1.0))
    with pytest.raises(ConstraintsInfeasible, match=r"empty block|five people"):
        CensusTopDown(rho=0.5, strategy=STRATEGY, constraints=bad).release(data, seed=0, accountant=acct)
    assert acct.ledger == []
    with pytest.raises(hierdp.constraints.ConstraintError, match="unknown cell"):
        CensusTopDown(rho=0.5, strategy=STRATEGY,
                      constraints=hierdp.Constraints().add_zero(block, cells=["hh=7|age=0"])).release(data, seed=0)


def test_a_constraint_file_and_a_checkpoint_of_its_own(tmp_path):
    from hierdp.scale.errors import CheckpointError

    data = census()
    c, county, total = das_constraints(data)
    path = c.write(tmp_path / "das.jsonl")
    rel = CensusTopDown(rho=0.5, strategy=STRATEGY, constraints=str(path)).release(data, seed=4,
                                                                                  checkpoint=tmp_path / "ck")
    _holds(rel, data, county, total)
    with pytest.raises(CheckpointError, match="other parameters"):
        CensusTopDown(rho=0.5, strategy=STRATEGY).release(data, seed=4, resume=tmp_path / "ck")
    again = CensusTopDown(rho=0.5, strategy=STRATEGY, constraints=c).release(data, resume=tmp_path / "ck")
    assert np.array_equal(again.values, rel.values)


def test_constraints_carried_up_keep_finer_levels_feasible():
    """A block holding every person of its county in one cell, with the county's total fixed: the
    block's interval is carried to the county (its cell 0 at least 40, with the total 40: exactly
    40), so the county is released able to hold the block, whatever the noise."""
    data = census()
    block = str(data.spine.block_names[0])
    u = int(data.spine.blocks[0])
    county = int(data.spine.parent[u])
    tight = (hierdp.Constraints().add_invariant(str(data.spine.names[county]), 40, name="county 40")
             .add_invariant(block, 40, cells=[LABELS[0]], name="block 40 in one cell"))
    for seed in range(3):
        rel = CensusTopDown(rho=0.5, strategy=STRATEGY, constraints=tight).release(data, seed=seed)
        v = rel.values
        assert v[county].sum() == 40 and v[u, 0] == 40 and v[county, 0] == 40
        assert rel.check_consistency() == []


def test_a_row_that_cannot_hold_after_the_noise_stops_the_release_naming_it():
    """A row coupling two blocks of different counties (their totals sum to a value) is decided on
    the public structure before any noise; once the counties are released, the blocks' parents may
    leave no room for it: the release stops, names the row and keeps the spends."""
    data = census()
    spine = data.spine
    b0, b1 = (str(spine.block_names[i]) for i in (0, len(spine.block_names) - 1))
    row = hierdp.Constraints().add_linear({b0: 1, b1: 1}, lower=300, name="two blocks hold 300")
    with pytest.raises(ReleaseAborted, match="two blocks hold 300") as info:
        CensusTopDown(rho=0.5, strategy=STRATEGY, constraints=row).release(data, seed=0)
    assert info.value.spends
