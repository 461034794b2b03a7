"""The Hierarchy type: a rooted tree of non-negative integer counts, compiled once to arrays.

Users see a ``networkx.DiGraph`` (edges parent -> child, node attributes ``level`` and
``count``); algorithms use the arrays. Node order is canonical: level by level (BFS) and, inside
a level, grouped by parent in parent order, so that

* level ``l`` is the index range ``level_ptr[l]:level_ptr[l+1]``;
* the children of node ``i`` are the index range ``child_ptr[i]:child_ptr[i+1]``;
* ``parent[i] < i`` for every non-root node, and ``parent[1:]`` is non-decreasing.

The arrays are read-only: a Hierarchy is immutable (:meth:`Hierarchy.with_counts` makes a new one
sharing the structure).
"""

from __future__ import annotations

from typing import Any
from collections.abc import Hashable, Iterable, Mapping, Sequence

import networkx as nx
import numpy as np
import pandas as pd

from hierdp._segments import children_csr
from hierdp.hierarchy import builders
from hierdp.hierarchy._tree import (
    canonical_order,
    check_unique_names,
    child_sums,
    fill_bottom_up,
    object_array,
)
from hierdp.hierarchy.counts import checked_total, coerce_counts
from hierdp.hierarchy.domain import DECLARED, OBSERVED, check_domain_attributes, observed_assumption
from hierdp.hierarchy.errors import (
    CountError,
    CycleError,
    EmptyInputError,
    HierarchyError,
    InconsistentCountError,
    UnknownLevelError,
    UnknownNodeError,
)

def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


class Hierarchy:
    """A rooted tree with a consistent non-negative integer count on every node.

    Build one with :meth:`from_frame`, :meth:`from_edges`, :meth:`from_graph` or
    :meth:`from_arrays`; the constructor is :meth:`from_arrays` (input in any node order).

    Attributes:
        names: object array of node names in index order (``names[0]`` is the root).
        parent: int64 parent index, ``-1`` for the root.
        level: int64 depth (root 0).
        level_ptr: int64 offsets, level ``l`` is ``level_ptr[l]:level_ptr[l+1]``.
        child_ptr: int64 offsets, children of ``i`` are ``child_ptr[i]:child_ptr[i+1]``.
        counts: int64 counts, ``counts[i] == counts[children(i)].sum()`` for internal nodes.
        level_names: one name per level, root level first.
        domain_source: ``"declared"`` when the set of nodes was given as public input (edges, a
            graph, arrays, a ``domain=`` frame), ``"observed"`` when :meth:`from_frame` read it
            from the rows; mechanisms refuse an observed domain nobody declared public (see
            :mod:`hierdp.privacy.domain`).
        domain_assumption: for an observed domain, the user's statement that it is public
            (``from_frame(..., observed_domain_public=True)``), which releases state; else None.
    """

    names: np.ndarray
    parent: np.ndarray
    level: np.ndarray
    level_ptr: np.ndarray
    child_ptr: np.ndarray
    counts: np.ndarray
    is_leaf: np.ndarray
    level_names: list[str]
    domain_source: str = DECLARED
    domain_assumption: str | None = None

    def __init__(
        self,
        names: Iterable[Hashable],
        parent: Sequence[int] | np.ndarray,
        counts: Any = None,
        level_names: Sequence[str] | None = None,
        *,
        check: bool = True,
    ) -> None:
        names_arr = object_array(names)
        n = names_arr.size
        if n == 0:
            raise EmptyInputError("a hierarchy needs at least one node; names is empty")
        par = np.asarray(parent)
        if par.ndim != 1 or par.dtype.kind not in "iu":
            raise HierarchyError(f"parent must be a 1-d integer array, got dtype {par.dtype} and shape {par.shape}")
        par = par.astype(np.int64)
        if par.size != n:
            raise HierarchyError(f"parent has {par.size} entries for {n} names")
        out = (par < -1) | (par >= n)
        if out.any():
            i = int(np.flatnonzero(out)[0])
            raise HierarchyError(f"node {names_arr[i]!r}: parent index {int(par[i])} is out of range 0..{n - 1}")
        self_loop = par == np.arange(n)
        if self_loop.any():
            raise CycleError(f"node {names_arr[int(np.flatnonzero(self_loop)[0])]!r} is its own parent (a cycle)")
        check_unique_names(names_arr, par)
        order, level_ptr = canonical_order(par, names_arr)
        position = np.empty(n, np.int64)
        position[order] = np.arange(n, dtype=np.int64)
        p = par[order]
        new_parent = np.where(p >= 0, position[np.maximum(p, 0)], -1)
        if counts is None:
            values, missing = np.zeros(n, np.int64), np.zeros(n, bool)
        else:
            c = np.asarray(counts) if not isinstance(counts, pd.Series) else counts.to_numpy()
            if c.ndim != 1 or c.size != n:
                raise CountError(f"counts has shape {c.shape} for {n} nodes")
            values, missing = coerce_counts(c, names_arr, allow_missing=True)
            values, missing = values[order], missing[order]
        self._set_structure(names_arr[order], new_parent, level_ptr, level_names)
        self._set_counts(values, missing, check)

    # ------------------------------------------------------------------ construction internals
    @classmethod
    def _from_canonical(
        cls,
        names: np.ndarray,
        parent: np.ndarray,
        level_ptr: np.ndarray,
        level_names: Sequence[str] | None,
        counts: np.ndarray,
        missing: np.ndarray | None = None,
        check: bool = True,
    ) -> Hierarchy:
        """Fast path for builders whose arrays are already in canonical order (not validated
        beyond counts; the builder guarantees the order)."""
        h = cls.__new__(cls)
        h._set_structure(names, parent, level_ptr, level_names)
        h._set_counts(counts, np.zeros(names.size, bool) if missing is None else missing, check)
        return h

    def _set_structure(self, names: np.ndarray, parent: np.ndarray, level_ptr: np.ndarray,
                       level_names: Sequence[str] | None) -> None:
        n = names.size
        n_levels = level_ptr.size - 1
        # in canonical order the children of every node are a contiguous run: the CSR's pointers,
        # shifted by the root (node 0, no parent), are the index ranges themselves
        ptr, _ = children_csr(parent, n)
        child_ptr = ptr + 1
        n_kids = np.diff(ptr)
        self.names = _frozen(names)
        self.parent = _frozen(parent.astype(np.int64, copy=False))
        self.level_ptr = _frozen(level_ptr.astype(np.int64, copy=False))
        self.level = _frozen(np.repeat(np.arange(n_levels, dtype=np.int64), np.diff(level_ptr)))
        self.child_ptr = _frozen(child_ptr)
        self.is_leaf = _frozen(n_kids == 0)
        self.level_names = self._check_level_names(level_names, n_levels)
        self._graph: nx.DiGraph | None = None
        self._index: dict[Hashable, int] | None = None

    @staticmethod
    def _check_level_names(level_names: Sequence[str] | None, n_levels: int) -> list[str]:
        if level_names is None:
            return [f"level{k}" for k in range(n_levels)]
        out = [str(x) for x in level_names]
        if len(out) != n_levels:
            raise HierarchyError(f"level_names {out} has {len(out)} names for {n_levels} levels")
        if len(set(out)) != len(out):
            dup = next(x for x in out if out.count(x) > 1)
            raise HierarchyError(f"level name {dup!r} is used twice in {out}")
        return out

    def _set_counts(self, values: np.ndarray, missing: np.ndarray, check: bool) -> None:
        """Fill missing internal counts bottom-up and (if ``check``) verify the given ones."""
        leaf_missing = missing & self.is_leaf
        if leaf_missing.any():
            i = int(np.flatnonzero(leaf_missing)[0])
            k = int(leaf_missing.sum())
            raise CountError(f"missing count for leaf {self.names[i]!r}" + (f" ({k} leaves lack a count)" if k > 1 else ""))
        values = values.astype(np.int64, copy=True)
        if missing.any():
            # the root holds the sum of all leaves: if that fits, no filled sum can wrap
            checked_total(values[self.is_leaf], what="leaf counts")
            fill_bottom_up(values, self.level_ptr, self.child_ptr, self.is_leaf, missing)
        if check:
            internal = np.flatnonzero(~self.is_leaf)
            sums = child_sums(values, self.child_ptr, internal)
            bad = (values[internal] != sums) & ~missing[internal]
            if bad.any():
                # report the deepest offender: its children are right, so it is the culprit
                cand = internal[bad]
                deepest = int(np.argmax(self.level[cand]))
                i = int(cand[deepest])
                s = int(sums[bad][deepest])
                raise InconsistentCountError(
                    f"node {self.names[i]!r} has count {int(values[i])} but its children sum to {s}"
                    + (f" ({int(bad.sum())} inconsistent parents)" if bad.sum() > 1 else "")
                )
        self.counts = _frozen(values)

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_arrays(
        cls,
        names: Iterable[Hashable],
        parent: Sequence[int] | np.ndarray,
        counts: Any = None,
        level_names: Sequence[str] | None = None,
        *,
        check: bool = True,
    ) -> Hierarchy:
        """Build from a parent-index array in any node order (fast path).

        Args:
            names: unique node names.
            parent: ``parent[i]`` is the index (into ``names``) of node i's parent, -1 for the root.
            counts: one count per node (in the order of ``names``). Leaves need one; internal
                nodes may be NaN/None (then aggregated from their children) and are otherwise
                checked against the sum of their children unless ``check=False``. ``None``:
                all counts zero (a structure only).
            level_names: one name per level, root first (default ``level0``, ``level1``, ...).
        """
        return cls(names, parent, counts, level_names, check=check)

    @classmethod
    def from_frame(cls, df: pd.DataFrame, levels: Sequence[str], count: str | None = None,
                   root_name: str | None = None, *, domain: Any = None,
                   observed_domain_public: bool = False) -> Hierarchy:
        """A hierarchy from a frame with one column per level (coarse to fine).

        Args:
            df: one row per unit (``count=None``) or rows with counts in column ``count``; rows
                with the same path are summed.
            levels: the level columns, coarse to fine. Node names are ``/``-joined paths.
            count: the count column (non-negative integers, checked exactly).
            root_name: the root's name (default ``"total"``, or ``"(total)"`` when a first-level
                value or a level column is spelled ``total``).
            domain: the public domain: a frame of the level columns (or a Geography) listing
                every possible node, e.g. every city of a public gazetteer. The tree then has
                exactly its nodes, those without rows with count 0 (and measured like any
                other by a mechanism); a row outside it is refused (UnknownNodeError).
                ``domain_source`` is ``"declared"``.
            observed_domain_public: without ``domain``, the nodes are read from the rows
                (``domain_source == "observed"``) and mechanisms refuse the tree, since a node
                whose only record is one person would reveal that person; pass True to state
                that the observed set of nodes is public knowledge (the release says so).

        See :func:`hierdp.hierarchy.builders.frame_arrays` for the errors.
        """
        if domain is not None and observed_domain_public:
            raise HierarchyError("give either domain= (a declared public domain) or observed_domain_public=True, "
                                 "not both")
        assumption = observed_assumption(observed_domain_public)
        t = builders.frame_arrays(df, levels, count, root_name=root_name, domain=domain)
        # counts are sums over rows, consistent by construction: skip the check
        h = cls._from_canonical(t.names, t.parent, t.level_ptr, t.level_names, t.counts, check=False)
        h._set_domain(DECLARED if domain is not None else OBSERVED, None if domain is not None else assumption)
        return h

    @classmethod
    def from_edges(cls, edges: Any, counts: Mapping[Hashable, Any] | pd.Series | None = None,
                   level_names: Sequence[str] | None = None, check: bool = True) -> Hierarchy:
        """From (parent, child) pairs or a 2-column frame (a declared domain: the caller gave
        the structure); see :func:`hierdp.hierarchy.builders.edge_arrays`.

        Args:
            counts: counts keyed by node name. Every leaf needs one; internal nodes without one
                are aggregated, those with one are checked unless ``check=False``.
            level_names: one name per level, root first (default ``level0``, ``level1``, ...).
        """
        names, parent, values = builders.edge_arrays(edges, counts)
        return cls(names, parent, values, level_names, check=check)

    @classmethod
    def from_graph(cls, G: nx.DiGraph, level_names: Sequence[str] | None = None,
                   check: bool = True) -> Hierarchy:
        """From a networkx DiGraph with ``count`` node attributes (a declared domain); see
        :func:`hierdp.hierarchy.builders.graph_arrays`. A ``level`` attribute, where present,
        must equal the depth."""
        names, parent, raw, lv_names = builders.graph_arrays(G, level_names)
        h = cls(names, parent, raw, lv_names, check=check)
        builders.check_graph_levels(G, h.names, lambda v: h.level[h.index_of(v)])
        return h

    def _set_domain(self, source: str, assumption: str | None) -> None:
        check_domain_attributes(source, assumption)
        self.domain_source = source
        self.domain_assumption = assumption

    def with_domain_assumption(self, observed_domain_public: bool = True) -> Hierarchy:
        """The same tree with the statement that its observed domain is public (or without it,
        for ``False``); a declared domain needs none and is returned as is."""
        if self.domain_source == DECLARED:
            return self
        h = self.__class__.__new__(self.__class__)
        h.__dict__.update(self.__dict__)
        h._set_domain(OBSERVED, observed_assumption(observed_domain_public))
        return h

    # ------------------------------------------------------------------ sizes and lookup
    @property
    def n(self) -> int:
        """Number of nodes."""
        return int(self.names.size)

    @property
    def n_levels(self) -> int:
        """Number of levels (root level included)."""
        return int(self.level_ptr.size - 1)

    @property
    def n_children(self) -> np.ndarray:
        """Number of children per node."""
        return np.diff(self.child_ptr)

    @property
    def leaves(self) -> np.ndarray:
        """Indices of the leaves, in index order."""
        return np.flatnonzero(self.is_leaf)

    def __len__(self) -> int:
        return self.n

    def __contains__(self, name: object) -> bool:
        try:
            self.index_of(name)
        except (UnknownNodeError, TypeError):
            return False
        return True

    def __repr__(self) -> str:
        sizes = ", ".join(f"{nm}={int(k)}" for nm, k in zip(self.level_names, np.diff(self.level_ptr), strict=False))
        return f"Hierarchy(n={self.n}, total={int(self.counts[0])}, levels: {sizes})"

    def index_of(self, name: Hashable) -> int:
        """Index of a node by name; UnknownNodeError (a KeyError too) when absent."""
        if self._index is None:
            self._index = {nm: i for i, nm in enumerate(self.names)}
        try:
            return self._index[name]
        except KeyError:
            raise UnknownNodeError(f"unknown node {name!r}") from None

    def level_index(self, level: int | str) -> int:
        """Level number from a level name or number (negative numbers count from the leaves)."""
        if isinstance(level, (int, np.integer)) and not isinstance(level, bool):
            k = int(level)
            if -self.n_levels <= k < self.n_levels:
                return k % self.n_levels
            raise UnknownLevelError(f"level {k} out of range: this hierarchy has {self.n_levels} levels")
        try:
            return self.level_names.index(level)  # type: ignore[arg-type]
        except ValueError:
            raise UnknownLevelError(f"unknown level {level!r}; levels are {self.level_names}") from None

    def level_slice(self, level: int | str) -> slice:
        """Index range of a level."""
        k = self.level_index(level)
        return slice(int(self.level_ptr[k]), int(self.level_ptr[k + 1]))

    def level_counts(self, level: int | str) -> pd.Series:
        """Counts of one level as a Series indexed by node name."""
        sl = self.level_slice(level)
        return pd.Series(self.counts[sl].copy(), index=pd.Index(self.names[sl], dtype=object, tupleize_cols=False),
                         name=self.level_names[self.level_index(level)])

    def levels(self) -> dict[str, pd.Series]:
        """``{level name: level_counts(level)}``, root level first."""
        return {nm: self.level_counts(k) for k, nm in enumerate(self.level_names)}

    def children(self, name: Hashable) -> list:
        """Names of a node's children."""
        i = self.index_of(name)
        return list(self.names[self.child_ptr[i]:self.child_ptr[i + 1]])

    def parent_of(self, name: Hashable) -> Hashable | None:
        """Name of a node's parent (None for the root)."""
        p = int(self.parent[self.index_of(name)])
        return None if p < 0 else self.names[p]

    # ------------------------------------------------------------------ counts
    def _node_vector(self, values: Any, what: str) -> np.ndarray:
        """A length-n vector from an array in index order or a Series keyed by node names."""
        if isinstance(values, pd.Series):
            idx = pd.Index(values.index)
            unknown = ~idx.isin(pd.Index(self.names, dtype=object, tupleize_cols=False))
            if unknown.any():
                raise UnknownNodeError(f"{what}: unknown node {idx[np.flatnonzero(unknown)[0]]!r}")
            return values.reindex(pd.Index(self.names, dtype=object, tupleize_cols=False)).to_numpy()
        arr = np.asarray(values)
        if arr.shape != (self.n,):
            raise HierarchyError(f"{what} has shape {arr.shape}, expected ({self.n},)")
        return arr

    def with_counts(self, counts: Any, *, check: bool = True) -> Hierarchy:
        """Same structure, new counts (array in index order, or Series keyed by names).

        Internal nodes may be NaN (aggregated from their children); given ones are checked
        against the sum of their children unless ``check=False``.
        """
        vec = self._node_vector(counts, "counts")
        values, missing = coerce_counts(vec, self.names, allow_missing=True)
        h = self.__class__.__new__(self.__class__)
        h.__dict__.update({k: v for k, v in self.__dict__.items() if k not in ("counts", "_graph")})
        h._graph = None
        h._set_counts(values, missing, check)
        return h

    def aggregate(self, leaf_counts: Any) -> np.ndarray:
        """Full count vector (index order) from leaf counts, summed bottom-up level by level.

        ``leaf_counts``: one value per leaf in the order of :attr:`leaves`, or a length-n vector
        (internal entries ignored), or a Series keyed by leaf names. Integer input gives int64
        (exact); anything else float64 (e.g. noisy leaves for a bottom-up estimate).
        """
        n_leaves = int(self.is_leaf.sum())
        if isinstance(leaf_counts, pd.Series):
            idx = pd.Index(self.names[self.is_leaf], dtype=object, tupleize_cols=False)
            missing = ~idx.isin(leaf_counts.index)
            if missing.any():
                raise CountError(f"missing count for leaf {idx[np.flatnonzero(missing)[0]]!r}")
            x = leaf_counts.reindex(idx).to_numpy()
        else:
            x = np.asarray(leaf_counts)
        if x.ndim != 1 or x.size not in (n_leaves, self.n):
            raise HierarchyError(f"leaf_counts has shape {x.shape}; expected ({n_leaves},) leaves or ({self.n},) nodes")
        dtype = np.int64 if x.dtype.kind in "biu" else np.float64
        out = np.zeros(self.n, dtype)
        if x.size == self.n:
            out[self.is_leaf] = x[self.is_leaf]
        else:
            out[self.is_leaf] = x
        return fill_bottom_up(out, self.level_ptr, self.child_ptr, self.is_leaf, ~self.is_leaf)

    # ------------------------------------------------------------------ views
    @property
    def graph(self) -> nx.DiGraph:
        """The hierarchy as a networkx DiGraph (edges parent -> child; ``level``, ``count``)."""
        if self._graph is None:
            g = nx.DiGraph(level_names=list(self.level_names))  # kept for from_graph round trips
            g.add_nodes_from(
                (nm, {"level": int(lv), "count": int(c)})
                for nm, lv, c in zip(self.names, self.level, self.counts, strict=False)
            )
            g.add_edges_from(zip(self.names[self.parent[1:]], self.names[1:], strict=False))
            self._graph = g
        return self._graph

    def to_frame(self) -> pd.DataFrame:
        """One row per node: ``node, parent, level, level_name, count`` (index order)."""
        par = np.empty(self.n, dtype=object)
        par[0] = None
        par[1:] = self.names[self.parent[1:]]
        return pd.DataFrame({
            "node": pd.Series(self.names, dtype=object),
            "parent": pd.Series(par, dtype=object),
            "level": self.level,
            "level_name": pd.Categorical.from_codes(self.level, self.level_names).astype(object),
            "count": self.counts,
        })
