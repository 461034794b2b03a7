"""Marginal query groups over a product histogram, with the structure a solver can exploit.

A histogram has ``K = prod(shape)`` cells over attributes of sizes ``shape`` (C order). A **query
group** ``q`` relabels every attribute ``a`` by a labelling ``L[q][a]`` of its levels (the identity
keeps it, all zeros sums it out, anything else recodes it, e.g. HHGQ's 8 levels into household /
institutional / non-institutional); its matrix is the Kronecker product over the attributes of the
one-hot matrices ``R_qa`` (``R_qa[j, i] = 1`` when level ``i`` has label ``j``). Every column holds
exactly one 1 (paper 003, §2.3, Lemma 4).

**The structure** (:class:`MarginalQueries`): a weighted information matrix
``H = sum_q w_q Q_qᵀ Q_q = sum_q w_q ⊗_a R_qaᵀ R_qa`` is block-diagonal in one product basis
``U = ⊗_a U_a``. Per attribute, take the classes of the common refinement of every labelling of
that attribute that is not the identity (``m_a`` classes): every ``R_qaᵀ R_qa`` maps the
within-class contrasts to 0 (the identity maps them to themselves) and acts on the span of the
normalised class indicators as a small ``m_a x m_a`` matrix. So ``U_a`` = the normalised class
indicators, then orthonormal within-class contrasts (Helmert); in ``U``, for each set ``T`` of
attributes taken in their contrast part, ``H`` acts as one small matrix
``B_T = sum_{q keeps every a in T} w_q ⊗_{a not in T} C_qa`` (size ``prod_{a not in T} m_a``, 1 for
plain marginals: then ``H`` is diagonal, the "mean and contrasts" eigenbasis of HDMM's marginal
templates) on every contrast coordinate. Applying ``H`` or ``H⁻¹`` to a histogram costs
``O(K · sum_a n_a)`` (the basis change) plus ``O(K · max |B_T|)``: never a ``K x K`` matrix.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product

import numpy as np

__all__ = ["MarginalQueries"]


def _labels(raw: object, n: int, what: str) -> np.ndarray:
    lab = np.asarray(raw, dtype=np.int64).ravel()
    if lab.shape != (n,):
        raise ValueError(f"{what}: a labelling of {n} levels needs {n} labels, got {lab.size}")
    if lab.size and (lab.min() < 0 or np.unique(lab).size != lab.max() + 1):
        raise ValueError(f"{what}: labels must be 0..m-1, each used (got {sorted(set(lab.tolist()))})")
    return lab


class MarginalQueries:
    """Query groups over a product histogram (module docstring).

    Args:
        shape: attribute sizes, e.g. ``(8, 2, 2, 63)``.
        labels: per group, per attribute, the label of each level (``range(n_a)``: kept, zeros:
            summed out, otherwise a recode).
        names: optional group names.
    """

    def __init__(self, shape: Sequence[int], labels: Sequence[Sequence[object]],
                 names: Sequence[str] | None = None) -> None:
        self.shape = tuple(int(s) for s in shape)
        if not self.shape or any(s < 1 for s in self.shape):
            raise ValueError(f"shape must be positive attribute sizes, got {shape!r}")
        groups = []
        for q, per_attr in enumerate(labels):
            if len(per_attr) != len(self.shape):
                raise ValueError(f"group {q}: {len(per_attr)} labellings for {len(self.shape)} attributes")
            groups.append(tuple(_labels(lab, n, f"group {q}, attribute {a}")
                                for a, (lab, n) in enumerate(zip(per_attr, self.shape, strict=False))))
        self.labels: tuple[tuple[np.ndarray, ...], ...] = tuple(groups)
        self.names = tuple(str(n) for n in names) if names is not None else tuple(f"q{i}" for i in range(len(groups)))
        if len(self.names) != len(self.labels):
            raise ValueError("one name per group")
        #: per group, the number of answers per attribute
        self.answer_shape = tuple(tuple(int(lab.max()) + 1 for lab in g) for g in self.labels)
        self._spectrum: _Spectrum | None = None
        self._cell_answer: dict[int, np.ndarray] = {}

    # ------------------------------------------------------------------ basics
    @classmethod
    def from_kept(cls, shape: Sequence[int], kept: Sequence[Sequence[int]],
                  names: Sequence[str] | None = None) -> MarginalQueries:
        """Plain marginals: per group, the kept attribute indices (the others summed out)."""
        shape = tuple(int(s) for s in shape)
        return cls(shape, [[np.arange(n) if a in set(k) else np.zeros(n, np.int64) for a, n in enumerate(shape)]
                           for k in kept], names)

    @property
    def n_cells(self) -> int:
        """``K``."""
        return int(np.prod(self.shape))

    @property
    def n_groups(self) -> int:
        """Number of query groups."""
        return len(self.labels)

    def n_answers(self, q: int) -> int:
        """Number of answers (rows) of group ``q``."""
        return int(np.prod(self.answer_shape[q]))

    def is_identity(self, q: int, a: int) -> bool:
        """Whether group ``q`` keeps attribute ``a`` as it is."""
        lab = self.labels[q][a]
        return bool(np.array_equal(lab, np.arange(lab.size)))

    def is_detailed(self, q: int) -> bool:
        """Whether group ``q`` is the identity on every attribute (the cells themselves)."""
        return all(self.is_identity(q, a) for a in range(len(self.shape)))

    def with_group(self, labels: Sequence[object], name: str, first: bool = True) -> MarginalQueries:
        """A copy with one more group (first or last)."""
        own = [list(g) for g in self.labels]
        new = [labels, *own] if first else [*own, labels]
        names = [name, *self.names] if first else [*self.names, name]
        return MarginalQueries(self.shape, new, names)

    def with_detailed(self) -> MarginalQueries:
        """A copy with the detailed group (every attribute kept) first."""
        return self.with_group([np.arange(n) for n in self.shape], "detailed")

    def matrix(self, q: int) -> np.ndarray:
        """The dense 0/1 matrix of group ``q`` (rows: answers in C order; columns: cells)."""
        mat: np.ndarray = np.ones((1, 1))
        for lab, m in zip(self.labels[q], self.answer_shape[q], strict=False):
            r = np.zeros((m, lab.size))
            r[lab, np.arange(lab.size)] = 1.0
            mat = np.kron(mat, r)
        return mat

    def cell_answer(self, q: int) -> np.ndarray:
        """``(K,)``: the answer of group ``q`` that each cell counts in (read-only, cached)."""
        if q not in self._cell_answer:
            grids = np.meshgrid(*[lab for lab in self.labels[q]], indexing="ij")
            idx = np.ravel_multi_index(tuple(g.ravel() for g in grids), self.answer_shape[q]).astype(np.int64)
            idx.setflags(write=False)
            self._cell_answer[q] = idx
        return self._cell_answer[q]

    def answer(self, q: int, x: np.ndarray) -> np.ndarray:
        """``Q_q x`` for histograms ``x`` of shape ``(..., K)`` -> ``(..., R_q)`` (integer in,
        integer out)."""
        lead = x.shape[:-1]
        t = np.asarray(x).reshape(lead + self.shape)
        off = len(lead)
        for a, (lab, m) in enumerate(zip(self.labels[q], self.answer_shape[q], strict=False)):
            if m == lab.size and np.array_equal(lab, np.arange(m)):
                continue
            ax = off + a
            if m == 1:
                t = t.sum(axis=ax, keepdims=True)
                continue
            r = np.zeros((lab.size, m), dtype=t.dtype if t.dtype.kind in "iu" else float)
            r[np.arange(lab.size), lab] = 1
            t = np.moveaxis(np.tensordot(t, r, axes=([ax], [0])), -1, ax)
        return t.reshape((*lead, self.n_answers(q)))

    def spread(self, q: int, y: np.ndarray) -> np.ndarray:
        """``Q_qᵀ y`` for answers ``y`` of shape ``(..., R_q)`` -> ``(..., K)``."""
        lead = y.shape[:-1]
        t = np.asarray(y).reshape(lead + self.answer_shape[q])
        off = len(lead)
        for a, lab in enumerate(self.labels[q]):
            if t.shape[off + a] == lab.size and np.array_equal(lab, np.arange(lab.size)):
                continue
            t = np.take(t, lab, axis=off + a)
        return np.ascontiguousarray(t).reshape((*lead, self.n_cells))

    def gram_apply(self, weights: np.ndarray, x: np.ndarray) -> np.ndarray:
        """``H x`` with ``H = sum_q w_q Q_qᵀ Q_q`` per row: ``weights`` ``(C, G)`` (or ``(G,)``),
        ``x`` ``(C, K)``."""
        w = np.broadcast_to(np.asarray(weights, float), (*x.shape[:-1], self.n_groups))
        out = np.zeros(x.shape, float)
        for q in range(self.n_groups):
            if not np.any(w[..., q]):
                continue
            if self.is_detailed(q):
                out += w[..., q, None] * x
            else:
                out += w[..., q, None] * self.spread(q, self.answer(q, x))
        return out

    def gram(self, weights: np.ndarray) -> np.ndarray:
        """The dense ``K x K`` information matrix for one weight vector ``(G,)`` (small K only)."""
        w = np.asarray(weights, float)
        out = np.zeros((self.n_cells, self.n_cells))
        for q in range(self.n_groups):
            if w[q]:
                m = self.matrix(q)
                out += w[q] * (m.T @ m)
        return out

    # ------------------------------------------------------------------ structure
    @property
    def spectrum(self) -> _Spectrum:
        """The block-diagonalising product basis (module docstring), built once."""
        if self._spectrum is None:
            self._spectrum = _Spectrum(self)
        return self._spectrum

    def solve_gram(self, weights: np.ndarray, x: np.ndarray) -> np.ndarray:
        """``H⁻¹ x`` per row (``weights`` ``(C, G)`` or ``(G,)``, ``x`` ``(C, K)``), through the
        structured basis. Raises ``numpy.linalg.LinAlgError`` when some ``H`` is singular."""
        return self.spectrum.solve(np.asarray(weights, float), np.asarray(x, float))

    def eigenvalue_range(self, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Smallest and largest eigenvalue of ``H`` per weight row (``(C,)`` each)."""
        return self.spectrum.eigenvalue_range(np.atleast_2d(np.asarray(weights, float)))

    def determines_cells(self, weights: np.ndarray | None = None) -> bool:
        """Whether the groups (with positive weights; default all 1) determine every cell, i.e.
        ``H`` is positive definite: the stacked matrices have full column rank."""
        w = np.ones(self.n_groups) if weights is None else np.asarray(weights, float)
        lo, hi = self.eigenvalue_range(w[None, :])
        return bool(lo[0] > 1e-12 * max(hi[0], 1.0))


class _Spectrum:
    """Per attribute an orthonormal basis ``U_a`` (class part first, then contrasts) and per
    group and attribute the operator on the class part; per pattern ``T`` the blocks' layout."""

    def __init__(self, mq: MarginalQueries) -> None:
        self.mq = mq
        d = len(mq.shape)
        self.bases: list[np.ndarray] = []
        self.m: list[int] = []
        #: per group, per attribute: (class-part matrix C_qa, contrast value 0/1)
        self.ops: list[list[tuple[np.ndarray, float]]] = [[] for _ in range(mq.n_groups)]
        for a, n in enumerate(mq.shape):
            labs = [mq.labels[q][a] for q in range(mq.n_groups) if not mq.is_identity(q, a)]
            if labs:
                _, cls = np.unique(np.stack(labs, 1), axis=0, return_inverse=True)
                cls = cls.ravel()
            else:
                cls = np.zeros(n, np.int64)
            m = int(cls.max()) + 1
            sizes = np.bincount(cls, minlength=m).astype(float)
            U = np.zeros((n, n))
            U[np.arange(n), cls] = 1.0 / np.sqrt(sizes[cls])
            col = m
            for g in range(m):  # Helmert contrasts within each class
                members = np.flatnonzero(cls == g)
                for j in range(1, members.size):
                    U[members[:j], col] = 1.0
                    U[members[j], col] = -float(j)
                    U[:, col] /= np.sqrt(j * (j + 1))
                    col += 1
            self.bases.append(U)
            self.m.append(m)
            root = np.sqrt(sizes)
            for q in range(mq.n_groups):
                if mq.is_identity(q, a):
                    self.ops[q].append((np.eye(m), 1.0))
                else:
                    lab = mq.labels[q][a]
                    rep = np.zeros(m, np.int64)
                    rep[cls] = lab  # each refinement class lies inside one class of q's labelling
                    same = (rep[:, None] == rep[None, :]).astype(float)
                    self.ops[q].append((same * root[:, None] * root[None, :], 0.0))
        self.patterns: list[tuple[tuple[int, ...], tuple[slice, ...], int, int]] = []
        for T in product((False, True), repeat=d):
            if any(t and self.m[a] == mq.shape[a] for a, t in enumerate(T)):
                continue  # no contrast coordinates on that attribute
            sl = tuple(slice(self.m[a], None) if t else slice(0, self.m[a]) for a, t in enumerate(T))
            size = int(np.prod([self.m[a] for a in range(d) if not T[a]] or [1]))
            rest = int(np.prod([mq.shape[a] - self.m[a] for a in range(d) if T[a]] or [1]))
            self.patterns.append((tuple(a for a in range(d) if T[a]), sl, size, rest))

    def blocks(self, weights: np.ndarray) -> list[np.ndarray]:
        """Per pattern, ``(W, s, s)`` blocks for ``W`` weight rows."""
        mq = self.mq
        out = []
        for T, _, size, _ in self.patterns:
            B = np.zeros((weights.shape[0], size, size))
            for q in range(mq.n_groups):
                if any(self.ops[q][a][1] == 0.0 for a in T):
                    continue
                mat = np.ones((1, 1))
                for a in range(len(mq.shape)):
                    if a not in T:
                        mat = np.kron(mat, self.ops[q][a][0])
                B += weights[:, q, None, None] * mat[None]
            out.append(B)
        return out

    def eigenvalue_range(self, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lo = np.full(weights.shape[0], np.inf)
        hi = np.zeros(weights.shape[0])
        for B in self.blocks(weights):
            ev = np.linalg.eigvalsh(B)
            lo = np.minimum(lo, ev[:, 0])
            hi = np.maximum(hi, ev[:, -1])
        return lo, hi

    def to_basis(self, x: np.ndarray, inverse: bool = False) -> np.ndarray:
        t = x.reshape((x.shape[0], *self.mq.shape))
        off = 1
        for a, U in enumerate(self.bases):
            # coordinates: Uᵀ x; back: U z
            t = np.moveaxis(np.tensordot(t, U.T if inverse else U, axes=([off + a], [0])), -1, off + a)
        return t

    def solve(self, weights: np.ndarray, x: np.ndarray) -> np.ndarray:
        C = x.shape[0]
        w = np.broadcast_to(weights, (C, self.mq.n_groups)) if weights.ndim == 1 else weights
        uniq, which = np.unique(w, axis=0, return_inverse=True)
        which = which.ravel()
        inv = [np.linalg.inv(B)[which] for B in self.blocks(uniq)]
        z = self.to_basis(x)
        out = np.empty_like(z)
        d = len(self.mq.shape)
        for (T, sl, size, rest), Binv in zip(self.patterns, inv, strict=False):
            key = (slice(None), *sl)
            sub = z[key]
            order = [0] + [1 + a for a in range(d) if a not in T] + [1 + a for a in T]
            moved = np.transpose(sub, order)
            shp = moved.shape
            res = np.einsum("cij,cjr->cir", Binv, moved.reshape(C, size, rest)).reshape(shp)
            out[key] = np.transpose(res, np.argsort(order))
        return self.to_basis(out, inverse=True).reshape(C, self.mq.n_cells)
