"""SpatialRelease (range queries under the uniformity assumption, consistency checks) and the MRE
metric with its workloads.

Oracles: hand computations (a query equal to a leaf, half a leaf, the whole domain; the notes' MRE
example), a per-cell loop over leaves for the density, and a direct fractional-overlap sum for
queries in coordinates."""

from __future__ import annotations

import numpy as np
import pytest

from hierdp.hierarchy.spatial import SpatialDomain, SpatialGrid
from hierdp.metrics.spatial import mean_relative_error, mre, random_rectangles, random_squares, relative_errors
from hierdp.release.spatial import SpatialRelease, SpatialTree


def _release(rects, values, shape=(4, 6), tree=None):
    return SpatialRelease(domain=SpatialDomain.cells(*shape), rects=np.array(rects), values=np.array(values),
                          accounting={}, tree=tree)


LEAVES = [[0, 2, 0, 6], [2, 4, 0, 2], [2, 4, 2, 6]]


def test_uniformity_answers():
    rel = _release(LEAVES, [12, 8, 40])
    assert rel.check_consistency() == []
    q = np.array([[0, 2, 0, 6], [0, 2, 0, 3], [0, 4, 0, 6], [2, 3, 0, 1], [1, 3, 1, 3], [0, 0, 0, 6]])
    # leaf; half a leaf; everything; a quarter of the 2x2 leaf; a query across three leaves:
    # cells (1,1),(1,2) of leaf 0 (12/12 each), (2,1) of leaf 1 (8/4), (2,2) of leaf 2 (40/8); empty
    np.testing.assert_allclose(rel.answer(q), [12, 6, 60, 2, 1 + 1 + 2 + 5, 0])


def test_density_equals_a_per_leaf_loop():
    rng = np.random.default_rng(0)
    rel = _release(LEAVES, rng.normal(0, 10, 3))
    dens = np.zeros((4, 6))
    for (r0, r1, c0, c1), v in zip(LEAVES, rel.values, strict=False):
        dens[r0:r1, c0:c1] = v / ((r1 - r0) * (c1 - c0))
    np.testing.assert_allclose(rel.density(), dens, atol=1e-12)


def test_answers_in_coordinates_count_partial_cells_by_overlap():
    dom = SpatialDomain(10.0, 16.0, -2.0, 2.0, 4, 6)  # cells of 1 x 1
    rel = SpatialRelease(domain=dom, rects=np.array(LEAVES), values=np.array([12.0, 8.0, 40.0]), accounting={})
    dens = rel.density()
    rng = np.random.default_rng(1)
    x0 = rng.uniform(9, 16, 200)
    x1 = x0 + rng.uniform(0, 4, 200)
    y0 = rng.uniform(-3, 2, 200)
    y1 = y0 + rng.uniform(0, 3, 200)
    got = rel.answer_box(x0, x1, y0, y1)
    for a, b, c, d, g in zip(x0, x1, y0, y1, got, strict=False):
        want = 0.0
        for i in range(4):
            for j in range(6):
                ox = max(0.0, min(b, 10 + j + 1) - max(a, 10 + j))
                oy = max(0.0, min(d, -2 + i + 1) - max(c, -2 + i))
                want += dens[i, j] * ox * oy
        assert g == pytest.approx(want, abs=1e-9)


def test_consistency_check_finds_gaps_overlaps_and_inconsistent_trees():
    assert "uncovered" in " ".join(_release(LEAVES[:2], [1, 2]).check_consistency())
    assert "more than once" in " ".join(_release([*LEAVES, [0, 1, 0, 1]], [1, 2, 3, 4]).check_consistency())
    assert "outside" in " ".join(_release([[0, 5, 0, 6]], [1]).check_consistency())
    parent = np.array([-1, 0, 0, 0])
    rects = np.array([[0, 4, 0, 6], *LEAVES])
    good = SpatialTree(parent, rects, np.array([60.0, 12.0, 8.0, 40.0]), np.array([0, 1, 1, 1]))
    assert _release(LEAVES, [12.0, 8.0, 40.0], tree=good).check_consistency() == []
    bad = SpatialTree(parent, rects, np.array([61.0, 12.0, 8.0, 40.0]), np.array([0, 1, 1, 1]))
    assert "sum of their children" in " ".join(_release(LEAVES, [12.0, 8.0, 40.0], tree=bad).check_consistency())


def test_mre_hand_example():
    # true (0, 10, 100), released (5, 12, 90): 5/20, 2/20, 10/100 -> mean 0.15 -> 15 %
    assert relative_errors([5, 12, 90], [0, 10, 100]).tolist() == [0.25, 0.1, 0.1]
    assert mean_relative_error([5, 12, 90], [0, 10, 100]) == pytest.approx(15.0, abs=1e-12)


def test_workloads():
    q = random_rectangles((1024, 1024), 5000, 0)
    assert q.shape == (5000, 4) and q.dtype == np.int64
    assert np.all((q[:, 0] >= 0) & (q[:, 1] <= 1024) & (q[:, 1] - q[:, 0] >= 11) & (q[:, 3] - q[:, 2] >= 11))
    s = random_squares((1024, 1024), 1000, 0.02, 1)
    assert set((s[:, 1] - s[:, 0]).tolist()) == {145} and set((s[:, 3] - s[:, 2]).tolist()) == {145}
    assert abs(145 ** 2 / 1024 ** 2 - 0.02) < 0.0005
    assert random_squares((1024, 1024), 10, 0.10, 1)[0, 1] - random_squares((1024, 1024), 10, 0.10, 1)[0, 0] == 324
    # corners uniform where the rectangle fits: both extremes are reached on a small grid
    t = random_squares((10, 10), 4000, 0.25, 2)
    assert t[:, 0].min() == 0 and t[:, 1].max() == 10
    with pytest.raises(ValueError):
        random_squares((10, 10), 5, 1.5)
    with pytest.raises(ValueError):
        random_rectangles((0, 10), 5)


def test_mre_of_an_exact_release_is_zero_on_leaf_aligned_queries():
    counts = np.arange(24).reshape(4, 6)
    grid = SpatialGrid.from_counts(counts)
    cells = np.array([[i, i + 1, j, j + 1] for i in range(4) for j in range(6)])
    rel = _release(cells, counts.ravel())
    assert mre(rel, grid, random_rectangles((4, 6), 300, 3)) == pytest.approx(0.0, abs=1e-10)
