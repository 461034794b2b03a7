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

from typing import Any, Sequence

import numpy as np
import pandas as pd

from hierdp.hierarchy.errors import (
    CountError,
    EmptyInputError,
    HierarchyError,
    MissingValueError,
    UnknownColumnError,
    UnknownNodeError,
)
from hierdp.hierarchy.topdown_tree import gather_children

__all__ = ["Geography", "ODTree"]


class Geography:
    """A nested geographic partition as arrays: levels 0 (whole space) .. g (finest areas).

    Attributes:
        level_names: names of levels 0..g (level 0 is ``root_name``).
        names: per level, an object array of area labels (unique within the level).
        parent: per level l >= 1, int64 index of each area's parent at level l-1.
        child_ptr: per level l < g, CSR pointers: children of area i at level l are the areas
            ``child_ptr[l][i]:child_ptr[l][i+1]`` of level l+1 (areas are sorted by parent).
    """

    def __init__(self, level_names: list[str], names: list[np.ndarray], parent: list[np.ndarray]) -> None:
        self.level_names = level_names
        self.names = names
        self.parent = parent
        self.child_ptr: list[np.ndarray] = []
        for lev in range(self.g):
            p = parent[lev + 1]
            if np.any(np.diff(p) < 0):
                raise HierarchyError(f"geography level {level_names[lev + 1]!r}: areas not sorted by parent")
            ptr = np.zeros(names[lev].size + 1, np.int64)
            np.cumsum(np.bincount(p, minlength=names[lev].size), out=ptr[1:])
            self.child_ptr.append(ptr)
        childless = [lev for lev in range(self.g) if np.any(np.diff(self.child_ptr[lev]) == 0)]
        if childless:
            lev = childless[0]
            i = int(np.flatnonzero(np.diff(self.child_ptr[lev]) == 0)[0])
            raise HierarchyError(
                f"geography: area {names[lev][i]!r} at level {level_names[lev]!r} has no sub-area at "
                f"level {level_names[lev + 1]!r}; every finest area must sit at the last level")
        self._finest_index: pd.Index | None = None
        self.paths: np.ndarray = names[-1]

    @property
    def g(self) -> int:
        """Number of geographic levels below the whole space."""
        return len(self.names) - 1

    @property
    def sizes(self) -> list[int]:
        """Number of areas per level."""
        return [int(n.size) for n in self.names]

    def ancestor(self, level: int, finest_idx: np.ndarray) -> np.ndarray:
        """Index at ``level`` of the ancestors of finest-level areas."""
        idx = np.asarray(finest_idx, dtype=np.int64)
        for lev in range(self.g, level, -1):
            idx = self.parent[lev][idx]
        return idx

    def finest_index(self, ids: Any, what: str) -> np.ndarray:
        """Finest-level index of each area id; raises :class:`UnknownNodeError` naming the first
        id that is not a finest area of this geography."""
        if self._finest_index is None:
            self._finest_index = pd.Index(self.names[self.g].astype(str))
        arr = pd.Series(ids).astype(str).to_numpy()
        pos = self._finest_index.get_indexer(arr)
        if np.any(pos < 0):
            bad = arr[np.flatnonzero(pos < 0)[0]]
            raise UnknownNodeError(f"{what}: area {bad!r} is not a finest-level area of the geography "
                                   f"(level {self.level_names[-1]!r})")
        return pos.astype(np.int64)

    def finest_index_of_paths(self, paths: Any, what: str) -> np.ndarray:
        """Like :meth:`finest_index` but by full path labels (kept in ``self.paths``)."""
        index = pd.Index(np.asarray(self.paths, dtype=object).astype(str))
        arr = pd.Series(paths).astype(str).to_numpy()
        pos = index.get_indexer(arr)
        if np.any(pos < 0):
            bad = arr[np.flatnonzero(pos < 0)[0]]
            raise UnknownNodeError(f"{what}: area {bad!r} is not in the geography")
        return pos.astype(np.int64)

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_frame(cls, df: pd.DataFrame, levels: Sequence[str] | None = None, *,
                   root_name: str = "total") -> "Geography":
        """From a frame with one column per level, coarse to fine (the finest = area ids).

        Rows may repeat. Leading columns holding a single value (the whole space, e.g.
        ``LEVEL0``) are dropped: level 0 is always the implicit root. An area is identified by its path (its ids from the coarsest level),
        so ids need only be unique under their parent; the finest ids must be unique, since
        trips name their finest area only.
        """
        if not isinstance(df, pd.DataFrame):
            raise HierarchyError(f"geography must be a DataFrame or a Hierarchy, got {type(df).__name__}")
        levels = list(df.columns) if levels is None else list(levels)
        if not levels:
            raise EmptyInputError("geography: no level columns given")
        for c in levels:
            if c not in df.columns:
                raise UnknownColumnError(f"geography: unknown column {c!r} (columns: {list(df.columns)})")
        if len(df) == 0:
            raise EmptyInputError("geography: the frame has no rows")
        for c in levels:
            na = df[c].isna().to_numpy()
            if na.any():
                raise MissingValueError(f"geography: column {c!r} has a missing value at row {int(np.flatnonzero(na)[0])}")
        # a leading column with a single value is the whole space, i.e. the implicit root
        root_level = root_name
        while len(levels) > 1 and df[levels[0]].nunique() == 1:
            root_level = str(levels[0])
            levels = levels[1:]
        names: list[np.ndarray] = [np.array([root_name], dtype=object)]
        parents: list[np.ndarray] = [np.zeros(0, np.int64)]
        row_idx = np.zeros(len(df), np.int64)  # index of each row's area at the current level
        for c in levels:
            raw_codes, raw_uniques = pd.factorize(df[c].astype(str), sort=True)
            combo = row_idx * max(len(raw_uniques), 1) + raw_codes
            uniq, inv = np.unique(combo, return_inverse=True)
            par = uniq // max(len(raw_uniques), 1)
            labels = np.asarray(raw_uniques, dtype=object)[uniq % max(len(raw_uniques), 1)]
            names.append(labels)
            parents.append(par.astype(np.int64))
            row_idx = inv.astype(np.int64).ravel()
        finest = names[-1].astype(str)
        if pd.Index(finest).has_duplicates:
            dup = pd.Index(finest)[pd.Index(finest).duplicated()][0]
            raise HierarchyError(f"geography: finest area {dup!r} (column {levels[-1]!r}) lies in two "
                                 "different parent areas; finest ids must be unique")
        # coarser labels must be unique within their level for readable output: make paths
        for lev in range(1, len(names) - 1):
            lab = names[lev].astype(str)
            if pd.Index(lab).has_duplicates:
                names[lev] = np.array([f"{names[lev - 1][p]}/{x}" if lev > 1 else x
                                       for p, x in zip(parents[lev], lab)], dtype=object)
        return cls([root_level] + [str(c) for c in levels], names, parents)

    @classmethod
    def from_hierarchy(cls, h: Any) -> "Geography":
        """From a :class:`~hierdp.hierarchy.Hierarchy` whose leaves all sit at the last level.

        Area labels are the last component of the hierarchy's ``/``-joined path names when that
        is unique within the level, else the full path.
        """
        level_ptr = np.asarray(h.level_ptr, dtype=np.int64)
        parent = np.asarray(h.parent, dtype=np.int64)
        child_ptr = np.asarray(h.child_ptr, dtype=np.int64)
        n_levels = int(h.n_levels)
        full = np.asarray(h.names, dtype=object).astype(str)
        names: list[np.ndarray] = []
        parents: list[np.ndarray] = []
        for lev in range(n_levels):
            lo, hi = int(level_ptr[lev]), int(level_ptr[lev + 1])
            lab = full[lo:hi]
            short = np.array([s.rsplit("/", 1)[-1] for s in lab], dtype=object)
            names.append(short if not pd.Index(short).has_duplicates else lab.astype(object))
            if lev == 0:
                if hi - lo != 1:
                    raise HierarchyError("geography hierarchy must have a single root")
                parents.append(np.zeros(0, np.int64))
            else:
                parents.append(parent[lo:hi] - int(level_ptr[lev - 1]))
            if lev < n_levels - 1 and np.any(child_ptr[lo + 1:hi + 1] - child_ptr[lo:hi] == 0):
                i = int(np.flatnonzero(child_ptr[lo + 1:hi + 1] - child_ptr[lo:hi] == 0)[0])
                raise HierarchyError(f"geography: area {lab[i]!r} at level {lev} has no sub-area; "
                                     "every finest area must sit at the last level")
        return cls([str(x) for x in h.level_names], names, parents)

    @classmethod
    def coerce(cls, geo: Any, levels: Sequence[str] | None = None) -> "Geography":
        """A :class:`Geography` from a Geography, a Hierarchy or a frame of level columns."""
        if isinstance(geo, Geography):
            return geo
        if isinstance(geo, pd.DataFrame):
            return cls.from_frame(geo, levels)
        if all(hasattr(geo, a) for a in ("level_ptr", "child_ptr", "parent", "names")):
            return cls.from_hierarchy(geo)
        raise HierarchyError(f"geography must be a DataFrame, a Hierarchy or a Geography, got {type(geo).__name__}")


class _ODNamer:
    """Labels of O/D tree keys (public geography only)."""

    def __init__(self, tree: "ODTree") -> None:
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
    """

    def __init__(self, origin_geo: Geography, destination_geo: Geography, leaf_orig: np.ndarray,
                 leaf_dest: np.ndarray, leaf_count: np.ndarray, *, kind: str = "destination") -> None:
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
        for a, b in self.level_pairs:
            k = anc_o[a] * destination_geo.sizes[b] + anc_d[b]
            uk, inv = np.unique(k, return_inverse=True)
            c = np.bincount(inv.ravel(), weights=leaf_count, minlength=uk.size)
            c = np.rint(c).astype(np.int64) if c.size else np.zeros(0, np.int64)
            m = c != 0
            self._keys.append(uk[m])
            self._counts.append(c[m])
        self.root_key = 0
        self.root_count = int(leaf_count.sum())
        self.namer = _ODNamer(self)

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
    ) -> "ODTree":
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

        Raises:
            HierarchyError family: unknown column, area not in the geography, negative or
            non-integer counts, empty input.
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
        cnt = _coerce_counts(trips[count] if count is not None else None, len(trips), count)
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
    ) -> "ODTree":
        """Build from the paper's reference layout: ``LEVEL0_ORIG..LEVELg_ORIG,
        LEVEL0_DEST..LEVELg_DEST, COUNT`` (ids unique only within a level).

        A level column with a single value (the whole space, ``LEVEL0_*``) is dropped: level 0
        is always the root. Without explicit geographies, the geography is read from the rows:
        with ``shared_geography`` (default, origins and destinations in the same space and with
        the same level count) it is the union of the origin and destination paths, otherwise one
        per side. Areas absent from the data are then unknown to the tree: pass ``origin_geo`` /
        ``destination_geo`` for the full public partition when it has areas without trips.
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
        # drop leading whole-space columns (one value on both sides)
        while len(o_lv) > 1 and df[o_lv[0]].nunique() == 1 and df[d_lv[0]].nunique() == 1:
            o_lv, d_lv = o_lv[1:], d_lv[1:]
        cnt = _coerce_counts(df[count] if count is not None else None, len(df), count)
        # within-level ids -> path strings, so that finest ids are unique geography-wide
        o_paths = _path_frame(df, o_lv)
        d_paths = _path_frame(df, d_lv)
        names = [_common_level_name(o, d) for o, d in zip(o_lv, d_lv)]
        if len(set(names)) < len(names):
            names = [str(o) for o in o_lv]
        o_paths.columns = names
        d_paths.columns = names
        if origin_geo is not None:
            # explicit public partition(s): trips name their finest ids directly
            og = Geography.coerce(origin_geo)
            dg = og if destination_geo is None else Geography.coerce(destination_geo)
            lo = og.finest_index(df[o_lv[-1]], f"origin column {o_lv[-1]!r}")
            ld = dg.finest_index(df[d_lv[-1]], f"destination column {d_lv[-1]!r}")
            return cls(og, dg, lo, ld, cnt, kind=kind)
        if destination_geo is not None:
            raise HierarchyError("destination_geo given without origin_geo")
        if shared_geography:
            both = pd.concat([o_paths, d_paths], ignore_index=True).drop_duplicates()
            og = _short_labels(Geography.from_frame(both, names))
            dg = og
        else:
            og = _short_labels(Geography.from_frame(o_paths.drop_duplicates(), names))
            dg = _short_labels(Geography.from_frame(d_paths.drop_duplicates(), names))
        lo = og.finest_index_of_paths(o_paths[names[-1]], "origin")
        ld = dg.finest_index_of_paths(d_paths[names[-1]], "destination")
        return cls(og, dg, lo, ld, cnt, kind=kind)

    # ------------------------------------------------------------------ TopDownTree protocol
    def _side_refined(self, level: int) -> str:
        """Which side the step ``level -> level + 1`` refines: ``"o"`` or ``"d"``."""
        a, b = self.level_pairs[level]
        a2, b2 = self.level_pairs[level + 1]
        return "o" if a2 > a else "d"

    def expand(self, level: int, parent_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every child of every parent key (zero-flow pairs included), with true counts."""
        if not 0 <= level < self.n_levels - 1:
            raise HierarchyError(f"expand: level must be in 0..{self.n_levels - 2}, got {level}")
        a, b = self.level_pairs[level]
        a2, b2 = self.level_pairs[level + 1]
        pk = np.asarray(parent_keys, dtype=np.int64)
        o, d = np.divmod(pk, self.destination_geo.sizes[b])
        if self._side_refined(level) == "d":
            ptr = self.destination_geo.child_ptr[b]
            kids, offsets = gather_children(ptr[d], ptr[d + 1] - ptr[d])
            child_keys = np.repeat(o, np.diff(offsets)) * self.destination_geo.sizes[b2] + kids
        else:
            ptr = self.origin_geo.child_ptr[a]
            kids, offsets = gather_children(ptr[o], ptr[o + 1] - ptr[o])
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


def _coerce_counts(col: pd.Series | None, n: int, name: str | None) -> np.ndarray:
    """Trip counts as int64, refusing NaN, negative and non-integer values (naming the row)."""
    if col is None:
        return np.ones(n, np.int64)
    try:
        v = pd.to_numeric(col, errors="raise").to_numpy(dtype=float)
    except (TypeError, ValueError) as exc:
        raise CountError(f"count column {name!r} is not numeric ({exc})") from None
    bad = ~np.isfinite(v)
    if bad.any():
        raise CountError(f"count column {name!r}: missing or infinite value at row {int(np.flatnonzero(bad)[0])}")
    if np.any(v < 0):
        i = int(np.flatnonzero(v < 0)[0])
        raise CountError(f"count column {name!r}: negative count {v[i]:g} at row {i}")
    if np.any(v != np.round(v)):
        i = int(np.flatnonzero(v != np.round(v))[0])
        raise CountError(f"count column {name!r}: non-integer count {v[i]:g} at row {i}")
    return v.astype(np.int64)


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
