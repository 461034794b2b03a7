"""Nothing a release carries depends on the private data beyond its DP values (issue 20, item 2).

One table, one row per registered mechanism: the mechanism runs, with the same seed, on two
neighbouring datasets (one person moved - bounded neighbours - or added - unbounded - as the
mechanism's unit says), chosen to be the hardest case for leaks of the data's *shape*: the person
lands in a cell that was empty (a new non-zero leaf, a larger observed stability, a group above K).
Every attribute of the two release objects is then compared, exhaustively:

* the **DP values** (counts, the partition a data-adaptive spatial mechanism chose from its noisy
  counts, statistics computed from them) may differ - each such attribute is listed below with the
  reason it is a DP output;
* **run diagnostics** (timings) may differ in value, not in shape;
* **everything else** - parameters, the whole accounting and its text, the structure, every solver
  statistic not derived from the noisy values, the table's non-value columns over the (public)
  domain, any attribute a mechanism adds - must be identical. An attribute not classified here
  fails the test until it is.

The oracle is the definition itself: a quantity that differs between neighbours while the
mechanism's DP output is held fixed by the same seed depends on the data beyond the DP values.
Two rows use neighbours the mechanism cannot tell apart at all (a unit above K, top-coded into K;
a record mapped to fewer groups than the declared stability): there even the DP values must match.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

from hierdp.hierarchy import Hierarchy
from hierdp.hierarchy.count_of_counts import CountOfCounts
from hierdp.hierarchy.spatial import SpatialGrid
from hierdp.mechanisms import create, names
from hierdp.mechanisms.safetab import PopulationGroupLevel
from hierdp.release import NodeHistogramRelease, SpatialRelease, TreeRelease
from hierdp.release.encoding import encode

DELTA = 1e-8


# -------------------------------------------------------------------------- neighbouring datasets
def _tree(bounded: bool, neighbour: bool) -> Hierarchy:
    """Cities of a declared gazetteer; the neighbour moves one person from a1 to the empty a3
    (bounded: n public) or adds one person in a3 (unbounded)."""
    counts = {"a1": 40, "a2": 25, "a3": 0, "b1": 30, "b2": 12}
    if neighbour:
        counts["a3"] += 1
        counts["a1"] -= 1 if bounded else 0
    domain = pd.DataFrame({"region": ["A", "A", "A", "B", "B"], "city": ["a1", "a2", "a3", "b1", "b2"]})
    rows = domain.assign(people=[counts[c] for c in domain["city"]])
    return Hierarchy.from_frame(rows, levels=["region", "city"], count="people", domain=domain)


def _units(sizes: list[int], *, K: int = 4, top_code: bool = True) -> CountOfCounts:
    units = pd.DataFrame({"unit": [f"u{i}" for i in range(len(sizes))],
                          "state": ["S1"] * 4 + ["S2"] * (len(sizes) - 4), "size": sizes})
    return CountOfCounts.from_units(units, unit="unit", levels=["state"], size="size", K=K,
                                    domain=pd.DataFrame({"state": ["S1", "S2"]}), top_code=top_code)


SIZES = [1, 2, 2, 4, 1, 3, 2, 1]


def _groups_grow(bounded: bool, neighbour: bool) -> CountOfCounts:
    """One person joins unit u1 (size 2 -> 3): the group-size neighbour relation."""
    sizes = list(SIZES)
    sizes[1] += 1 if neighbour else 0
    return _units(sizes)


def _groups_above_k(bounded: bool, neighbour: bool) -> CountOfCounts:
    """One person joins the size-K unit u3 (4 -> 5 with K = 4, top-coded): the histograms are
    identical, so the two releases must be identical - values included (P1)."""
    sizes = list(SIZES)
    sizes[3] += 1 if neighbour else 0
    return _units(sizes)


def _people(neighbour: bool) -> pd.DataFrame:
    rng = np.random.default_rng(5)
    df = pd.DataFrame({"sex": rng.choice(["F", "M"], 300), "age": rng.integers(0, 95, 300),
                       "grp": rng.choice(["a", "b", "c"], 300)})
    if neighbour:  # one more person, in group c
        df = pd.concat([df, pd.DataFrame({"sex": ["F"], "age": [40], "grp": ["c"]})], ignore_index=True)
    return df


def _safetab_params(neighbour: bool) -> dict[str, Any]:
    """Declared stability 2; the neighbour's record is in groups c and d (observed stability 1 -> 2)."""
    df = _people(neighbour)
    pairs = pd.DataFrame({"record": df.index, "group": df["grp"].to_numpy()})
    if neighbour:
        pairs = pd.concat([pairs, pd.DataFrame({"record": [df.index[-1]], "group": ["d"]})], ignore_index=True)
    levels = [PopulationGroupLevel("grp", 1.0, 2, pairs, universe=["a", "b", "c", "d"], total_only=["d"])]
    return {"levels": levels, "sex_values": ["F", "M"], "delta": DELTA}


def _points(bounded: bool, neighbour: bool) -> SpatialGrid:
    """The spatial contract's grid; the neighbour moves (bounded) or adds (unbounded) one point in an
    empty corner cell."""
    rng = np.random.default_rng(11)
    x = np.concatenate([rng.normal(4, 1.5, 400), rng.uniform(0, 16, 100)]).clip(0, 16)
    y = np.concatenate([rng.normal(5, 2.0, 400), rng.uniform(0, 16, 100)]).clip(0, 16)
    keep = ~((x > 15) & (y > 15))  # the corner cell (15, 15) is empty in D
    x, y = x[keep], y[keep]
    if neighbour:
        x, y = (np.append(x[1:], 15.5), np.append(y[1:], 15.5)) if bounded else (np.append(x, 15.5),
                                                                                  np.append(y, 15.5))
    return SpatialGrid.from_points(x, y, shape=(16, 16), box=(0, 16, 0, 16))


def _spine(bounded: bool, neighbour: bool) -> Any:
    from hierdp.mechanisms.census import SpineHistograms
    from hierdp.spines import Spine

    rows = pd.DataFrame({"county": ["c1", "c1", "c2"], "block": ["b1", "b2", "b3"]})
    spine = Spine.from_frame(rows, ["county", "block"], ["1/3", "1/3", "1/3"], root="US")
    counts = np.array([[3, 1], [0, 2], [5, 0]])
    if neighbour:  # one person of block b2 into the empty cell 0 (bounded: from cell 1)
        counts[1, 0] += 1
        counts[1, 1] -= 1 if bounded else 0
    return SpineHistograms(spine, counts)


def _spatial(extra: dict[str, Any] | None = None) -> tuple[Callable[[], dict[str, Any]], Callable[..., Any]]:
    return (lambda: {"epsilon": 1.0, "delta": DELTA, "bounded": False, **(extra or {})}), _points


# name -> (constructor parameters (given the neighbour flag), data(bounded, neighbour), DP values that may differ)
TREE = {"levels": "the released values (post-processed noisy counts)"}
HISTOGRAM = {"values": "the released histograms"}
ADAPTIVE = {"rects": "the partition chosen from noisy counts", "values": "the released leaf values",
            "tree": "the partition tree chosen from noisy counts, with its noisy values",
            "details": "the noisy N and the shape of the partition chosen from noisy counts",
            "_density_prefix": "a cache of the released values"}
FIXED_GRID = {"values": "the released leaf values", "tree": "the tree's noisy values (its shape is public)",
              "_density_prefix": "a cache of the released values"}

ROWS: dict[str, tuple[Callable[[], dict[str, Any]], Callable[..., Any], dict[str, str]]] = {
    "inftda": (lambda: {"epsilon": 1.0, "delta": DELTA}, _tree, TREE),
    "tda_l2": (lambda: {"epsilon": 1.0, "delta": DELTA}, _tree, TREE),
    "tda_l2_exact": (lambda: {"rho": 0.05, "delta": DELTA, "bounded": False}, _tree, TREE),
    "tda_linf": (lambda: {"epsilon": 1.0, "delta": DELTA}, _tree, TREE),
    "vanilla": (lambda: {"epsilon": 1.0, "delta": DELTA}, _tree, TREE),
    "sh": (lambda: {"epsilon": 4.0, "delta": 1e-3}, _tree, TREE),
    "topdown": (lambda: {"epsilon": 1.0, "delta": DELTA, "noise": "geometric", "objective": "l2"}, _tree, TREE),
    "census_topdown": (lambda: {"epsilon": 1.0, "delta": DELTA}, _spine, HISTOGRAM),
    **{name: (lambda: {"epsilon": 1.0}, _groups_grow, HISTOGRAM)
       for name in ("pgsr_mh", "pgsr_mh_relaxed", "pgsr_mdp", "pgsr_mhc", "pgsr_mhc_relaxed", "pgsr_cumulative_dp",
                    "pgsr_chain_dp", "pgsr_topdown")},
    "htf": (*_spatial({"eps_prt_per_level": 0.01, "eps_height": 0.01, "stop_count": 5}), ADAPTIVE),
    "identity": (*_spatial(), FIXED_GRID),
    "uniform": (*_spatial(), FIXED_GRID),
    "ug": (*_spatial(), ADAPTIVE),
    "ag": (*_spatial(), ADAPTIVE),
    "quadtree": (*_spatial({"height": 3}), FIXED_GRID),
    "kdtree": (*_spatial({"height": 4}), ADAPTIVE),
    "privelet": (*_spatial(), FIXED_GRID),
}
SAFETAB_DP = {"frame": "the noisy counts and the tabulations chosen from noisy Step-1 totals"}

#: per release type, attributes that are diagnostics of the run (compared in shape only) and the
#: solver statistics computed from the noisy values (post-processing of DP output)
DIAGNOSTICS = {"timings"}
STATS_FROM_NOISY_VALUES = {
    "objective": "the solver's objective on the noisy targets",
    "released": "the number of nodes released non-zero (a count of DP values)",
    "released_leaves": "the number of leaves SH released (a count of DP values)",
    "n_groups": "groups of released parents (parents released non-zero)",
    "n_children": "children of released parents",
    "parents": "released parents of the level",
    "children": "children of released parents",
    "max_group": "the largest group among released parents",
    "iterations": "solver iterations on the noisy targets",
    "certificate": "the optimality certificate of the noisy problem",
}


#: parameters and accounting details that are computed from the noisy values
PARAMS_FROM_NOISY_VALUES = {"objective": "the post-processing objective on the noisy histograms (group sizes)"}
DETAILS_FROM_NOISY_VALUES = {"noisy_n": "HTF's noisy number of points (it sets the tree height)",
                             "n_used": "UG / AG's noisy N (it sets the grid)"}


def _masked(d: Any, dp: dict[str, str]) -> Any:
    return {k: ("<dp>" if k in dp else encode(v)) for k, v in dict(d).items()}


def _masked_stats(stats: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: ("<dp>" if k in STATS_FROM_NOISY_VALUES else "<time>" if k.endswith("_s") else encode(v))
             for k, v in level.items()} for level in stats]


def _repr_masked(rel: Any) -> str:
    """repr with the numbers that count DP outputs masked (nodes per level, rows, leaves)."""
    text = repr(rel)
    text = re.sub(r"nodes per level=\[[^\]]*\]", "nodes per level=[<dp>]", text)
    return re.sub(r"(rows|leaves)=[\d,]+", r"\1=<dp>", text)


def snapshot(rel: Any, data: Any, dp: dict[str, str]) -> dict[str, Any]:
    """Everything of ``rel`` except its DP values (``dp``: attribute -> why it is one)."""
    out: dict[str, Any] = {"attributes": sorted(vars(rel)), "repr": _repr_masked(rel),
                           "accounting_text": rel.accounting_text(), "guarantee": rel.guarantee}
    for name, value in vars(rel).items():
        if name in dp:
            continue
        if name in DIAGNOSTICS:
            out[name] = sorted(value) if isinstance(value, dict) else len(value)
        elif name == "accounting":
            acc = value.to_dict()
            acc["fields"]["details"] = _masked(value.details, DETAILS_FROM_NOISY_VALUES)
            out[name] = acc
        elif name == "params":
            out[name] = _masked(value, PARAMS_FROM_NOISY_VALUES)
        elif name == "solver_stats":
            out[name] = _masked_stats(value)
        elif name == "namer":
            out[name] = type(value).__name__  # the input tree's labels: public structure
        elif name == "domain":
            out[name] = value.describe()
        elif name == "frame" or isinstance(value, pd.DataFrame):
            out[name] = value.to_dict("list")
        else:
            out[name] = encode(value)
    frame = rel.with_domain(data).to_frame() if isinstance(rel, TreeRelease) else rel.to_frame()
    value_columns = {"value", "noisy_count"}
    if "rects" in dp or "frame" in dp:  # a data-adaptive partition or table: its rows are DP output
        out["frame_columns"] = list(frame.columns)
    else:
        out["frame"] = frame.drop(columns=[c for c in frame.columns if c in value_columns]).to_dict("list")
    return out


def _differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    return [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def test_every_registered_mechanism_has_a_neighbour_row() -> None:
    assert set(names()) == set(ROWS) | {"safetab"}


@pytest.mark.parametrize("name", sorted(ROWS))
def test_nothing_beside_the_dp_values_differs_between_neighbours(name: str) -> None:
    params, data, dp = ROWS[name]
    mech = create(name, **params())
    bounded = mech.unit.bounded
    d0, d1 = data(bounded, False), data(bounded, True)
    r0, r1 = (create(name, **params()).release(d, seed=3) for d in (d0, d1))
    for rel in (r0, r1):
        assert type(rel) in (TreeRelease, NodeHistogramRelease, SpatialRelease)
    s0, s1 = snapshot(r0, d0, dp), snapshot(r1, d1, dp)
    assert _differences(s0, s1) == [], f"{name}: differs between neighbours beyond its DP values"


@pytest.mark.parametrize("name", ["pgsr_mdp", "pgsr_chain_dp", "pgsr_topdown"])
def test_a_unit_above_k_is_invisible_when_top_coded(name: str) -> None:
    """P1: with K = 4 and top coding, a unit of size 4 or 5 is counted in size 4 - the data the
    mechanism sees is identical, so must be the whole release (values too), its note included."""
    r0, r1 = (create(name, epsilon=1.0).release(_groups_above_k(True, nb), seed=3) for nb in (False, True))
    assert r0 == r1 and r0.accounting == r1.accounting
    assert any("top-coded" in a for a in r0.accounting.assumptions)


def test_safetab_attaches_no_observed_statistic() -> None:
    """P3: SafeTab's observed stability (1 on one neighbour, 2 on the other) was attached to the
    release and shown in its repr. Same seed: the accounting, parameters, repr and frame columns are
    identical; only the noisy table differs."""
    r0, r1 = (create("safetab", **_safetab_params(nb)).release(_people(nb), seed=3) for nb in (False, True))
    s0, s1 = snapshot(r0, None, SAFETAB_DP), snapshot(r1, None, SAFETAB_DP)
    assert _differences(s0, s1) == []
    assert not any("stability" in a and a != "stabilities" for a in vars(r0))
    mech = create("safetab", **_safetab_params(True))
    assert mech.observed_stability(_people(True)) == {"grp": 2}  # available on demand, for evaluation


def test_safetab_include_true_is_refused_in_secure_mode_and_flagged_in_seeded_mode() -> None:
    """P12: a frame with true counts is never a private release."""
    from hierdp.mechanisms.safetab import SafeTabError

    params = {**_safetab_params(False), "include_true": True}
    with pytest.raises(SafeTabError, match="include_true"):
        create("safetab", **params).release(_people(False))  # secure: the default without a seed
    with pytest.raises(SafeTabError, match="include_true"):
        create("safetab", **params).release(_people(False), secure=True)
    rel = create("safetab", **params).release(_people(False), seed=1)
    assert "true_count" in rel.to_frame().columns
    assert any("NOT A PRIVATE RELEASE" in n for n in rel.accounting.notes) and "NOT A PRIVATE" in rel.guarantee


def test_the_snapshot_catches_a_leak() -> None:
    """The comparison itself can fail: an attached data statistic (SH's old true number of non-zero
    leaves) is found."""
    params, data, dp = ROWS["sh"]
    d0, d1 = data(True, False), data(True, True)
    r0, r1 = (create("sh", **params()).release(d, seed=3) for d in (d0, d1))
    for rel, d in ((r0, d0), (r1, d1)):
        rel.solver_stats[-1]["positive_leaves"] = int((d.counts[d.level == d.n_levels - 1] > 0).sum())
    assert _differences(snapshot(r0, d0, dp), snapshot(r1, d1, dp)) == ["solver_stats"]
