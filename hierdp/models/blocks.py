"""Vectorized blocks of a :class:`~hierdp.models.Problem`: linear constraint rows and query terms.

Both are stored as CSR matrices over the problem's node indices (``scipy.sparse``), appended block
by block; no Python object is created per row, so millions of rows (the cumulative chains of
paper 001 over node x size, the query terms of the Census TopDown) pose in seconds.

* :class:`LinearRows`: ``lower <= A y <= upper`` (``add_constraints``, ``add_linear`` appends one
  row, ``add_monotone_chains`` appends two-term rows ``y[b] - y[a] >= 0``).
* :class:`QueryTerms`: objective terms on linear queries of the nodes, ``w_q * dist(a_q . y, t_q)``
  with the problem's distance (``l2``: squared, ``l1``: absolute; ``linf``: every block
  contributes the max of its terms).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from collections.abc import Callable, Hashable, Sequence

import numpy as np

#: row kinds: general linear rows vs two-term monotone-chain rows (a plug-in may honour only chains)
KIND_LINEAR = 0
KIND_CUMULATIVE = 1


@dataclass(frozen=True)
class LinearConstraint:
    """``lower <= sum(coef[k] * y[index[k]]) <= upper`` over node indices (one row, a read-only view)."""

    index: np.ndarray
    coef: np.ndarray
    lower: float = -np.inf
    upper: float = np.inf
    name: str | None = None

    def activity(self, values: np.ndarray) -> float:
        """Left-hand side evaluated at ``values``."""
        return float(np.dot(self.coef, np.asarray(values, dtype=float)[self.index]))


@dataclass
class _Chunk:
    """One appended block: CSR pieces with local row pointers."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    lower: np.ndarray  # constraints: lower bound; queries: target
    upper: np.ndarray  # constraints: upper bound; queries: weights
    name: str | None
    single: bool  # an ``add_linear`` row: its name is the row's own name
    kind: int = KIND_LINEAR

    @property
    def n_rows(self) -> int:
        return int(self.indptr.size - 1)


@dataclass
class _ChunkStore:
    """Append-only list of chunks, materialized into one CSR on demand."""

    chunks: list[_Chunk] = field(default_factory=list)

    def append(self, chunk: _Chunk) -> None:
        self.chunks.append(chunk)

    @property
    def n_rows(self) -> int:
        return sum(c.n_rows for c in self.chunks)

    def concat(self, n_cols: int) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(csr, lower, upper, block_of_row, kind_of_row)`` over all chunks."""
        from scipy.sparse import csr_matrix

        if not self.chunks:
            return (csr_matrix((0, n_cols)), np.zeros(0), np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int8))
        nnz = np.array([c.indices.size for c in self.chunks], dtype=np.int64)
        shift = np.concatenate([[0], np.cumsum(nnz)[:-1]])
        indptr = np.concatenate([[0]] + [c.indptr[1:] + s for c, s in zip(self.chunks, shift, strict=True)]).astype(np.int64)
        indices = np.concatenate([c.indices for c in self.chunks]).astype(np.int64)
        data = np.concatenate([c.data for c in self.chunks]).astype(float)
        rows = indptr.size - 1
        mat = csr_matrix((data, indices, indptr), shape=(rows, n_cols))
        lower = np.concatenate([c.lower for c in self.chunks]).astype(float)
        upper = np.concatenate([c.upper for c in self.chunks]).astype(float)
        block = np.repeat(np.arange(len(self.chunks), dtype=np.int64), [c.n_rows for c in self.chunks])
        kind = np.repeat(np.array([c.kind for c in self.chunks], dtype=np.int8), [c.n_rows for c in self.chunks])
        return mat, lower, upper, block, kind

    def row_name(self, block: int, row_in_block: int) -> str | None:
        c = self.chunks[block]
        if c.single:
            return c.name
        return None if c.name is None else f"{c.name}[{row_in_block}]"


class LinearRows:
    """All user linear rows of a problem: ``lower <= matrix @ y <= upper`` (read-only arrays).

    Attributes:
        matrix: ``scipy.sparse.csr_matrix`` of shape ``(m, n)`` over node indices.
        lower, upper: row bounds (``-inf`` / ``inf`` for a one-sided row).
        block: index of the block (``add_*`` call) each row came from.
        kind: per row, :data:`KIND_LINEAR` or :data:`KIND_CUMULATIVE` (a monotone-chain row).
    """

    def __init__(self, store: _ChunkStore, n_cols: int) -> None:
        self._store = store
        self.matrix, self.lower, self.upper, self.block, self.kind = store.concat(n_cols)
        for a in (self.lower, self.upper, self.block, self.kind):
            a.setflags(write=False)
        starts = np.concatenate([[0], np.cumsum([c.n_rows for c in store.chunks])]).astype(np.int64)
        self._block_start = starts

    def __len__(self) -> int:
        return int(self.matrix.shape[0])

    @property
    def n_rows(self) -> int:
        """Number of rows."""
        return len(self)

    def name(self, r: int) -> str:
        """A readable label for row ``r``: its name, ``block[i]`` for a named block, else ``#r``."""
        b = int(self.block[r])
        got = self._store.row_name(b, int(r - self._block_start[b]))
        return got if got is not None else f"#{int(r)}"

    def activity(self, values: np.ndarray) -> np.ndarray:
        """``matrix @ values`` (the left-hand sides)."""
        return self.matrix @ np.asarray(values, dtype=float)

    def as_list(self) -> list[LinearConstraint]:
        """One :class:`LinearConstraint` per row (slow for millions of rows; for small problems)."""
        m = self.matrix
        out = []
        for r in range(len(self)):
            s, e = m.indptr[r], m.indptr[r + 1]
            b = int(self.block[r])
            out.append(LinearConstraint(m.indices[s:e].astype(np.int64), m.data[s:e].astype(float),
                                        float(self.lower[r]), float(self.upper[r]),
                                        self._store.row_name(b, int(r - self._block_start[b]))))
        return out


class QueryTerms:
    """All query terms of a problem: term ``q`` is ``weight[q] * dist(matrix[q] @ y, target[q])``.

    Attributes:
        matrix: ``scipy.sparse.csr_matrix`` of shape ``(Q, n)`` over node indices.
        target, weight: per term.
        block: the block (``add_query_terms`` call) of each term; for ``linf`` every block is one
            group whose largest weighted deviation enters the objective.
    """

    def __init__(self, store: _ChunkStore, n_cols: int) -> None:
        self._store = store
        self.matrix, self.target, self.weight, self.block, _ = store.concat(n_cols)
        for a in (self.target, self.weight, self.block):
            a.setflags(write=False)
        self.n_blocks = len(store.chunks)

    def __len__(self) -> int:
        return int(self.matrix.shape[0])

    def deviations(self, values: np.ndarray) -> np.ndarray:
        """``matrix @ values - target`` per term."""
        return self.matrix @ np.asarray(values, dtype=float) - self.target


# ---------------------------------------------------------------------------------- block builders
def as_csr_block(a: Any, n_cols: int, what: str, columns: np.ndarray | None = None) -> Any:
    """``a`` (scipy sparse, dense 2-D or 1-D array) as a canonical CSR with ``n_cols`` columns.

    ``columns`` maps ``a``'s columns to node indices (then ``a`` has ``len(columns)`` columns).
    Explicit zeros are dropped and duplicate entries summed.

    Raises:
        ValueError: wrong shape, non-finite coefficients (the message names ``what``).
    """
    from scipy import sparse

    if sparse.issparse(a):
        m = sparse.csr_matrix(a, dtype=float, copy=True)
    else:
        arr = np.asarray(a, dtype=float)
        if arr.ndim == 1:
            arr = arr[None, :]
        if arr.ndim != 2:
            raise ValueError(f"{what}: the matrix must be 2-D, got shape {arr.shape}")
        m = sparse.csr_matrix(arr)
    if not np.all(np.isfinite(m.data)):
        r = int(np.searchsorted(m.indptr, int(np.flatnonzero(~np.isfinite(m.data))[0]), side="right") - 1)
        raise ValueError(f"{what}: row {r} has a non-finite coefficient")
    if columns is not None:
        if m.shape[1] != columns.size:
            raise ValueError(f"{what}: the matrix has {m.shape[1]} columns for {columns.size} nodes")
        m = sparse.csr_matrix((m.data, columns[m.indices], m.indptr), shape=(m.shape[0], n_cols))
    elif m.shape[1] != n_cols:
        raise ValueError(f"{what}: the matrix has {m.shape[1]} columns; the problem has {n_cols} nodes")
    m.sum_duplicates()
    m.eliminate_zeros()
    m.sort_indices()
    return m


def row_vector(v: Any, m: int, default: float, what: str) -> np.ndarray:
    """A scalar or length-``m`` vector as float64 of length ``m``."""
    arr = np.asarray(default if v is None else v, dtype=float)
    if arr.ndim == 0:
        return np.full(m, float(arr))
    arr = arr.ravel()
    if arr.size != m:
        raise ValueError(f"{what} has {arr.size} entries for {m} rows")
    return arr.copy()


def chain_pairs(chains: Any, index_of: Callable[[Hashable], int]) -> tuple[np.ndarray, np.ndarray]:
    """``(earlier, later)`` node indices of every consecutive pair of every chain.

    ``chains``: a 2-D integer array (one chain per row, vectorized), or a sequence of sequences of
    node names / indices (chains may differ in length).
    """
    arr = None
    if isinstance(chains, np.ndarray) and chains.ndim == 2 and np.issubdtype(chains.dtype, np.integer):
        arr = chains.astype(np.int64)
    if arr is not None:
        return arr[:, :-1].ravel(), arr[:, 1:].ravel()
    earlier: list[int] = []
    later: list[int] = []
    for chain in chains:
        idx = [index_of(v) for v in chain]
        earlier.extend(idx[:-1])
        later.extend(idx[1:])
    return np.asarray(earlier, dtype=np.int64), np.asarray(later, dtype=np.int64)


def chain_block(earlier: np.ndarray, later: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR pieces ``(indptr, indices, data)`` of the rows ``y[later] - y[earlier]`` (sorted columns)."""
    m = earlier.size
    swap = later < earlier
    first = np.where(swap, later, earlier)
    second = np.where(swap, earlier, later)
    indices = np.empty(2 * m, np.int64)
    indices[0::2] = first
    indices[1::2] = second
    data = np.empty(2 * m)
    data[0::2] = np.where(swap, 1.0, -1.0)
    data[1::2] = np.where(swap, -1.0, 1.0)
    indptr = np.arange(0, 2 * m + 1, 2, dtype=np.int64)
    return indptr, indices, data


def names_of(nodes: Sequence[Hashable] | np.ndarray, index_of: Callable[[Hashable], int], n: int) -> np.ndarray:
    """Node indices of ``nodes`` (an integer array is range-checked without a Python loop)."""
    arr = np.asarray(nodes)
    if np.issubdtype(arr.dtype, np.integer) and arr.ndim == 1:
        bad = (arr < 0) | (arr >= n)
        if bad.any():
            raise ValueError(f"node index {int(arr[np.flatnonzero(bad)[0]])} out of range 0..{n - 1}")
        return arr.astype(np.int64)
    return np.asarray([index_of(v) for v in nodes], dtype=np.int64)
