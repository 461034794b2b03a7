"""Synthetic geographies and origin/destination flows.

Two families:

* The nested partitions and Pareto O/D flows of paper 000 (§5, Table 1), reproduced bit for bit:
  :func:`binary_partition`, :func:`random_partition` and :func:`synthetic_od` draw from the same
  random streams as the authors' generator (Python's :mod:`random` for the fanouts and for the
  choice of non-zero pairs, NumPy's legacy global-seed stream for the Pareto flows), so the pairs,
  their order and every flow equal the authors' files for the same parameters.
* :func:`italy_like_od`: an Italy-scale commuting set (regions → provinces → municipalities, about
  500,000 non-zero pairs out of 64 million, 28 million trips) with flows concentrated near the
  origin, generated with vectorized NumPy only.

Area ids of the paper's partitions follow the authors' numbering: within one level they are
unique integers assigned in post-order (the first leaf gets 0, like the root), so ids are unique
only *within* a level.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from hierdp.hierarchy.od import ODTree

__all__ = [
    "NestedPartition",
    "SyntheticOD",
    "binary_partition",
    "italy_like_od",
    "nested_partition",
    "random_partition",
    "synthetic_od",
]


@dataclass(frozen=True)
class NestedPartition:
    """A nested partition of space with ``depth`` levels below the whole space.

    Attributes:
        paths: ``(n_leaves, depth + 1)`` int64 array; row ``i`` is the root-to-leaf path of leaf ``i``
            (column ``k`` = id of the area at level ``k``; column 0 is the root, id 0). Rows are in
            depth-first order, children in increasing id order, as the authors enumerate them.
    """

    paths: np.ndarray

    @property
    def depth(self) -> int:
        """Number of levels below the root."""
        return self.paths.shape[1] - 1

    @property
    def n_leaves(self) -> int:
        """Number of finest-level areas."""
        return self.paths.shape[0]

    def nodes_per_level(self) -> list[int]:
        """Number of areas at each level, root first (e.g. ``[1, 3, 13, 74, 435]``)."""
        return [int(np.unique(self.paths[:, k]).size) for k in range(self.depth + 1)]

    def to_frame(self, prefix: str = "LEVEL", suffix: str = "") -> pd.DataFrame:
        """One row per leaf, one column ``f"{prefix}{k}{suffix}"`` per level (root first)."""
        return pd.DataFrame(
            {f"{prefix}{k}{suffix}": self.paths[:, k] for k in range(self.depth + 1)}
        )


@dataclass(frozen=True)
class SyntheticOD:
    """An O/D data set over one partition used for both sides.

    Attributes:
        trips: frame with columns ``origin``, ``destination`` (leaf ids, i.e. ``LEVEL{g}`` ids) and
            ``count`` (positive flows), one row per non-zero pair, in the generator's order.
        geography: frame with one column per level ``LEVEL0 … LEVELg``, one row per leaf.
        partition: the :class:`NestedPartition` behind ``geography``.
    """

    trips: pd.DataFrame
    geography: pd.DataFrame
    partition: NestedPartition

    def od_tree(self, kind: str = "destination") -> ODTree:
        """The O/D tree of these trips over the generated partition (a declared domain: every
        area of the partition is in the tree, with or without trips)."""
        from hierdp.hierarchy.od import ODTree

        return ODTree.from_trips(self.trips, origin="origin", destination="destination", count="count",
                                 origin_geo=self.geography, kind=kind)

    def level_frame(self) -> pd.DataFrame:
        """The authors' layout: ``LEVEL0_ORIG … LEVELg_ORIG, LEVEL0_DEST … LEVELg_DEST, COUNT``."""
        paths = self.partition.paths
        leaf_row = pd.Series(np.arange(paths.shape[0]), index=paths[:, -1])
        o_rows = leaf_row.loc[self.trips["origin"].to_numpy()].to_numpy()
        d_rows = leaf_row.loc[self.trips["destination"].to_numpy()].to_numpy()
        g = self.partition.depth
        cols: dict[str, np.ndarray] = {}
        for k in range(g + 1):
            cols[f"LEVEL{k}_ORIG"] = paths[o_rows, k]
        for k in range(g + 1):
            cols[f"LEVEL{k}_DEST"] = paths[d_rows, k]
        cols["COUNT"] = self.trips["count"].to_numpy()
        return pd.DataFrame(cols)


def nested_partition(
    depth: int, max_branching: int, *, random_branching: bool, seed: int = 42
) -> NestedPartition:
    """The authors' nested partition generator (any fanout rule), as a :class:`NestedPartition`.

    A node's fanout is ``max_branching`` or, with ``random_branching``, ``random.randint(2,
    max_branching)`` drawn right after ``random.seed(s)`` where ``s`` is ``seed`` plus the sum of the
    child indices on the node's path (siblings' seeds differ by one, which correlates fanouts: this
    is what gives ``[1, 3, 13, 74, 435]`` areas per level for depth 4, fanout ≤ 10, seed 42).
    Ids are a global post-order counter (first leaf 0); the root is labelled 0.
    """
    if not isinstance(depth, (int, np.integer)) or depth < 1:
        raise ValueError(f"depth must be a positive integer, got {depth!r}")
    if not isinstance(max_branching, (int, np.integer)) or max_branching < 2:
        raise ValueError(f"max_branching must be an integer >= 2, got {max_branching!r}")
    rng = random.Random()
    counter = 0
    paths: list[list[int]] = []

    # Recursion depth is the partition depth (<= a few dozen), and there are at most a few
    # thousand internal nodes: a plain recursive walk is clearest here, not a hot path.
    def expand(level: int, node_seed: int) -> list[tuple[int, list[list[int]]]]:
        """Return [(child id, list of suffix paths under that child)] for a node at ``level``."""
        nonlocal counter
        rng.seed(node_seed)
        fanout = rng.randint(2, max_branching) if random_branching else max_branching
        out = []
        for i in range(fanout):
            if level + 1 >= depth:
                suffixes: list[list[int]] = [[]]
            else:
                grand = expand(level + 1, node_seed + i)
                suffixes = [[cid, *s] for cid, subs in grand for s in subs]
            out.append((counter, suffixes))
            counter += 1
        return out

    for cid, subs in expand(0, seed):
        for s in subs:
            paths.append([0, cid, *s])
    return NestedPartition(paths=np.asarray(paths, dtype=np.int64))


def binary_partition(depth: int = 8) -> NestedPartition:
    """Paper 000's binary partition: every area split in two, ``depth`` levels (2**depth leaves)."""
    return nested_partition(depth, 2, random_branching=False)


def random_partition(depth: int = 4, max_branching: int = 10, seed: int = 42) -> NestedPartition:
    """Paper 000's random partition: fanout uniform in ``2..max_branching`` (authors' seeding)."""
    return nested_partition(depth, max_branching, random_branching=True, seed=seed)


def synthetic_od(
    partition: NestedPartition,
    zero_probability: float,
    scale: float = 3.0,
    max_flow: int = 1000,
    seed: int = 42,
) -> SyntheticOD:
    """Paper 000's O/D flows over ``partition`` (both sides), matching the authors' streams.

    All ``N = n_leaves**2`` leaf pairs are enumerated (origin-major, leaves in depth-first order);
    ``int(N * (1 - zero_probability))`` of them are kept with ``random.sample`` after
    ``random.seed(seed)``; flows are ``numpy.random.pareto(scale)`` draws (legacy stream seeded with
    ``seed``) divided by their maximum and mapped to ``floor(1 + x * (max_flow - 1))`` — so every flow
    lies in ``[1, max_flow]`` and the largest equals ``max_flow``.

    Only the sampled indices are drawn in Python (``random.sample`` over a ``range`` selects the same
    positions as over the authors' list of tuples); the pairs are decoded with integer division.
    """
    if not 0.0 <= float(zero_probability) < 1.0:
        raise ValueError(f"zero_probability must be in [0, 1), got {zero_probability!r}")
    if scale <= 0:
        raise ValueError(f"scale (Pareto shape) must be positive, got {scale!r}")
    if int(max_flow) < 1:
        raise ValueError(f"max_flow must be >= 1, got {max_flow!r}")
    n_leaves = partition.n_leaves
    n_all = n_leaves * n_leaves
    n_keep = int(n_all * (1 - zero_probability))
    if n_keep < 1:
        raise ValueError(
            f"zero_probability={zero_probability} keeps no pair out of {n_all}; lower it"
        )
    sampler = random.Random(seed)
    chosen = np.fromiter(sampler.sample(range(n_all), n_keep), dtype=np.int64, count=n_keep)
    # The authors seed NumPy's legacy global stream; a private RandomState gives the same draws
    # without touching the caller's global state.
    flows = np.random.RandomState(seed).pareto(scale, n_keep)
    flows = np.floor(1 + flows / flows.max() * (int(max_flow) - 1)).astype(np.int64)
    leaf_ids = partition.paths[:, -1]
    trips = pd.DataFrame(
        {
            "origin": leaf_ids[chosen // n_leaves],
            "destination": leaf_ids[chosen % n_leaves],
            "count": flows,
        }
    )
    return SyntheticOD(trips=trips, geography=partition.to_frame(), partition=partition)


def _sizes_to_groups(n_items: int, n_groups: int, weights: np.ndarray, rng: np.random.Generator):
    """Assign ``n_items`` items to ``n_groups`` groups, each non-empty, sizes ∝ ``weights``.

    Returns the group index of each item, sorted (items of a group are contiguous).
    """
    extra = rng.multinomial(n_items - n_groups, weights / weights.sum())
    return np.repeat(np.arange(n_groups), 1 + extra)


def italy_like_od(
    n_regions: int = 20,
    n_provinces: int = 110,
    n_municipalities: int = 8000,
    n_pairs: int = 500_000,
    n_trips: float = 28e6,
    seed: int = 0,
    *,
    locality: tuple[float, float, float, float] = (0.08, 0.62, 0.22, 0.08),
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """An Italy-scale commuting O/D set: 3-level geography and flows concentrated near the origin.

    Geography: ``n_municipalities`` municipalities grouped into ``n_provinces`` provinces grouped
    into ``n_regions`` regions (group sizes heavy-tailed, every group non-empty). Municipality
    "sizes" are log-normal. Pairs: origins are drawn ∝ size; each destination is, with the
    probabilities in ``locality``, the origin itself, a municipality of the same province, of the
    same region, or anywhere (∝ size within that scope). Distinct pairs are kept until
    ``n_pairs`` are found. Flows: every pair gets at least one trip; the remaining trips are spread
    ∝ a heavy-tailed weight that favours large and local pairs, summing exactly to ``n_trips``.

    Returns:
        ``(trips, geography)``: ``trips`` has columns ``origin``, ``destination`` (municipality names)
        and ``count`` (int64); ``geography`` has columns ``region``, ``province``, ``municipality``,
        one row per municipality (names: ``R07``, ``P042``, ``M01234``).
    """
    n_trips = int(n_trips)
    if not 1 <= n_regions <= n_provinces <= n_municipalities:
        raise ValueError(
            "need 1 <= n_regions <= n_provinces <= n_municipalities, got "
            f"{n_regions}, {n_provinces}, {n_municipalities}"
        )
    if not 1 <= n_pairs <= n_municipalities**2:
        raise ValueError(f"n_pairs must be in [1, {n_municipalities**2}], got {n_pairs}")
    if n_trips < n_pairs:
        raise ValueError(f"n_trips ({n_trips}) must be >= n_pairs ({n_pairs}): flows are positive")
    locality_arr = np.asarray(locality, dtype=float)
    if locality_arr.shape != (4,) or (locality_arr < 0).any() or locality_arr.sum() <= 0:
        raise ValueError(f"locality must be 4 non-negative weights, got {locality!r}")
    locality_arr = locality_arr / locality_arr.sum()
    rng = np.random.default_rng(seed)

    # Geography: municipalities sorted by province, provinces sorted by region, so that every
    # province and every region is a contiguous block of municipality indices.
    prov_of_region = _sizes_to_groups(n_provinces, n_regions, rng.pareto(1.5, n_regions) + 1, rng)
    muni_prov = _sizes_to_groups(
        n_municipalities, n_provinces, rng.pareto(1.5, n_provinces) + 1, rng
    )
    muni_region = prov_of_region[muni_prov]
    size = rng.lognormal(mean=0.0, sigma=1.3, size=n_municipalities)
    cum = np.concatenate([[0.0], np.cumsum(size)])
    prov_lo = np.searchsorted(muni_prov, np.arange(n_provinces), side="left")
    prov_hi = np.searchsorted(muni_prov, np.arange(n_provinces), side="right")
    reg_lo = np.searchsorted(muni_region, np.arange(n_regions), side="left")
    reg_hi = np.searchsorted(muni_region, np.arange(n_regions), side="right")

    def draw_in_block(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """For each (lo, hi) block of municipalities, draw one index ∝ size (vectorized)."""
        u = cum[lo] + rng.random(lo.size) * (cum[hi] - cum[lo])
        return np.clip(np.searchsorted(cum, u, side="right") - 1, lo, hi - 1)

    # Oversample candidate pairs in rounds until enough distinct ones exist; keep first arrivals
    # so that the kept set does not depend on the number of rounds' padding.
    keys = np.empty(0, dtype=np.int64)
    batch = int(n_pairs * 3)
    for _ in range(50):
        o = draw_in_block(np.zeros(batch, np.int64), np.full(batch, n_municipalities))
        scope = rng.choice(4, size=batch, p=locality_arr)
        d = o.copy()
        m = scope == 1
        d[m] = draw_in_block(prov_lo[muni_prov[o[m]]], prov_hi[muni_prov[o[m]]])
        m = scope == 2
        d[m] = draw_in_block(reg_lo[muni_region[o[m]]], reg_hi[muni_region[o[m]]])
        m = scope == 3
        d[m] = draw_in_block(np.zeros(m.sum(), np.int64), np.full(m.sum(), n_municipalities))
        keys = np.concatenate([keys, o * n_municipalities + d])
        uniq, first = np.unique(keys, return_index=True)
        if uniq.size >= n_pairs:
            keys = keys[np.sort(first)[:n_pairs]]
            break
        keys = uniq
    else:
        raise ValueError(
            f"could not find {n_pairs} distinct pairs with locality={locality}; widen it"
        )
    o, d = keys // n_municipalities, keys % n_municipalities

    # Flows: 1 each, plus the rest ∝ Pareto weight × gravity (sizes) × locality bonus.
    same_prov = muni_prov[o] == muni_prov[d]
    bonus = np.where(o == d, 150.0, np.where(same_prov, 3.0, 1.0))
    weight = (rng.pareto(1.2, n_pairs) + 1) * np.sqrt(size[o] * size[d]) * bonus
    rest = n_trips - n_pairs
    share = weight / weight.sum() * rest
    extra = np.floor(share).astype(np.int64)
    short = rest - int(extra.sum())
    if short > 0:  # largest remainders get the last trips, so the total is exact
        extra[np.argpartition(share - extra, -short)[-short:]] += 1
    count = 1 + extra

    muni_names = np.array([f"M{i:05d}" for i in range(n_municipalities)], dtype=object)
    geography = pd.DataFrame(
        {
            "region": [f"R{r:02d}" for r in muni_region],
            "province": [f"P{p:03d}" for p in muni_prov],
            "municipality": muni_names,
        }
    )
    trips = pd.DataFrame({"origin": muni_names[o], "destination": muni_names[d], "count": count})
    return trips, geography
