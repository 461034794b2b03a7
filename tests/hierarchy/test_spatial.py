"""Points -> frequency matrix, rectangle counts from prefix sums, and the public-domain rule.

Oracles: a per-point Python loop that bins with exact rationals (independent of the vectorized
floor arithmetic), direct ``numpy`` slice sums for rectangle counts, and the refusal happening before
any noise (the generator's state is unchanged)."""

from __future__ import annotations

import copy
from fractions import Fraction

import numpy as np
import pytest

from hierdp.hierarchy.spatial import SpatialDataError, SpatialDomain, SpatialGrid
from hierdp.mechanisms import create
from hierdp.privacy.domain import ObservedDomainError


def _bin_loop(x, y, box, rows, cols):
    """Bin each point with exact fractions: col = floor((x - x0) * cols / (x1 - x0)), upper edge -> last."""
    x0, x1, y0, y1 = (Fraction(v) for v in box)
    out = np.zeros((rows, cols), np.int64)
    for a, b in zip(x, y, strict=False):
        j = int((Fraction(a) - x0) * cols // (x1 - x0))
        i = int((Fraction(b) - y0) * rows // (y1 - y0))
        out[min(i, rows - 1), min(j, cols - 1)] += 1
    return out


def test_binning_matches_exact_loop_and_keeps_every_point():
    rng = np.random.default_rng(0)
    for _ in range(20):
        rows, cols = (int(v) for v in rng.integers(1, 12, 2))
        box = (float(rng.uniform(-5, 0)), float(rng.uniform(1, 5)),
               float(rng.uniform(-3, 0)), float(rng.uniform(0.5, 4)))
        n = int(rng.integers(1, 300))
        x = rng.uniform(box[0], box[1], n)
        y = rng.uniform(box[2], box[3], n)
        x[:3] = box[1]  # points on the upper edges belong to the last column / row
        y[:2] = box[3]
        g = SpatialGrid.from_points(x, y, shape=(rows, cols), box=box)
        assert g.counts.dtype == np.int64 and g.counts.sum() == n == g.n_points
        assert np.array_equal(g.counts, _bin_loop(x, y, box, rows, cols))


def test_weights_are_multiplicities():
    x = np.array([0.5, 0.5, 2.5])
    y = np.array([0.5, 0.5, 0.5])
    g = SpatialGrid.from_points(x, y, shape=(1, 3), box=(0, 3, 0, 1), weights=[2, 3, 7])
    assert g.counts.tolist() == [[5, 0, 7]]


def test_rectangle_counts_equal_direct_sums():
    rng = np.random.default_rng(1)
    counts = rng.poisson(3.0, (37, 23))
    g = SpatialGrid.from_counts(counts)
    r = np.sort(rng.integers(0, 38, (500, 2)), axis=1)
    c = np.sort(rng.integers(0, 24, (500, 2)), axis=1)
    got = g.rect_count(r[:, 0], r[:, 1], c[:, 0], c[:, 1])
    want = [counts[a:b, p:q].sum() for (a, b), (p, q) in zip(r, c, strict=False)]
    assert got.tolist() == want
    q = np.stack([r[:, 0], r[:, 1], c[:, 0], c[:, 1]], axis=1)
    assert g.query_counts(q).tolist() == want


@pytest.mark.parametrize("kwargs, match", [
    ({"x": [0.1, np.nan], "y": [0.1, 0.2]}, "x: 1 coordinate"),
    ({"x": [0.1, 0.2], "y": [np.inf, 0.2]}, "y: 1 coordinate"),
    ({"x": [], "y": []}, "no points"),
    ({"x": [0.1, 0.2], "y": [0.1]}, "x has 2 points but y has 1"),
    ({"x": [0.1, 5.0], "y": [0.1, 0.2], "box": (0, 1, 0, 1)}, "outside the box"),
    ({"x": [0.1], "y": [0.1], "shape": (0, 4), "box": (0, 1, 0, 1)}, "rows"),
    ({"x": [0.1], "y": [0.1], "shape": (4, -2), "box": (0, 1, 0, 1)}, "cols"),
    ({"x": [0.1], "y": [0.1], "shape": (2.5, 4), "box": (0, 1, 0, 1)}, "rows"),
    ({"x": [0.1], "y": [0.1], "box": (1, 0, 0, 1)}, "x_min"),
    ({"x": [0.1], "y": [0.1], "box": (0, 1, 0, np.nan)}, "y_max"),
    ({"x": [0.1, 0.2], "y": [0.1, 0.2], "box": (0, 1, 0, 1), "weights": [1, -1]}, "weights"),
    ({"x": [0.1, 0.2], "y": [0.1, 0.2], "box": (0, 1, 0, 1), "weights": [1, 0.5]}, "weights"),
    ({"x": [0.1, 0.2], "y": [0.1, 0.2], "box": (0, 1, 0, 1), "weights": [0, 0]}, "every weight is 0"),
    ({"x": [0.1, 0.1], "y": [0.1, 0.2]}, "span no area along x"),
    ({"x": [0.1, 0.2], "y": [0.1, 0.2], "box": (0, 1, 0, 1), "observed_domain_public": True}, "explicit box"),
])
def test_bad_points_and_grids_are_refused(kwargs, match):
    with pytest.raises(SpatialDataError, match=match):
        SpatialGrid.from_points(**kwargs)


def test_bad_count_matrices_are_refused():
    with pytest.raises(SpatialDataError, match="non-negative"):
        SpatialGrid.from_counts(np.array([[1, -2]]))
    with pytest.raises(SpatialDataError, match="integers"):
        SpatialGrid.from_counts(np.array([[1.5, 2]]))
    with pytest.raises(SpatialDataError, match="2-D"):
        SpatialGrid.from_counts(np.array([1, 2]))
    with pytest.raises(SpatialDataError, match="rows"):
        SpatialDomain.cells(0, 3)


def _state(rng):
    return copy.deepcopy(rng.bit_generator.state)


@pytest.mark.parametrize("name", ["htf", "ug", "quadtree", "identity"])
def test_a_box_read_off_the_data_is_refused_before_noise_unless_declared_public(name):
    rng = np.random.default_rng(3)
    x, y = rng.uniform(2, 7, 300), rng.uniform(-1, 4, 300)
    observed = SpatialGrid.from_points(x, y, shape=(16, 16))
    assert observed.domain_source == "observed" and observed.domain.x_min == x.min()
    params = {"epsilon": 1.0, **({"height": 3} if name == "quadtree" else {})}
    gen = np.random.default_rng(0)
    before = _state(gen)
    with pytest.raises(ObservedDomainError):
        create(name, **params).release(observed, rng=gen)
    assert _state(gen) == before
    declared = SpatialGrid.from_points(x, y, shape=(16, 16), observed_domain_public=True)
    rel = create(name, **params).release(declared, seed=0)
    (said,) = rel.accounting.assumptions
    assert "derived from the points' own extremes" in said and rel.guarantee.endswith(f"assumes: {said}")
