"""Per-level metrics against hand-computed values (paper 000 eq. 2 and §5's f_d)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from hierdp import metrics
from hierdp.hierarchy.od import ODTree
from hierdp.privacy.budget import Budget
from hierdp.release import Accounting, ReleaseLevel, TreeRelease


@pytest.fixture()
def tree() -> ODTree:
    # two areas A, B; trips: A->A x3, A->B x1  (destination tree: 3 levels)
    geo = pd.DataFrame({"m": ["A", "B"]})
    trips = pd.DataFrame({"o": ["A", "A", "A", "A"], "d": ["A", "A", "A", "B"]})
    return ODTree.from_trips(trips, origin="o", destination="d", origin_geo=geo)


def _rel(tree: ODTree, level_entries: list[list[tuple[str, str, int, int]]]) -> TreeRelease:
    """Build a release from (origin, dest, value, parent position) per level."""
    levels = [ReleaseLevel(np.array([0]), np.array([-1]), np.array([4]))]
    for L, entries in enumerate(level_entries, start=1):
        a, b = tree.level_pairs[L]
        og, dg = tree.origin_geo, tree.destination_geo
        keys = [list(og.names[a]).index(o) * dg.sizes[b] + list(dg.names[b]).index(d) for o, d, _, _ in entries]
        levels.append(ReleaseLevel(np.array(keys, np.int64), np.array([p for *_, p in entries], np.int64),
                                   np.array([v for _, _, v, _ in entries], np.int64)))
    acc = Accounting(mechanism="hand", total=Budget.zcdp(1.0))
    return TreeRelease(levels, tree.level_names, "hand", None, acc, [0.5, 1.0, 2.0], namer=tree.namer)


def test_hand_computed_metrics(tree: ODTree) -> None:
    # true: level1 total->A 3, total->B 1; level2 A->A 3, A->B 1, B->* 0
    rel = _rel(tree, [
        [("total", "A", 2, 0), ("total", "B", 2, 0)],             # errors 1, 1
        [("A", "A", 1, 0), ("B", "A", 1, 0), ("B", "B", 2, 1)],   # A->A err 2, B->A fp err 1, B->B fp err 2, A->B missed err 1
    ])
    mx = metrics.max_abs_error_by_level(rel, tree)
    assert list(mx) == [0.0, 1.0, 2.0]
    mean = metrics.mean_abs_error_by_level(rel, tree)
    # ratios of small integers: correctly rounded on every machine, the default tolerance suffices
    assert mean[2] == pytest.approx((2 + 1 + 2 + 1) / 4)  # union: A->A, A->B, B->A, B->B
    assert metrics.mean_abs_error_by_level(rel, tree, over="universe")[2] == pytest.approx(6 / 4)
    fdr = metrics.false_discovery_rate_by_level(rel, tree)
    assert fdr[1] == 0.0 and fdr[2] == pytest.approx(100 * 2 / 3)
    fnr = metrics.false_negative_rate_by_level(rel, tree)
    assert fnr[1] == 0.0 and fnr[2] == pytest.approx(100 * 1 / 2)
    rt = metrics.runtime_by_level(rel)
    assert list(rt) == [0.5, 1.0, 2.0] and rt.index.name == "level"
    rep = metrics.level_report(rel, tree)
    assert list(rep["released_nodes"]) == [1, 2, 3] and list(rep["true_nonzero"]) == [1, 2, 2]
    assert rep["false_discovery_rate_pct"].iloc[2] == pytest.approx(100 * 2 / 3)
    assert rep["false_negative_rate_pct"].iloc[2] == pytest.approx(100 * 1 / 2)
    assert rep["mean_abs_error"].iloc[2] == pytest.approx((2 + 1 + 2 + 1) / 4)


def test_empty_release_level(tree: ODTree) -> None:
    rel = _rel(tree, [[("total", "A", 4, 0)], []])
    fdr = metrics.false_discovery_rate_by_level(rel, tree)
    assert math.isnan(fdr[2])  # nothing positive released: 0/0
    assert metrics.false_negative_rate_by_level(rel, tree)[2] == 100.0
    assert metrics.max_abs_error_by_level(rel, tree)[2] == 3.0


def test_metrics_match_dense_computation_on_a_real_release(tree: ODTree) -> None:
    from hierdp.mechanisms.topdown import InfTDA

    rng = np.random.default_rng(0)
    geo = pd.DataFrame({"r": list("aabbcc"), "m": [f"m{i}" for i in range(6)]})
    trips = pd.DataFrame({"o": rng.choice(geo.m, 300), "d": rng.choice(geo.m, 300)})
    t = ODTree.from_trips(trips, origin="o", destination="d", origin_geo=geo)
    rel = InfTDA(epsilon=0.5, delta=1e-8).release(t, seed=1)
    mx = metrics.max_abs_error_by_level(rel, t)
    fdr = metrics.false_discovery_rate_by_level(rel, t)
    for L in range(t.n_levels):
        dense_true = np.zeros(t.level_size(L), np.int64)
        k, c = t.nonzero(L)
        dense_true[k] = c
        dense_rel = np.zeros_like(dense_true)
        dense_rel[rel.levels[L].keys] = rel.levels[L].values
        assert mx[L] == np.abs(dense_rel - dense_true).max()
        pos = dense_rel > 0
        assert fdr[L] == pytest.approx(100 * np.sum(pos & (dense_true == 0)) / pos.sum())


def test_table_releases_are_refused_with_a_clear_message(tree: ODTree) -> None:
    from hierdp.release import TableRelease

    table = TableRelease(frame=pd.DataFrame({"value": [1]}), accounting=Accounting(mechanism="hand",
                                                                                   total=Budget.zcdp(1.0)))
    with pytest.raises(TypeError, match="tree release"):
        metrics.level_report(table, tree)
