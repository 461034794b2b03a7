"""The declarative, array-based post-processing problem.

A :class:`Problem` describes one optimization over a forest of nodes:

* structure: ``parent[i]`` is the index of node ``i``'s parent, ``-1`` for a root;
* every node with children satisfies consistency: ``value[i] == sum(value[children(i)])``;
* some nodes are *fixed* (an already released parent in TopDown, an invariant such as a state
  total): ``fixed[i]`` holds their value, ``NaN`` marks a free node;
* the objective is a distance of the free nodes to noisy ``target`` values (``NaN`` target: the
  node has no objective term): ``l2`` = sum w_i (y_i - x_i)^2, ``l1`` = sum w_i |y_i - x_i|,
  ``linf`` = sum over *groups* of max_{i in group} w_i |y_i - x_i|. A group is the set of free nodes
  sharing their nearest fixed ancestor (or tree root when none is fixed): fixed nodes separate
  independent sub-problems, so a TopDown level is one group per parent and each group keeps its
  own optimum;
* optional integrality, non-negativity, per-node bounds;
* vectorized blocks (CSR, :mod:`hierdp.models.blocks`): linear constraint rows
  (:meth:`Problem.add_constraints`; :meth:`Problem.add_linear` adds one named row;
  :meth:`Problem.add_monotone_chains` adds cumulative chains) and query-term objectives
  (:meth:`Problem.add_query_terms`);
* hooks that receive the Pyomo model built from the problem, so users may add components.

Arrays are read-only once the problem is built (``fixed``, bounds, ...): change them through
:meth:`Problem.fix` and :meth:`Problem.add_bounds`, which re-validate. Bad input is refused when it
is stated, with a :class:`ProblemError` naming the node or row.

Everything is numpy; a TopDown level with 10^6 children is one Problem.
"""

from __future__ import annotations

from typing import Any
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence

import numpy as np

from hierdp._segments import depth_by_doubling, follow_to_terminal
from hierdp.errors import HierdpError, exact_number
from hierdp.models.blocks import (
    KIND_CUMULATIVE,
    KIND_LINEAR,
    LinearConstraint,
    LinearRows,
    QueryTerms,
    _Chunk,
    _ChunkStore,
    as_csr_block,
    chain_block,
    chain_pairs,
    names_of,
    row_vector,
)

OBJECTIVES = ("l2", "l1", "linf")

#: every problem feature a plug-in may or may not honour (see ``Capabilities.features``)
FEATURES = frozenset({"weights", "bounds", "linear_constraints", "cumulative", "query_terms", "pyomo_hooks",
                      "free_sign", "missing_targets"})

__all__ = ["FEATURES", "OBJECTIVES", "LinearConstraint", "Problem", "ProblemError"]


class ProblemError(HierdpError, ValueError):
    """A problem is malformed (shapes, structure, unknown nodes, inconsistent fixed values)."""


class Problem:
    """A post-processing optimization problem over a forest of nodes (see module docstring).

    Args:
        parent: integer array, ``parent[i]`` is node i's parent index or -1 for a root (floats are
            accepted only when they hold integers).
        target: float array of noisy values; NaN means "no objective term".
        fixed: float array with the fixed value of fixed nodes and NaN for free nodes
            (default: all free).
        objective: ``"l2"``, ``"l1"`` or ``"linf"``.
        weights: non-negative per-node objective weights (default 1).
        integer: require integer values.
        nonnegative: require values >= 0.
        lower, upper: per-node bounds (default unbounded; ``-inf``/``inf`` mean no bound, NaN is
            refused).
        names: optional node names (hashable), used by :meth:`add_linear` and friends.

    Raises:
        ProblemError: malformed input, naming the node: a cycle, a parent index that is not an
            integer in range, NaN bounds, a fixed value outside its node's bounds, non-integer
            fixed values in an integer problem, fixed values that the tree cannot reconcile (a
            node fixed at 10 whose subtree is fixed to sum to 9), ...
    """

    def __init__(
        self,
        parent: Sequence[int] | np.ndarray,
        target: Sequence[float] | np.ndarray,
        *,
        fixed: Sequence[float] | np.ndarray | None = None,
        objective: str = "l2",
        weights: Sequence[float] | np.ndarray | None = None,
        integer: bool = True,
        nonnegative: bool = True,
        lower: Sequence[float] | np.ndarray | None = None,
        upper: Sequence[float] | np.ndarray | None = None,
        names: Sequence[Hashable] | np.ndarray | None = None,
    ) -> None:
        self.parent = _frozen(_parent_vec(parent))
        n = self.parent.size
        self.target = _frozen(_float_vec(target, n, "target", np.nan))
        self.fixed = _frozen(_float_vec(fixed, n, "fixed", np.nan))
        self.weights = _frozen(_float_vec(weights, n, "weights", 1.0))
        self.lower = _frozen(_float_vec(lower, n, "lower", -np.inf))
        self.upper = _frozen(_float_vec(upper, n, "upper", np.inf))
        if objective not in OBJECTIVES:
            raise ProblemError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
        self._objective = objective
        self._integer = bool(integer)
        self._nonnegative = bool(nonnegative)
        self.names = None if names is None else _frozen(np.array(names, dtype=object).ravel())
        if self.names is not None and self.names.size != n:
            raise ProblemError(f"names has {self.names.size} entries for {n} nodes")
        self._rows = _ChunkStore()
        self._queries = _ChunkStore()
        self.pyomo_hooks: list[Callable[[Any, Problem], None]] = []
        self._name_index: dict[Hashable, int] | None = None
        self._cache: dict[str, Any] = {}
        self._validate()

    # ------------------------------------------------------------------ scalar settings
    @property
    def objective(self) -> str:
        """``"l2"``, ``"l1"`` or ``"linf"``."""
        return self._objective

    @objective.setter
    def objective(self, value: str) -> None:
        if value not in OBJECTIVES:
            raise ProblemError(f"objective must be one of {OBJECTIVES}, got {value!r}")
        self._objective = value

    @property
    def integer(self) -> bool:
        """Whether values must be integers."""
        return self._integer

    @integer.setter
    def integer(self, value: bool) -> None:
        self._integer = bool(value)
        self._validate()

    @property
    def nonnegative(self) -> bool:
        """Whether values must be non-negative."""
        return self._nonnegative

    @nonnegative.setter
    def nonnegative(self, value: bool) -> None:
        self._nonnegative = bool(value)
        self._validate()

    # ------------------------------------------------------------------ construction helpers
    @classmethod
    def from_groups(
        cls,
        values: Sequence[float] | np.ndarray,
        offsets: Sequence[int] | np.ndarray,
        totals: Sequence[float] | np.ndarray,
        *,
        objective: str = "linf",
        integer: bool = True,
        nonnegative: bool = True,
        weights: np.ndarray | None = None,
    ) -> Problem:
        """A TopDown level: group g's children ``values[offsets[g]:offsets[g+1]]`` must sum to
        the fixed ``totals[g]``.

        Node layout: the G parents come first (indices ``0..G-1``, fixed), then the children in
        the order of ``values`` (indices ``G..G+N-1``), so ``solution.values[G:]`` are the
        children.
        """
        values = np.asarray(values, dtype=float).ravel()
        offsets = np.asarray(offsets, dtype=np.int64).ravel()
        totals = np.asarray(totals, dtype=float).ravel()
        g = totals.size
        if offsets.size != g + 1 or offsets[0] != 0 or offsets[-1] != values.size:
            raise ProblemError("offsets must have len(totals)+1 entries, start at 0, end at len(values)")
        if np.any(np.diff(offsets) < 0):
            raise ProblemError("offsets must be non-decreasing")
        sizes = np.diff(offsets)
        parent = np.concatenate([np.full(g, -1, np.int64), np.repeat(np.arange(g, dtype=np.int64), sizes)])
        target = np.concatenate([np.full(g, np.nan), values])
        fixed = np.concatenate([totals, np.full(values.size, np.nan)])
        w = None
        if weights is not None:
            w = np.concatenate([np.ones(g), np.asarray(weights, dtype=float).ravel()])
        return cls(parent, target, fixed=fixed, objective=objective, integer=integer,
                   nonnegative=nonnegative, weights=w)

    @classmethod
    def from_hierarchy(
        cls,
        hierarchy: Any,
        target: Any,
        *,
        fix_root: bool = True,
        fix_levels: Iterable[str | int] = (),
        objective: str = "l2",
        integer: bool = True,
        nonnegative: bool = True,
        weights: Any = None,
    ) -> Problem:
        """The whole-tree problem of a hierarchy (duck-typed on its arrays).

        ``hierarchy`` needs ``parent`` (-1 for roots), ``names``, ``counts`` (true counts, used
        only for the nodes fixed here), and for ``fix_levels`` ``level`` (level per node) and
        ``level_names``: :class:`hierdp.hierarchy.Hierarchy` has them all.

        Args:
            target: noisy values: an array in node order, or a mapping / ``pandas.Series`` keyed
                by node name (nodes without a value, or NaN: no objective term).
            fix_root: fix every root at its true count (an invariant such as a national total).
            fix_levels: level names or numbers whose nodes are fixed at their true counts (the
                Census "invariants" pattern). Fixing at true counts is outside any DP guarantee:
                the release must state it.
            objective, integer, nonnegative: as for :class:`Problem`.
            weights: per-node objective weights (array in node order, or keyed by name).
        """
        parent = np.asarray(hierarchy.parent, dtype=np.int64)
        names = np.asarray(hierarchy.names, dtype=object)
        n = parent.size
        tgt = _node_vector(target, names, "target")
        w = None if weights is None else _node_vector(weights, names, "weights")
        fixed = np.full(n, np.nan)
        counts = np.asarray(hierarchy.counts)
        pick = np.zeros(n, bool)
        if fix_root:
            pick |= parent < 0
        levels = list(fix_levels)
        if levels:
            level = np.asarray(hierarchy.level, dtype=np.int64)
            level_names = list(getattr(hierarchy, "level_names", []))
            for lv in levels:
                if isinstance(lv, (int, np.integer)) and not isinstance(lv, bool):
                    k = int(lv)
                elif lv in level_names:
                    k = level_names.index(lv)
                else:
                    raise ProblemError(f"unknown level {lv!r} in fix_levels; levels: {level_names}")
                if not 0 <= k <= int(level.max()):
                    raise ProblemError(f"level {lv!r} out of range 0..{int(level.max())}")
                pick |= level == k
        fixed[pick] = counts[pick].astype(float)
        return cls(parent, tgt, fixed=fixed, objective=objective, weights=w, integer=integer,
                   nonnegative=nonnegative, names=names)

    # ------------------------------------------------------------------ node lookup
    def index_of(self, node: Hashable) -> int:
        """Index of a node given by name (or by integer index when the problem has no names)."""
        if self.names is None:
            if isinstance(node, (int, np.integer)) and not isinstance(node, bool) and 0 <= int(node) < self.n:
                return int(node)
            raise ProblemError(f"unknown node {node!r}: this problem has no names; use indices 0..{self.n - 1}")
        if self._name_index is None:
            index = {name: i for i, name in enumerate(self.names)}
            if len(index) != self.n:
                raise ProblemError("node names are not unique")
            self._name_index = index
        try:
            return self._name_index[node]
        except KeyError:
            raise ProblemError(f"unknown node {node!r}") from None
        except TypeError:
            raise ProblemError(f"unknown node {node!r} (not hashable)") from None

    # ------------------------------------------------------------------ constraint rows
    def add_constraints(
        self,
        matrix: Any,
        lower: float | Sequence[float] | np.ndarray | None = None,
        upper: float | Sequence[float] | np.ndarray | None = None,
        *,
        nodes: Sequence[Hashable] | np.ndarray | None = None,
        name: str | None = None,
    ) -> Problem:
        """Add the rows ``lower <= matrix @ y <= upper`` (vectorized; returns ``self``).

        Args:
            matrix: ``scipy.sparse`` matrix or dense array, one row per constraint, one column per
                node (or per entry of ``nodes``).
            lower, upper: scalars or one value per row (default ``-inf`` / ``inf``; every row needs
                a finite side).
            nodes: the nodes of ``matrix``'s columns (names, or an integer array of indices).
            name: block name; row ``i`` is reported as ``name[i]``.
        """
        columns = None if nodes is None else names_of(nodes, self.index_of, self.n)
        try:
            mat = as_csr_block(matrix, self.n, f"constraint block {name or len(self._rows.chunks)}", columns)
        except ValueError as exc:
            raise ProblemError(str(exc)) from None
        m = mat.shape[0]
        label = name or f"block {len(self._rows.chunks)}"
        lo = _row_bounds(lower, m, -np.inf, f"{label}: lower")
        hi = _row_bounds(upper, m, np.inf, f"{label}: upper")
        _check_rows(mat, lo, hi, label)
        self._rows.append(_Chunk(mat.indptr.astype(np.int64), mat.indices.astype(np.int64), mat.data.copy(),
                                 lo, hi, name, single=False, kind=KIND_LINEAR))
        self._changed()
        return self

    def add_linear(
        self,
        coeffs: Mapping[Hashable, float],
        *,
        lower: float = -np.inf,
        upper: float = np.inf,
        name: str | None = None,
    ) -> Problem:
        """Add ``lower <= sum(coef * node) <= upper`` over named nodes; returns ``self``.

        Sugar for a one-row :meth:`add_constraints`.
        """
        if not coeffs:
            raise ProblemError("a linear constraint needs at least one node")
        lower, upper = float(lower), float(upper)
        if np.isnan(lower) or np.isnan(upper):
            raise ProblemError(f"linear constraint {name or ''}: NaN bound")
        if not (lower <= upper):
            raise ProblemError(f"linear constraint {name or ''}: lower {lower} > upper {upper}")
        if np.isinf(lower) and np.isinf(upper):
            raise ProblemError("a linear constraint needs a finite lower or upper bound")
        idx = np.array([self.index_of(k) for k in coeffs], dtype=np.int64)
        coef = np.array([float(v) for v in coeffs.values()], dtype=float)
        if not np.all(np.isfinite(coef)):
            raise ProblemError("linear constraint coefficients must be finite")
        order = np.argsort(idx, kind="stable")
        idx, coef = idx[order], coef[order]
        uniq, start = np.unique(idx, return_index=True)
        coef = np.add.reduceat(coef, start)
        keep = coef != 0
        if not keep.any():
            raise ProblemError(f"linear constraint {name or ''}: every coefficient is zero")
        self._rows.append(_Chunk(np.array([0, int(keep.sum())], np.int64), uniq[keep], coef[keep],
                                 np.array([lower]), np.array([upper]), name, single=True, kind=KIND_LINEAR))
        self._changed()
        return self

    def add_monotone_chains(
        self,
        chains: Any,
        *,
        increasing: bool = True,
        name: str | None = "chain",
    ) -> Problem:
        """Cumulative (monotone) chains: along every chain, values never decrease (or increase).

        Each consecutive pair ``(a, b)`` of a chain adds the two-term row ``y[b] - y[a] >= 0``
        (``<= 0`` when ``increasing=False``): the cumulative counts of paper 001 (``c[r, k]`` is
        monotone in ``k``). Vectorized for a 2-D integer array of node indices (one chain per row);
        a sequence of sequences of names or indices is also accepted. Returns ``self``.
        """
        earlier, later = chain_pairs(chains, self.index_of)
        both = np.concatenate([earlier, later])
        if both.size and (both.min() < 0 or both.max() >= self.n):
            raise ProblemError(f"chain node index out of range 0..{self.n - 1}")
        if np.any(earlier == later):
            raise ProblemError(f"chain repeats node {int(earlier[np.flatnonzero(earlier == later)[0]])} "
                               "consecutively")
        if earlier.size == 0:
            return self
        indptr, indices, data = chain_block(earlier, later)
        m = earlier.size
        lo = np.zeros(m) if increasing else np.full(m, -np.inf)
        hi = np.full(m, np.inf) if increasing else np.zeros(m)
        self._rows.append(_Chunk(indptr, indices, data, lo, hi, name, single=False, kind=KIND_CUMULATIVE))
        self._changed()
        return self

    @property
    def constraints(self) -> LinearRows:
        """Every user linear row as one CSR block (:class:`~hierdp.models.blocks.LinearRows`)."""
        if "rows" not in self._cache:
            self._cache["rows"] = LinearRows(self._rows, self.n)
        return self._cache["rows"]

    @property
    def n_constraints(self) -> int:
        """Number of user linear rows."""
        return self._rows.n_rows

    @property
    def linear(self) -> list[LinearConstraint]:
        """The user rows as :class:`LinearConstraint` objects (a read-only view; for small problems)."""
        if "linear" not in self._cache:
            self._cache["linear"] = self.constraints.as_list() if self._rows.chunks else []
        return self._cache["linear"]

    # ------------------------------------------------------------------ query terms
    def add_query_terms(
        self,
        matrix: Any,
        target: float | Sequence[float] | np.ndarray,
        weights: float | Sequence[float] | np.ndarray | None = None,
        *,
        nodes: Sequence[Hashable] | np.ndarray | None = None,
        name: str | None = None,
    ) -> Problem:
        """Objective terms on linear queries: term q is ``w_q * dist(matrix[q] @ y, target[q])``.

        ``dist`` is the problem's objective: squared (``l2``), absolute (``l1``); for ``linf``
        the whole block is one group, contributing the largest ``w_q |a_q . y - t_q|``. Fixed
        nodes may appear (they are constants). Typical uses: prefix sums, marginals, a
        histogram's total (paper 001 §8, the Census TopDown's query terms). Returns ``self``.
        """
        columns = None if nodes is None else names_of(nodes, self.index_of, self.n)
        label = name or f"query block {len(self._queries.chunks)}"
        try:
            mat = as_csr_block(matrix, self.n, label, columns)
        except ValueError as exc:
            raise ProblemError(str(exc)) from None
        m = mat.shape[0]
        try:
            t = row_vector(target, m, np.nan, f"{label}: target")
            w = row_vector(weights, m, 1.0, f"{label}: weights")
        except ValueError as exc:
            raise ProblemError(str(exc)) from None
        if not np.all(np.isfinite(t)):
            raise ProblemError(f"{label}: term {int(np.flatnonzero(~np.isfinite(t))[0])} has a non-finite target")
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            bad = int(np.flatnonzero(~np.isfinite(w) | (w < 0))[0])
            raise ProblemError(f"{label}: term {bad} has weight {w[bad]} (weights must be finite and >= 0)")
        empty = np.diff(mat.indptr) == 0
        if empty.any():
            raise ProblemError(f"{label}: term {int(np.flatnonzero(empty)[0])} has no node")
        self._queries.append(_Chunk(mat.indptr.astype(np.int64), mat.indices.astype(np.int64), mat.data.copy(),
                                    t, w, name, single=False))
        self._changed()
        return self

    @property
    def queries(self) -> QueryTerms:
        """Every query term as one CSR block (:class:`~hierdp.models.blocks.QueryTerms`)."""
        if "queries" not in self._cache:
            self._cache["queries"] = QueryTerms(self._queries, self.n)
        return self._cache["queries"]

    @property
    def n_query_terms(self) -> int:
        """Number of query terms."""
        return self._queries.n_rows

    # ------------------------------------------------------------------ changes
    def add_bounds(self, node: Hashable, lower: float | None = None, upper: float | None = None) -> Problem:
        """Tighten the bounds of one node; returns ``self``."""
        i = self.index_of(node)
        lo, hi = self.lower.copy(), self.upper.copy()
        if lower is not None:
            if np.isnan(lower):
                raise ProblemError(f"node {node!r}: lower bound is NaN")
            lo[i] = max(lo[i], float(lower))
        if upper is not None:
            if np.isnan(upper):
                raise ProblemError(f"node {node!r}: upper bound is NaN")
            hi[i] = min(hi[i], float(upper))
        if lo[i] > hi[i]:
            raise ProblemError(f"node {node!r}: lower bound {lo[i]} > upper bound {hi[i]}")
        old = self.lower, self.upper
        self.lower, self.upper = _frozen(lo), _frozen(hi)
        self._revalidate(old=("lower", "upper"), values=old)
        return self

    def fix(self, node: Hashable | Sequence[Hashable] | np.ndarray, value: float | Sequence[float] | np.ndarray
            ) -> Problem:
        """Fix one node (or several: a sequence of nodes and one value each) at ``value``; returns ``self``."""
        if isinstance(node, (list, np.ndarray)):  # tuples may be node names
            idx = names_of(node, self.index_of, self.n)
            vals = np.broadcast_to(np.asarray(value, dtype=float), idx.shape)
        else:
            idx = np.array([self.index_of(node)])
            vals = np.asarray(value, dtype=float).reshape(1)
        if not np.all(np.isfinite(vals)):
            bad = int(idx[np.flatnonzero(~np.isfinite(vals))[0]])
            raise ProblemError(f"{self.label(bad)}: fixed value must be finite")
        fixed = self.fixed.copy()
        fixed[idx] = vals
        old = (self.fixed,)
        self.fixed = _frozen(fixed)
        self._revalidate(old=("fixed",), values=old)
        return self

    def with_target(self, target: Sequence[float] | np.ndarray) -> Problem:
        """A copy of this problem with other targets: the same structure, fixed values, bounds,
        weights, rows, query terms, hooks and names (the blocks are shared: they are read-only)."""
        p = Problem(self.parent, target, fixed=self.fixed, objective=self.objective, weights=self.weights,
                    integer=self.integer, nonnegative=self.nonnegative, lower=self.lower, upper=self.upper,
                    names=self.names)
        p._rows = _ChunkStore(list(self._rows.chunks))
        p._queries = _ChunkStore(list(self._queries.chunks))
        p.pyomo_hooks = list(self.pyomo_hooks)
        return p

    def on_pyomo_model(self, hook: Callable[[Any, Problem], None]) -> Problem:
        """Register ``hook(model, problem)``, called on the Pyomo model before it is solved.

        Only solvers that build a Pyomo model (``highs`` through Pyomo) can honour hooks; the
        others refuse such a problem.
        """
        self.pyomo_hooks.append(hook)
        return self

    def _changed(self) -> None:
        # rows and query terms do not change the tree: keep the structural caches
        for key in ("rows", "linear", "queries"):
            self._cache.pop(key, None)

    def _revalidate(self, old: tuple[str, ...], values: tuple[np.ndarray, ...]) -> None:
        """Validate after a change; restore the previous arrays if the change is refused."""
        try:
            self._validate()
        except ProblemError:
            for attr, arr in zip(old, values, strict=True):
                setattr(self, attr, arr)
            self._cache.clear()
            raise

    # ------------------------------------------------------------------ derived structure
    @property
    def n(self) -> int:
        """Number of nodes."""
        return int(self.parent.size)

    @property
    def is_fixed(self) -> np.ndarray:
        """Boolean mask of fixed nodes."""
        return ~np.isnan(self.fixed)

    @property
    def is_free(self) -> np.ndarray:
        """Boolean mask of free nodes."""
        return np.isnan(self.fixed)

    @property
    def effective_lower(self) -> np.ndarray:
        """Lower bounds including non-negativity."""
        return np.maximum(self.lower, 0.0) if self.nonnegative else self.lower

    @property
    def has_custom_bounds(self) -> bool:
        """True when some node has a bound beyond non-negativity."""
        return bool(np.any(np.isfinite(self.lower)) or np.any(np.isfinite(self.upper)))

    @property
    def has_weights(self) -> bool:
        """True when weights are not all one on free nodes with a target."""
        m = self.is_free & ~np.isnan(self.target)
        return bool(np.any(self.weights[m] != 1.0))

    def features(self) -> frozenset[str]:
        """The features of this problem a plug-in must honour (a subset of :data:`FEATURES`)."""
        f = set()
        if self.has_weights:
            f.add("weights")
        if self.has_custom_bounds:
            f.add("bounds")
        if self._rows.chunks:
            kinds = {c.kind for c in self._rows.chunks}
            if KIND_LINEAR in kinds:
                f.add("linear_constraints")
            if KIND_CUMULATIVE in kinds:
                f.add("cumulative")
        if self._queries.chunks:
            f.add("query_terms")
        if self.pyomo_hooks:
            f.add("pyomo_hooks")
        if not self.nonnegative:
            f.add("free_sign")
        if np.any(np.isnan(self.target[self.is_free])):
            f.add("missing_targets")
        return frozenset(f)

    def magnitude(self) -> float:
        """Largest finite absolute value among targets, fixed values, bounds and row bounds."""
        parts = [self.target, self.fixed, self.lower, self.upper]
        if self._rows.chunks:
            parts += [self.constraints.lower, self.constraints.upper]
        if self._queries.chunks:
            parts.append(self.queries.target)
        big = 0.0
        for a in parts:
            fin = np.abs(a[np.isfinite(a)])
            if fin.size:
                big = max(big, float(fin.max()))
        return big

    def children_csr(self) -> tuple[np.ndarray, np.ndarray]:
        """``(child_ptr, child_idx)``: children of node i are ``child_idx[child_ptr[i]:child_ptr[i+1]]``."""
        if "csr" not in self._cache:
            has_parent = self.parent >= 0
            kids = np.flatnonzero(has_parent)
            order = np.argsort(self.parent[kids], kind="stable")
            child_idx = kids[order]
            counts = np.bincount(self.parent[kids], minlength=self.n)
            child_ptr = np.zeros(self.n + 1, np.int64)
            np.cumsum(counts, out=child_ptr[1:])
            self._cache["csr"] = (child_ptr, child_idx)
        return self._cache["csr"]

    @property
    def n_children(self) -> np.ndarray:
        """Number of children per node."""
        ptr, _ = self.children_csr()
        return np.diff(ptr)

    def depth(self) -> np.ndarray:
        """Depth of every node (roots 0), by pointer doubling (``O(n log depth)``, no step cap)."""
        if "depth" not in self._cache:
            self._cache["depth"] = _frozen(depth_by_doubling(self.parent))
        return self._cache["depth"]

    def _anchor(self) -> np.ndarray:
        """Per node: the first node at or above it (itself excluded unless terminal) that is fixed
        or a root; for a free node that is its group's anchor."""
        if "anchor" not in self._cache:
            idx = np.arange(self.n, dtype=np.int64)
            terminal = self.is_fixed | (self.parent < 0)
            self._cache["anchor"] = follow_to_terminal(np.where(terminal, idx, self.parent))
        return self._cache["anchor"]

    def groups(self) -> np.ndarray:
        """Group id per node for the ``linf`` objective (-1 for fixed nodes).

        A free node's group is its nearest fixed ancestor, or its tree root when no ancestor is
        fixed (pointer doubling: exact at any depth). Ids are ``0..G-1`` in increasing order of
        the anchor node (see :meth:`group_anchors`).
        """
        if "groups" not in self._cache:
            free = self.is_free
            g = np.full(self.n, -1, np.int64)
            anchors = np.zeros(0, np.int64)
            if free.any():
                anchors, inv = np.unique(self._anchor()[free], return_inverse=True)
                g[free] = inv.ravel()
            self._cache["groups"] = _frozen(g)
            self._cache["group_anchors"] = _frozen(anchors)
        return self._cache["groups"]

    def group_anchors(self) -> np.ndarray:
        """Anchor node of every group: its nearest fixed ancestor, or its free root."""
        self.groups()
        return self._cache["group_anchors"]

    @property
    def n_groups(self) -> int:
        """Number of linf groups."""
        return int(self.group_anchors().size)

    @property
    def structure(self) -> str:
        """``"level"`` when the problem is a batch of independent TopDown groups, else ``"tree"``.

        Level: every free node is a leaf whose parent is fixed, and every fixed node with a free
        child has only free children.
        """
        if "structure" not in self._cache:
            free = self.is_free
            nch = self.n_children
            ok = bool(free.any())
            if ok:
                ok = not np.any(free & (nch > 0))
                ok = ok and not np.any(free & (self.parent < 0))
                ok = ok and bool(np.all(~free[self.parent[free]]))
            if ok:
                has_parent = self.parent >= 0
                par_of_free = np.zeros(self.n, bool)
                par_of_free[self.parent[free]] = True
                kid_fixed = has_parent & ~free
                ok = not np.any(par_of_free[self.parent[kid_fixed]])
            self._cache["structure"] = "level" if ok else "tree"
        return self._cache["structure"]

    def level_groups(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """For a level problem: ``(parents, offsets, child_index, totals)``.

        ``child_index[offsets[g]:offsets[g+1]]`` are the (free) children of fixed node
        ``parents[g]`` whose fixed value is ``totals[g]``. Fast paths operate on
        ``target[child_index]`` with these offsets.
        """
        if self.structure != "level":
            raise ProblemError("not a level problem (free nodes must be leaves under fixed parents)")
        if "level_groups" not in self._cache:
            free_idx = np.flatnonzero(self.is_free)
            par = self.parent[free_idx]
            order = np.argsort(par, kind="stable")
            child_index = free_idx[order]
            parents, counts = np.unique(par[order], return_counts=True)
            offsets = np.zeros(parents.size + 1, np.int64)
            np.cumsum(counts, out=offsets[1:])
            totals = self.fixed[parents]
            self._cache["level_groups"] = (parents, offsets, child_index, totals)
        return self._cache["level_groups"]

    def determined_values(self) -> np.ndarray:
        """Value of every node the fixed nodes determine (fixed nodes, and free nodes whose
        children are all determined: their sum); NaN elsewhere."""
        if "determined" not in self._cache:
            self._validate()
        return self._cache["determined"]

    # ------------------------------------------------------------------ evaluation
    def objective_value(self, values: np.ndarray) -> float:
        """The objective of this problem at ``values`` (a full length-n vector), query terms included."""
        values = np.asarray(values, dtype=float)
        m = self.is_free & ~np.isnan(self.target)
        dev = np.abs(values[m] - self.target[m]) * self.weights[m]
        total = 0.0
        if self.objective == "l2":
            total = float(np.sum(self.weights[m] * (values[m] - self.target[m]) ** 2))
        elif self.objective == "l1":
            total = float(dev.sum())
        else:
            g = self.groups()[m]
            if g.size:
                per_group = np.zeros(int(g.max()) + 1)
                np.maximum.at(per_group, g, dev)
                total = float(per_group.sum())
        if self._queries.chunks:
            q = self.queries
            d = q.deviations(values)
            if self.objective == "l2":
                total += float(np.sum(q.weight * d * d))
            elif self.objective == "l1":
                total += float(np.sum(q.weight * np.abs(d)))
            else:
                per_block = np.zeros(q.n_blocks)
                np.maximum.at(per_block, q.block, q.weight * np.abs(d))
                total += float(per_block.sum())
        return total

    def violations(self, values: np.ndarray, tol: float | None = None) -> list[str]:
        """Every constraint of this problem violated by ``values`` (empty list: feasible).

        Integer problems are checked exactly, in integers (values, fixed nodes, bounds, sums,
        rows); continuous ones within ``tol`` (default 1e-9) relative to each check's magnitude.
        See :mod:`hierdp.models.feasibility`.
        """
        from hierdp.models.feasibility import violations

        return violations(self, values, tol)

    def label(self, i: int) -> str:
        """How messages name node ``i``: ``node 'name'`` when the problem has names, else ``node i``."""
        return f"node {self.names[i]!r}" if self.names is not None else f"node {int(i)}"

    _label = label  # removed when highs/ortools move to label() (end of this change)

    # ------------------------------------------------------------------ validation
    def _validate(self) -> None:
        n = self.n
        p = self.parent
        if n == 0:
            raise ProblemError("a problem needs at least one node")
        if np.any((p < -1) | (p >= n)):
            i = int(np.flatnonzero((p < -1) | (p >= n))[0])
            raise ProblemError(f"node {i}: parent index {int(p[i])} out of range")
        if np.any(p == np.arange(n)):
            raise ProblemError(f"node {int(np.flatnonzero(p == np.arange(n))[0])} is its own parent")
        # acyclic: every ancestor chain must end at a root
        reach = _roots_reachable(p)
        if not reach.all():
            raise ProblemError(f"the parent array has a cycle through node {int(np.flatnonzero(~reach)[0])}")
        if np.any(self.weights < 0) or not np.all(np.isfinite(self.weights)):
            i = int(np.flatnonzero((self.weights < 0) | ~np.isfinite(self.weights))[0])
            raise ProblemError(f"weights must be finite and non-negative ({self.label(i)} has {self.weights[i]})")
        for what, arr in (("lower", self.lower), ("upper", self.upper)):
            if np.any(np.isnan(arr)):
                i = int(np.flatnonzero(np.isnan(arr))[0])
                raise ProblemError(f"{self.label(i)}: {what} bound is NaN (use {'-' if what == 'lower' else ''}inf "
                                   "for no bound)")
        if np.any(self.lower == np.inf) or np.any(self.upper == -np.inf):
            i = int(np.flatnonzero((self.lower == np.inf) | (self.upper == -np.inf))[0])
            raise ProblemError(f"{self.label(i)}: infinite bound on the wrong side (no value is feasible)")
        fx = self.is_fixed
        if np.any(np.isinf(self.fixed)):
            raise ProblemError(f"{self.label(int(np.flatnonzero(np.isinf(self.fixed))[0]))}: fixed values must be finite")
        if np.any(np.isinf(self.target)):
            raise ProblemError(f"{self.label(int(np.flatnonzero(np.isinf(self.target))[0]))}: targets must be "
                               "finite or NaN")
        fixed0 = np.nan_to_num(self.fixed)
        if self.integer and np.any(fx & (fixed0 != np.round(fixed0))):
            i = int(np.flatnonzero(fx & (fixed0 != np.round(fixed0)))[0])
            raise ProblemError(f"{self.label(i)} is fixed at a non-integer value in an integer problem")
        if self.nonnegative and np.any(fx & (fixed0 < 0)):
            i = int(np.flatnonzero(fx & (fixed0 < 0))[0])
            raise ProblemError(f"{self.label(i)} is fixed at a negative value in a non-negative problem")
        if np.any(self.lower > self.upper):
            i = int(np.flatnonzero(self.lower > self.upper)[0])
            raise ProblemError(f"{self.label(i)}: lower bound > upper bound")
        out = fx & ((fixed0 < self.lower) | (fixed0 > self.upper))
        if out.any():
            i = int(np.flatnonzero(out)[0])
            raise ProblemError(f"{self.label(i)} is fixed at {exact_number(self.fixed[i])} outside its bounds "
                               f"[{exact_number(self.lower[i])}, {exact_number(self.upper[i])}]")
        self._cache.clear()
        self._cache["determined"] = _frozen(self._determined(fx, fixed0))

    def _determined(self, fx: np.ndarray, fixed0: np.ndarray) -> np.ndarray:
        """Bottom-up by depth: values forced by fixed nodes; refuse fixed values the tree cannot
        reconcile and forced values outside their bounds (both name the node)."""
        n = self.n
        p = self.parent
        val = np.where(fx, fixed0, np.nan)
        has_parent = p >= 0
        if not has_parent.any():
            return val
        depth = self.depth()
        order = np.argsort(depth, kind="stable")
        ptr = np.searchsorted(depth[order], np.arange(int(depth.max()) + 2))
        nch = np.bincount(p[has_parent], minlength=n)
        exact = self.integer
        for d in range(int(depth.max()), 0, -1):
            kids = order[ptr[d]:ptr[d + 1]]
            par = p[kids]
            known = ~np.isnan(val[kids])
            n_known = np.bincount(par, weights=known, minlength=n)
            sums = np.bincount(par[known], weights=val[kids[known]], minlength=n)
            parents = np.unique(par)
            full = parents[n_known[parents] == nch[parents]]
            if not full.size:
                continue
            fixed_full = full[fx[full]]
            s, f = sums[fixed_full], fixed0[fixed_full]
            if exact:
                bad = _integer_sums_differ(par[known], val[kids[known]], fixed_full, f, n)
            else:
                bad = np.abs(s - f) > 1e-9 * np.maximum(1.0, np.abs(s))
            if bad.any():
                i = int(fixed_full[np.flatnonzero(bad)[0]])
                raise ProblemError(f"{self.label(i)} is fixed at {exact_number(self.fixed[i])} but its fixed (or "
                                   f"fully determined) children sum to {exact_number(sums[i])}")
            free_full = full[~fx[full]]
            val[free_full] = sums[free_full]
            lo = self.effective_lower[free_full]
            hi = self.upper[free_full]
            bad = (sums[free_full] < lo) | (sums[free_full] > hi)
            if bad.any():
                k = int(np.flatnonzero(bad)[0])
                i = int(free_full[k])
                raise ProblemError(f"{self.label(i)} is determined by its fixed descendants to be "
                                   f"{exact_number(sums[i])}, outside its bounds [{exact_number(lo[k])}, "
                                   f"{exact_number(hi[k])}]")
        return val


def _integer_sums_differ(par: np.ndarray, vals: np.ndarray, nodes: np.ndarray, fixed: np.ndarray, n: int
                         ) -> np.ndarray:
    """Per node of ``nodes``: whether the integer values ``vals`` of its children (``par``: their
    parents) sum to something other than ``fixed``, exactly. Float sums are exact while every
    partial sum stays below 2^53 (checked with a bound); beyond, Python integers."""
    bound = np.bincount(par, weights=np.abs(vals), minlength=n)
    if not bound.size or bound.max() < 2.0 ** 53:
        return np.bincount(par, weights=vals, minlength=n)[nodes] != fixed
    big = np.zeros(n, dtype=object)
    big[:] = 0
    np.add.at(big, par, np.array([int(v) for v in vals], dtype=object))
    return np.array([big[i] != int(f) for i, f in zip(nodes, fixed, strict=True)], dtype=bool)


def _roots_reachable(parent: np.ndarray) -> np.ndarray:
    """Mask of nodes whose ancestor chain ends at a root (False on or below a cycle).

    Pointer doubling: after k rounds ``anc[i]`` is the 2^k-th ancestor (or -1), so ceil(log2 n)+1
    rounds settle every chain that ends at a root; nodes on a cycle never reach -1.
    """
    anc = parent.copy()
    for _ in range(int(np.ceil(np.log2(parent.size + 1))) + 1):
        anc = np.where(anc >= 0, anc[np.maximum(anc, 0)], -1)
        anc = np.where(parent < 0, -1, anc)
    return anc < 0


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def _parent_vec(parent: Any) -> np.ndarray:
    """Parent indices as a fresh int64 array; floats only when they hold integers (NaN refused)."""
    raw = np.array(parent, copy=True).ravel()
    if raw.dtype == object:
        try:
            raw = raw.astype(float)
        except (TypeError, ValueError):
            raise ProblemError("parent indices must be integers") from None
    if np.issubdtype(raw.dtype, np.integer):
        return raw.astype(np.int64)
    if raw.dtype == bool or not np.issubdtype(raw.dtype, np.floating):
        if raw.size == 0:
            return raw.astype(np.int64)
        raise ProblemError(f"parent indices must be integers, got dtype {raw.dtype}")
    bad = ~np.isfinite(raw) | (raw != np.round(raw))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ProblemError(f"node {i}: parent index {raw[i]} is not an integer")
    return raw.astype(np.int64)


def _float_vec(x: Iterable[float] | np.ndarray | None, n: int, what: str, default: float) -> np.ndarray:
    if x is None:
        return np.full(n, default, dtype=float)
    try:
        arr = np.array(x, dtype=float).ravel()
    except (TypeError, ValueError):
        raise ProblemError(f"{what} must be numbers") from None
    if arr.size != n:
        raise ProblemError(f"{what} has {arr.size} entries for {n} nodes")
    return arr


def _row_bounds(v: Any, m: int, default: float, what: str) -> np.ndarray:
    try:
        arr = row_vector(v, m, default, what)
    except (TypeError, ValueError) as exc:
        raise ProblemError(str(exc)) from None
    return arr


def _check_rows(mat: Any, lo: np.ndarray, hi: np.ndarray, label: str) -> None:
    if np.any(np.isnan(lo) | np.isnan(hi)):
        r = int(np.flatnonzero(np.isnan(lo) | np.isnan(hi))[0])
        raise ProblemError(f"{label}: row {r} has a NaN bound")
    if np.any(lo > hi):
        r = int(np.flatnonzero(lo > hi)[0])
        raise ProblemError(f"{label}: row {r} has lower {lo[r]} > upper {hi[r]}")
    if np.any(np.isinf(lo) & np.isinf(hi)):
        r = int(np.flatnonzero(np.isinf(lo) & np.isinf(hi))[0])
        raise ProblemError(f"{label}: row {r} needs a finite lower or upper bound")
    if np.any(lo == np.inf) or np.any(hi == -np.inf):
        r = int(np.flatnonzero((lo == np.inf) | (hi == -np.inf))[0])
        raise ProblemError(f"{label}: row {r} has an infinite bound on the wrong side")
    empty = np.diff(mat.indptr) == 0
    if empty.any():
        raise ProblemError(f"{label}: row {int(np.flatnonzero(empty)[0])} has no node (all coefficients zero)")


def _node_vector(v: Any, names: np.ndarray, what: str) -> np.ndarray:
    """An array in node order, or a mapping / Series keyed by name (missing: NaN)."""
    if isinstance(v, Mapping) or (hasattr(v, "index") and hasattr(v, "reindex")):
        import pandas as pd

        s = pd.Series(v, dtype=float) if isinstance(v, Mapping) else v.astype(float)
        known = pd.Index(names, dtype=object)
        unknown = ~pd.Index(s.index, dtype=object).isin(known)
        if unknown.any():
            raise ProblemError(f"{what}: unknown node {s.index[np.flatnonzero(unknown)[0]]!r}")
        if not s.index.is_unique:
            raise ProblemError(f"{what}: node names repeat in its index")
        return s.reindex(known).to_numpy(dtype=float)
    return _float_vec(v, names.size, what, np.nan)
