"""Baselines of paper 000 §5: VanillaGauss and the stability histogram SH (Thm 8)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from hierdp.hierarchy import Hierarchy
from hierdp.hierarchy.od import ODTree
from hierdp.hierarchy.topdown_tree import HierarchyTree
from hierdp.mechanisms.topdown.baselines import SH, StabilityHistogram, UniverseTooLarge, VanillaGauss, sh_threshold


def _od(n_leaves: int = 6, n_trips: int = 500, seed: int = 0) -> ODTree:
    geo = pd.DataFrame({"r": [f"R{i // 3}" for i in range(n_leaves)], "m": [f"m{i}" for i in range(n_leaves)]})
    rng = np.random.default_rng(seed)
    trips = pd.DataFrame({"o": rng.choice(geo.m, n_trips), "d": rng.choice(geo.m[:2], n_trips)})
    return ODTree.from_trips(trips, origin="o", destination="d", origin_geo=geo)


def test_sh_threshold_is_theorem_8() -> None:
    for eps in (0.1, 1.0, 10.0):
        for delta in (1e-8, 1e-5):
            scale, t = sh_threshold(eps, delta)
            # both are rounded up by at most an ulp (the safe side): the default 1e-6 is loose
            assert scale == pytest.approx(2 / eps)  # 1-global sensitivity 2
            assert t == pytest.approx(1 + 2 * math.log(2 / delta) / eps)
    assert SH is StabilityHistogram
    # unbounded halves the scale; more contributions raise both
    s_u, t_u = sh_threshold(1.0, 1e-8, bounded=False)
    assert s_u == pytest.approx(1.0) and t_u == pytest.approx(1 + math.log(2 / 1e-8))
    s_m, t_m = sh_threshold(1.0, 1e-8, contributions=3, distinct=False)
    assert s_m == pytest.approx(6.0) and t_m == pytest.approx(3 + 6 * math.log(6 / 1e-8))


def test_sh_releases_only_true_positive_leaves_above_threshold() -> None:
    tree = _od(n_trips=20_000)
    mech = SH(epsilon=5.0, delta=1e-6)
    rel = mech.release(tree, seed=3)
    T = tree.n_levels - 1
    leaves = rel.levels[T]
    assert np.all(tree.counts(T, leaves.keys) > 0)  # no false positives by construction
    assert np.all(leaves.values >= mech.threshold)
    assert rel.check_consistency() == []
    # aggregated levels: parents are sums of released leaves
    for L in range(1, T + 1):
        lv, prev = rel.levels[L], rel.levels[L - 1]
        assert np.array_equal(np.bincount(lv.parent, weights=lv.values, minlength=len(prev)).astype(np.int64), prev.values)
        assert np.array_equal(tree.parent_of(L, lv.keys), prev.keys[lv.parent])
    # with a huge threshold nothing survives
    rel0 = SH(epsilon=0.01, delta=1e-12).release(_od(n_trips=50), seed=0)
    assert len(rel0.levels[T]) == 0 and rel0.total == 0


def test_sh_noise_scale() -> None:
    """Counts far above the threshold: released - true is discrete Laplace with scale 2/eps."""
    geo = pd.DataFrame({"m": [f"m{i}" for i in range(40)]})
    trips = pd.DataFrame({"o": np.repeat(geo.m.to_numpy(), 1), "d": np.repeat(geo.m.to_numpy(), 1), "n": 10_000})
    tree = ODTree.from_trips(trips, origin="o", destination="d", count="n", origin_geo=geo)
    errs = []
    for s in range(250):  # 10,000 errors: the sample variance's SE is ~2.2 % (kurtosis 6)
        rel = SH(epsilon=1.0, delta=1e-8).release(tree, seed=s)
        lv = rel.levels[-1]
        errs.append(lv.values - tree.counts(tree.n_levels - 1, lv.keys))
    e = np.concatenate(errs)
    # discrete Laplace with scale b: variance 2 e^{-1/b} / (1 - e^{-1/b})^2
    q = math.exp(-1 / 2.0)
    var = 2 * q / (1 - q) ** 2
    assert e.size == 10_000
    assert e.var() == pytest.approx(var, rel=0.1)  # ~4.5 SE


def test_vanilla_gauss_noise_and_consistency() -> None:
    # 5,000 empty leaves under 50 parents: every leaf is noised, zeros included
    df = pd.DataFrame({"a": np.repeat(np.arange(50), 100), "b": np.arange(5000), "n": 0})
    df.loc[0, "n"] = 1
    h = Hierarchy.from_frame(df, levels=["a", "b"], count="n", observed_domain_public=True)
    rho = 0.5
    rel = VanillaGauss(rho=rho).release(h, seed=0)
    tree = HierarchyTree(h)
    T = tree.n_levels - 1
    sigma2 = 2 / (2 * rho)  # bounded, m = 1: GS2^2 = 2
    assert rel.params["sigma2"] == pytest.approx(sigma2)
    # reconstruct all leaf values (absent = 0) and compare variance with sigma^2
    leaf_keys, _ = np.arange(h.level_ptr[T], h.level_ptr[T + 1]), None
    vals = np.zeros(leaf_keys.size, np.int64)
    lv = rel.levels[T]
    vals[lv.keys - h.level_ptr[T]] = lv.values
    err = vals - h.counts[h.level_ptr[T]:h.level_ptr[T + 1]]
    assert abs(err.mean()) < 0.1
    assert err.var() == pytest.approx(sigma2, rel=0.08)  # 5,000 leaves: SE sqrt(2/5000) = 2 %, so 4 SE
    # parents are exact sums of their (noisy) children; negative values allowed
    for L in range(1, T + 1):
        cur, prev = rel.levels[L], rel.levels[L - 1]
        s = np.bincount(cur.parent, weights=cur.values, minlength=len(prev)).astype(np.int64)
        assert np.array_equal(s, prev.values)
    assert (lv.values < 0).any()


def test_vanilla_gauss_refuses_huge_universe() -> None:
    n = 10_000  # 10^8 potential pairs > default max_universe 5e7
    geo = pd.DataFrame({"r": np.arange(n) // 100, "m": np.arange(n)})
    trips = pd.DataFrame({"o": [0, 1], "d": [2, 3]})
    tree = ODTree.from_trips(trips, origin="o", destination="d", origin_geo=geo)
    with pytest.raises(UniverseTooLarge, match="100,000,000"):
        VanillaGauss(epsilon=1.0, delta=1e-8).release(tree, seed=0)
    with pytest.raises(UniverseTooLarge):
        VanillaGauss(epsilon=1.0, delta=1e-8, max_universe=10).release(_od(), seed=0)
    rel = VanillaGauss(epsilon=1.0, delta=1e-8).release(_od(), seed=0)
    assert rel.n_levels == 5


def test_sh_refuses_records_above_the_last_level() -> None:
    h = Hierarchy.from_edges([("total", "a"), ("total", "b"), ("a", "a1")], counts={"a1": 5, "b": 7})
    with pytest.raises(ValueError, match="last level"):
        SH(epsilon=1.0, delta=1e-6).release(h, seed=0)
    # VanillaGauss noises shallow leaves too: the root is the sum of all noisy leaves
    rel = VanillaGauss(rho=1.0, max_universe=100).release(h, seed=0)
    assert rel.check_consistency() == [] or all("negative" in m for m in rel.check_consistency())
