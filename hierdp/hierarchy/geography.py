"""A nested geographic partition (the public structure of origin/destination trees).

A :class:`Geography` lists every area of every level, coarse to fine, as arrays: per level the
area labels, the parent of each area and CSR pointers to its sub-areas. It is the *declared
domain* of an O/D tree: areas without any trip are part of it (and are measured like any other),
and nothing in it is read from private rows unless the caller built it that way (then its
``domain_source`` says ``"observed"``).
"""

from __future__ import annotations

from typing import Any
from collections.abc import Sequence

import numpy as np
import pandas as pd

from hierdp.privacy.disclosure import quote_private
from hierdp._segments import children_csr
from hierdp.hierarchy.errors import (
    EmptyInputError,
    HierarchyError,
    MissingValueError,
    UnknownColumnError,
    UnknownNodeError,
)

__all__ = ["Geography"]


def free_root_name(preferred: str, taken: set[str]) -> str:
    """``preferred`` unless it is in ``taken``, else ``"(preferred)"``, ``"(preferred 2)"``, ...

    The hidden root of a tree built from level columns gets a name; a level value or column
    that happens to be spelled ``total`` must not clash with it.
    """
    if preferred not in taken:
        return preferred
    k = 1
    while True:
        cand = f"({preferred})" if k == 1 else f"({preferred} {k})"
        if cand not in taken:
            return cand
        k += 1


class Geography:
    """A nested geographic partition as arrays: levels 0 (whole space) .. g (finest areas).

    Attributes:
        level_names: names of levels 0..g (level 0 is the root).
        names: per level, an object array of area labels (unique within the level).
        ids: per level, the areas' own ids as strings (as given, before any path labelling;
            ``ids[l][i]`` is unique only under its parent).
        parent: per level l >= 1, int64 index of each area's parent at level l-1.
        child_ptr: per level l < g, CSR pointers: children of area i at level l are the areas
            ``child_ptr[l][i]:child_ptr[l][i+1]`` of level l+1 (areas are sorted by parent).
        domain_source: ``"declared"`` (given as public structure) or ``"observed"`` (derived
            from the rows of private data); see :mod:`hierdp.privacy.domain`.
        domain_assumption: for an observed geography, the user's statement that it is public.
    """

    def __init__(self, level_names: list[str], names: list[np.ndarray], parent: list[np.ndarray], *,
                 ids: list[np.ndarray] | None = None, domain_source: str = "declared",
                 domain_assumption: str | None = None) -> None:
        self.level_names = level_names
        self.names = names
        self.parent = parent
        self.ids = ids if ids is not None else [np.asarray(n, dtype=object).astype(str) for n in names]
        self.domain_source = domain_source
        self.domain_assumption = domain_assumption
        self.child_ptr: list[np.ndarray] = []
        for lev in range(self.g):
            p = parent[lev + 1]
            if np.any(np.diff(p) < 0):
                raise HierarchyError(f"geography level {level_names[lev + 1]!r}: areas not sorted by parent")
            self.child_ptr.append(children_csr(p, names[lev].size)[0])
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

    def __repr__(self) -> str:
        sizes = ", ".join(f"{nm}={k}" for nm, k in zip(self.level_names, self.sizes, strict=False))
        return f"Geography({sizes}; domain {self.domain_source})"

    def ancestor(self, level: int, finest_idx: np.ndarray) -> np.ndarray:
        """Index at ``level`` of the ancestors of finest-level areas."""
        idx = np.asarray(finest_idx, dtype=np.int64)
        for lev in range(self.g, level, -1):
            idx = self.parent[lev][idx]
        return idx

    def finest_index(self, ids: Any, what: str) -> np.ndarray:
        """Finest-level index of each area id; raises :class:`UnknownNodeError` naming the first
        id that is not a finest area of this geography (and its row)."""
        if self._finest_index is None:
            self._finest_index = pd.Index(self.names[self.g].astype(str))
        arr = pd.Series(ids).astype(str).to_numpy()
        pos = self._finest_index.get_indexer(arr)
        if np.any(pos < 0):
            k = int(np.flatnonzero(pos < 0)[0])
            n_bad = int(np.sum(pos < 0))
            # name the row, not the area it names (a trip's origin or destination is private)
            raise UnknownNodeError(f"{what}: row {k} names an area{quote_private(arr[k])} that is not a finest-level "
                                   f"area of the geography (level {self.level_names[-1]!r})"
                                   + (f"; {n_bad} rows name unknown areas" if n_bad > 1 else ""))
        return pos.astype(np.int64)

    def finest_index_of_paths(self, paths: Any, what: str) -> np.ndarray:
        """Like :meth:`finest_index` but by full path labels (kept in ``self.paths``)."""
        index = pd.Index(np.asarray(self.paths, dtype=object).astype(str))
        arr = pd.Series(paths).astype(str).to_numpy()
        pos = index.get_indexer(arr)
        if np.any(pos < 0):
            k = int(np.flatnonzero(pos < 0)[0])
            raise UnknownNodeError(f"{what}: row {k} names an area{quote_private(arr[k])} that is not in the geography")
        return pos.astype(np.int64)

    def check_ancestors(self, finest_idx: np.ndarray, level_ids: Sequence[Any], columns: Sequence[str],
                        what: str) -> None:
        """Refuse rows whose coarser ids disagree with the geography.

        ``level_ids[k]`` holds, per row, the id the data gives at geography level ``k + 1``
        (``len(level_ids) == g``, the last being the finest ids already looked up as
        ``finest_idx``). A row that puts an area under another parent than the public geography
        does would otherwise be silently re-filed.
        """
        for k in range(self.g - 1):
            lev = k + 1
            want = self.ids[lev][self.ancestor(lev, finest_idx)]
            got = pd.Series(level_ids[k]).astype(str).to_numpy()
            bad = got != want
            if np.any(bad):
                i = int(np.flatnonzero(bad)[0])
                fin = self.names[self.g][finest_idx[i]]
                shown = quote_private(f"area {str(fin)!r} in {got[i]!r}, the geography's {want[i]!r}", verbatim=True)
                raise HierarchyError(
                    f"{what}: row {i} puts its area under another parent (column {columns[k]!r}) than the "
                    f"geography does (level {self.level_names[lev]!r}){shown}")

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_frame(cls, df: pd.DataFrame, levels: Sequence[str] | None = None, *,
                   root_name: str = "total") -> Geography:
        """From a frame with one column per level, coarse to fine (the finest = area ids).

        Rows may repeat. Leading columns holding a single value (the whole space, e.g.
        ``LEVEL0``) are dropped: level 0 is always the implicit root. An area is identified by
        its path (its ids from the coarsest level), so ids need only be unique under their
        parent; the finest ids must be unique, since trips name their finest area only. Ids are
        compared as strings (``01001`` and ``1001`` are different areas).
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
        root_level = free_root_name(root_name, {str(c) for c in levels})
        while len(levels) > 1 and df[levels[0]].nunique() == 1:
            root_level = str(levels[0])
            levels = levels[1:]
        names: list[np.ndarray] = [np.array([root_name], dtype=object)]
        ids: list[np.ndarray] = [np.array([root_name], dtype=object)]
        parents: list[np.ndarray] = [np.zeros(0, np.int64)]
        row_idx = np.zeros(len(df), np.int64)  # index of each row's area at the current level
        for c in levels:
            raw_codes, raw_uniques = pd.factorize(df[c].astype(str), sort=True)
            combo = row_idx * max(len(raw_uniques), 1) + raw_codes
            uniq, inv = np.unique(combo, return_inverse=True)
            par = uniq // max(len(raw_uniques), 1)
            labels = np.asarray(raw_uniques, dtype=object)[uniq % max(len(raw_uniques), 1)]
            names.append(labels)
            ids.append(labels.copy())
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
                                       for p, x in zip(parents[lev], lab, strict=False)], dtype=object)
        return cls([root_level] + [str(c) for c in levels], names, parents, ids=ids)

    @classmethod
    def from_hierarchy(cls, h: Any) -> Geography:
        """From a :class:`~hierdp.hierarchy.Hierarchy` whose leaves all sit at the last level.

        Area labels are the last component of the hierarchy's ``/``-joined path names when that
        is unique within the level, else the full path. The hierarchy's ``domain_source`` and
        ``domain_assumption`` carry over (a hierarchy read from private rows stays observed).
        """
        level_ptr = np.asarray(h.level_ptr, dtype=np.int64)
        parent = np.asarray(h.parent, dtype=np.int64)
        child_ptr = np.asarray(h.child_ptr, dtype=np.int64)
        n_levels = int(h.n_levels)
        full = np.asarray(h.names, dtype=object).astype(str)
        names: list[np.ndarray] = []
        ids: list[np.ndarray] = []
        parents: list[np.ndarray] = []
        for lev in range(n_levels):
            lo, hi = int(level_ptr[lev]), int(level_ptr[lev + 1])
            lab = full[lo:hi]
            short = np.array([s.rsplit("/", 1)[-1] for s in lab], dtype=object)
            names.append(short if not pd.Index(short).has_duplicates else lab.astype(object))
            ids.append(short)
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
        return cls([str(x) for x in h.level_names], names, parents, ids=ids,
                   domain_source=getattr(h, "domain_source", "declared"),
                   domain_assumption=getattr(h, "domain_assumption", None))

    @classmethod
    def coerce(cls, geo: Any, levels: Sequence[str] | None = None) -> Geography:
        """A :class:`Geography` from a Geography, a Hierarchy or a frame of level columns."""
        if isinstance(geo, Geography):
            return geo
        if isinstance(geo, pd.DataFrame):
            return cls.from_frame(geo, levels)
        if all(hasattr(geo, a) for a in ("level_ptr", "child_ptr", "parent", "names")):
            return cls.from_hierarchy(geo)
        raise HierarchyError(f"geography must be a DataFrame, a Hierarchy or a Geography, got {type(geo).__name__}")
