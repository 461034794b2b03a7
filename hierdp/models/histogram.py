"""Histogram level chunks: the per-parent models of a Census-style TopDown as a problem kind of
their own, and their translation to a general :class:`~hierdp.models.Problem`.

A :class:`LevelChunk` holds a chunk of parents of one geolevel and their children as arrays (no
Python object per node): the parents' released ``(P, kp)`` histograms, every child's noisy query
answers with their weights, and optional constraints - per-(child, cell) bounds (structural zeros
are upper bounds of 0), a CSR block of rows over the chunk's ``(child, cell)`` variables (edit
constraints such as "cell a <= cell b" in a geounit, group-quarters lower bounds, invariants on
chosen geounits) and per-child invariant totals. Variable ``(c, k)`` has column ``c * K + k``.

Two problem kinds are posed over a chunk, each with its own solver plug-ins
(``hierdp solvers`` lists them) and a translation to a :class:`Problem` for the general solvers
(small chunks only: the information matrix of a child is dense, ``K x K``):

* :class:`HistogramWLS` (kind ``"histogram_wls"``): per parent, weighted least squares over the
  children's query answers (weights 1/variance) with consistency (``sum_c x[c, k] = parent[map(k)]``)
  and the constraints, continuous; strictly convex where every child is measured.
* :class:`HistogramRounding` (kind ``"histogram_rounding"``): the integer rounder around a
  continuous solution ``x̂``, L1 over the cells (``objective="cells"``: a transportation problem
  without rows) or over every query answer (``"queries"``, the DAS's objective), over the box
  ``floor(x̂) <= y <= floor(x̂) + 1`` within the bounds.

The Problem translation (``to_problem``): the parents' cells first (fixed), then every child's
cells; child cell ``(c, k)``'s parent is cell ``map(k)`` of c's parent, so consistency is the
Problem's own tree constraint; query groups are query-term blocks; rows, bounds and totals are
rows and bounds of the Problem.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import sparse

from hierdp.models.marginals import MarginalQueries
from hierdp.models.problem import Problem

__all__ = ["MAX_TRANSLATED_NONZEROS", "HistogramRounding", "HistogramWLS", "LevelChunk", "continuous_problem",
           "rounding_problem"]

#: the largest translated model (nonzeros) a chunk hands to a general solver
MAX_TRANSLATED_NONZEROS = 20_000_000


class LevelChunk:
    """Children of a chunk of parents, with their measurements and constraints (arrays only).

    Attributes:
        parent_values: ``(P, kp)`` released parent histograms.
        child_parent: local parent index (0..P-1) of every child.
        targets: ``(C, K)`` noisy detailed answers (NaN: not measured or no detailed group).
        target_weight: ``(C,)`` weight of the detailed answers (0 where none).
        query_mats: per non-detailed group, its ``(R_q, K)`` matrix.
        query_answers: per group ``(C, R_q)`` noisy answers (NaN rows: unmeasured child).
        query_weight: per group ``(C,)`` weights (1/variance).
        totals: ``(C,)`` invariant child totals, or None.
        cell_map: ``(K,)`` parent cell of each child cell (default: the same cell; the root maps
            every cell to its one total).
        queries: the :class:`~hierdp.models.marginals.MarginalQueries` whose groups are
            ``query_mats`` (in order), or None; the structured solvers need it.
        lower, upper: ``(C, K)`` per-(child, cell) bounds or None (default 0 and +inf; an upper
            bound 0 is a structural zero).
        rows: ``(R, C*K)`` CSR matrix over the ``(child, cell)`` variables (column ``c*K + k``),
            or None; ``row_lower`` / ``row_upper`` ``(R,)`` (``-inf`` / ``inf``: one-sided).
    """

    def __init__(self, parent_values: np.ndarray, child_parent: np.ndarray, targets: np.ndarray,
                 target_weight: np.ndarray, query_mats: list[np.ndarray], query_answers: list[np.ndarray],
                 query_weight: list[np.ndarray], totals: np.ndarray | None,
                 cell_map: np.ndarray | None = None, *, queries: MarginalQueries | None = None,
                 lower: np.ndarray | None = None, upper: np.ndarray | None = None, rows: Any = None,
                 row_lower: np.ndarray | None = None, row_upper: np.ndarray | None = None) -> None:
        self.parent_values = parent_values
        self.child_parent = child_parent
        self.targets = targets
        self.target_weight = target_weight
        self.query_mats = query_mats
        self.query_answers = query_answers
        self.query_weight = query_weight
        self.totals = totals
        #: parent cell of each child cell (default: the same cell; the root maps all to its total)
        self.cell_map = np.arange(targets.shape[1]) if cell_map is None else np.asarray(cell_map, np.int64)
        self.queries = queries
        if queries is not None and queries.n_groups != len(query_mats):
            raise ValueError(f"queries describes {queries.n_groups} groups, query_mats holds {len(query_mats)}")
        C, K = targets.shape
        for name, b in (("lower", lower), ("upper", upper)):
            if b is not None and np.shape(b) != (C, K):
                raise ValueError(f"{name} must have shape (children, cells) = {(C, K)}, got {np.shape(b)}")
        self.lower = None if lower is None else np.asarray(lower, float)
        self.upper = None if upper is None else np.asarray(upper, float)
        if rows is not None:
            rows = sparse.csr_matrix(rows)
            if rows.shape[1] != C * K:
                raise ValueError(f"rows must have C*K = {C * K} columns, got {rows.shape[1]}")
            n = rows.shape[0]
            row_lower = np.full(n, -np.inf) if row_lower is None else np.asarray(row_lower, float)
            row_upper = np.full(n, np.inf) if row_upper is None else np.asarray(row_upper, float)
            if row_lower.shape != (n,) or row_upper.shape != (n,):
                raise ValueError("row_lower / row_upper need one value per row")
            if rows.nnz and not rows.has_canonical_format:
                rows.sum_duplicates()
        self.rows = rows
        self.row_lower = row_lower if rows is not None else None
        self.row_upper = row_upper if rows is not None else None

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(P, C, K)``."""
        return self.parent_values.shape[0], self.child_parent.size, self.targets.shape[1]

    @property
    def n_parent_nodes(self) -> int:
        """Number of fixed parent-cell nodes (P times the parents' cells)."""
        return int(self.parent_values.size)

    @property
    def n_rows(self) -> int:
        """Number of user rows."""
        return 0 if self.rows is None else int(self.rows.shape[0])

    def lower_bounds(self) -> np.ndarray:
        """``(C, K)`` lower bounds (0 where none given)."""
        return np.zeros(self.targets.shape) if self.lower is None else np.maximum(self.lower, 0.0)

    def upper_bounds(self) -> np.ndarray:
        """``(C, K)`` upper bounds (+inf where none given)."""
        return np.full(self.targets.shape, np.inf) if self.upper is None else self.upper

    def row_children(self) -> np.ndarray:
        """Per row, the one child all its entries belong to, or -1 when it spans several children
        (or has none)."""
        if self.rows is None:
            return np.zeros(0, np.int64)
        K = self.targets.shape[1]
        r = self.rows
        child = r.indices // K
        starts = r.indptr[:-1]
        n = r.shape[0]
        out = np.full(n, -1, np.int64)
        nz = np.diff(r.indptr) > 0
        if not nz.any():
            return out
        lo = np.minimum.reduceat(child, starts[nz]) if child.size else np.zeros(0, np.int64)
        hi = np.maximum.reduceat(child, starts[nz]) if child.size else np.zeros(0, np.int64)
        out[np.flatnonzero(nz)] = np.where(lo == hi, lo, -1)
        return out

    def row_parents(self) -> np.ndarray:
        """Per row, the local parent of its entries, or -1 when they span several parents."""
        if self.rows is None:
            return np.zeros(0, np.int64)
        K = self.targets.shape[1]
        r = self.rows
        par = self.child_parent[r.indices // K]
        n = r.shape[0]
        out = np.full(n, -1, np.int64)
        nz = np.flatnonzero(np.diff(r.indptr) > 0)
        if nz.size:
            starts = r.indptr[nz]
            lo = np.minimum.reduceat(par, starts)
            hi = np.maximum.reduceat(par, starts)
            out[nz] = np.where(lo == hi, lo, -1)
        return out

    def coupled_parents(self) -> np.ndarray:
        """``(P,)`` label per parent: parents that share a row share a label (solve them together)."""
        P = self.parent_values.shape[0]
        if self.rows is None or self.rows.nnz == 0:
            return np.arange(P)
        K = self.targets.shape[1]
        r = self.rows.tocoo()
        par = self.child_parent[r.col // K]
        first = np.full(r.shape[0], -1, np.int64)
        order = np.argsort(r.row, kind="stable")
        rr, pp = r.row[order], par[order]
        start = np.r_[True, rr[1:] != rr[:-1]]
        first[rr[start]] = pp[start]
        a, b = first[rr], pp
        link = sparse.coo_matrix((np.ones(a.size), (a, b)), shape=(P, P))
        from scipy.sparse.csgraph import connected_components

        return connected_components(link + link.T, directed=False)[1].astype(np.int64)

    def subset(self, parents: np.ndarray) -> tuple[LevelChunk, np.ndarray]:
        """The chunk of the parents where the bool mask ``parents`` holds, and the indices of their
        children in this chunk (parents renumbered in order). A row must lie entirely inside or
        entirely outside the kept children."""
        keep = np.asarray(parents, bool)
        kids = np.flatnonzero(keep[self.child_parent])
        renum = np.cumsum(keep) - 1
        C, K = self.targets.shape
        rows = row_lower = row_upper = None
        if self.rows is not None:
            kept_col = np.zeros(C * K, bool)
            kept_col[(kids[:, None] * K + np.arange(K)[None, :]).ravel()] = True
            r = self.rows
            inside = np.add.reduceat(kept_col[r.indices].astype(np.int64), r.indptr[:-1]) if r.nnz else \
                np.zeros(r.shape[0], np.int64)
            inside = np.where(np.diff(r.indptr) > 0, inside, 0)
            size = np.diff(r.indptr)
            if np.any((inside > 0) & (inside < size)):
                raise ValueError("a row couples kept and dropped parents: keep coupled parents together")
            sel = np.flatnonzero((inside == size) & (size > 0))
            col_new = np.full(C * K, -1, np.int64)
            col_new[(kids[:, None] * K + np.arange(K)[None, :]).ravel()] = np.arange(kids.size * K)
            sub = r[sel]
            rows = sparse.csr_matrix((sub.data, col_new[sub.indices], sub.indptr), shape=(sel.size, kids.size * K))
            assert self.row_lower is not None and self.row_upper is not None
            row_lower, row_upper = self.row_lower[sel], self.row_upper[sel]
        sub_chunk = LevelChunk(
            self.parent_values[keep], renum[self.child_parent[kids]], self.targets[kids], self.target_weight[kids],
            self.query_mats, [a[kids] for a in self.query_answers], [w[kids] for w in self.query_weight],
            None if self.totals is None else self.totals[kids], self.cell_map, queries=self.queries,
            lower=None if self.lower is None else self.lower[kids], upper=None if self.upper is None else self.upper[kids],
            rows=rows, row_lower=row_lower, row_upper=row_upper)
        return sub_chunk, kids

    def measured(self) -> np.ndarray:
        """``(C,)`` whether a child has any measurement."""
        m = ~np.isnan(self.targets).any(1) & (self.target_weight > 0)
        for a, w in zip(self.query_answers, self.query_weight, strict=False):
            m |= ~np.isnan(a).any(1) & (w > 0)
        return m

    def group_weights(self) -> np.ndarray:
        """``(C, 1 + groups)``: the detailed weight then each group's weight (0 where unmeasured)."""
        cols = [np.where(np.isnan(self.targets).any(1), 0.0, self.target_weight)]
        for a, w in zip(self.query_answers, self.query_weight, strict=False):
            cols.append(np.where(np.isnan(a).any(1), 0.0, w))
        return np.stack(cols, 1)

    def magnitude(self) -> float:
        """Largest finite absolute value among parent values, answers, bounds, totals, row bounds."""
        parts = [self.parent_values, self.targets, *self.query_answers]
        parts += [a for a in (self.totals, self.lower, self.upper, self.row_lower, self.row_upper) if a is not None]
        best = 0.0
        for a in parts:
            a = np.asarray(a, float)
            fin = a[np.isfinite(a)]
            if fin.size:
                best = max(best, float(np.abs(fin).max()))
        return best


# ---------------------------------------------------------------------------------- translation
def _skeleton(chunk: LevelChunk) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    _P, C, K = chunk.shape
    kp = chunk.parent_values.shape[1]
    npn = chunk.n_parent_nodes
    parent = np.concatenate([np.full(npn, -1, np.int64),
                             (chunk.child_parent[:, None] * kp + chunk.cell_map[None, :]).ravel()])
    fixed = np.concatenate([chunk.parent_values.astype(float).ravel(), np.full(C * K, np.nan)])
    child_nodes = npn + np.arange(C * K, dtype=np.int64)
    return parent, fixed, child_nodes


def _query_block(mat: np.ndarray, rows: np.ndarray, C: int) -> Any:
    """``kron(I_C, mat)`` restricted to children ``rows`` (CSR over the children's cell columns)."""
    block = sparse.kron(sparse.identity(C, format="csr"), sparse.csr_matrix(mat), format="csr")
    keep = (rows[:, None] * mat.shape[0] + np.arange(mat.shape[0])[None, :]).ravel()
    return block[keep]


def _add_rows(p: Problem, chunk: LevelChunk, child_nodes: np.ndarray) -> None:
    _, C, K = chunk.shape
    if chunk.totals is not None:
        mat = sparse.kron(sparse.identity(C, format="csr"), sparse.csr_matrix(np.ones((1, K))), format="csr")
        p.add_constraints(mat, chunk.totals.astype(float), chunk.totals.astype(float), nodes=child_nodes,
                          name="invariant total")
    if chunk.rows is not None and chunk.rows.shape[0]:
        assert chunk.row_lower is not None and chunk.row_upper is not None
        p.add_constraints(chunk.rows, chunk.row_lower, chunk.row_upper, nodes=child_nodes, name="user row")


def _bounds(chunk: LevelChunk, lo: np.ndarray | None = None,
            hi: np.ndarray | None = None) -> tuple[np.ndarray | None, np.ndarray | None]:
    npn = chunk.n_parent_nodes
    if lo is None and hi is None and chunk.lower is None and chunk.upper is None:
        return None, None
    low = chunk.lower_bounds() if lo is None else np.maximum(lo, chunk.lower_bounds())
    up = chunk.upper_bounds() if hi is None else np.minimum(hi, chunk.upper_bounds())
    return (np.concatenate([np.full(npn, -np.inf), low.ravel()]),
            np.concatenate([np.full(npn, np.inf), up.ravel()]))


def continuous_problem(chunk: LevelChunk) -> Problem:
    """The weighted least-squares model of a chunk of parents (:class:`HistogramWLS`) as a Problem."""
    _P, C, K = chunk.shape
    parent, fixed, child_nodes = _skeleton(chunk)
    npn = chunk.n_parent_nodes
    target = np.concatenate([np.full(npn, np.nan), chunk.targets.ravel()])
    # the optimum does not change when every weight is scaled by one constant; general QP solvers
    # need weights near 1 (1/variance of geometric noise at small epsilon is ~1e-6: HiGHS's QP then
    # stalls within its tolerances, issue 20's C12)
    scale = max([float(np.max(chunk.target_weight, initial=0.0))]
                + [float(np.max(wq, initial=0.0)) for wq in chunk.query_weight]) or 1.0
    w = np.concatenate([np.ones(npn), np.repeat(chunk.target_weight / scale, K)])
    w = np.where(np.isnan(target), 1.0, w)
    lower, upper = _bounds(chunk)
    p = Problem(parent, target, fixed=fixed, objective="l2", integer=False, nonnegative=True, weights=w,
                lower=lower, upper=upper)
    for q, (mat, ans, wq) in enumerate(zip(chunk.query_mats, chunk.query_answers, chunk.query_weight, strict=False)):
        rows = np.flatnonzero(~np.isnan(ans[:, 0]) & (wq > 0))
        if rows.size == 0:
            continue
        p.add_query_terms(_query_block(mat, rows, C), ans[rows].ravel(), np.repeat(wq[rows] / scale, mat.shape[0]),
                          nodes=child_nodes, name=f"query group {q}")
    _add_rows(p, chunk, child_nodes)
    return p


def rounding_box(chunk: LevelChunk, xhat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rounder's integer box ``floor(x̂) <= y <= floor(x̂) + 1`` within the chunk's bounds.

    ``floor(x̂ + 1e-7)``: 2.9999999 from a QP with 1e-7 feasibility tolerance means 3; its box is
    [3, 4], which still holds the continuous point up to that tolerance."""
    x = np.maximum(np.asarray(xhat, dtype=float), 0.0)
    lo = np.floor(x + 1e-7)
    hi = lo + 1.0
    if chunk.lower is not None or chunk.upper is not None:
        lo = np.maximum(lo, np.ceil(chunk.lower_bounds() - 1e-7))
        hi = np.minimum(hi, np.floor(chunk.upper_bounds() + 1e-7))
    return lo, hi


def rounding_problem(chunk: LevelChunk, xhat: np.ndarray, queries: bool = True) -> Problem:
    """The integer L1 rounder around the continuous solution ``xhat`` (``(C, K)``) as a Problem:
    over every query answer (``queries=True``, the DAS's objective) or over the cells only (then,
    without rows, the model is a transportation problem: totally unimodular, its LP optimum is
    integral)."""
    _P, C, _K = chunk.shape
    parent, fixed, child_nodes = _skeleton(chunk)
    x = np.maximum(np.asarray(xhat, dtype=float), 0.0)
    lo, hi = rounding_box(chunk, x)
    npn = chunk.n_parent_nodes
    lower = np.concatenate([np.full(npn, -np.inf), lo.ravel()])
    upper = np.concatenate([np.full(npn, np.inf), hi.ravel()])
    target = np.concatenate([np.full(npn, np.nan), x.ravel()])
    p = Problem(parent, target, fixed=fixed, objective="l1", integer=True, nonnegative=True, lower=lower, upper=upper)
    for q, mat in enumerate(chunk.query_mats if queries else []):
        p.add_query_terms(_query_block(mat, np.arange(C), C), (x @ mat.T).ravel(), 1.0, nodes=child_nodes,
                          name=f"query group {q}")
    _add_rows(p, chunk, child_nodes)
    return p


# ---------------------------------------------------------------------------------- the kinds
_FEATURE_TEXT = {"query_terms": "query-term objectives", "bounds": "per-node bounds",
                 "linear_constraints": "linear constraint rows", "weights": "non-uniform objective weights",
                 "missing_targets": "nodes without a target (unmeasured children)"}


class _ChunkKind:
    """What both histogram problem kinds share (see the module docstring)."""

    kind: str = ""
    objective: str = ""
    integer: bool = False

    def __init__(self, chunk: LevelChunk) -> None:
        if not isinstance(chunk, LevelChunk):
            raise TypeError("a histogram problem is posed over a LevelChunk")
        self.chunk = chunk

    @property
    def n_parents(self) -> int:
        """Number of parents (independent sub-problems unless rows couple them)."""
        return self.chunk.shape[0]

    def features(self) -> frozenset[str]:
        """Problem features (names of :data:`hierdp.models.FEATURES`) a plug-in must honour."""
        c = self.chunk
        f = {"weights"} if self.objective == "l2" else set()
        if c.query_mats and (self.objective == "l2" or getattr(self, "queries", False)):
            f.add("query_terms")
        if c.lower is not None or c.upper is not None:
            f.add("bounds")
        if c.totals is not None or c.n_rows:
            f.add("linear_constraints")
        if self.objective == "l2" and not c.measured().all():
            f.add("missing_targets")
        return frozenset(f)

    def magnitude(self) -> float:
        """Largest absolute value in the data (see :meth:`LevelChunk.magnitude`)."""
        return self.chunk.magnitude()

    def values_from_problem(self, values: np.ndarray) -> np.ndarray:
        """The ``(C, K)`` child values from the values of :meth:`to_problem`'s nodes."""
        _, C, K = self.chunk.shape
        return np.asarray(values)[self.chunk.n_parent_nodes:].reshape(C, K)

    def violations(self, values: np.ndarray, tol: float = 1e-9) -> list[str]:
        """Every constraint violated by the ``(C, K)`` ``values``, per parent (empty: feasible).

        Integer kinds are checked exactly in integers; continuous ones within ``tol`` times the
        magnitude of the data (at least 1)."""
        c = self.chunk
        P, C, K = c.shape
        x = np.asarray(values)
        if x.shape != (C, K):
            return [f"values have shape {x.shape}, expected {(C, K)}"]
        if not np.all(np.isfinite(x.astype(float))):
            return ["values are not finite"]
        kp = c.parent_values.shape[1]
        out: list[str] = []
        if self.integer:
            if not np.array_equal(x, np.rint(x)):
                out.append("values are not integers")
            xi = np.rint(x).astype(np.int64)
            isums = np.zeros((P, kp), np.int64)
            np.add.at(isums, (np.repeat(c.child_parent, K), np.tile(c.cell_map, C)), xi.ravel())
            bad = np.flatnonzero((isums != np.rint(c.parent_values).astype(np.int64)).any(1))
            xs: np.ndarray = xi
            atol = 0.0
        else:
            sums = np.zeros((P, kp))
            np.add.at(sums, (np.repeat(c.child_parent, K), np.tile(c.cell_map, C)), x.ravel())
            scale = max(1.0, self.magnitude())
            atol = tol * scale
            bad = np.flatnonzero((np.abs(sums - c.parent_values) > atol).any(1))
            xs = x.astype(float)
        if bad.size:
            out.append(f"parent(s) {bad[:5].tolist()}: children do not sum to the parent's cells")
        lo, hi = self._box()
        below = np.flatnonzero((xs < lo - atol).any(1))
        above = np.flatnonzero((xs > hi + atol).any(1))
        if below.size:
            out.append(f"child(ren) {below[:5].tolist()}: a cell below its lower bound (or negative)")
        if above.size:
            out.append(f"child(ren) {above[:5].tolist()}: a cell above its upper bound")
        if c.totals is not None:
            t = xs.sum(1)
            off = np.flatnonzero(np.abs(t - c.totals) > atol) if not self.integer else \
                np.flatnonzero(t != np.rint(c.totals).astype(np.int64))
            if off.size:
                out.append(f"child(ren) {off[:5].tolist()}: total differs from its invariant")
        if c.rows is not None and c.rows.shape[0]:
            assert c.row_lower is not None and c.row_upper is not None
            if self.integer:
                coef = c.rows.data
                if np.array_equal(coef, np.rint(coef)):
                    r = sparse.csr_matrix((np.rint(coef).astype(np.int64), c.rows.indices, c.rows.indptr),
                                          shape=c.rows.shape) @ xs.ravel()
                    rl = np.where(np.isfinite(c.row_lower), np.ceil(c.row_lower - 1e-9), -np.inf)
                    ru = np.where(np.isfinite(c.row_upper), np.floor(c.row_upper + 1e-9), np.inf)
                    viol = np.flatnonzero((r < rl) | (r > ru))
                else:
                    r = c.rows @ xs.ravel().astype(float)
                    s = tol * max(1.0, float(np.abs(c.rows).sum(1).max()) * max(1.0, float(np.abs(xs).max())))
                    viol = np.flatnonzero((r < c.row_lower - s) | (r > c.row_upper + s))
            else:
                r = c.rows @ xs.ravel()
                s = atol * max(1.0, float(np.abs(c.rows).sum(1).max()))
                viol = np.flatnonzero((r < c.row_lower - s) | (r > c.row_upper + s))
            if viol.size:
                out.append(f"row(s) {viol[:5].tolist()} violated")
        return out

    def _box(self) -> tuple[np.ndarray, np.ndarray]:
        return self.chunk.lower_bounds(), self.chunk.upper_bounds()

    def translated_size(self) -> int:
        """Estimated nonzeros of :meth:`to_problem`'s model for a general solver (refusals)."""
        raise NotImplementedError

    def to_problem(self) -> Problem:
        """The chunk as a general :class:`Problem`."""
        raise NotImplementedError

    def describe(self) -> str:
        """A few words for messages."""
        P, C, K = self.chunk.shape
        return f"this {self.kind} chunk ({P:,} parent(s), {C:,} children x {K:,} cells)"

    def refusals(self, solver: Any) -> list[str]:
        """Why a general plug-in (one that solves :class:`Problem`\\ s) cannot take this chunk through
        its translation: too large to translate (:data:`MAX_TRANSLATED_NONZEROS`), or the
        plug-in's own refusals of the translated Problem."""
        cap = getattr(solver, "capabilities", None)
        if cap is not None:  # what the plug-in can never do, said before any size or translation
            why = []
            if self.objective not in cap.objectives:
                why.append(f"objective {self.objective!r} not supported (supports {sorted(cap.objectives)})")
            if self.integer and not cap.integer:
                why.append("integer problems not supported")
            if not self.integer and not cap.continuous:
                why.append("continuous problems not supported")
            why += [f"{_FEATURE_TEXT.get(f, f)} not supported" for f in sorted(self.features() - set(cap.features))]
            if why:
                return [f"as a general Problem: {r}" for r in why]
        size = int(self.translated_size())
        if size > MAX_TRANSLATED_NONZEROS:
            return [f"as a general Problem {self.describe()} would hold ~{size:,} nonzeros (limit "
                    f"{MAX_TRANSLATED_NONZEROS:,}); the histogram plug-ins solve it without translation (hierdp solvers)"]
        return [f"as a general Problem: {r}" for r in solver.unsupported(self.to_problem())]


class HistogramWLS(_ChunkKind):
    """The continuous stage over a chunk (kind ``"histogram_wls"``; module docstring)."""

    kind = "histogram_wls"
    objective = "l2"
    integer = False

    def to_problem(self) -> Problem:
        """The chunk as a general :class:`Problem` (:func:`continuous_problem`)."""
        return continuous_problem(self.chunk)

    def translated_size(self) -> int:
        """Nonzeros of the QP: a child's Hessian block holds ``K²/R_q`` entries per query group."""
        _P, C, K = self.chunk.shape
        per_child = K + sum(K * K // max(m.shape[0], 1) for m in self.chunk.query_mats)
        return int(C * per_child + self.chunk.n_parent_nodes + (self.chunk.rows.nnz if self.chunk.rows is not None
                                                                else 0))

    def objective_value(self, values: np.ndarray) -> float:
        """``sum_c sum_q w_cq ||Q_q x_c - y_cq||²`` over the measured answers."""
        return float(self.parent_objectives(values).sum())

    def parent_objectives(self, values: np.ndarray) -> np.ndarray:
        """The objective of each parent's children."""
        c = self.chunk
        x = np.asarray(values, float)
        per = np.zeros(x.shape[0])
        m = ~np.isnan(c.targets).any(1)
        per[m] += c.target_weight[m] * ((x[m] - c.targets[m]) ** 2).sum(1)
        for q, (mat, a, w) in enumerate(zip(c.query_mats, c.query_answers, c.query_weight, strict=False)):
            m = ~np.isnan(a).any(1)
            if m.any():
                ans = x[m] @ mat.T if c.queries is None else c.queries.answer(q, x[m])
                per[m] += w[m] * ((ans - a[m]) ** 2).sum(1)
        return np.bincount(c.child_parent, per, minlength=c.shape[0])

    def subset(self, parents: np.ndarray) -> tuple[HistogramWLS, np.ndarray]:
        """The problem of the parents where the mask holds, and their children's indices."""
        sub, kids = self.chunk.subset(parents)
        return HistogramWLS(sub), kids


class HistogramRounding(_ChunkKind):
    """The integer rounder over a chunk around ``xhat`` (kind ``"histogram_rounding"``)."""

    kind = "histogram_rounding"
    objective = "l1"
    integer = True

    def __init__(self, chunk: LevelChunk, xhat: np.ndarray, objective: str = "cells") -> None:
        super().__init__(chunk)
        if objective not in ("cells", "queries"):
            raise ValueError(f"objective must be 'cells' or 'queries', got {objective!r}")
        self.xhat = np.maximum(np.asarray(xhat, float), 0.0)
        if self.xhat.shape != chunk.targets.shape:
            raise ValueError(f"xhat must have shape {chunk.targets.shape}, got {self.xhat.shape}")
        self.queries = objective == "queries"
        self.rounding = objective

    def _box(self) -> tuple[np.ndarray, np.ndarray]:
        return rounding_box(self.chunk, self.xhat)

    def to_problem(self) -> Problem:
        """The rounder as a general :class:`Problem` (:func:`rounding_problem`)."""
        return rounding_problem(self.chunk, self.xhat, queries=self.queries)

    def translated_size(self) -> int:
        """Nonzeros of the MIP: the consistency tree, bounds and (with ``"queries"``) one term row
        per query answer over its cells."""
        _P, C, K = self.chunk.shape
        per_child = 2 * K + (len(self.chunk.query_mats) * K if self.queries else 0)
        return int(C * per_child + (self.chunk.rows.nnz if self.chunk.rows is not None else 0))

    def objective_value(self, values: np.ndarray) -> float:
        """L1 distance to ``xhat`` over the cells (and every query answer with ``"queries"``)."""
        return float(self.parent_objectives(values).sum())

    def parent_objectives(self, values: np.ndarray) -> np.ndarray:
        """The objective of each parent's children."""
        c = self.chunk
        y = np.asarray(values, float)
        per = np.abs(y - self.xhat).sum(1)
        if self.queries:
            for q, mat in enumerate(c.query_mats):
                if c.queries is not None:
                    per += np.abs(c.queries.answer(q, y) - c.queries.answer(q, self.xhat)).sum(1)
                else:
                    per += np.abs((y - self.xhat) @ mat.T).sum(1)
        return np.bincount(c.child_parent, per, minlength=c.shape[0])

    def subset(self, parents: np.ndarray) -> tuple[HistogramRounding, np.ndarray]:
        """The problem of the parents where the mask holds, and their children's indices."""
        sub, kids = self.chunk.subset(parents)
        return HistogramRounding(sub, self.xhat[kids], self.rounding), kids
