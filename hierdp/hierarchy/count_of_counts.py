"""Count-of-counts (group-size) hierarchies: paper 001's data, and the dynamic-programming hierarchy built on it.

A *group* (household, taxi, aircraft) is a unit with members; its *size* is its number of members.
For every region ``r`` of a region tree and every size ``k = 1..K``, ``h[r, k]`` is the number of
groups of region ``r`` whose size is ``k``. :class:`CountOfCounts` holds

* the **public structure**: the region tree (a :class:`~hierdp.hierarchy.Hierarchy` whose counts
  are the number of groups per region, ``G_r``), the number of sizes ``K``, and the number of
  groups ``G`` (the root's ``G_r``);
* the **private histograms** ``h`` (``(n_regions, K)`` int64, a view of a size-major array).

What is public and why (paper 001 Lemma 4 and 6, hierdp's decision A2 of the notes): neighbouring
datasets differ by one person added to or removed from an *existing* group, so the list of groups
and the region of each group are public, hence ``G`` and every ``G_r``; sizes are private. The
region domain is public when it was declared (``domain=``, a frame of every possible region path),
or when the user states that the regions observed in the data are public. ``K`` is public when it
is given; the observed maximum size is data-derived, so ``K=None`` needs
``observed_k_public=True`` and the release then says so. Both statements travel as
``domain_source`` / ``domain_assumption`` (see :mod:`hierdp.privacy.domain`).

:meth:`CountOfCounts.dynprog_tree` is the dynamic-programming hierarchy of §6 as a *view*: a dummy root fixed at ``G``
whose ``K`` children are the national counts of each size, each the root of a copy of the region
tree. It holds index arithmetic only (node ``(k, r)`` is ``1 + (k-1) * n_regions + r``); its
``parent`` array and a :class:`~hierdp.models.Problem` are built from the region arrays on demand.

Bad input is refused with the culprit named (:class:`GroupSizeError`, a ``HierarchyError``): a unit
in two regions, a unit listed twice, a size that is not a positive integer, a person in two units,
empty input, ``K`` smaller than an observed size (unless ``top_code=True``: sizes above ``K`` then
fall into the top bucket, which a neighbour move can enter but never leave upwards).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from collections.abc import Sequence

import numpy as np
import pandas as pd

from hierdp.privacy.disclosure import quote_private
from hierdp.hierarchy.core import Hierarchy
from hierdp.hierarchy.domain import DECLARED, OBSERVED
from hierdp.hierarchy.errors import EmptyInputError, HierarchyError, UnknownColumnError

__all__ = ["K_ASSUMPTION", "TOP_CODE_NOTE", "CountOfCounts", "DynProgTree", "GroupSizeError"]

#: what a release states when K is the observed maximum size, declared public by the user
K_ASSUMPTION = "the largest group size K (the observed maximum) is assumed public (declared by the user)"
#: what a release states when sizes above K were put into the top bucket
TOP_CODE_NOTE = "sizes above K are counted in size K (top-coded)"


class GroupSizeError(HierarchyError):
    """Malformed group-size input (the message names the unit, person, row or value)."""


class CountOfCounts:
    """Group-size histograms over a region tree (see the module docstring).

    Build with :meth:`from_units` (one row per group), :meth:`from_persons` (one row per person
    with a unit id) or :meth:`from_histograms` (leaf histograms on a region tree you declare).

    Attributes:
        regions: the region tree; ``regions.counts`` are the public group totals ``G_r``.
        K: number of sizes (cells ``1..K``).
        by_size: ``(K, n_regions)`` int64, ``by_size[k-1, r]`` = groups of size k in region r.
        top_coded: whether sizes above ``K`` were counted in size ``K``.
        k_source: ``"declared"`` (K given) or ``"observed"`` (the observed maximum).
        domain_source, domain_assumption: see :mod:`hierdp.privacy.domain` (an observed region
            domain or an observed K makes the whole structure ``"observed"``).
    """

    def __init__(self, regions: Hierarchy, by_size: np.ndarray, *, K: int, k_source: str = DECLARED,
                 observed_k_public: bool = False, top_coded: bool = False) -> None:
        by_size = np.asarray(by_size, dtype=np.int64)
        _check_leaves_at_one_depth(regions)
        if by_size.shape != (K, regions.n):
            raise GroupSizeError(f"by_size must have shape (K={K}, n_regions={regions.n}), got {by_size.shape}")
        if np.any(by_size < 0):
            raise GroupSizeError("group counts must be non-negative")
        self.regions = regions
        self.K = int(K)
        by_size.setflags(write=False)
        self.by_size = by_size
        self.top_coded = bool(top_coded)
        self.k_source = k_source
        assumptions = []
        source = DECLARED
        if regions.domain_source == OBSERVED:
            source = OBSERVED
            if regions.domain_assumption:
                assumptions.append(regions.domain_assumption)
            else:
                assumptions = None  # type: ignore[assignment]
        if k_source == OBSERVED:
            source = OBSERVED
            if observed_k_public and assumptions is not None:
                assumptions.append(K_ASSUMPTION)
            else:
                assumptions = None  # type: ignore[assignment]
        self.domain_source = source
        self.domain_assumption = "; ".join(assumptions) if source == OBSERVED and assumptions else None
        if source == OBSERVED and self.domain_assumption is None:
            missing = []
            if regions.domain_source == OBSERVED and not regions.domain_assumption:
                missing.append("the region domain (pass domain= or observed_domain_public=True)")
            if k_source == OBSERVED and not observed_k_public:
                missing.append("K (pass K= or observed_k_public=True)")
            self._missing_public = missing
        else:
            self._missing_public = []

    # ------------------------------------------------------------------ views
    @property
    def h(self) -> np.ndarray:
        """``(n_regions, K)`` view: ``h[r, k-1]`` groups of size ``k`` in region ``r``."""
        return self.by_size.T

    @property
    def n_regions(self) -> int:
        """Number of regions (all levels)."""
        return int(self.regions.n)

    @property
    def G(self) -> int:
        """The public number of groups (every level sums to it)."""
        return int(self.regions.counts[0])

    @property
    def group_totals(self) -> np.ndarray:
        """Public groups per region ``G_r`` (int64, one per region)."""
        return np.asarray(self.regions.counts, dtype=np.int64)

    @property
    def n_persons(self) -> int:
        """People in all groups (sizes top-coded at K count as K)."""
        return int((self.by_size[:, 0] * np.arange(1, self.K + 1)).sum())

    @property
    def n_levels(self) -> int:
        """Region levels including the root (the paper's L is ``n_levels``: every level is noised)."""
        return int(self.regions.n_levels)

    @property
    def sizes(self) -> np.ndarray:
        """The cells ``1..K``."""
        return np.arange(1, self.K + 1, dtype=np.int64)

    @property
    def assumptions(self) -> tuple[str, ...]:
        """What a release must state beyond the neighbour relation."""
        out: list[str] = []
        if self.domain_assumption:
            out.append(self.domain_assumption)
        if self.top_coded:
            out.append(TOP_CODE_NOTE)
        return tuple(out)

    def level_regions(self, level: int) -> np.ndarray:
        """Region indices of one level."""
        lp = self.regions.level_ptr
        return np.arange(lp[level], lp[level + 1], dtype=np.int64)

    def histogram_frame(self) -> pd.DataFrame:
        """``(region x size)`` frame of the true histograms (for small data)."""
        return pd.DataFrame(self.h, index=pd.Index(self.regions.names, name="region"),
                            columns=pd.Index(self.sizes, name="size"))

    def dynprog_tree(self) -> DynProgTree:
        """The dynamic-programming hierarchy of §6 (a view, see :class:`DynProgTree`)."""
        return DynProgTree(self)

    def __repr__(self) -> str:
        return (f"CountOfCounts(regions={self.n_regions:,}, levels={self.n_levels}, K={self.K:,}, "
                f"G={self.G:,}, persons={self.n_persons:,})")

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_histograms(cls, regions: Hierarchy, leaf_histograms: Any, *, K: int | None = None,
                        observed_k_public: bool = False) -> CountOfCounts:
        """From a region tree and one histogram per *leaf* region (``(n_leaves, K)``, leaves in
        the tree's order); inner regions are summed. The region tree's counts are replaced by
        the group totals. Used by the synthetic generators (whose structure is declared)."""
        hist = np.asarray(leaf_histograms)
        if hist.ndim != 2:
            raise GroupSizeError(f"leaf_histograms must be 2-D (leaves x sizes), got shape {hist.shape}")
        if not np.issubdtype(hist.dtype, np.integer):
            if not np.all(np.isfinite(hist)) or np.any(hist != np.round(hist)):
                raise GroupSizeError("leaf histograms must hold integers")
            hist = hist.astype(np.int64)
        if np.any(hist < 0):
            raise GroupSizeError("leaf histograms must be non-negative")
        leaves = np.flatnonzero(regions.n_children == 0)
        if hist.shape[0] != leaves.size:
            raise GroupSizeError(f"leaf_histograms has {hist.shape[0]} rows for {leaves.size} leaf regions")
        k_obs = _largest_size(hist)
        k_source = DECLARED
        if K is None:
            K, k_source = max(k_obs, 1), OBSERVED
        K = _check_k(K)
        if k_obs > K:
            raise GroupSizeError(f"K={K} is smaller than an observed size ({k_obs})")
        full = np.zeros((regions.n, K), np.int64)
        full[leaves, :hist.shape[1]] = hist[:, :K] if hist.shape[1] >= K else hist
        by_size = _aggregate(regions, full.T.copy())
        totals = by_size.sum(axis=0)
        tree = regions.with_counts(totals) if not np.array_equal(regions.counts, totals) else regions
        return cls(tree, by_size, K=K, k_source=k_source, observed_k_public=observed_k_public)

    @classmethod
    def from_units(cls, df: pd.DataFrame, *, unit: str, levels: Sequence[str], size: str, K: int | None = None,
                   domain: Any = None, observed_domain_public: bool = False, observed_k_public: bool = False,
                   top_code: bool = False, root_name: str | None = None) -> CountOfCounts:
        """From one row per group: a unit id, its region (one column per level, coarse to fine)
        and its size (a positive integer).

        Args:
            unit, levels, size: column names.
            K: the number of sizes (public input). ``None``: the observed maximum, which is
                data-derived: pass ``observed_k_public=True`` to state it is public.
            domain: a frame of the level columns listing every possible region (public); without
                it the regions are read from the rows and ``observed_domain_public=True`` states
                that they are public.
            top_code: count sizes above ``K`` in size ``K`` (else they are refused).
            root_name: name of the root region.

        Raises:
            GroupSizeError: a unit listed twice or in two regions, a bad size, ``K`` below an
                observed size; the hierarchy errors of :meth:`Hierarchy.from_frame`.
        """
        levels = [levels] if isinstance(levels, str) else list(levels)
        _need_columns(df, [unit, size, *levels])
        if len(df) == 0:
            raise EmptyInputError("no rows: a group-size release needs at least one group")
        _check_unit_regions(df, unit, levels, per_person=False)
        sizes = _positive_sizes(df[size], size)
        return cls._build(df, levels, df[unit], sizes, K=K, domain=domain,
                          observed_domain_public=observed_domain_public, observed_k_public=observed_k_public,
                          top_code=top_code, root_name=root_name, rows=df.index.to_numpy())

    @classmethod
    def from_persons(cls, df: pd.DataFrame, *, unit: str, levels: Sequence[str], person: str | None = None,
                     K: int | None = None, domain: Any = None, observed_domain_public: bool = False,
                     observed_k_public: bool = False, top_code: bool = False,
                     root_name: str | None = None) -> CountOfCounts:
        """From one row per person: a unit id and the unit's region; a unit's size is its number
        of rows. With ``person=`` (a person id column) a person listed in two units, or twice, is
        refused. Other arguments as :meth:`from_units`.
        """
        levels = [levels] if isinstance(levels, str) else list(levels)
        cols = [unit, *levels] + ([person] if person is not None else [])
        _need_columns(df, cols)
        if len(df) == 0:
            raise EmptyInputError("no rows: a group-size release needs at least one person")
        if person is not None:
            _check_persons(df, person, unit)
        _check_unit_regions(df, unit, levels, per_person=True)
        codes, uniques = pd.factorize(df[unit], sort=False)
        first = np.full(uniques.size, -1, np.int64)
        order = np.arange(len(df), dtype=np.int64)[::-1]
        first[codes[order]] = order  # the first row of each unit
        units = df.iloc[first].reset_index(drop=True)
        sizes = np.bincount(codes, minlength=uniques.size).astype(np.int64)
        return cls._build(units, levels, units[unit], sizes, K=K, domain=domain,
                          observed_domain_public=observed_domain_public, observed_k_public=observed_k_public,
                          top_code=top_code, root_name=root_name, rows=df.index.to_numpy()[first])

    @classmethod
    def _build(cls, units: pd.DataFrame, levels: list[str], unit_ids: pd.Series, sizes: np.ndarray, *,
               K: int | None, domain: Any, observed_domain_public: bool, observed_k_public: bool,
               top_code: bool, root_name: str | None, rows: Any) -> CountOfCounts:
        """``rows``: each unit's row label in the caller's input (messages name rows, not values)."""
        k_source = DECLARED
        if K is None:
            if top_code:
                raise GroupSizeError("top_code=True needs K= (the public top size)")
            K, k_source = int(sizes.max()), OBSERVED
        K = _check_k(K)
        too_big = sizes > K
        if too_big.any() and not top_code:
            i = int(np.flatnonzero(too_big)[0])
            # name the row, not the unit or its size (private data; HIERDP_SHOW_DATA=1 quotes them)
            shown = quote_private(f"unit {_show(unit_ids.iloc[i])!r} of size {int(sizes[i])}", verbatim=True)
            raise GroupSizeError(f"K={K} is smaller than an observed size: the unit at row {_show(rows[i])!r}{shown} "
                                 f"is larger ({int(too_big.sum())} unit(s) above K; pass a larger K (--max-size), or "
                                 "top_code=True (--top-code) to count them in size K)")
        sizes = np.minimum(sizes, K)
        regions = Hierarchy.from_frame(units[levels], levels, root_name=root_name, domain=domain,
                                       observed_domain_public=observed_domain_public)
        leaf_names = regions.names[regions.level_ptr[-2]:]
        paths = units[levels[0]].astype(str).to_numpy(dtype=object)
        for c in levels[1:]:
            paths = paths + "/" + units[c].astype(str).to_numpy(dtype=object)
        leaf = pd.Index(leaf_names).get_indexer(paths)
        if np.any(leaf < 0):  # cannot happen for frames Hierarchy.from_frame accepted
            raise GroupSizeError(f"the unit at row {_show(rows[int(np.flatnonzero(leaf < 0)[0])])!r}: region not found")
        leaf = leaf + int(regions.level_ptr[-2])
        by_size = np.zeros((K, regions.n), np.int64)
        np.add.at(by_size, (sizes - 1, leaf), 1)
        by_size = _aggregate(regions, by_size)
        # the note follows the declared option, never the data: whether some unit exceeds K is private
        # (one person joining a size-K unit flips it)
        return cls(regions, by_size, K=K, k_source=k_source, observed_k_public=observed_k_public,
                   top_coded=bool(top_code))


# ---------------------------------------------------------------------------------- the dynamic-programming tree
@dataclass(frozen=True)
class DynProgTree:
    """The dynamic-programming hierarchy of paper 001 §6 over a :class:`CountOfCounts` (a view).

    Node ``0`` is the dummy root (fixed at ``G``); node ``(k, r)`` (size ``k`` in 1..K, region
    ``r``) is ``1 + (k - 1) * n_regions + r``. Its level is ``1 + level(r)``; the children of
    ``(k, r)`` are ``(k, r')`` for the region children ``r'`` of ``r``; the root's children are
    the national nodes ``(k, root)``. Size subtrees are independent except through the root.
    """

    data: CountOfCounts

    @property
    def n(self) -> int:
        """Number of nodes: ``1 + K * n_regions``."""
        return 1 + self.data.K * self.data.n_regions

    def node(self, k: Any, r: Any) -> Any:
        """Index of node ``(k, r)`` (vectorized)."""
        return 1 + (np.asarray(k, dtype=np.int64) - 1) * self.data.n_regions + np.asarray(r, dtype=np.int64)

    @property
    def parent(self) -> np.ndarray:
        """The parent array (int64, -1 for the dummy root), built from the region arrays."""
        n, K = self.data.n_regions, self.data.K
        rp = np.asarray(self.data.regions.parent, dtype=np.int64)
        base = 1 + np.arange(K, dtype=np.int64)[:, None] * n
        par = np.where(rp[None, :] < 0, 0, base + rp[None, :])
        return np.concatenate([[-1], par.ravel()])

    @property
    def level(self) -> np.ndarray:
        """Level of every node (root 0, national 1, ...)."""
        rl = np.asarray(self.data.regions.level, dtype=np.int64) + 1
        return np.concatenate([[0], np.tile(rl, self.data.K)])

    def values(self, by_size: np.ndarray | None = None) -> np.ndarray:
        """Node vector: ``G`` at the root, then ``by_size`` (``(K, n_regions)``, default the true
        counts) in node order."""
        b = self.data.by_size if by_size is None else np.asarray(by_size)
        return np.concatenate([[self.data.G], b.ravel()]).astype(b.dtype if b.dtype.kind == "f" else np.int64)

    def to_by_size(self, values: np.ndarray) -> np.ndarray:
        """The ``(K, n_regions)`` array of a node vector (root dropped)."""
        return np.asarray(values)[1:].reshape(self.data.K, self.data.n_regions)

    # ------------------------------------------------------------------ the post-order chain (§9.2)
    def chain_order(self) -> np.ndarray:
        """Node indices in the post-order chain of §9.2 (size-major; the root last)."""
        post = _region_postorder(self.data.regions)
        n, K = self.data.n_regions, self.data.K
        by_pos = np.empty(n, np.int64)
        by_pos[post] = np.arange(n, dtype=np.int64)
        return np.concatenate([(1 + np.arange(K, dtype=np.int64)[:, None] * n + by_pos[None, :]).ravel(), [0]])

    def chain_equal_edges(self) -> np.ndarray:
        """For chain positions ``1..N-1``: True where the node at position ``i`` is the parent of
        the node at ``i - 1`` (an "=" edge, C8), False for a "≥" edge (C9)."""
        order = self.chain_order()
        par = self.parent
        return par[order[:-1]] == order[1:]


# ---------------------------------------------------------------------------------- helpers
def _check_leaves_at_one_depth(regions: Hierarchy) -> None:
    """Refuse a ragged region tree (leaves at different depths): the group-size mechanisms release
    one histogram per region and level, and a level's histograms sum to the G groups only when
    every group sits in a region of every level - a leaf above the last level would drop its
    groups from the levels below it (and the chain DP's per-level equalities would not hold).
    Public structure only: refused before any noise."""
    leaf_levels = np.unique(regions.level[regions.n_children == 0])
    if leaf_levels.size > 1:
        names = regions.level_names
        shallow = int(leaf_levels[0])
        raise GroupSizeError(
            f"the region tree is ragged: it has leaf regions at level {shallow} ({names[shallow]!r}) above the last "
            f"level {int(leaf_levels[-1])} ({names[int(leaf_levels[-1])]!r}); group-size releases need every leaf at "
            "the last level (each level's histograms sum to the G groups): give a region that has no subdivision "
            "one child region standing for itself at each level below it")


def _show(x: Any) -> Any:
    """A numpy scalar as the plain Python value (so messages read ``3``, not ``np.int64(3)``)."""
    return x.item() if isinstance(x, np.generic) else x


def _largest_size(hist: np.ndarray) -> int:
    nz = np.flatnonzero(hist.sum(axis=0) > 0)
    return int(nz[-1]) + 1 if nz.size else 0


def _check_k(K: Any) -> int:
    if isinstance(K, bool) or not isinstance(K, (int, np.integer)):
        if isinstance(K, float) and K.is_integer() and K >= 1:
            return int(K)
        raise GroupSizeError(f"K must be a positive integer (the largest group size), got {K!r}")
    if K < 1:
        raise GroupSizeError(f"K must be a positive integer (the largest group size), got {K!r}")
    return int(K)


def _aggregate(regions: Hierarchy, by_size: np.ndarray) -> np.ndarray:
    """Sum leaf columns up the region tree, one level at a time (deepest first)."""
    parent = np.asarray(regions.parent, dtype=np.int64)
    lp = np.asarray(regions.level_ptr, dtype=np.int64)
    for lev in range(regions.n_levels - 1, 0, -1):
        idx = np.arange(lp[lev], lp[lev + 1])
        # children are contiguous and grouped by parent in canonical order: reduce by parent runs
        par = parent[idx]
        starts = np.flatnonzero(np.concatenate([[True], par[1:] != par[:-1]]))
        sums = np.add.reduceat(by_size[:, idx], starts, axis=1)
        by_size[:, par[starts]] += sums
    return by_size


def _region_postorder(regions: Hierarchy) -> np.ndarray:
    """Post-order position of every region (children in index order), vectorized by level:
    ``post = pre + subtree_size - 1 - depth``."""
    parent = np.asarray(regions.parent, dtype=np.int64)
    lp = np.asarray(regions.level_ptr, dtype=np.int64)
    n = parent.size
    size = np.ones(n, np.int64)
    for lev in range(regions.n_levels - 1, 0, -1):
        idx = np.arange(lp[lev], lp[lev + 1])
        np.add.at(size, parent[idx], size[idx])
    pre = np.zeros(n, np.int64)
    depth = np.asarray(regions.level, dtype=np.int64)
    for lev in range(1, regions.n_levels):
        idx = np.arange(lp[lev], lp[lev + 1])
        par = parent[idx]
        # exclusive cumulative subtree sizes of earlier siblings (siblings are contiguous)
        csum = np.cumsum(size[idx])
        starts = np.flatnonzero(np.concatenate([[True], par[1:] != par[:-1]]))
        group_start = np.repeat(starts, np.diff(np.concatenate([starts, [idx.size]])))
        before = csum - size[idx] - np.where(group_start > 0, csum[group_start - 1], 0)
        pre[idx] = pre[par] + 1 + before
    return pre + size - 1 - depth


def _need_columns(df: pd.DataFrame, cols: Sequence[str]) -> None:
    if not isinstance(df, pd.DataFrame):
        raise GroupSizeError(f"expected a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise UnknownColumnError(f"column {missing[0]!r} is not in the data (columns: {list(df.columns)})")
    for c in cols:
        bad = df[c].isna().to_numpy()
        if bad.any():
            raise GroupSizeError(f"column {c!r} has a missing value at row {_show(df.index[int(np.flatnonzero(bad)[0])])!r}")


def _rows_text(df: pd.DataFrame, mask: np.ndarray) -> str:
    """``"rows 3 and 7"``: the first two rows of ``mask`` (messages name rows, not values)."""
    rows = df.index[mask][:2].tolist()
    return f"rows {_show(rows[0])!r} and {_show(rows[1])!r}"


def _check_unit_regions(df: pd.DataFrame, unit: str, levels: list[str], *, per_person: bool) -> None:
    """A unit id maps to one region path (and, for unit rows, to one row). Messages name the rows;
    the unit id and its regions are quoted only with ``HIERDP_SHOW_DATA=1``."""
    ids = df[unit]
    dup = ids.duplicated(keep=False).to_numpy()
    if not dup.any():
        return
    sub = df.loc[dup, [unit, *levels]]
    distinct = sub.drop_duplicates()
    clash = distinct[unit].duplicated(keep=False).to_numpy()
    if clash.any():
        u = distinct[unit].to_numpy()[clash][0]
        first_two = distinct.index[distinct[unit].to_numpy() == u][:2]
        paths = distinct.loc[first_two, levels].astype(str).agg("/".join, axis=1).tolist()
        mask = df.index.isin(first_two)
        raise GroupSizeError(f"{_rows_text(df, mask)} put one unit in two regions"
                             f"{quote_private(f'unit {_show(u)!r} in {paths[0]!r} and {paths[1]!r}', verbatim=True)}")
    if not per_person:
        u = ids.to_numpy()[dup][0]
        raise GroupSizeError(f"{_rows_text(df, ids.to_numpy() == u)} list the same unit{quote_private(_show(u), 'unit')}; "
                             "give one row per group (or use from_persons for one row per person)")


def _check_persons(df: pd.DataFrame, person: str, unit: str) -> None:
    pair = df[[person, unit]]
    dup = pair[person].duplicated(keep=False).to_numpy()
    if not dup.any():
        return
    sub = pair[dup].drop_duplicates()
    clash = sub[person].duplicated(keep=False).to_numpy()
    if clash.any():
        p = sub[person].to_numpy()[clash][0]
        first_two = sub.index[sub[person].to_numpy() == p][:2]
        units = sub.loc[first_two, unit].tolist()
        raise GroupSizeError(f"{_rows_text(df, df.index.isin(first_two))} put one person in two units"
                             f"{quote_private(f'person {_show(p)!r} in {_show(units[0])!r} and {_show(units[1])!r}', verbatim=True)}")
    p = pair[person].to_numpy()[dup][0]
    raise GroupSizeError(f"{_rows_text(df, pair[person].to_numpy() == p)} list the same person twice in one unit"
                         f"{quote_private(_show(p), 'person')}")


def _positive_sizes(col: pd.Series, name: str) -> np.ndarray:
    if col.dtype == bool:
        raise GroupSizeError(f"size column {name!r} holds booleans, not group sizes")
    vals = pd.to_numeric(col, errors="coerce")
    bad = vals.isna().to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise GroupSizeError(f"non-numeric size {_show(col.iloc[i])!r} in column {name!r}, row {_show(col.index[i])!r}")
    arr = vals.to_numpy(dtype=float)
    bad = ~np.isfinite(arr) | (arr != np.round(arr)) | (arr <= 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise GroupSizeError(f"size {_show(col.iloc[i])!r} in column {name!r}, row {_show(col.index[i])!r} is not a positive "
                             "integer (a group has at least one member)")
    if np.any(arr >= 2.0 ** 53):
        i = int(np.flatnonzero(arr >= 2.0 ** 53)[0])
        raise GroupSizeError(f"size {col.iloc[i]!r} in column {name!r}, row {col.index[i]!r} is too large")
    return arr.astype(np.int64)
