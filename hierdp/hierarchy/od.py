"""Origin/destination trees (paper 000, §3), built implicitly.

Trips between the finest areas of two geographic partitions (g levels each, level 0 = the whole
space) define two non-negative hierarchical trees of 2g+1 levels:

* the **destination tree**: tree level L pairs origin level ⌊L/2⌋ with destination level ⌈L/2⌉;
  a node (u_l, v_l) first gets the children (u_l, v_{l+1}) for every finer destination, and each
  of those the children (u_{l+1}, v_{l+1}) for every finer origin (§3, steps (1)-(2));
* the **origin tree**: the reverse (origin refined first).

Nothing is materialized. A node key at tree level L is ``o * n_dest[b] + d`` (o, d: area indices
at the geographic levels a, b of L). Children are generated on demand from the geographies'
CSR child arrays (every finer area, zero-flow pairs included) and true counts are looked up with
``np.searchsorted`` in one sorted sparse table per level (non-zero pairs only). Memory is
O(non-zero pairs × levels + areas), independent of the number of potential pairs.
"""

from __future__ import annotations

from typing import Any
from collections.abc import Sequence

import numpy as np
import pandas as pd

from hierdp._segments import gather_ranges
from hierdp.hierarchy.counts import checked_total, coerce_counts
from hierdp.hierarchy.domain import observed_assumption
from hierdp.hierarchy.errors import (
    CountError,
    EmptyInputError,
    HierarchyError,
    MissingValueError,
    UnknownColumnError,
)
from hierdp.hierarchy.geography import Geography

__all__ = ["Geography", "ODTree"]


class _ODNamer:
    """Labels of O/D tree keys (public geography only)."""

    def __init__(self, tree: ODTree) -> None:
        self.orig = tree.origin_geo
        self.dest = tree.destination_geo
        self.level_pairs = tree.level_pairs

    def _decode(self, level: int, keys: np.ndarray) -> tuple[int, int, np.ndarray, np.ndarray]:
        a, b = self.level_pairs[level]
        keys = np.asarray(keys, dtype=np.int64)
        o, d = np.divmod(keys, self.dest.sizes[b])
        return a, b, o, d

    def key_columns(self, level: int, keys: np.ndarray) -> dict[str, np.ndarray]:
        a, b, o, d = self._decode(level, keys)
        n = o.size
        return {
            "origin_level": np.full(n, self.orig.level_names[a], dtype=object),
            "origin": self.orig.names[a][o].astype(str),
            "destination_level": np.full(n, self.dest.level_names[b], dtype=object),
            "destination": self.dest.names[b][d].astype(str),
        }

    def key_names(self, level: int, keys: np.ndarray) -> np.ndarray:
        cols = self.key_columns(level, keys)
        return np.char.add(np.char.add(cols["origin"].astype(str), "->"), cols["destination"].astype(str)).astype(object)


class ODTree:
    """The destination (or origin) tree of an O/D dataset, implicit (see module docstring).

    Use :meth:`from_trips` or :meth:`from_level_frame`. Implements
    :class:`~hierdp.hierarchy.topdown_tree.TopDownTree`.

    Attributes:
        kind: ``"destination"`` or ``"origin"``.
        origin_geo, destination_geo: the two :class:`Geography` (may be the same object).
        level_pairs: per tree level L, ``(a, b)`` = (origin geo level, destination geo level).
        n_levels: 2g + 1.
        domain_source: ``"declared"`` when both geographies are (the structure was given, e.g.
            a public geography), ``"observed"`` when one was read from the trips' rows; see
            :mod:`hierdp.privacy.domain`. The constructor's ``domain_source`` /
            ``domain_assumption`` override what the geographies say.
        domain_assumption: the user's statement that an observed domain is public, else None.
    """

    def __init__(self, origin_geo: Geography, destination_geo: Geography, leaf_orig: np.ndarray,
                 leaf_dest: np.ndarray, leaf_count: np.ndarray, *, kind: str = "destination",
                 domain_source: str | None = None, domain_assumption: str | None = None) -> None:
        if kind not in ("destination", "origin"):
            raise HierarchyError(f"kind must be 'destination' or 'origin', got {kind!r}")
        if origin_geo.g != destination_geo.g:
            raise HierarchyError(f"origin and destination geographies need the same number of levels "
                                 f"({origin_geo.g} vs {destination_geo.g})")
        self.kind = kind
        self.origin_geo = origin_geo
        self.destination_geo = destination_geo
        g = origin_geo.g
        self.g = g
        self.n_levels = 2 * g + 1
        # destination tree: L -> (floor(L/2), ceil(L/2)); origin tree: the reverse
        if kind == "destination":
            self.level_pairs = [(L // 2, (L + 1) // 2) for L in range(self.n_levels)]
        else:
            self.level_pairs = [((L + 1) // 2, L // 2) for L in range(self.n_levels)]
        self.level_names = [f"{origin_geo.level_names[a]}->{destination_geo.level_names[b]}"
                            for a, b in self.level_pairs]
        n_o, n_d = origin_geo.sizes[-1], destination_geo.sizes[-1]
        if n_o * n_d >= 2 ** 62:
            raise HierarchyError(f"{n_o} x {n_d} potential pairs overflow int64 keys")
        # aggregate duplicate leaf pairs, then build one sorted sparse table per tree level
        self._keys: list[np.ndarray] = []
        self._counts: list[np.ndarray] = []
        leaf_orig = np.asarray(leaf_orig, dtype=np.int64)
        leaf_dest = np.asarray(leaf_dest, dtype=np.int64)
        leaf_count = np.asarray(leaf_count, dtype=np.int64)
        anc_o = {a: origin_geo.ancestor(a, leaf_orig) for a in range(g + 1)}
        anc_d = {b: destination_geo.ancestor(b, leaf_dest) for b in range(g + 1)}
        if np.any(leaf_count < 0):
            raise HierarchyError(f"negative trip count {int(leaf_count[np.flatnonzero(leaf_count < 0)[0]])}")
        # exact: every partial sum is at most the total, so a total within int64 cannot wrap
        self.root_count = checked_total(leaf_count, what="trip counts")
        for a, b in self.level_pairs:
            k = anc_o[a] * destination_geo.sizes[b] + anc_d[b]
            order = np.argsort(k, kind="stable")
            ks = k[order]
            if ks.size:
                starts = np.flatnonzero(np.concatenate([[True], ks[1:] != ks[:-1]]))
                uk, c = ks[starts], np.add.reduceat(leaf_count[order], starts)  # int64, exact
            else:
                uk, c = ks, np.zeros(0, np.int64)
            m = c != 0
            self._keys.append(uk[m])
            self._counts.append(c[m])
        self.root_key = 0
        self.namer = _ODNamer(self)
        observed = [geo for geo in (origin_geo, destination_geo) if geo.domain_source == "observed"]
        self.domain_source = domain_source or ("observed" if observed else "declared")
        self.domain_assumption = domain_assumption if domain_source is not None else (
            next((geo.domain_assumption for geo in observed if geo.domain_assumption), None) if observed else None)

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_trips(
        cls,
        trips: pd.DataFrame,
        *,
        origin: str,
        destination: str,
        count: str | None = None,
        origin_geo: Any,
        destination_geo: Any = None,
        geo_levels: list[str] | None = None,
        kind: str = "destination",
    ) -> ODTree:
        """Build from trips between finest areas.

        Args:
            trips: one row per trip, or per O/D pair with a ``count`` column.
            origin, destination: columns holding finest-level area ids.
            count: optional column of non-negative integer trip counts (default: 1 per row).
            origin_geo: a :class:`~hierdp.hierarchy.Hierarchy`, a :class:`Geography`, or a frame
                with one column per geographic level (coarse to fine; the finest = area ids).
            destination_geo: the same for destinations (default: ``origin_geo``).
            geo_levels: level columns of frame geographies (default: all their columns).
            kind: ``"destination"`` (refine destinations first) or ``"origin"``.

        The geography is the tree's public domain (``domain_source == "declared"``): every
        area of it, with or without trips, is part of the tree. (A geography given as a
        Hierarchy read from private rows stays ``"observed"``.)

        Raises:
            HierarchyError family: unknown column, area not in the geography, negative or
            non-integer counts, counts whose total exceeds int64, empty input.
        """
        if not isinstance(trips, pd.DataFrame):
            raise HierarchyError(f"trips must be a DataFrame, got {type(trips).__name__}")
        for c in (origin, destination) + ((count,) if count is not None else ()):
            if c not in trips.columns:
                raise UnknownColumnError(f"trips: unknown column {c!r} (columns: {list(trips.columns)})")
        if len(trips) == 0:
            raise EmptyInputError("trips: the frame has no rows")
        for c in (origin, destination):
            na = trips[c].isna().to_numpy()
            if na.any():
                raise MissingValueError(f"trips: column {c!r} has a missing value at row {int(np.flatnonzero(na)[0])}")
        cnt = _trip_counts(trips, count)
        og = Geography.coerce(origin_geo, geo_levels)
        dg = og if destination_geo is None else Geography.coerce(destination_geo, geo_levels)
        lo = og.finest_index(trips[origin], f"origin column {origin!r}")
        ld = dg.finest_index(trips[destination], f"destination column {destination!r}")
        return cls(og, dg, lo, ld, cnt, kind=kind)

    @classmethod
    def from_level_frame(
        cls,
        df: pd.DataFrame,
        *,
        origin_levels: Sequence[str],
        destination_levels: Sequence[str],
        count: str | None = "COUNT",
        kind: str = "destination",
        origin_geo: Any = None,
        destination_geo: Any = None,
        shared_geography: bool = True,
        observed_domain_public: bool = False,
    ) -> ODTree:
        """Build from the paper's reference layout: ``LEVEL0_ORIG..LEVELg_ORIG,
        LEVEL0_DEST..LEVELg_DEST, COUNT`` (ids unique only within a level).

        The domain (every area of every level) should be public: pass ``origin_geo`` (and
        ``destination_geo`` when the sides differ), a frame of level columns coarse to fine, a
        :class:`Geography` or a Hierarchy listing every area, trips or not. Rows are then
        looked up by their finest ids, and their coarser ids must agree with the geography.
        The leading data columns beyond the geography's levels must hold one value each (the
        whole space, ``LEVEL0_*``).

        Without a geography the areas are read from the rows (``domain_source ==
        "observed"``): with ``shared_geography`` (default) the union of the origin and
        destination paths, otherwise one per side, leading single-valued columns dropped. Such
        a tree is refused by every mechanism unless ``observed_domain_public=True`` states that
        the observed set of areas is public knowledge (the release then says it assumes so).
        """
        if not isinstance(df, pd.DataFrame):
            raise HierarchyError(f"expected a DataFrame, got {type(df).__name__}")
        o_lv, d_lv = list(origin_levels), list(destination_levels)
        for c in o_lv + d_lv + ([count] if count is not None else []):
            if c not in df.columns:
                raise UnknownColumnError(f"unknown column {c!r} (columns: {list(df.columns)})")
        if len(df) == 0:
            raise EmptyInputError("the frame has no rows")
        if len(o_lv) != len(d_lv):
            raise HierarchyError(f"origin_levels has {len(o_lv)} columns, destination_levels {len(d_lv)}")
        for c in o_lv + d_lv:
            na = df[c].isna().to_numpy()
            if na.any():
                raise MissingValueError(f"column {c!r} has a missing value at row {int(np.flatnonzero(na)[0])}")
        cnt = _trip_counts(df, count)
        if origin_geo is not None:
            # the declared public partition(s): rows name their finest ids, coarser ids are checked
            og = Geography.coerce(origin_geo)
            dg = og if destination_geo is None else Geography.coerce(destination_geo)
            o_use = _align_to_geography(df, o_lv, og, "origin")
            d_use = _align_to_geography(df, d_lv, dg, "destination")
            lo = og.finest_index(df[o_use[-1]], f"origin column {o_use[-1]!r}")
            ld = dg.finest_index(df[d_use[-1]], f"destination column {d_use[-1]!r}")
            og.check_ancestors(lo, [df[c] for c in o_use], o_use, "origin")
            dg.check_ancestors(ld, [df[c] for c in d_use], d_use, "destination")
            return cls(og, dg, lo, ld, cnt, kind=kind)
        if destination_geo is not None:
            raise HierarchyError("destination_geo given without origin_geo")
        # drop leading whole-space columns (one value on both sides)
        while len(o_lv) > 1 and df[o_lv[0]].nunique() == 1 and df[d_lv[0]].nunique() == 1:
            o_lv, d_lv = o_lv[1:], d_lv[1:]
        # within-level ids -> path strings, so that finest ids are unique geography-wide
        o_paths = _path_frame(df, o_lv)
        d_paths = _path_frame(df, d_lv)
        names = [_common_level_name(o, d) for o, d in zip(o_lv, d_lv, strict=False)]
        if len(set(names)) < len(names):
            names = [str(o) for o in o_lv]
        o_paths.columns = names
        d_paths.columns = names
        if shared_geography:
            both = pd.concat([o_paths, d_paths], ignore_index=True).drop_duplicates()
            og = _short_labels(Geography.from_frame(both, names))
            dg = og
        else:
            og = _short_labels(Geography.from_frame(o_paths.drop_duplicates(), names))
            dg = _short_labels(Geography.from_frame(d_paths.drop_duplicates(), names))
        lo = og.finest_index_of_paths(o_paths[names[-1]], "origin")
        ld = dg.finest_index_of_paths(d_paths[names[-1]], "destination")
        return cls(og, dg, lo, ld, cnt, kind=kind, domain_source="observed",
                   domain_assumption=observed_assumption(observed_domain_public))

    # ------------------------------------------------------------------ TopDownTree protocol
    def _side_refined(self, level: int) -> str:
        """Which side the step ``level -> level + 1`` refines: ``"o"`` or ``"d"``."""
        a, _b = self.level_pairs[level]
        a2, _b2 = self.level_pairs[level + 1]
        return "o" if a2 > a else "d"

    def expand(self, level: int, parent_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every child of every parent key (zero-flow pairs included), with true counts."""
        if not 0 <= level < self.n_levels - 1:
            raise HierarchyError(f"expand: level must be in 0..{self.n_levels - 2}, got {level}")
        a, b = self.level_pairs[level]
        _a2, b2 = self.level_pairs[level + 1]
        pk = np.asarray(parent_keys, dtype=np.int64)
        o, d = np.divmod(pk, self.destination_geo.sizes[b])
        if self._side_refined(level) == "d":
            ptr = self.destination_geo.child_ptr[b]
            kids, offsets = gather_ranges(ptr[d], ptr[d + 1] - ptr[d])
            child_keys = np.repeat(o, np.diff(offsets)) * self.destination_geo.sizes[b2] + kids
        else:
            ptr = self.origin_geo.child_ptr[a]
            kids, offsets = gather_ranges(ptr[o], ptr[o + 1] - ptr[o])
            child_keys = kids * self.destination_geo.sizes[b2] + np.repeat(d, np.diff(offsets))
        return child_keys, offsets, self.counts(level + 1, child_keys)

    def counts(self, level: int, keys: np.ndarray) -> np.ndarray:
        """True counts of the given keys (0 for empty pairs), by binary search."""
        tk, tc = self._keys[level], self._counts[level]
        keys = np.asarray(keys, dtype=np.int64)
        if tk.size == 0:
            return np.zeros(keys.size, np.int64)
        pos = np.minimum(np.searchsorted(tk, keys), tk.size - 1)
        return np.where(tk[pos] == keys, tc[pos], 0).astype(np.int64)

    def nonzero(self, level: int) -> tuple[np.ndarray, np.ndarray]:
        """``(keys, counts)`` of the non-zero pairs of ``level``, sorted by key."""
        return self._keys[level], self._counts[level]

    def parent_of(self, level: int, keys: np.ndarray) -> np.ndarray:
        """Parent keys (level - 1) of the given keys of ``level``."""
        if not 1 <= level < self.n_levels:
            raise HierarchyError(f"parent_of: level must be in 1..{self.n_levels - 1}, got {level}")
        a, b = self.level_pairs[level]
        pa, pb = self.level_pairs[level - 1]
        o, d = np.divmod(np.asarray(keys, dtype=np.int64), self.destination_geo.sizes[b])
        if pa < a:
            o = self.origin_geo.parent[a][o]
        if pb < b:
            d = self.destination_geo.parent[b][d]
        return o * self.destination_geo.sizes[pb] + d

    def level_size(self, level: int) -> int:
        """Number of potential pairs at ``level``."""
        a, b = self.level_pairs[level]
        return int(self.origin_geo.sizes[a]) * int(self.destination_geo.sizes[b])

    def key_names(self, level: int, keys: np.ndarray) -> np.ndarray:
        """``"origin->destination"`` labels."""
        return self.namer.key_names(level, keys)

    def key_columns(self, level: int, keys: np.ndarray) -> dict[str, np.ndarray]:
        """Origin / destination label columns."""
        return self.namer.key_columns(level, keys)

    @property
    def n_nonzero(self) -> int:
        """Number of non-zero finest O/D pairs."""
        return int(self._keys[-1].size)

    def __repr__(self) -> str:
        return (f"ODTree(kind={self.kind!r}, levels={self.n_levels}, areas={self.origin_geo.sizes[-1]}x"
                f"{self.destination_geo.sizes[-1]}, nonzero_pairs={self.n_nonzero}, trips={self.root_count})")


def _trip_counts(df: pd.DataFrame, count: str | None) -> np.ndarray:
    """Trip counts as int64 through the one checked conversion of :mod:`.counts` (exact: no
    float64 on the way; NaN, negative, fractional, non-numeric and beyond-int64 values refused
    naming the row); one per row without a count column."""
    if count is None:
        return np.ones(len(df), np.int64)
    try:
        values, _ = coerce_counts(df[count], df.index, noun="row")
    except CountError as exc:
        raise CountError(f"count column {count!r}: {exc}") from None
    return values


def _align_to_geography(df: pd.DataFrame, cols: list[str], geo: Geography, side: str) -> list[str]:
    """The last ``geo.g`` of ``cols`` (one per geography level); the leading ones must each hold a
    single value (the whole space)."""
    extra = len(cols) - geo.g
    if extra < 0:
        raise HierarchyError(f"{side}: {len(cols)} level columns {cols} but the geography has {geo.g} levels "
                             f"below the root ({geo.level_names[1:]})")
    for c in cols[:extra]:
        if df[c].nunique() > 1:
            raise HierarchyError(f"{side}: column {c!r} holds several values but the geography has only "
                                 f"{geo.g} levels below the whole space ({geo.level_names[1:]})")
    return cols[extra:]


def _common_level_name(o: str, d: str) -> str:
    """``LEVEL2_ORIG``, ``LEVEL2_DEST`` -> ``LEVEL2`` (common prefix), else the origin column."""
    k = 0
    while k < min(len(o), len(d)) and o[k] == d[k]:
        k += 1
    common = o[:k].rstrip("_- .")
    return common or o


def _short_labels(geo: Geography) -> Geography:
    """Replace path labels ("a/b/c") by the last id where that is unique within its level;
    the full finest paths are kept in ``geo.paths`` for lookups."""
    geo.paths = geo.names[-1].copy()
    for lev in range(1, geo.g + 1):
        short = np.array([str(x).rsplit("/", 1)[-1] for x in geo.names[lev]], dtype=object)
        if not pd.Index(short).has_duplicates:
            geo.names[lev] = short
    geo._finest_index = None
    return geo


def _path_frame(df: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    """Each level's id replaced by its path from the coarsest given level ("a/b/c")."""
    out = {}
    acc = None
    for c in cols:
        s = df[c].astype(str)
        acc = s if acc is None else acc + "/" + s
        out[c] = acc
    return pd.DataFrame(out)
