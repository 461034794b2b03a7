"""Synthetic PL 94-171 (2020 redistricting data) persons over real US geography.

The PL 94-171 person histogram of the 2020 DAS has 2,016 cells: HHGQ (8: household and seven
group-quarters types) x voting age (2: under 18, 18+) x Hispanic (2) x CENRACE (63: the six
single races and their 57 combinations). The attribute levels follow the DAS production code
(``programs/schema/attributes/hhgq_person_simple.py``, ``cenrace.py`` of
``uscensusbureau/DAS_2020_Redistricting_Production_Code``); the query strategy is in
:mod:`hierdp.mechanisms.census.pl94`.

* **Geography (real)**: state -> county -> ZIP code area of the ``zipcodes`` package (``data``
  extra); each ZIP area is one tract. **Blocks (synthetic, seeded)**: 40-150 per tract (the US
  averages ~96 blocks per tract), in block groups of at most 30 blocks (~33 in the US).
* **Housing units and group-quarters facilities (synthetic)**: ~30% of blocks have no housing
  unit (8.1 M tabulation blocks, ~5.9 M populated); ~1% have one group-quarters facility whose
  type follows the 2020 GQ population by type. In the DAS these counts are public invariants.
* **Persons (synthetic)**: per populated block a negative-binomial number of household persons
  (mean 58, so ~40 per block over all blocks); per tract a composition over Hispanic origin x
  CENRACE drawn around national 2020 shares (so tracts differ, as neighbourhoods do); voting age
  ~78% adults. Facilities hold 10-200 persons: nursing homes adults only (the DAS's
  ``nurse_nva_0`` structural zero), juvenile facilities minors.
* **Constraints** (:func:`pl94_constraints`): the DAS's block constraints as data: a state total
  is invariant; a block with no housing unit has 0 persons in households and a GQ type without a
  facility has 0 persons of that type (``hhgq_total_ub``); a GQ type with f facilities has at
  least f persons (``hhgq_total_lb``); no person under 18 in a nursing facility in any geounit.

The national shares are rounded 2020 Census figures (Census Bureau, "Race and Ethnicity in the
United States: 2010 Census and 2020 Census", Aug 2021; 2020 Group Quarters counts); they only set a
realistic sparsity (most of the 2,016 cells are 0 in a block, a few hundred are not in a tract).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np
import pandas as pd

__all__ = [
    "CENRACE_LEVELS",
    "HHGQ_LEVELS",
    "PL94_ATTRIBUTES",
    "PL94_LEVELS",
    "PL94_SHAPE",
    "pl94_blocks",
    "pl94_constraints",
    "pl94_histograms",
    "pl94_persons",
    "pl94_units",
]

PL94_ATTRIBUTES = ("hhgq", "votingage", "hispanic", "cenrace")
PL94_SHAPE = (8, 2, 2, 63)
#: the spine's geolevels below the root (the DAS's Block_Group here is the conventional one)
PL94_LEVELS = ["state", "county", "tract", "block_group", "block"]
HHGQ_LEVELS = ("household", "correctional facilities for adults", "juvenile facilities", "nursing facilities",
               "other institutional facilities", "college/university student housing", "military quarters",
               "other noninstitutional facilities")
_RACES = ("white", "black", "aian", "asian", "nhopi", "sor")
#: the 63 CENRACE levels in the DAS's order: single races, then combinations by size
CENRACE_LEVELS = tuple("-".join(c) for k in range(1, 7) for c in combinations(_RACES, k))
_COMBOS = tuple(frozenset(c) for k in range(1, 7) for c in combinations(range(6), k))


def _race_shares() -> tuple[np.ndarray, np.ndarray]:
    """National shares of the 63 CENRACE levels and P(Hispanic | level) (rounded 2020 figures)."""
    single = {0: 0.616, 1: 0.124, 2: 0.011, 3: 0.060, 4: 0.002, 5: 0.084}
    two = {(0, 5): 0.058, (0, 2): 0.012, (0, 1): 0.009, (0, 3): 0.006, (1, 5): 0.002, (1, 2): 0.001,
           (3, 4): 0.0008, (0, 4): 0.0006, (2, 5): 0.0005, (3, 5): 0.0005, (1, 3): 0.0004}
    p = np.zeros(63)
    for i, c in enumerate(_COMBOS):
        key = tuple(sorted(c))
        if len(c) == 1:
            p[i] = single[key[0]]
        elif key in two:
            p[i] = two[key]
        else:  # the long tail: rarer with every added race
            p[i] = 4e-4 * 0.3 ** (len(c) - 2)
    p /= p.sum()
    hisp = np.full(63, 0.12)
    for i, c in enumerate(_COMBOS):
        if 5 in c:
            hisp[i] = 0.75
        elif c == frozenset({0}):
            hisp[i] = 0.11
        elif c == frozenset({1}) or c == frozenset({3}):
            hisp[i] = 0.04
    return p, hisp


#: GQ persons by type, 2020 (millions, rounded): correctional 1.96, juvenile 0.04, nursing 1.23,
#: other institutional 0.10, college 2.30, military 0.32, other noninstitutional 0.90
_GQ_SHARES = np.array([1.96, 0.04, 1.23, 0.10, 2.30, 0.32, 0.90])


def pl94_blocks(n_blocks: int, *, states: Sequence[str] | None = None, blocks_per_tract: tuple[int, int] = (40, 150),
                block_group_size: int = 30, seed: int = 0) -> pd.DataFrame:
    """``n_blocks`` synthetic blocks over real geography (module docstring): one row per block with
    ``state, county, tract, block_group, block``, in spine order.

    Tracts are the ZIP code areas of ``states`` (default: every state, smallest first, so small
    spines stay inside few states) taken in order until ``n_blocks`` blocks exist.
    """
    from hierdp.datasets.us_geography import load_zip_table

    if n_blocks < 1:
        raise ValueError(f"n_blocks must be >= 1, got {n_blocks}")
    zips = load_zip_table(states)
    if states is None:
        size = zips.groupby("state").size().sort_values(kind="stable")
        order = {s: i for i, s in enumerate(size.index)}
        zips = zips.assign(_o=zips.state.map(order)).sort_values(["_o", "county", "zip"], kind="stable")
    rng = np.random.default_rng(seed)
    per = rng.integers(blocks_per_tract[0], blocks_per_tract[1] + 1, len(zips))
    cum = np.cumsum(per)
    n_tracts = int(np.searchsorted(cum, n_blocks) + 1)
    if n_tracts > len(zips):
        raise ValueError(f"{n_blocks:,} blocks need more tracts than the {len(zips):,} ZIP areas of these states")
    per = per[:n_tracts].copy()
    per[-1] -= int(cum[n_tracts - 1] - n_blocks)
    z = zips.iloc[np.repeat(np.arange(n_tracts), per)].reset_index(drop=True)
    j = np.arange(n_blocks) - np.repeat(np.cumsum(per) - per, per)
    n_bg = np.repeat(-(-per // block_group_size), per)  # block groups per tract, evenly sized
    bg = (j * n_bg) // np.repeat(per, per)
    tract = z["zip"].to_numpy().astype(str)
    return pd.DataFrame({
        "state": z["state"].to_numpy(), "county": z["county"].to_numpy(), "tract": tract,
        "block_group": np.char.add(np.char.add(tract, "-"), bg.astype(str)),
        "block": np.char.add(np.char.add(tract, "-"), np.char.zfill(j.astype(str), 4)),
    })


def pl94_units(blocks: pd.DataFrame, *, no_housing_share: float = 0.30, gq_share: float = 0.01,
               seed: int = 0) -> pd.DataFrame:
    """Per block: ``housing_units`` and the number of GQ facilities of each type
    (``gq1`` ... ``gq7``, HHGQ levels 1-7). Public (invariant) in the DAS."""
    rng = np.random.default_rng(seed + 1)
    n = len(blocks)
    hu = np.where(rng.random(n) < no_housing_share, 0, 1 + rng.negative_binomial(3, 3 / (3 + 22), n))
    out = pd.DataFrame({"housing_units": hu}, index=blocks["block"].to_numpy())
    gq_type = np.where(rng.random(n) < gq_share, 1 + rng.choice(7, n, p=_GQ_SHARES / _GQ_SHARES.sum()), 0)
    for t in range(1, 8):
        out[f"gq{t}"] = (gq_type == t).astype(np.int64)
    return out


def pl94_persons(blocks: pd.DataFrame, units: pd.DataFrame, *, mean_household_persons: float = 58.0,
                 seed: int = 0) -> pd.DataFrame:
    """Synthetic person records ``block`` (row of ``blocks``), ``hhgq, votingage, hispanic,
    cenrace`` (module docstring)."""
    rng = np.random.default_rng(seed + 2)
    n = len(blocks)
    race_p, hisp_p = _race_shares()
    joint = np.stack([race_p * (1 - hisp_p), race_p * hisp_p])  # (hispanic, cenrace)
    tracts, tract_of = np.unique(blocks["tract"].to_numpy(), return_inverse=True)
    tract_of = tract_of.ravel()
    # a tract's composition: Dirichlet around the national joint shares (neighbourhoods differ)
    comp = rng.dirichlet(300.0 * joint.ravel() + 0.01, tracts.size)
    adult = rng.beta(40, 11, tracts.size)  # ~78% adults
    hu = units["housing_units"].to_numpy()
    r = 2.0
    pop = np.where(hu > 0, rng.negative_binomial(r, r / (r + mean_household_persons), n), 0)
    gq = units[[f"gq{t}" for t in range(1, 8)]].to_numpy()
    gq_type = np.where(gq.any(1), gq.argmax(1) + 1, 0)
    gq_pop = np.where(gq_type > 0, np.maximum(gq.sum(1), rng.integers(10, 201, n)), 0)
    size = pop + gq_pop
    block = np.repeat(np.arange(n), size)
    in_gq = np.arange(block.size) - np.repeat(np.cumsum(size) - size, size) >= np.repeat(pop, size)
    hhgq = np.where(in_gq, gq_type[block], 0)
    # Hispanic x CENRACE: per block a multinomial draw from its tract's composition
    cells = rng.multinomial(size, comp[tract_of])  # (n, 126)
    order = np.repeat(np.tile(np.arange(126), n), cells.ravel())
    order = order[np.argsort(rng.random(order.size) + np.repeat(np.arange(n), size), kind="stable")]
    hispanic, cenrace = np.divmod(order, 63)
    va = (rng.random(block.size) < adult[tract_of[block]]).astype(np.int64)
    va = np.where(np.isin(hhgq, [1, 3, 5, 6]), 1, va)  # adult facilities; nursing: nurse_nva_0
    va = np.where(hhgq == 2, 0, va)  # juvenile facilities
    return pd.DataFrame({"block": block, "hhgq": hhgq.astype(np.int64), "votingage": va,
                         "hispanic": hispanic.astype(np.int64), "cenrace": cenrace.astype(np.int64)})


def pl94_histograms(persons: pd.DataFrame, n_blocks: int) -> np.ndarray:
    """``(n_blocks, 2016)`` int64 block histograms of person records (cells in C order over
    :data:`PL94_SHAPE`)."""
    cell = np.ravel_multi_index((persons["hhgq"].to_numpy(), persons["votingage"].to_numpy(),
                                 persons["hispanic"].to_numpy(), persons["cenrace"].to_numpy()), PL94_SHAPE)
    K = int(np.prod(PL94_SHAPE))
    flat = np.bincount(persons["block"].to_numpy() * K + cell, minlength=n_blocks * K)
    return flat.reshape(n_blocks, K).astype(np.int64, copy=False)


def pl94_constraints(units: pd.DataFrame) -> dict[str, object]:
    """The DAS's PL94 block constraints as arrays (module docstring):

    * ``"upper_zero"``: ``(n_blocks, 8)`` bool, HHGQ types that must hold 0 persons in the block
      (no housing unit, or no facility of that GQ type);
    * ``"gq_lower"``: ``(n_blocks, 8)`` int, at least this many persons of each type (facilities);
    * ``"structural_zero_cells"``: cells 0 in every geounit (nursing facilities x under 18);
    * ``"invariant_levels"``: ``["state"]`` (state totals are published exactly).
    """
    hu = units["housing_units"].to_numpy()
    gq = units[[f"gq{t}" for t in range(1, 8)]].to_numpy()
    counts = np.column_stack([hu, gq])
    lower = np.column_stack([np.zeros_like(hu), gq])
    cells = np.ravel_multi_index(np.meshgrid([3], [0], [0, 1], np.arange(63), indexing="ij"), PL94_SHAPE).ravel()
    return {"upper_zero": counts == 0, "gq_lower": lower, "structural_zero_cells": np.sort(cells),
            "invariant_levels": ["state"]}
