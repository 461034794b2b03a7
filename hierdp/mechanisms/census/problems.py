"""The per-parent models of the Census-style TopDown, posed as :class:`~hierdp.models.Problem`\\ s.

For a chunk of parents of one geolevel, node layout: the parents' cells first (fixed at the
released parent histograms), then every child's cells (free; child-cell ``(c, k)``'s parent is
cell ``k`` of c's parent). So consistency per cell is the Problem's own tree constraint, and a
parent's K cells are K groups; the query terms of a child (its marginals) couple them, so the
solvers' batch planner keeps one parent's groups together (one model per parent, batched).

* **continuous stage**: ``l2``, continuous, non-negative; node targets = the detailed query's noisy
  answers with weight 1/variance; every other query group is a block of query terms (target the
  noisy answers, weight 1/variance). Unmeasured children have no terms (NaN targets): bypass is
  "nodes with no measurement".
* **rounding stage**: ``l1``, integer, bounds ``floor(x̂) <= y <= floor(x̂) + 1``; node targets x̂ and
  query terms at the continuous answers (the Census rounder: L1 over floor + binary increments).
  The constraint matrix of consistency plus per-child invariant totals is a transportation matrix
  (totally unimodular) and x̂ is a fractional point of it, so an integer point exists.
* **invariants**: a child's total fixed exactly is one constraint row ``sum_k y[c, k] = total``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import sparse

from hierdp.models import Problem

__all__ = ["LevelChunk", "continuous_problem", "rounding_problem"]


class LevelChunk:
    """Children of a chunk of parents, with their measurements (arrays, no Python object per node).

    Attributes:
        parent_values: ``(P, K)`` released parent histograms.
        child_parent: local parent index (0..P-1) of every child.
        targets: ``(C, K)`` noisy detailed answers (NaN: not measured or no detailed group).
        target_weight: ``(C,)`` weight of the detailed answers (0 where none).
        query_mats: per non-detailed group, its ``(R_q, K)`` matrix.
        query_answers: per group ``(C, R_q)`` noisy answers (NaN rows: unmeasured child).
        query_weight: per group ``(C,)`` weights (1/variance).
        totals: ``(C,)`` invariant totals, or None.
    """

    def __init__(self, parent_values: np.ndarray, child_parent: np.ndarray, targets: np.ndarray,
                 target_weight: np.ndarray, query_mats: list[np.ndarray], query_answers: list[np.ndarray],
                 query_weight: list[np.ndarray], totals: np.ndarray | None,
                 cell_map: np.ndarray | None = None) -> None:
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

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(P, C, K)``."""
        return self.parent_values.shape[0], self.child_parent.size, self.targets.shape[1]

    def subset(self, parents: np.ndarray) -> tuple[LevelChunk, np.ndarray]:
        """The chunk of the parents where the bool mask ``parents`` holds, and the indices of their
        children in this chunk (parents renumbered in order)."""
        keep = np.asarray(parents, bool)
        kids = np.flatnonzero(keep[self.child_parent])
        renum = np.cumsum(keep) - 1
        sub = LevelChunk(self.parent_values[keep], renum[self.child_parent[kids]], self.targets[kids],
                         self.target_weight[kids], self.query_mats, [a[kids] for a in self.query_answers],
                         [w[kids] for w in self.query_weight], None if self.totals is None else self.totals[kids],
                         self.cell_map)
        return sub, kids

    @property
    def n_parent_nodes(self) -> int:
        """Number of fixed parent-cell nodes (P times the parents' cells)."""
        return int(self.parent_values.size)


def _skeleton(chunk: LevelChunk) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    P, C, K = chunk.shape
    kp = chunk.parent_values.shape[1]
    npn = chunk.n_parent_nodes
    parent = np.concatenate([np.full(npn, -1, np.int64),
                             (chunk.child_parent[:, None] * kp + chunk.cell_map[None, :]).ravel()])
    fixed = np.concatenate([chunk.parent_values.astype(float).ravel(), np.full(C * K, np.nan)])
    child_nodes = npn + np.arange(C * K, dtype=np.int64)
    return parent, fixed, child_nodes


def _query_block(mat: np.ndarray, rows: np.ndarray, C: int) -> Any:
    """``kron(I_C, mat)`` restricted to children ``rows`` (CSR over the children's cell columns)."""
    K = mat.shape[1]
    block = sparse.kron(sparse.identity(C, format="csr"), sparse.csr_matrix(mat), format="csr")
    keep = (rows[:, None] * mat.shape[0] + np.arange(mat.shape[0])[None, :]).ravel()
    del K
    return block[keep]


def _add_invariants(p: Problem, chunk: LevelChunk, child_nodes: np.ndarray) -> None:
    if chunk.totals is None:
        return
    _, C, K = chunk.shape
    mat = sparse.kron(sparse.identity(C, format="csr"), sparse.csr_matrix(np.ones((1, K))), format="csr")
    p.add_constraints(mat, chunk.totals.astype(float), chunk.totals.astype(float), nodes=child_nodes,
                      name="invariant total")


def continuous_problem(chunk: LevelChunk) -> Problem:
    """The weighted least-squares model of a chunk of parents (see the module docstring)."""
    P, C, K = chunk.shape
    parent, fixed, child_nodes = _skeleton(chunk)
    npn = chunk.n_parent_nodes
    target = np.concatenate([np.full(npn, np.nan), chunk.targets.ravel()])
    w = np.concatenate([np.ones(npn), np.repeat(chunk.target_weight, K)])
    w = np.where(np.isnan(target), 1.0, w)
    p = Problem(parent, target, fixed=fixed, objective="l2", integer=False, nonnegative=True, weights=w)
    for q, (mat, ans, wq) in enumerate(zip(chunk.query_mats, chunk.query_answers, chunk.query_weight)):
        rows = np.flatnonzero(~np.isnan(ans[:, 0]))
        if rows.size == 0:
            continue
        p.add_query_terms(_query_block(mat, rows, C), ans[rows].ravel(), np.repeat(wq[rows], mat.shape[0]),
                          nodes=child_nodes, name=f"query group {q}")
    _add_invariants(p, chunk, child_nodes)
    return p


def rounding_problem(chunk: LevelChunk, xhat: np.ndarray, queries: bool = True) -> Problem:
    """The integer L1 rounder around the continuous solution ``xhat`` (``(C, K)``): over every
    query answer (``queries=True``, the DAS's objective) or over the cells only (then the model is
    a transportation problem: totally unimodular, its LP optimum is integral)."""
    P, C, K = chunk.shape
    parent, fixed, child_nodes = _skeleton(chunk)
    x = np.maximum(np.asarray(xhat, dtype=float), 0.0)
    # 2.9999999 from a QP with 1e-7 feasibility tolerance means 3: its box is [3, 4], which still
    # holds the continuous point up to that tolerance
    lo = np.floor(x + 1e-7)
    npn = chunk.n_parent_nodes
    lower = np.concatenate([np.full(npn, -np.inf), lo.ravel()])
    upper = np.concatenate([np.full(npn, np.inf), (lo + 1).ravel()])
    target = np.concatenate([np.full(npn, np.nan), x.ravel()])
    p = Problem(parent, target, fixed=fixed, objective="l1", integer=True, nonnegative=True, lower=lower, upper=upper)
    for q, mat in enumerate(chunk.query_mats if queries else []):
        p.add_query_terms(_query_block(mat, np.arange(C), C), (x @ mat.T).ravel(), 1.0, nodes=child_nodes,
                          name=f"query group {q}")
    _add_invariants(p, chunk, child_nodes)
    return p
