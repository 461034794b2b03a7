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
* optional integrality, non-negativity, per-node bounds, and user linear constraints over named
  nodes (``problem.add_linear({"A": 1, "B": 1}, lower=100)``);
* hooks that receive the Pyomo model built from the problem, so users may add components.

Everything is numpy; a TopDown level with 10^6 children is one Problem.
"""

from __future__ import annotations

from hierdp.errors import HierdpError

from dataclasses import dataclass
from typing import Any, Callable, Hashable, Iterable, Mapping, Sequence

import numpy as np

OBJECTIVES = ("l2", "l1", "linf")


class ProblemError(HierdpError, ValueError):
    """A problem is malformed (shapes, structure, unknown nodes, inconsistent fixed values)."""


@dataclass(frozen=True)
class LinearConstraint:
    """``lower <= sum(coef[k] * y[index[k]]) <= upper`` over node indices."""

    index: np.ndarray
    coef: np.ndarray
    lower: float = -np.inf
    upper: float = np.inf
    name: str | None = None

    def activity(self, values: np.ndarray) -> float:
        """Left-hand side evaluated at ``values``."""
        return float(np.dot(self.coef, np.asarray(values, dtype=float)[self.index]))


class Problem:
    """A post-processing optimization problem over a forest of nodes (see module docstring).

    Args:
        parent: int array, ``parent[i]`` is node i's parent index or -1 for a root.
        target: float array of noisy values; NaN means "no objective term".
        fixed: float array with the fixed value of fixed nodes and NaN for free nodes
            (default: all free).
        objective: ``"l2"``, ``"l1"`` or ``"linf"``.
        weights: non-negative per-node objective weights (default 1).
        integer: require integer values.
        nonnegative: require values >= 0.
        lower, upper: per-node bounds (default unbounded).
        names: optional node names (hashable), used by :meth:`add_linear` and friends.
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
        self.parent = np.asarray(parent, dtype=np.int64).ravel()
        n = self.parent.size
        self.target = _float_vec(target, n, "target", np.nan)
        self.fixed = _float_vec(fixed, n, "fixed", np.nan)
        self.weights = _float_vec(weights, n, "weights", 1.0)
        self.lower = _float_vec(lower, n, "lower", -np.inf)
        self.upper = _float_vec(upper, n, "upper", np.inf)
        if objective not in OBJECTIVES:
            raise ProblemError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
        self.objective = objective
        self.integer = bool(integer)
        self.nonnegative = bool(nonnegative)
        self.names = None if names is None else np.asarray(names, dtype=object).ravel()
        if self.names is not None and self.names.size != n:
            raise ProblemError(f"names has {self.names.size} entries for {n} nodes")
        self.linear: list[LinearConstraint] = []
        self.pyomo_hooks: list[Callable[[Any, "Problem"], None]] = []
        self._name_index: dict[Hashable, int] | None = None
        self._cache: dict[str, Any] = {}
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
    ) -> "Problem":
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

    # ------------------------------------------------------------------ user constraints
    def index_of(self, node: Hashable) -> int:
        """Index of a node given by name (or by integer index when the problem has no names)."""
        if self.names is None:
            if isinstance(node, (int, np.integer)) and 0 <= int(node) < self.n:
                return int(node)
            raise ProblemError(f"unknown node {node!r}: this problem has no names; use indices 0..{self.n - 1}")
        if self._name_index is None:
            self._name_index = {name: i for i, name in enumerate(self.names)}
            if len(self._name_index) != self.n:
                raise ProblemError("node names are not unique")
        try:
            return self._name_index[node]
        except KeyError:
            raise ProblemError(f"unknown node {node!r}") from None

    def add_linear(
        self,
        coeffs: Mapping[Hashable, float],
        *,
        lower: float = -np.inf,
        upper: float = np.inf,
        name: str | None = None,
    ) -> "Problem":
        """Add ``lower <= sum(coef * node) <= upper`` over named nodes; returns ``self``."""
        if not coeffs:
            raise ProblemError("a linear constraint needs at least one node")
        if not (lower <= upper):
            raise ProblemError(f"linear constraint {name or ''}: lower {lower} > upper {upper}")
        if np.isinf(lower) and np.isinf(upper):
            raise ProblemError("a linear constraint needs a finite lower or upper bound")
        idx = np.array([self.index_of(k) for k in coeffs], dtype=np.int64)
        coef = np.array([float(v) for v in coeffs.values()], dtype=float)
        if not np.all(np.isfinite(coef)):
            raise ProblemError("linear constraint coefficients must be finite")
        self.linear.append(LinearConstraint(idx, coef, float(lower), float(upper), name))
        self._cache.clear()
        return self

    def add_bounds(self, node: Hashable, lower: float | None = None, upper: float | None = None) -> "Problem":
        """Tighten the bounds of one node; returns ``self``."""
        i = self.index_of(node)
        if lower is not None:
            self.lower[i] = max(self.lower[i], float(lower))
        if upper is not None:
            self.upper[i] = min(self.upper[i], float(upper))
        if self.lower[i] > self.upper[i]:
            raise ProblemError(f"node {node!r}: lower bound {self.lower[i]} > upper bound {self.upper[i]}")
        self._cache.clear()
        return self

    def fix(self, node: Hashable, value: float) -> "Problem":
        """Fix one node at ``value``; returns ``self``."""
        i = self.index_of(node)
        if not np.isfinite(value):
            raise ProblemError(f"node {node!r}: fixed value must be finite")
        self.fixed[i] = float(value)
        self._cache.clear()
        self._validate()
        return self

    def on_pyomo_model(self, hook: Callable[[Any, "Problem"], None]) -> "Problem":
        """Register ``hook(model, problem)``, called on the Pyomo model before it is solved.

        Only solvers that build a Pyomo model (``highs`` through Pyomo) can honour hooks; the
        others refuse such a problem.
        """
        self.pyomo_hooks.append(hook)
        return self

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
        """Depth of every node (roots 0), by vectorized pointer jumping."""
        if "depth" not in self._cache:
            d = np.zeros(self.n, np.int64)
            anc = self.parent.copy()
            active = anc >= 0
            while active.any():
                d[active] += 1
                anc[active] = self.parent[anc[active]]
                active = anc >= 0
            self._cache["depth"] = d
        return self._cache["depth"]

    def groups(self) -> np.ndarray:
        """Group id per node for the ``linf`` objective (-1 for fixed nodes).

        A free node's group is its nearest fixed ancestor, or its tree root when no ancestor is
        fixed; ids are renumbered ``0..G-1`` in order of first appearance.
        """
        if "groups" not in self._cache:
            free = self.is_free
            # anchor[i]: nearest fixed ancestor or root, found by pointer jumping
            anchor = np.where(self.parent >= 0, self.parent, np.arange(self.n))
            anchor = np.where(free & (self.parent < 0), np.arange(self.n), anchor)
            for _ in range(64):
                p = anchor
                step = free[p] & (self.parent[p] >= 0)
                nxt = np.where(step, self.parent[p], p)
                if np.array_equal(nxt, anchor):
                    break
                anchor = nxt
            g = np.full(self.n, -1, np.int64)
            if free.any():
                uniq, inv = np.unique(anchor[free], return_inverse=True)
                g[free] = inv
            self._cache["groups"] = g
        return self._cache["groups"]

    @property
    def n_groups(self) -> int:
        """Number of linf groups."""
        g = self.groups()
        return int(g.max()) + 1 if g.size and g.max() >= 0 else 0

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

    # ------------------------------------------------------------------ evaluation
    def objective_value(self, values: np.ndarray) -> float:
        """The objective of this problem at ``values`` (a full length-n vector)."""
        values = np.asarray(values, dtype=float)
        m = self.is_free & ~np.isnan(self.target)
        dev = np.abs(values[m] - self.target[m]) * self.weights[m]
        if self.objective == "l2":
            return float(np.sum(self.weights[m] * (values[m] - self.target[m]) ** 2))
        if self.objective == "l1":
            return float(dev.sum())
        g = self.groups()[m]
        if g.size == 0:
            return 0.0
        per_group = np.zeros(int(g.max()) + 1)
        np.maximum.at(per_group, g, dev)
        return float(per_group.sum())

    def violations(self, values: np.ndarray, tol: float = 1e-6) -> list[str]:
        """Every constraint of this problem violated by ``values`` (empty list: feasible)."""
        values = np.asarray(values, dtype=float)
        out: list[str] = []
        if values.shape != (self.n,):
            return [f"values has shape {values.shape}, expected ({self.n},)"]
        if not np.all(np.isfinite(values)):
            out.append("values contain NaN or inf")
            return out
        fx = self.is_fixed
        bad = fx & (np.abs(values - np.nan_to_num(self.fixed)) > tol)
        if bad.any():
            out.append(f"{int(bad.sum())} fixed node(s) changed, e.g. {self._label(np.flatnonzero(bad)[0])}")
        if self.integer:
            bad = np.abs(values - np.round(values)) > tol
            if bad.any():
                out.append(f"{int(bad.sum())} non-integer value(s), e.g. {self._label(np.flatnonzero(bad)[0])}")
        lo = self.effective_lower
        bad = values < lo - tol
        if bad.any():
            out.append(f"{int(bad.sum())} value(s) below their lower bound, e.g. {self._label(np.flatnonzero(bad)[0])}")
        bad = values > self.upper + tol
        if bad.any():
            out.append(f"{int(bad.sum())} value(s) above their upper bound, e.g. {self._label(np.flatnonzero(bad)[0])}")
        has_parent = self.parent >= 0
        nch = self.n_children
        if self.integer and not out and np.abs(values).max() < 2.0 ** 62:
            # integer problems: compare sums exactly in int64 (a relative tolerance would let a
            # parent of 10^7 differ from its children by 10)
            iv = np.rint(values).astype(np.int64)
            sums_i = np.zeros(self.n, np.int64)
            np.add.at(sums_i, self.parent[has_parent], iv[has_parent])
            bad = (nch > 0) & (sums_i != iv)
        else:
            sums = np.bincount(self.parent[has_parent], weights=values[has_parent], minlength=self.n)
            bad = (nch > 0) & (np.abs(sums - values) > tol * np.maximum(1.0, np.abs(values)))
        if bad.any():
            out.append(f"{int(bad.sum())} node(s) differ from the sum of their children, e.g. {self._label(np.flatnonzero(bad)[0])}")
        for k, c in enumerate(self.linear):
            a = c.activity(values)
            if a < c.lower - tol * max(1.0, abs(c.lower)) or a > c.upper + tol * max(1.0, abs(c.upper)):
                out.append(f"linear constraint {c.name or k} violated: {c.lower} <= {a} <= {c.upper} fails")
        return out

    def _label(self, i: int) -> str:
        return f"node {self.names[i]!r}" if self.names is not None else f"node {int(i)}"

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
            raise ProblemError("weights must be finite and non-negative")
        fx = self.is_fixed
        if np.any(np.isinf(self.fixed)):
            raise ProblemError("fixed values must be finite")
        if np.any(np.isinf(self.target)):
            raise ProblemError("targets must be finite or NaN")
        if self.integer and np.any(fx & (self.fixed != np.round(np.nan_to_num(self.fixed)))):
            i = int(np.flatnonzero(fx & (self.fixed != np.round(np.nan_to_num(self.fixed))))[0])
            raise ProblemError(f"{self._label(i)} is fixed at a non-integer value in an integer problem")
        if self.nonnegative and np.any(fx & (np.nan_to_num(self.fixed) < 0)):
            i = int(np.flatnonzero(fx & (np.nan_to_num(self.fixed) < 0))[0])
            raise ProblemError(f"{self._label(i)} is fixed at a negative value in a non-negative problem")
        if np.any(self.lower > self.upper):
            i = int(np.flatnonzero(self.lower > self.upper)[0])
            raise ProblemError(f"{self._label(i)}: lower bound > upper bound")
        # a fixed node whose children are all fixed must already be consistent
        has_parent = p >= 0
        nch = np.bincount(p[has_parent], minlength=n)
        nfree = np.bincount(p[has_parent & ~fx], minlength=n)
        sums = np.bincount(p[has_parent & fx], weights=np.nan_to_num(self.fixed)[has_parent & fx], minlength=n)
        bad = fx & (nch > 0) & (nfree == 0) & (np.abs(sums - np.nan_to_num(self.fixed)) > 1e-9 * np.maximum(1, np.abs(sums)))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ProblemError(f"{self._label(i)} is fixed at {self.fixed[i]} but its fixed children sum to {sums[i]}")
        self._cache.clear()


def _roots_reachable(parent: np.ndarray) -> np.ndarray:
    """Mask of nodes whose ancestor chain ends at a root (False on or below a cycle).

    Pointer doubling: after k rounds ``anc[i]`` is the 2^k-th ancestor (or -1), so ceil(log2 n)+1
    rounds settle every chain that ends at a root; nodes on a cycle never reach -1.
    """
    anc = parent.copy()
    for _ in range(int(np.ceil(np.log2(parent.size + 1))) + 1):
        anc = np.where(anc >= 0, anc[np.maximum(anc, 0)], -1)
        anc = np.where(parent < 0, -1, anc)
    # one more plain step: nodes whose 2^k ancestor is a root still have anc >= 0 only on cycles
    return anc < 0


def _float_vec(x: Iterable[float] | np.ndarray | None, n: int, what: str, default: float) -> np.ndarray:
    if x is None:
        return np.full(n, default, dtype=float)
    arr = np.array(x, dtype=float).ravel()
    if arr.size != n:
        raise ProblemError(f"{what} has {arr.size} entries for {n} nodes")
    return arr
