"""A US-like spine from real public geography (the ``zipcodes`` package, ``data`` extra) with
synthetic blocks and counts beneath, and real off-spine entities that cross county lines.

* Geography (real): state -> county -> ZIP code area (STANDARD, active ZIPs of ``zipcodes``), with
  each ZIP's postal place (state, city) and first area code. Postal places and area codes are the
  off-spine entities: they are unions of ZIP areas that often cross county lines.
* Below (synthetic, seeded): each ZIP area gets a number of blocks; consecutive blocks form
  conventional block groups of at most ``bg_size`` blocks; each ZIP is one "tract" under a
  one-tract "tract group" (the geolevel that Algorithm 2 regroups).
* Counts (synthetic, seeded): per block a Poisson population spread over K cells.

Levels: ``US, state, county, tract_group, tract (= ZIP), block_group, block``. Counts are not in
the spine: the spine is public geography only (paper 003, §5.1).
"""

from __future__ import annotations

from typing import Any
from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = ["US_LEVELS", "load_zip_table", "us_like_blocks", "us_like_counts", "us_like_entities"]

US_LEVELS = ["state", "county", "tract_group", "tract", "block_group", "block"]


def load_zip_table(states: Sequence[str] | None = None) -> pd.DataFrame:
    """STANDARD, active ZIP codes with ``state, county, zip, city, area_code`` (real, from ``zipcodes``)."""
    try:
        import zipcodes
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("the US geography needs the 'zipcodes' package: pip install 'hierdp[data]'") from exc
    rows = [z for z in zipcodes.list_all() if z.get("zip_code_type") == "STANDARD" and z.get("active")]
    df = pd.DataFrame({
        "state": [z["state"] for z in rows],
        "county": [f"{z['state']}:{z['county'] or 'unknown'}" for z in rows],
        "zip": [z["zip_code"] for z in rows],
        "city": [f"{z['state']}:{z['city']}" for z in rows],
        "area_code": [(z.get("area_codes") or ["none"])[0] for z in rows],
    })
    if states is not None:
        unknown = sorted(set(states) - set(df.state))
        if unknown:
            raise ValueError(f"unknown state code(s) {unknown}")
        df = df[df.state.isin(list(states))]
    return df.sort_values(["state", "county", "zip"]).reset_index(drop=True)


def us_like_blocks(zips: pd.DataFrame, *, blocks_per_zip: tuple[int, int] = (4, 40), bg_size: int = 8,
                   seed: int = 0) -> pd.DataFrame:
    """One row per synthetic block: the spine columns (:data:`US_LEVELS`) plus ``city`` and
    ``area_code`` of its ZIP."""
    rng = np.random.default_rng(seed)
    n = rng.integers(blocks_per_zip[0], blocks_per_zip[1] + 1, len(zips))
    rep = np.repeat(np.arange(len(zips)), n)
    j = np.arange(rep.size) - np.repeat(np.cumsum(n) - n, n)
    z = zips.iloc[rep].reset_index(drop=True)
    zip_code = z["zip"].to_numpy()
    return pd.DataFrame({
        "state": z["state"], "county": z["county"], "tract_group": "tg" + pd.Series(zip_code),
        "tract": zip_code, "block_group": [f"{a}-bg{b // bg_size}" for a, b in zip(zip_code, j, strict=False)],
        "block": [f"{a}-{b:03d}" for a, b in zip(zip_code, j, strict=False)], "city": z["city"], "area_code": z["area_code"],
    })


def us_like_entities(blocks: pd.DataFrame, spine: Any) -> Any:
    """Postal places and area codes as :class:`~hierdp.spines.Entities` (one category each)."""
    from hierdp.spines import Entities

    return Entities.from_columns(spine, blocks, "block", ["city", "area_code"], outside="none")


def us_like_counts(n_blocks: int, n_cells: int, *, mean: float = 30.0, seed: int = 0) -> np.ndarray:
    """Synthetic ``(n_blocks, n_cells)`` counts: a Poisson block population spread over the cells by
    a skewed (Dirichlet) profile, so some cells are rare."""
    rng = np.random.default_rng(seed)
    pop = rng.poisson(mean, n_blocks)
    profile = rng.dirichlet(np.full(n_cells, 0.7))
    return np.stack([rng.multinomial(p, profile) for p in pop]) if n_blocks else np.zeros((0, n_cells), np.int64)
