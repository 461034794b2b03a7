"""``histogram_wls_dense``: the dense exact per-parent WLS of a histogram level chunk (kind
``"histogram_wls"``), certified per parent - the oracle of the structured ``histogram_wls`` on
small histograms (it builds ``K x K`` matrices: memory ``O(children · K²)``, cost ``O(K³)`` per
distinct weights and active set).

**Weighted least squares**. For a parent p with children c, child c's objective is
``sum_q w_cq ||Q_q x_c - y_cq||^2 = x_cᵀ H_c x_c - 2 b_cᵀ x_c + const`` with the K x K information
matrix ``H_c = sum_q w_cq Q_qᵀ Q_q`` (positive definite: the strategy has full column rank) and
``b_c = sum_q w_cq Q_qᵀ y_cq``. The constraints are ``sum_c E x_c = P_p`` (E maps a child cell to
its parent cell: the identity, or every cell to the root's total), ``x_c >= 0``, and optionally an
invariant total ``1ᵀ x_c = t_c``. For a guessed active set A (cells held at 0) the KKT system is
solved exactly by eliminating every child: with the bordered child matrix
``M_c = [[H_FF + I_AA, 1_F], [1_Fᵀ, 0]]`` (the border only with invariant totals),
``x_c = G_c (b_c - Eᵀ λ_p) + t_c s_c`` where ``G_c`` and ``s_c`` are blocks of ``M_c⁻¹``, and the
parent's multiplier solves the small system ``(sum_c E G_c Eᵀ) λ_p = sum_c E (G_c b_c + t_c s_c) - P_p``
(one step of iterative refinement). The active set is updated by the primal-dual active-set rule
(free cells that went negative become active; active cells whose multiplier went negative are
freed), for all parents of a batch at once, with numpy batched inverses: no loop over nodes.

A parent is **certified** when its KKT conditions hold within stated tolerances: primal
feasibility (``x >= -tol``, parent and invariant equalities within ``tol = 1e-9 max(1, |P_p|)``),
stationarity on free cells and non-negative multipliers on active cells (within ``1e-9`` of the
gradient's scale). The QP is strictly convex, so a KKT point is its unique optimum. Parents that
are not certified after ``max_iter`` updates (the primal-dual rule can cycle when H is not an
M-matrix) are returned as such; the mechanism sends them to the general solver.

Structural zeros (an upper bound 0) are cells held at 0; other bounds and user rows are refused
(``unsupported``): the structured plug-in handles them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from hierdp.models.histogram import HistogramWLS, LevelChunk
from hierdp.models.problem import Problem
from hierdp.solvers._histogram_face import FEASIBILITY_RTOL, STATIONARITY_RTOL
from hierdp.solvers.base import Capabilities, Solution, Solver

__all__ = ["DenseHistogramWLSSolver", "FastWLSResult", "child_information", "wls_fast"]

#: the largest histogram the dense oracle accepts (its K x K matrices per child)
MAX_DENSE_CELLS = 512


@dataclass
class FastWLSResult:
    """Outcome of :func:`wls_fast` on a chunk.

    Attributes:
        values: ``(C, K)`` continuous child values (>= 0; meaningful for certified parents only).
        certified: ``(P,)`` bool, KKT conditions verified for that parent.
        iterations: ``(P,)`` active-set updates each parent needed (``max_iter + 1`` if never).
    """

    values: np.ndarray
    certified: np.ndarray
    iterations: np.ndarray


def child_information(chunk: LevelChunk) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every child's information matrix and linear term, deduplicated.

    Returns ``(H_unique (U, K, K), which (C,), b (C, K), measured (C,))``: child c's matrix is
    ``H_unique[which[c]]`` (children with the same weights share one, so a geolevel has only as
    many distinct matrices as distinct budgets), and whether c has any measurement.
    """
    _, _C, K = chunk.shape
    tw = np.where(np.isnan(chunk.targets).any(1), 0.0, chunk.target_weight)
    b = tw[:, None] * np.nan_to_num(chunk.targets)
    weights = [tw]
    for mat, ans, w in zip(chunk.query_mats, chunk.query_answers, chunk.query_weight, strict=False):
        wq = np.where(~np.isnan(ans).any(1), w, 0.0)
        b += wq[:, None] * (np.nan_to_num(ans) @ mat)
        weights.append(wq)
    W = np.stack(weights, 1)  # (C, 1 + groups)
    uniq, which = np.unique(W, axis=0, return_inverse=True)
    grams = np.stack([np.eye(K)] + [m.T @ m for m in chunk.query_mats])  # (1 + groups, K, K)
    H = np.einsum("ug,gkl->ukl", uniq, grams)
    return H, which.ravel(), b, np.asarray((W > 0).any(1))


def _segment_sum(a: np.ndarray, starts: np.ndarray) -> np.ndarray:
    return np.add.reduceat(a, starts, axis=0)


def wls_fast(chunk: LevelChunk, *, max_iter: int = 50) -> FastWLSResult:
    """The exact weighted least-squares stage for every parent of ``chunk`` (module docstring).

    ``chunk.child_parent`` must list each parent's children contiguously (parents 0..P-1 in order),
    every parent having at least one child. Memory is O(C K²): callers bound C per chunk.
    """
    P, C, K = chunk.shape
    kp = chunk.parent_values.shape[1]
    cp = np.asarray(chunk.child_parent, np.int64)
    counts = np.bincount(cp, minlength=P)
    if C == 0 or (counts == 0).any() or (np.diff(cp) < 0).any():
        raise ValueError("wls_fast needs every parent's children listed contiguously, each parent with a child")
    H, which, b, measured = child_information(chunk)
    E = np.zeros((kp, K))
    E[chunk.cell_map, np.arange(K)] = 1.0
    identity_map = kp == K and np.array_equal(chunk.cell_map, np.arange(K))
    Pv = chunk.parent_values.astype(float)
    totals = None if chunk.totals is None else np.asarray(chunk.totals, float)
    # every child cell under a parent cell fixed at 0 is 0 (non-negativity); so is a child with total 0
    forced = (Pv == 0)[cp][:, chunk.cell_map]  # (C, K)
    if chunk.upper is not None:  # structural zeros
        forced |= chunk.upper <= 0
    if totals is not None:
        forced |= (totals == 0)[:, None]
    active = forced.copy()
    x = np.zeros((C, K))
    certified = np.zeros(P, bool)
    # a parent with an unmeasured child has a singular H_c: leave it to the general solver
    hopeless = np.bincount(cp, weights=~measured, minlength=P) > 0
    iterations = np.full(P, max_iter + 1, np.int64)
    live = np.flatnonzero(~hopeless)
    starts_all = np.concatenate([[0], np.cumsum(counts)[:-1]])
    G_all = np.empty((C, K, K))
    s_all = np.empty((C, K))
    dirty = np.ones(C, bool)
    for it in range(max_iter + 1):
        if live.size == 0:
            break
        # children of the live parents (contiguous runs), with local parent ids
        lc = counts[live]
        starts = np.concatenate([[0], np.cumsum(lc)[:-1]])
        kids = np.repeat(starts_all[live] - starts, lc) + np.arange(lc.sum())
        local = np.repeat(np.arange(live.size), lc)
        A = active[kids]
        tk = None if totals is None else totals[kids]
        # child blocks only where the active set changed (most children settle after one update)
        d = kids[dirty[kids]]
        G_all[d], s_d = _child_blocks(H, which[d], active[d], totals is not None)
        if s_d is not None:
            s_all[d] = s_d
        dirty[d] = False
        xs, nu, ok = _solve_active_set(H, which[kids], G_all[kids], None if tk is None else s_all[kids], b[kids], A,
                                       E, chunk.cell_map, identity_map, Pv[live], local, starts, tk)
        x[kids] = xs
        certified[live] = ok
        iterations[live[ok]] = it
        if it == max_iter or ok.all():
            break
        # primal-dual active-set update for the parents not yet certified
        redo = ~ok[local]
        new = (~A & (xs < 0)) | (A & (nu > 0)) | forced[kids]
        new = _keep_one_free(new, nu, local, Pv[live], chunk.cell_map, kp, tk)
        changed = redo & (new != A).any(1)
        A[changed] = new[changed]
        active[kids] = A
        dirty[kids[changed]] = True
        live = live[~ok]
    x = np.where(active, 0.0, np.maximum(x, 0.0))
    return FastWLSResult(x, certified, iterations)


def _child_blocks(H: np.ndarray, which: np.ndarray, A: np.ndarray, border: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """``G_c`` and ``s_c`` (blocks of the inverse bordered child matrix), one inverse per distinct
    (information matrix, active set) pair."""
    C, K = A.shape
    key = np.concatenate([which[:, None], np.packbits(A, axis=1).astype(np.int64)], axis=1)
    uk, inv_idx = np.unique(key, axis=0, return_index=False, return_inverse=True)
    inv_idx = inv_idx.ravel()
    first = np.zeros(uk.shape[0], np.int64)
    first[inv_idx[::-1]] = np.arange(C)[::-1]  # a representative child per key
    Au = A[first]
    Fu = (~Au).astype(float)
    M = np.zeros((uk.shape[0], K + 1, K + 1))
    M[:, :K, :K] = H[uk[:, 0]] * (Fu[:, :, None] * Fu[:, None, :])
    M[:, np.arange(K), np.arange(K)] += Au  # x_A = 0 rows
    if border:
        M[:, :K, K] = Fu
        M[:, K, :K] = Fu
        M[:, K, K] = np.where(Fu.any(1), 0.0, 1.0)  # no free cell: the total must be 0 (mu arbitrary)
    else:
        M[:, K, K] = 1.0
    inv = np.linalg.inv(M)
    Gu = inv[:, :K, :K] * (Fu[:, :, None] * Fu[:, None, :])
    G = Gu[inv_idx]
    s = (inv[:, :K, K] * Fu)[inv_idx] if border else None
    return G, s


def _solve_active_set(H: np.ndarray, which: np.ndarray, G: np.ndarray, s: np.ndarray | None, b: np.ndarray,
                      A: np.ndarray, E: np.ndarray, cell_map: np.ndarray, identity_map: bool, Pv: np.ndarray,
                      local: np.ndarray, starts: np.ndarray,
                      totals: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """KKT solve for fixed active sets; returns x, multipliers of the active cells, certified."""
    _C, _K = b.shape
    P, kp = Pv.shape
    F = ~A
    Ff = F.astype(float)
    border = totals is not None
    own = np.einsum("ckl,cl->ck", G, b)
    if totals is not None and s is not None:
        own = own + totals[:, None] * s
    if identity_map:
        S = _segment_sum(G, starts)
        r = _segment_sum(own, starts) - Pv
    else:
        S = _segment_sum(E @ G @ E.T, starts)
        r = _segment_sum(own @ E.T, starts) - Pv
    # null directions: parent cells with no free child cell (lambda_i = 0), and with invariant
    # totals the all-ones direction (absorbed by the children's mu); consistent right-hand sides
    # make the regularized solution a solution of the original system
    diag = np.einsum("pii->pi", S)
    empty = diag == 0
    S[:, np.arange(kp), np.arange(kp)] += empty
    if border:
        u = (~empty).astype(float)
        u /= np.maximum(np.sqrt(u.sum(1, keepdims=True)), 1.0)
        S += u[:, :, None] * u[:, None, :] * np.maximum(diag.max(1), 1e-300)[:, None, None]
    r = np.where(empty, 0.0, r)
    try:
        Sinv = np.linalg.inv(S)  # positive definite after the regularization (the common case)
    except np.linalg.LinAlgError:  # e.g. invariant totals with disjoint free sets: more null directions
        Sinv = np.linalg.pinv(S, rcond=1e-13, hermitian=True)
    lam = np.einsum("pij,pj->pi", Sinv, r)

    def primal(lam: np.ndarray) -> np.ndarray:
        lamc = lam[local] @ E  # (C, K): E^T lambda of the child's parent
        return own - np.einsum("ckl,cl->ck", G, lamc)

    xs = primal(lam)
    res = _segment_sum(xs @ E.T, starts) - Pv
    lam = lam + np.einsum("pij,pj->pi", Sinv, np.where(empty, 0.0, res))  # one refinement step
    xs = primal(lam)
    lamc = lam[local] @ E
    grad = np.einsum("ckl,cl->ck", H[which], xs) - b + lamc
    if border:
        nf = F.sum(1)
        mu = -np.where(nf > 0, (grad * Ff).sum(1) / np.maximum(nf, 1), 0.0)
        nu = grad + mu[:, None]
    else:
        nu = grad
    # --- certificate (KKT within tolerances), per parent
    scale_x = np.maximum(1.0, np.abs(Pv).max(1))  # (P,)
    tol_x = FEASIBILITY_RTOL * scale_x
    # magnitude of the gradient's terms: |H x| <= max row sum of |H| * max |x|
    gscale = np.abs(H).sum(2).max(1)[which] * np.abs(xs).max(1) + np.abs(b).max(1) + np.abs(lamc).max(1)
    if border:
        gscale = gscale + np.abs(mu)
    tol_g = STATIONARITY_RTOL * np.maximum(gscale, 1e-300)  # (C,)
    # an active cell whose parent cell has no free child cell (or, with totals, whose child has no
    # free cell) has a free multiplier (lambda_i or mu_c can be taken large): no sign condition.
    # "No free child cell" is counted, not read off S's diagonal: with totals, a child whose one
    # free cell is fixed by its total adds nothing to S, yet its stationarity ties lambda_i to mu_c
    # (so lambda_i is not free: the sign conditions of the other active cells must hold)
    nofree = _segment_sum(Ff @ E.T, starts) == 0
    held = A & ~np.asarray(nofree)[local][:, cell_map]
    if border:
        held &= np.asarray(F.any(1))[:, None]
    bad_child = ((F & (xs < -tol_x[local][:, None])).any(1)
                 | (F & (np.abs(nu) > tol_g[:, None])).any(1)
                 | (held & (nu < -tol_g[:, None])).any(1))
    if border:
        bad_child |= np.abs((xs * Ff).sum(1) - totals) > tol_x[local]
    eq = np.abs(_segment_sum(np.where(A, 0.0, xs) @ E.T, starts) - Pv).max(1)
    bad_child |= ~np.isfinite(xs).all(1)
    ok = (eq <= tol_x) & (np.bincount(local, weights=bad_child, minlength=P) == 0)
    return np.where(A, 0.0, xs), np.where(A, nu, 0.0), ok


def _keep_one_free(new: np.ndarray, nu: np.ndarray, local: np.ndarray, Pv: np.ndarray, cell_map: np.ndarray,
                   kp: int, totals: np.ndarray | None) -> np.ndarray:
    """A parent cell with a positive value (a child with a positive total) needs a free cell: free
    the candidate with the smallest multiplier (the least strongly held at 0)."""
    C, K = new.shape
    group = (local[:, None] * kp + cell_map[None, :]).ravel()
    n_free = np.bincount(group, weights=~new.ravel(), minlength=Pv.size)
    stuck = (n_free == 0) & (Pv.ravel() > 0)
    if stuck.any():
        cand = np.flatnonzero(stuck[group])
        key = np.where(np.isfinite(nu.ravel()[cand]), nu.ravel()[cand], np.inf)
        order = np.lexsort((key, group[cand]))
        g = group[cand][order]
        first = np.r_[True, g[1:] != g[:-1]]
        flat = new.ravel().copy()
        flat[cand[order][first]] = False
        new = flat.reshape(C, K)
    if totals is not None:
        stuck_c = new.all(1) & (totals > 0)
        if stuck_c.any():
            rows = np.flatnonzero(stuck_c)
            new[rows, np.argmin(nu[rows], axis=1)] = False
    return new


class DenseHistogramWLSSolver(Solver):
    """The dense oracle of histogram chunks' WLS (module docstring)."""

    name = "histogram_wls_dense"
    problem_kinds = frozenset({"histogram_wls"})

    @dataclass(frozen=True)
    class Options:
        """``max_active_set_updates``: primal-dual active-set updates per parent."""

        max_active_set_updates: int = 50

    capabilities = Capabilities(
        objectives=frozenset({"l2"}), integer=False, continuous=True, structures=frozenset({"histogram"}),
        features=frozenset({"weights", "query_terms", "linear_constraints"}),
        limits={"problem_kind": "histogram_wls", "max_cells": MAX_DENSE_CELLS,
                "optimality": f"KKT certified per parent: constraints {FEASIBILITY_RTOL:g} x max(1, |parent|), "
                              f"stationarity {STATIONARITY_RTOL:g} of the gradient's terms",
                "rows": "invariant child totals only (no user rows, no bounds but structural zeros)",
                "time_limit": "not needed (at most max_active_set_updates vectorized passes)"},
        tolerance=FEASIBILITY_RTOL,
        description="dense per-parent WLS of histogram chunks (K x K inverses per distinct active set): the oracle "
                    "of histogram_wls on small histograms",
    )

    def unsupported(self, problem: Any) -> list[str]:
        """Refusals: general Problems, other kinds, more than :data:`MAX_DENSE_CELLS` cells, user
        rows, bounds other than structural zeros."""
        if isinstance(problem, Problem):
            return ["solves histogram level chunks (problem kind 'histogram_wls') only, not a general Problem"]
        if getattr(problem, "kind", None) != "histogram_wls":
            return [f"solves problem kind 'histogram_wls', not {getattr(problem, 'kind', type(problem).__name__)!r}"]
        c = problem.chunk
        why = []
        K = c.targets.shape[1]
        if K > MAX_DENSE_CELLS:
            why.append(f"{K:,} cells: the dense oracle builds K x K = {K * K:,}-entry matrices per child (limit "
                       f"{MAX_DENSE_CELLS} cells); use histogram_wls")
        if c.n_rows:
            why.append("user rows not supported (histogram_wls handles them)")
        if c.lower is not None and np.any(c.lower > 0):
            why.append("lower bounds not supported (histogram_wls handles them)")
        if c.upper is not None and np.any((c.upper > 0) & np.isfinite(c.upper)):
            why.append("upper bounds other than structural zeros not supported (histogram_wls handles them)")
        return why

    def solve_problem(self, problem: Any, *, time_limit: float | None = None, **options: Any) -> Solution:
        """Solve every parent; status ``optimal`` only when every parent is certified."""
        from hierdp.solvers.histogram_wls import chunk_solution

        opts = self.parse_options(options)
        t0 = time.perf_counter()
        assert isinstance(problem, HistogramWLS)
        res = wls_fast(problem.chunk, max_iter=opts.max_active_set_updates)
        reason = np.where(res.certified, 0, np.where(res.iterations > opts.max_active_set_updates, 2, 1))
        hopeless = ~_measured_parents(problem.chunk)
        reason = np.where(hopeless, 3, reason)
        return chunk_solution(problem, res.values, res.certified, reason, self.name, t0,
                              {"rounds_max": int(res.iterations[res.certified].max(initial=0))})


def _measured_parents(chunk: LevelChunk) -> np.ndarray:
    P = chunk.shape[0]
    return np.bincount(chunk.child_parent, weights=~chunk.measured(), minlength=P) == 0
