"""Intervals of the other families: group sizes, Census TopDown, spatial, SafeTab."""

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import hierdp
from hierdp.intervals import IntervalsUnsupported, intervals
from hierdp.intervals.histogram import simulate_histograms
from hierdp.intervals.noise_law import NoiseLaw
from hierdp.mechanisms import create
from hierdp.mechanisms.safetab import PopulationGroupLevel
from hierdp.privacy.moe import geometric_coverage


def _groups():
    from hierdp.datasets.group_sizes import random_count_of_counts

    return random_count_of_counts(np.random.default_rng(6), depth=2, max_fanout=3, K=5, max_groups_per_leaf=4)


@pytest.mark.parametrize("name", ["pgsr_mdp", "pgsr_cumulative_dp", "pgsr_chain_dp", "pgsr_topdown"])
def test_group_size_re_releases_keep_the_promises(name):
    data = _groups()
    mech = create(name, epsilon=1.0)
    rel = mech.release(data, seed=0)
    sims = simulate_histograms(rel, mech, 6, np.random.default_rng(0))
    for b in range(sims.shape[2]):  # each re-release is a release: consistent, non-negative, faithful
        again = type(rel)(names=rel.names, parent=rel.parent, level=rel.level, level_names=rel.level_names,
                          cells=rel.cells, values=sims[:, :, b], accounting=rel.accounting,
                          level_totals=rel.level_totals)
        assert again.check_consistency() == []
    f = rel.intervals(0.9, mechanism=mech, draws=30, seed=0)
    assert len(f) == rel.values.size
    assert (f["lower"] <= f["value"]).all() and (f["value"] <= f["upper"]).all() and (f["lower"] >= 0).all()
    assert f.attrs["intervals"]["kind"] == "estimate"


def test_group_sizes_need_the_mechanism():
    data = _groups()
    rel = create("pgsr_mdp", epsilon=1.0).release(data, seed=0)
    with pytest.raises(IntervalsUnsupported, match="mechanism="):
        rel.intervals(0.9)


def _spine_data():
    from hierdp.mechanisms.census import QueryStrategy, SpineHistograms
    from hierdp.spines import Spine

    frame = pd.DataFrame({"state": ["S"] * 6, "county": ["C1"] * 3 + ["C2"] * 3,
                          "block": [f"b{i}" for i in range(6)]})
    spine = Spine.from_frame(frame, ["state", "county", "block"], [Fraction(1, 4)] * 4, root="US")
    strategy = QueryStrategy.marginals((2, 2))
    counts = np.random.default_rng(0).integers(0, 30, (6, strategy.n_cells))
    return spine, strategy, SpineHistograms(spine, counts)


def test_census_bootstrap_and_refusals():
    spine, strategy, data = _spine_data()
    mech = create("census_topdown", rho=1.0, strategy=strategy)
    rel = mech.release(data, seed=0)
    f = rel.intervals(0.9, mechanism=mech, domain=spine, draws=20, seed=1)
    assert (f["lower"] <= f["value"]).all() and (f["value"] <= f["upper"]).all()
    with pytest.raises(IntervalsUnsupported, match="spine"):
        rel.intervals(0.9, mechanism=mech, draws=5)
    other = create("census_topdown", rho=0.3, strategy=strategy)  # not the mechanism that made it
    with pytest.raises(IntervalsUnsupported, match="other noise parameters"):
        rel.intervals(0.9, mechanism=other, domain=spine, draws=5)


def test_htf_leaf_intervals_are_exact_margins():
    from hierdp.datasets.points import gaussian_cluster
    from hierdp.intervals.spatial import htf_leaf_laws

    grid = gaussian_cluster(n=3000, sigma=5.0, side=32, seed=0)
    rel = create("htf", epsilon=0.5).release(grid, seed=0)
    f = intervals(rel, 0.9)
    assert f.attrs["intervals"]["kind"] == "exact"
    laws = htf_leaf_laws(rel)
    half = (f["upper"] - f["lower"]).to_numpy() / 2
    for law, m in zip(laws, half, strict=True):
        eps = 1.0 / law.param
        assert geometric_coverage(eps, m) >= 0.9 > geometric_coverage(eps, m - 1)  # privacy.moe's closed form
    with pytest.raises(IntervalsUnsupported):
        create("htf", epsilon=0.5, combine_pruned=True).release(grid, seed=0).intervals(0.9)


def test_quadtree_wls_intervals():
    from hierdp.datasets.points import gaussian_cluster

    grid = gaussian_cluster(n=3000, sigma=5.0, side=16, seed=0)
    rel = create("quadtree", epsilon=1.0, height=3).release(grid, seed=0)
    f = intervals(rel, 0.95)
    assert f.attrs["intervals"]["method"] == "wls" and f.attrs["intervals"]["kind"] == "estimate"
    assert np.allclose((f["upper"] + f["lower"]) / 2, f["value"])


def test_safetab_intervals_equal_the_release_margins():
    rng = np.random.default_rng(5)
    people = pd.DataFrame({"sex": rng.choice(["F", "M"], 300), "age": rng.integers(0, 95, 300),
                           "grp": rng.choice(["a", "b", "c"], 300)})
    pairs = pd.DataFrame({"record": people.index, "group": people["grp"].to_numpy()})
    levels = [PopulationGroupLevel("grp", 1.0, 1, pairs, universe=["a", "b", "c", "d"], total_only=["d"])]
    for noise in ("geometric", "discrete_gaussian"):
        rel = create("safetab", levels=levels, sex_values=["F", "M"], noise=noise).release(people, seed=0)
        f = rel.intervals(rel.moe_level)
        # the release's own moe column (computed by the mechanism from the delivered budget)
        assert np.array_equal(f["upper"] - f["noisy_count"], f["moe"])
        assert np.array_equal(f["noisy_count"] - f["lower"], f["moe"])
        assert f.attrs["intervals"]["kind"] == "exact"


def test_unknown_release_type_is_refused():
    rel = create("vanilla", rho=1.0).release(hierdp.Hierarchy.from_edges([("r", "a"), ("r", "b")],
                                                                           counts={"a": 3, "b": 4}), seed=0)
    with pytest.raises(IntervalsUnsupported):
        rel.intervals(0.9, domain=None)
    assert NoiseLaw("geometric", 1.0).margin(0.5) >= 0
