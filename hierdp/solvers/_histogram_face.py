"""The structured per-parent weighted least squares of a histogram level chunk: slot layout,
structured products, face projections, multipliers and the KKT certificate.

Notation (a chunk of parents, :class:`~hierdp.models.histogram.LevelChunk`): child ``c`` has the
objective ``½ x_cᵀ H_c x_c - b_cᵀ x_c`` with ``H_c = sum_q w_cq Q_qᵀ Q_q`` (the detailed group's
``Q = I``), constraints: every parent cell ``i`` equals the sum of its child cells (``A1 x = P``),
bounds ``l <= x <= u`` (``l = 0`` by default), rows ``rl <= A2 x <= ru`` (user rows and invariant
child totals).

**Slots.** A child cell under a parent cell fixed at 0, or with upper bound 0, is 0: it is dropped.
The other ``(child, cell)`` pairs are the *slots* (at the block level of a PL94 release, about the
parent's few hundred non-zero cells per child, not 2,016). ``H x`` over slots costs ``O(slots · G)``:
per query group, a marginal sum per child (``bincount`` over the slot's answer index) spread back.

**Units.** Parents are independent unless a row couples them; coupled parents form one *unit*.
Every scalar of the iterative method (step sizes, convergence) is per unit: a batch of units is
solved at once, vectorised over all its slots.

**Faces.** For a *working set* - each slot free, at its lower or at its upper bound; each row
inactive, at its lower or at its upper bound (equality rows always active) - the equality-
constrained QP on the free slots is solved by projected conjugate gradients: the orthogonal
projection onto ``{A1 d = 0, A2_active d = 0}`` over the free slots is the per-cell mean
subtraction, corrected through a small per-unit Schur complement when rows are active. The
multipliers (``λ`` per parent cell, ``π`` per active row) are the least-squares fit of the
gradient on the free slots; the slots' bound multipliers are ``ν = ∇f + A1ᵀλ + A2ᵀπ``.

**Certificate.** A unit is certified when its KKT conditions hold within stated tolerances
(:data:`FEASIBILITY_RTOL` times ``max(1, |parent|)`` for the constraints; :data:`STATIONARITY_RTOL`
times the magnitude of the gradient's terms for stationarity and the multipliers' signs). The
QP is strictly convex (every child measured, ``H_c`` positive definite), so that point is its
unique optimum.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

from hierdp.models.histogram import LevelChunk
from hierdp.models.marginals import MarginalQueries

__all__ = ["FEASIBILITY_RTOL", "STATIONARITY_RTOL", "Face", "structure_of"]

#: primal feasibility tolerance, relative to max(1, |parent values|)
FEASIBILITY_RTOL = 1e-9
#: stationarity / dual feasibility tolerance, relative to the gradient terms' magnitude
STATIONARITY_RTOL = 1e-9

FREE, LOWER, UPPER = 0, 1, 2
INACTIVE, EQUAL = 0, 3


def structure_of(chunk: LevelChunk) -> MarginalQueries | None:
    """The chunk's query groups with the detailed group first, or None without structure."""
    if chunk.queries is None:
        return None
    return chunk.queries.with_detailed()


def _row_parents(chunk: LevelChunk) -> np.ndarray:
    """Per user row, the local parent of its first entry (-1: no entry)."""
    assert chunk.rows is not None
    r = chunk.rows
    out = np.full(r.shape[0], -1, np.int64)
    nz = np.diff(r.indptr) > 0
    out[nz] = chunk.child_parent[r.indices[r.indptr[:-1][nz]] // chunk.targets.shape[1]]
    return out


def _segment_max(values: np.ndarray, seg: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n)
    np.maximum.at(out, seg, values)
    return out


@dataclass
class _RowSystem:
    """Active rows restricted to the free slots, with their per-unit Schur pseudo-inverse."""

    A2: sparse.csr_matrix  # (active rows, slots), free columns only
    B: sparse.csr_matrix  # A2 A1ᵀ (active rows, cells)
    rows: np.ndarray  # indices of the active rows
    Sinv: np.ndarray  # (units with rows, m, m) padded pseudo-inverses
    unit_slot: np.ndarray  # per active row: (unit position, local index)


class Face:
    """Slot layout and operators of one (sub)chunk; see the module docstring.

    Args:
        chunk: the chunk (all its children measured, ``queries`` set).
        mq: :func:`structure_of` the chunk.
        units: ``(P,)`` unit label per parent (0..U-1).
    """

    def __init__(self, chunk: LevelChunk, mq: MarginalQueries, units: np.ndarray) -> None:
        P, C, K = chunk.shape
        self.chunk, self.mq = chunk, mq
        self.P, self.C, self.K = P, C, K
        kp = chunk.parent_values.shape[1]
        cp = np.asarray(chunk.child_parent, np.int64)
        W = chunk.group_weights()  # (C, G) with the detailed group first
        self.W = W
        pv = np.asarray(chunk.parent_values, float)
        # slots: per parent, the cells whose parent cell is not 0; every child takes its parent's
        # list (O(slots), no (C, K) array)
        sup_p, sup_k = np.nonzero(pv[:, chunk.cell_map] != 0)
        counts = np.bincount(sup_p, minlength=P)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        per_child = counts[cp]
        sc = np.repeat(np.arange(C), per_child)
        sk = sup_k[np.repeat(starts[cp] - np.concatenate([[0], np.cumsum(per_child)[:-1]]), per_child)
                   + np.arange(per_child.sum())]
        keep = np.ones(sc.size, bool)
        if chunk.upper is not None:
            keep &= chunk.upper[sc, sk] > 0
        if chunk.totals is not None:  # a child whose invariant total is 0 is 0
            keep &= np.asarray(chunk.totals)[sc] != 0
        sc, sk = sc[keep], sk[keep]
        forced_bad: np.ndarray = np.zeros(C, bool)
        if chunk.lower is not None:  # a lower bound > 0 on a cell that must be 0
            lo_pos = np.asarray(chunk.lower > 0)
            lo_pos[sc, sk] = False
            forced_bad = np.asarray(lo_pos.any(1))
        self.sc, self.sk = sc.astype(np.int64), sk.astype(np.int64)
        self.n = sc.size
        self.sp = cp[sc]  # parent per slot
        self.units = np.asarray(units, np.int64)
        self.U = int(self.units.max()) + 1 if P else 0
        self.su = self.units[self.sp]  # unit per slot
        t = chunk.targets[sc, sk]
        b = np.where(np.isnan(t), 0.0, t) * W[sc, 0]
        for q in range(1, mq.n_groups):
            if W[:, q].any():
                a = chunk.query_answers[q - 1][sc, mq.cell_answer(q)[sk]]
                b += np.where(np.isnan(a), 0.0, a) * W[sc, q]
        self.b = b
        self.lo = np.maximum(chunk.lower[sc, sk], 0.0) if chunk.lower is not None else np.zeros(self.n)
        self.hi = chunk.upper[sc, sk] if chunk.upper is not None else np.full(self.n, np.inf)
        self.wd = W[sc, 0]
        self.groups: list[tuple[np.ndarray, np.ndarray, int]] = []
        for q in range(1, mq.n_groups):
            if not W[:, q].any():
                continue
            R = mq.n_answers(q)
            key = sc * R + mq.cell_answer(q)[sk]
            u, ids = np.unique(key, return_inverse=True)
            self.groups.append((ids.ravel().astype(np.int64), W[u // R, q], int(u.size)))
        self.wsum = W.sum(1)[sc]  # the diagonal of H per slot (each column of a group holds one 1)
        # consistency groups: (parent, parent cell) of every slot
        ekey = self.sp * kp + chunk.cell_map[sk]
        eu, eid = np.unique(ekey, return_inverse=True)
        self.eid = eid.ravel().astype(np.int64)
        self.ne = int(eu.size)
        self.erhs = pv.ravel()[eu]
        self.epar = eu // kp
        self.eunit = self.units[self.epar]
        # parent cells with a non-zero value but no slot (every child cell forced to 0): infeasible
        need = np.zeros(P * kp, bool)
        need[(pv != 0).ravel()] = True
        need[eu] = False
        self.infeasible = np.zeros(P, bool)
        self.infeasible[np.flatnonzero(need) // kp] = True
        self.infeasible[np.unique(cp[forced_bad])] = True
        low_sum = np.bincount(self.eid, self.lo, minlength=self.ne)
        high_sum = np.bincount(self.eid, np.where(np.isfinite(self.hi), self.hi, np.inf), minlength=self.ne)
        bad_e = (low_sum > self.erhs * (1 + 1e-12) + 1e-9) | (high_sum < self.erhs * (1 - 1e-12) - 1e-9)
        self.infeasible[self.epar[bad_e]] = True
        self._rows(chunk)
        # magnitudes for the tolerances
        self.pscale = np.maximum(1.0, np.abs(pv).max(1) if pv.size else np.zeros(0))  # per parent

    # ------------------------------------------------------------------ rows
    def _rows(self, chunk: LevelChunk) -> None:
        """Rows over slots: invariant totals (one equality row per child), then user rows."""
        C, K = self.C, self.K
        slot_of = np.full(C * K, -1, np.int64)
        slot_of[self.sc * K + self.sk] = np.arange(self.n)
        mats, rl, ru = [], [], []
        if chunk.totals is not None:
            t = np.asarray(chunk.totals, float)
            mats.append(sparse.csr_matrix((np.ones(self.n), (self.sc, np.arange(self.n))), shape=(C, self.n)))
            rl.append(t)
            ru.append(t)
        if chunk.rows is not None and chunk.rows.shape[0]:
            r = chunk.rows.tocoo()
            s = slot_of[r.col]
            ok = s >= 0  # entries on dropped cells (fixed at 0) contribute nothing
            mats.append(sparse.csr_matrix((r.data[ok], (r.row[ok], s[ok])), shape=(r.shape[0], self.n)))
            assert chunk.row_lower is not None and chunk.row_upper is not None
            rl.append(np.asarray(chunk.row_lower, float))
            ru.append(np.asarray(chunk.row_upper, float))
        if mats:
            self.A2 = sparse.vstack(mats, format="csr")
            self.rl = np.concatenate(rl)
            self.ru = np.concatenate(ru)
            coo = self.A2.tocoo()
            first = np.full(self.A2.shape[0], -1, np.int64)
            first[coo.row[::-1]] = self.su[coo.col[::-1]]
            self.runit = first
            # a row over forced-zero cells only is 0: its parents are infeasible unless 0 is allowed
            bad = (first < 0) & ((self.rl > 1e-9) | (self.ru < -1e-9))
            if bad.any():
                row_parent = np.concatenate([chunk.child_parent if chunk.totals is not None else np.zeros(0, np.int64),
                                             _row_parents(chunk)])
                self.infeasible[row_parent[bad][row_parent[bad] >= 0]] = True
            self.runit = first
        else:
            self.A2 = sparse.csr_matrix((0, self.n))
            self.rl = self.ru = np.zeros(0)
            self.runit = np.zeros(0, np.int64)
        self.n_rows = int(self.A2.shape[0])

    # ------------------------------------------------------------------ products
    def hess(self, v: np.ndarray) -> np.ndarray:
        """``H v`` over the slots (every slot, free or not)."""
        out = self.wd * v
        for ids, wk, n in self.groups:
            m = np.bincount(ids, v, minlength=n)
            out += (wk * m)[ids]
        return out

    def unit_sum(self, v: np.ndarray) -> np.ndarray:
        """Per unit, the sum of a slot vector."""
        return np.bincount(self.su, v, minlength=self.U)

    # ------------------------------------------------------------------ projections
    def row_system(self, free: np.ndarray, row_state: np.ndarray, max_rows: int) -> tuple[_RowSystem | None,
                                                                                          np.ndarray]:
        """The Schur system of the active rows over the free slots; and a ``(U,)`` mask of units
        with more than ``max_rows`` active rows (not handled)."""
        too_many = np.zeros(self.U, bool)
        act = np.flatnonzero((row_state != INACTIVE) & (self.runit >= 0))
        if act.size == 0:
            return None, too_many
        A2 = self.A2[act] @ sparse.diags(free.astype(float))
        A2 = sparse.csr_matrix(A2)
        A2.eliminate_zeros()
        A1t = sparse.csr_matrix((free.astype(float), (np.arange(self.n), self.eid)), shape=(self.n, self.ne))
        B = sparse.csr_matrix(A2 @ A1t)
        nf = np.bincount(self.eid, free, minlength=self.ne)
        inv_n = np.where(nf > 0, 1.0 / np.maximum(nf, 1), 0.0)
        S = (A2 @ A2.T - B @ sparse.diags(inv_n) @ B.T).tocoo()
        ru = self.runit[act]
        counts = np.bincount(ru, minlength=self.U)
        too_many = counts > max_rows
        order = np.argsort(ru, kind="stable")
        local = np.empty(act.size, np.int64)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        local[order] = np.arange(act.size) - starts[ru[order]]
        units_with = np.flatnonzero((counts > 0) & ~too_many)
        pos = np.full(self.U, -1, np.int64)
        pos[units_with] = np.arange(units_with.size)
        m = int(counts[units_with].max()) if units_with.size else 0
        dense = np.zeros((units_with.size, m, m))
        keep = (pos[ru[S.row]] >= 0) & (ru[S.row] == ru[S.col])
        dense[pos[ru[S.row[keep]]], local[S.row[keep]], local[S.col[keep]]] = S.data[keep]
        Sinv = np.zeros_like(dense)
        if units_with.size:
            ev, V = np.linalg.eigh(dense)
            cut = 1e-12 * np.maximum(np.abs(ev).max(1, keepdims=True), 1e-300)
            inv = np.where(ev > cut, 1.0 / np.where(ev > cut, ev, 1.0), 0.0)
            Sinv = np.einsum("uij,uj,ukj->uik", V, inv, V)
        unit_slot = np.stack([pos[ru], local], 1)
        return _RowSystem(A2, B, act, Sinv, unit_slot), too_many

    def coefficients(self, free: np.ndarray, rs: _RowSystem | None, r1: np.ndarray,
                     r2: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
        """``(α, β)`` with ``A1ᵀα + A2ᵀβ`` (free slots) the least-squares fit of right-hand sides
        ``r1 = A1 v`` (per cell) and ``r2 = A2 v`` (per active row)."""
        nf = np.bincount(self.eid, free, minlength=self.ne)
        inv_n = np.where(nf > 0, 1.0 / np.maximum(nf, 1), 0.0)
        if rs is None or r2 is None:
            return r1 * inv_n, None
        rhs = r2 - rs.B @ (r1 * inv_n)
        beta = np.zeros(rs.rows.size)
        ok = rs.unit_slot[:, 0] >= 0
        if ok.any():
            m = rs.Sinv.shape[1]
            vec = np.zeros((rs.Sinv.shape[0], m))
            vec[rs.unit_slot[ok, 0], rs.unit_slot[ok, 1]] = rhs[ok]
            sol = np.einsum("uij,uj->ui", rs.Sinv, vec)
            beta[ok] = sol[rs.unit_slot[ok, 0], rs.unit_slot[ok, 1]]
        alpha = (r1 - rs.B.T @ beta) * inv_n
        return alpha, beta

    def project(self, v: np.ndarray, free: np.ndarray, rs: _RowSystem | None) -> np.ndarray:
        """Orthogonal projection of ``v`` (free slots) onto the null space of the face's equalities."""
        vf = np.where(free, v, 0.0)
        r1 = np.bincount(self.eid, vf, minlength=self.ne)
        r2 = rs.A2 @ vf if rs is not None else None
        alpha, beta = self.coefficients(free, rs, r1, r2)
        out = vf - alpha[self.eid]
        if rs is not None and beta is not None:
            out -= rs.A2.T @ beta
        return np.where(free, out, 0.0)

    def restore(self, x: np.ndarray, free: np.ndarray, rs: _RowSystem | None, row_target: np.ndarray) -> np.ndarray:
        """``x`` moved on its free slots (least change) to satisfy the face's equalities."""
        r1 = np.bincount(self.eid, x, minlength=self.ne) - self.erhs
        r2 = None
        if rs is not None:
            r2 = self.A2[rs.rows] @ x - row_target[rs.rows]
        alpha, beta = self.coefficients(free, rs, r1, r2)
        out = x - np.where(free, alpha[self.eid], 0.0)
        if rs is not None and beta is not None:
            out -= rs.A2.T @ beta
        return out

    def multipliers(self, g: np.ndarray, free: np.ndarray, rs: _RowSystem | None,
                    state: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(λ per cell, π per row, ν per slot)``: the least-squares multipliers of the gradient
        on the free slots; a cell without a free slot gets the λ that best meets its bound slots'
        sign conditions (its λ is otherwise free)."""
        gf = np.where(free, g, 0.0)
        r1 = np.bincount(self.eid, gf, minlength=self.ne)
        r2 = rs.A2 @ gf if rs is not None else None
        alpha, beta = self.coefficients(free, rs, r1, r2)
        lam = -alpha
        pi = np.zeros(self.n_rows)
        rterm = np.zeros(self.n)
        if rs is not None and beta is not None:
            pi[rs.rows] = -beta
            rterm = self.A2[rs.rows].T @ pi[rs.rows]
        base = g + rterm
        nf = np.bincount(self.eid, free, minlength=self.ne)
        empty = nf == 0
        if empty.any():
            at_lo = (state == LOWER) & empty[self.eid]
            at_hi = (state == UPPER) & empty[self.eid]
            need = np.full(self.ne, -np.inf)
            np.maximum.at(need, self.eid[at_lo], -base[at_lo])
            allow = np.full(self.ne, np.inf)
            np.minimum.at(allow, self.eid[at_hi], -base[at_hi])
            pick = np.where(np.isfinite(need), need, np.where(np.isfinite(allow), allow, 0.0))
            lam = np.where(empty, pick, lam)
        nu = base + lam[self.eid]
        return lam, pi, nu

    # ------------------------------------------------------------------ certificate
    def certify(self, x: np.ndarray, state: np.ndarray, row_state: np.ndarray, free: np.ndarray,
                rs: _RowSystem | None, max_rows: int = 512) -> tuple[np.ndarray, np.ndarray]:
        """KKT conditions per parent within the stated tolerances (module docstring); returns
        ``(ok (P,), reason code (P,))`` (0 ok, 1 infeasible, 2 not stationary, 3 multiplier sign).

        Multipliers need not be unique (invariant totals, a cell with one free child): when the
        least-squares ones give a bound slot the wrong sign, the unit's stationarity equations are
        solved exactly (SVD: a particular solution and the null space) and an LP over the null space
        maximises the sign conditions' margin; the multipliers it gives are checked with the same
        tolerances (:meth:`_degenerate`)."""
        code = self._certify_once(x, state, row_state, free, rs)
        bad_u = np.zeros(self.U, bool)
        np.logical_or.at(bad_u, self.units, code == 3)
        np.logical_and.at(bad_u, self.units, code != 1)
        if bad_u.any():
            ok_u = self._degenerate(x, state, row_state, free, bad_u)
            code = np.where(bad_u[self.units] & ok_u[self.units], 0, code)
        ubad = np.zeros(self.U, bool)
        np.logical_or.at(ubad, self.units, code > 0)
        return ~ubad[self.units], code

    def _certify_once(self, x: np.ndarray, state: np.ndarray, row_state: np.ndarray, free: np.ndarray,
                      rs: _RowSystem | None) -> np.ndarray:
        g = self.hess(x) - self.b
        lam, pi, nu = self.multipliers(g, free, rs, state)
        P = self.P
        tol_x = FEASIBILITY_RTOL * self.pscale  # per parent
        sums = np.bincount(self.eid, x, minlength=self.ne)
        bad_f = np.zeros(P, bool)
        np.logical_or.at(bad_f, self.epar, np.abs(sums - self.erhs) > tol_x[self.epar])
        tx = tol_x[self.sp]
        np.logical_or.at(bad_f, self.sp, (x < self.lo - tx) | (x > self.hi + tx))
        if self.n_rows:
            ax = self.A2 @ x
            rscale = np.maximum(1.0, np.abs(self.A2).sum(1).A1)
            rp = np.where(self.runit >= 0, self.runit, 0)
            # a row's tolerance: the feasibility tolerance of its unit's largest parent
            unit_scale = _segment_max(self.pscale[self.epar], self.eunit, self.U)
            rt = FEASIBILITY_RTOL * unit_scale[rp] * rscale
            viol = (ax < self.rl - rt) | (ax > self.ru + rt)
            ubad = np.zeros(self.U, bool)
            np.logical_or.at(ubad, rp[viol], True)
            bad_f |= ubad[self.units]
        # stationarity scale per child: |H x| <= (max row sum of H) |x|; plus |b|, |λ|, |A2ᵀπ|
        hx = self.wsum * np.abs(x)
        rterm = np.abs(self.A2.T @ pi) if self.n_rows else 0.0
        term = np.maximum.reduce([hx, np.abs(self.b), np.abs(lam[self.eid]), rterm + 0 * hx])
        child_scale = _segment_max(term, self.sc, self.C)
        tol_g = STATIONARITY_RTOL * np.maximum(child_scale, 1e-300)[self.sc]
        bad_s = np.zeros(P, bool)
        np.logical_or.at(bad_s, self.sp, free & (np.abs(nu) > tol_g))
        bad_m = np.zeros(P, bool)
        np.logical_or.at(bad_m, self.sp, ((state == LOWER) & (nu < -tol_g)) | ((state == UPPER) & (nu > tol_g)))
        if self.n_rows:
            rtol = STATIONARITY_RTOL * np.maximum(_segment_max(child_scale[self.sc], self.su, self.U), 1e-300)
            rp = np.where(self.runit >= 0, self.runit, 0)
            wrong = ((row_state == LOWER) & (pi > rtol[rp] * np.maximum(1.0, np.abs(pi).max(initial=0.0))))
            wrong |= (row_state == UPPER) & (pi < -rtol[rp] * np.maximum(1.0, np.abs(pi).max(initial=0.0)))
            ubad = np.zeros(self.U, bool)
            np.logical_or.at(ubad, rp[wrong], True)
            bad_m |= ubad[self.units]
        bad_f |= self.infeasible | ~np.isfinite(np.bincount(self.sp, x, minlength=P))
        return np.where(bad_f, 1, np.where(bad_s, 2, np.where(bad_m, 3, 0)))

    def _degenerate(self, x: np.ndarray, state: np.ndarray, row_state: np.ndarray, free: np.ndarray,
                    units: np.ndarray, max_entries: int = 20_000_000) -> np.ndarray:
        """``(U,)``: for each of ``units``, whether multipliers exist that meet stationarity and the
        signs within the tolerances: the stationarity equations on the free slots solved exactly
        (SVD), then ``max m`` over their null space with every bound slot's multiplier beyond
        ``m`` times its child's gradient scale on the right side (and the active rows' likewise),
        and the result checked as in :meth:`_certify_once`. A unit whose dense system would exceed
        ``max_entries`` is not decided (False)."""
        from scipy.optimize import linprog

        out = np.zeros(self.U, bool)
        g = self.hess(x) - self.b
        term = np.maximum.reduce([self.wsum * np.abs(x), np.abs(self.b), np.abs(g)])
        cs_child = _segment_max(term, self.sc, self.C)
        for u in np.flatnonzero(units):
            sl = np.flatnonzero(self.su == u)
            cells, e_loc = np.unique(self.eid[sl], return_inverse=True)
            rows = np.flatnonzero((self.runit == u) & (row_state != INACTIVE))
            nz = cells.size + rows.size
            if sl.size * nz > max_entries:
                continue
            B = np.zeros((sl.size, nz))
            B[np.arange(sl.size), e_loc] = 1.0
            if rows.size:
                B[:, cells.size:] = self.A2[rows][:, sl].T.toarray()
            cs = np.maximum(cs_child[self.sc[sl]], 1e-300)
            tol = STATIONARITY_RTOL * cs
            f = free[sl]
            Bf = B[f]
            if Bf.shape[0]:
                Uu, sv, Vt = np.linalg.svd(Bf, full_matrices=True)
                rank = int((sv > 1e-10 * max(sv.max(initial=0.0), 1e-300)).sum())
                z0 = Vt[:rank].T @ ((Uu[:, :rank].T @ -g[sl][f]) / sv[:rank])
                N = Vt[rank:].T
            else:
                z0, N = np.zeros(nz), np.eye(nz)
            if np.any(np.abs(Bf @ z0 + g[sl][f]) > tol[f]):
                continue  # stationarity cannot hold on the free slots
            lo_s, hi_s = state[sl] == LOWER, state[sl] == UPPER
            z = z0
            if N.shape[1]:
                # variables (w, m): maximise m; LOWER: -(B(z0 + N w) + g)/cs + m <= 0; UPPER: (...)/cs + m <= 0
                blocks, rhs = [], []
                for sign, mask in ((-1.0, lo_s), (1.0, hi_s)):
                    if mask.any():
                        blocks.append(np.hstack([sign * (B[mask] @ N) / cs[mask, None], np.ones((mask.sum(), 1))]))
                        rhs.append(-sign * (B[mask] @ z0 + g[sl][mask]) / cs[mask])
                rscale = float(cs.max())
                for sign, state_r in ((1.0, LOWER), (-1.0, UPPER)):  # at lower π <= -m, at upper π >= m
                    pick = np.flatnonzero(row_state[rows] == state_r)
                    if pick.size:
                        Nr = N[cells.size + pick]
                        blocks.append(np.hstack([sign * Nr / rscale, np.ones((pick.size, 1))]))
                        rhs.append(-sign * z0[cells.size + pick] / rscale)
                if blocks:
                    c = np.zeros(N.shape[1] + 1)
                    c[-1] = -1.0
                    res = linprog(c, A_ub=np.vstack(blocks), b_ub=np.concatenate(rhs),
                                  bounds=[(None, None)] * N.shape[1] + [(None, 1.0)], method="highs")
                    if res.status != 0:
                        continue
                    z = z0 + N @ res.x[:-1]
            nu = B @ z + g[sl]
            ok = bool(np.all(np.abs(nu[f]) <= tol[f]) and np.all(nu[lo_s] >= -tol[lo_s])
                      and np.all(nu[hi_s] <= tol[hi_s]))
            if rows.size:
                pi = z[cells.size:]
                rt = STATIONARITY_RTOL * float(cs.max()) * max(1.0, float(np.abs(pi).max()))
                ok = ok and not np.any((row_state[rows] == LOWER) & (pi > rt)) \
                    and not np.any((row_state[rows] == UPPER) & (pi < -rt))
            out[u] = bool(ok)
        return out
