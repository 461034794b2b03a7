"""NodeHistogramRelease: invariants checked against an independent pandas aggregation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hierdp.release.histogram import NodeHistogramRelease


def _release(leaf_values: np.ndarray, **kw) -> NodeHistogramRelease:
    # nation -> 2 states -> 2 counties each; leaves' histograms given, parents by pandas groupby
    counties = pd.DataFrame(leaf_values, index=["A1", "A2", "B1", "B2"])
    state = counties.groupby(np.array(["A", "A", "B", "B"])).sum()
    nation = state.sum().to_frame().T
    values = np.vstack([nation.to_numpy(), state.to_numpy(), counties.to_numpy()])
    return NodeHistogramRelease(
        names=np.array(["US", "A", "B", "A1", "A2", "B1", "B2"], dtype=object),
        parent=np.array([-1, 0, 0, 1, 1, 2, 2]), level=np.array([0, 1, 1, 2, 2, 2, 2]),
        level_names=["nation", "state", "county"], cells=np.arange(1, leaf_values.shape[1] + 1),
        values=values, accounting={"guarantee": "test"}, cell_name="size", **kw)


def test_consistent_release_has_no_violations_and_tidy_frame() -> None:
    rng = np.random.default_rng(3)
    rel = _release(rng.integers(0, 9, size=(4, 3)), level_totals=None)
    assert rel.check_consistency() == []
    assert rel.count_violations() == 0
    f = rel.to_frame()
    assert len(f) == 7 * 3
    wide = f.pivot(index="node", columns="size", values="value").loc[list(rel.names)]
    np.testing.assert_array_equal(wide.to_numpy(), rel.values)
    assert set(f.loc[f["node"] == "A1", "parent"]) == {"A"}
    assert rel.level_values(1).shape == (2, 3)


def test_violations_are_counted_per_parent_cell() -> None:
    rel = _release(np.ones((4, 3), dtype=np.int64))
    rel.values[1, 0] += 1      # state A, size 1: now differs from its children (and the nation from its)
    rel.values[6, 2] -= 1      # county B2, size 3: its parent B differs
    # by hand: A/size1 (3 vs 2), US/size1 (4 vs 3 + 2) and B/size3 (2 vs 1 + 0) differ; US/size3 still
    # equals A + B (2 + 2) because B itself was not changed
    assert rel.count_violations() == 3
    msgs = rel.check_consistency()
    assert any("3 (node, size) pairs" in m for m in msgs)


def test_promises_checked() -> None:
    rel = _release(np.zeros((4, 2), dtype=np.int64), level_totals=1)
    assert any("sums to 0, not 1" in m for m in rel.check_consistency())
    neg = _release(np.array([[1, -1], [0, 0], [0, 0], [0, 0]]))
    assert any("negative value" in m for m in neg.check_consistency())
    flt = _release(np.full((4, 2), 0.5))
    assert any("not integers" in m for m in flt.check_consistency())


def test_malformed_structure_refused() -> None:
    with pytest.raises(ValueError, match="shape"):
        NodeHistogramRelease(names=np.array(["r", "a"]), parent=np.array([-1, 0]), level=np.array([0, 1]),
                             level_names=["r", "a"], cells=np.arange(2), values=np.zeros((2, 3)), accounting={})
    with pytest.raises(ValueError, match="level by level"):
        NodeHistogramRelease(names=np.array(["a", "r"]), parent=np.array([1, -1]), level=np.array([1, 0]),
                             level_names=["r", "a"], cells=np.arange(1), values=np.zeros((2, 1)), accounting={})
