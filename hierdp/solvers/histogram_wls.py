"""``histogram_wls``: the structured, exact per-parent weighted least squares of a histogram level
chunk (kind ``"histogram_wls"``), certified parent by parent.

The method (machinery in :mod:`hierdp.solvers._histogram_face`): a **primal-dual active-set**
method (each slot free or at a bound, each row inactive or at a bound) whose every step solves the
equality-constrained QP of the current working set by **projected conjugate gradients** over the
slots, vectorised over all units of the chunk (per-unit step sizes). Products with the information
matrices use the query groups' structure (per group, one marginal sum per child and its spread):
``O(slots · G)`` per iteration, memory ``O(slots)``; never a ``K x K`` matrix. The working set is
updated by the primal-dual rule (a free slot below its bound becomes active; an active slot whose
multiplier has the wrong sign is freed; the same for rows). When a unit's working set no longer
changes, its KKT conditions are checked (the certificate of :class:`~._histogram_face.Face`); a
unit that is not certified after ``max_rounds`` working-set updates, or whose CG stalls, or with a
child that is not measured (its information matrix is singular: the optimum is not unique), or
with more active rows than ``max_rows_per_unit``, is reported as such: the caller hands those
parents to the next plug-in.

Tolerances: constraints within ``1e-9 · max(1, |parent|)``; stationarity and multiplier signs
within ``1e-9`` of the gradient's terms (per child). CG runs to a residual ``1e-13`` of the terms.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from hierdp.models.histogram import HistogramWLS, LevelChunk
from hierdp.models.problem import Problem
from hierdp.solvers._histogram_face import (
    EQUAL,
    FEASIBILITY_RTOL,
    FREE,
    INACTIVE,
    LOWER,
    STATIONARITY_RTOL,
    UPPER,
    Face,
    structure_of,
)
from hierdp.solvers.base import Capabilities, Solution, Solver, Status

__all__ = ["HistogramWLSSolver", "StructuredResult", "kkt_check", "solve_structured"]

#: why a parent was not certified
REASONS = {
    1: "not certified: its KKT conditions do not hold within the tolerances (infeasible, or numerically hard)",
    2: "not certified: the working set did not settle within max_rounds updates",
    3: "a child has no measurement that determines its cells (singular information matrix: the optimum is "
       "not unique)",
    4: "more active rows than max_rows_per_unit",
    5: "the time limit was reached",
    6: "its constraints cannot hold (bounds or rows against the parent's cells)",
}


@dataclass
class StructuredResult:
    """Outcome of :func:`solve_structured`.

    Attributes:
        values: ``(C, K)`` child values (meaningful for certified parents).
        certified: ``(P,)`` KKT certified.
        rounds: ``(P,)`` working-set updates used.
        cg_iterations: total CG iterations (all rounds).
        reason: ``(P,)`` 0 for certified parents, else a key of :data:`REASONS`.
    """

    values: np.ndarray
    certified: np.ndarray
    rounds: np.ndarray
    cg_iterations: int
    reason: np.ndarray


def _initial(face: Face, chunk: LevelChunk) -> np.ndarray:
    """A start inside the box: each parent cell split in proportion to the children's positive
    detailed answers (evenly where none is positive)."""
    t = chunk.targets[face.sc, face.sk]
    t = np.where(np.isnan(t), 0.0, np.maximum(t, 0.0)) + 1e-3
    tot = np.bincount(face.eid, t, minlength=face.ne)
    x = t * (face.erhs / np.where(tot > 0, tot, 1.0))[face.eid]
    return np.clip(x, face.lo, face.hi)


def _cg(face: Face, x: np.ndarray, free: np.ndarray, rs: Any, live: np.ndarray, max_cg: int,
        tol: float) -> tuple[np.ndarray, int, np.ndarray]:
    """Projected CG on the face for the live units; returns x, iterations, stalled units."""
    U = face.U
    r = np.where(free, face.hess(x) - face.b, 0.0)
    z = face.project(r, free, rs)
    p = -z
    zz = face.unit_sum(z * z)
    term = np.abs(face.b) + face.wsum * np.abs(x)
    scale = np.zeros(U)
    np.maximum.at(scale, face.su, term)
    scale = np.sqrt(np.bincount(face.su, minlength=U)) * np.maximum(scale, 1e-300)
    best = zz.copy()
    since = np.zeros(U, np.int64)
    run = live.copy()
    it = 0
    for it in range(max_cg):
        run &= np.sqrt(zz) > tol * scale
        if not run.any():
            break
        act = run[face.su]
        Hp = np.where(free & act, face.hess(p), 0.0)
        pHp = face.unit_sum(p * Hp)
        a = np.where(run & (pHp > 0), zz / np.where(pHp > 0, pHp, 1.0), 0.0)
        x = x + a[face.su] * p
        r = r + a[face.su] * Hp
        if it % 100 == 99:  # refresh the recurrence against drift
            r = np.where(free, face.hess(x) - face.b, 0.0)
        z = face.project(r, free, rs)
        zn = face.unit_sum(z * z)
        beta = np.where(run, zn / np.where(zz > 0, zz, 1.0), 0.0)
        if it % 100 == 99:
            beta[:] = 0.0
        p = face.project(-z + beta[face.su] * p, free, rs)
        improved = zn < 0.999 * best
        best = np.where(improved, zn, best)
        since = np.where(improved, 0, since + 1)
        run &= since < 50  # stalled at its rounding floor
        zz = np.where(run, zn, zz)
    stalled = live & (np.sqrt(zz) > tol * scale * 1e3)
    return x, it + 1, stalled


def solve_structured(chunk: LevelChunk, *, max_rounds: int = 60, max_cg: int = 2000, max_rows_per_unit: int = 512,
                     time_limit: float | None = None, conservative_after: int = 12) -> StructuredResult:
    """The structured exact WLS of every parent of ``chunk`` (module docstring)."""
    t0 = time.perf_counter()
    P, C, K = chunk.shape
    values = np.zeros((C, K))
    reason = np.zeros(P, np.int64)
    rounds = np.zeros(P, np.int64)
    mq = structure_of(chunk)
    if mq is None or C == 0:
        return StructuredResult(values, np.zeros(P, bool), rounds, 0, np.full(P, 3 if mq else 1))
    W = chunk.group_weights()
    uniq, which = np.unique(W, axis=0, return_inverse=True)
    lo_ev, hi_ev = mq.eigenvalue_range(uniq)
    singular = ~(lo_ev > 1e-12 * np.maximum(hi_ev, 1e-300))
    bad_child = singular[which.ravel()]
    labels = chunk.coupled_parents()
    _, units = np.unique(labels, return_inverse=True)
    units = units.ravel()
    bad_unit = np.zeros(int(units.max()) + 1, bool)
    np.logical_or.at(bad_unit, units[chunk.child_parent[bad_child]], True)
    reason[bad_unit[units]] = 3
    ok_parents = reason == 0
    if not ok_parents.all():
        sub, kids = chunk.subset(ok_parents)
        inner = solve_structured(sub, max_rounds=max_rounds, max_cg=max_cg, max_rows_per_unit=max_rows_per_unit,
                                 time_limit=None if time_limit is None else max(0.0, time_limit - (time.perf_counter()
                                                                                                  - t0)))
        values[kids] = inner.values
        idx = np.flatnonzero(ok_parents)
        reason[idx] = inner.reason
        rounds[idx] = inner.rounds
        return StructuredResult(values, reason == 0, rounds, inner.cg_iterations, reason)

    face = Face(chunk, mq, units)
    U = face.U
    state = np.full(face.n, FREE, np.int8)
    fixed = face.lo >= face.hi
    state[fixed] = LOWER
    row_state = np.where(face.rl >= face.ru, EQUAL, INACTIVE).astype(np.int8)
    x = _initial(face, chunk)
    live = np.ones(U, bool)
    uinf = np.zeros(U, bool)
    np.logical_or.at(uinf, units, face.infeasible)
    live &= ~uinf
    done = np.zeros(U, bool)
    ureason = np.where(uinf, 6, 0)
    cg_total = 0
    urounds = np.zeros(U, np.int64)
    fresh = np.zeros(face.n, bool)  # slots put at a bound by the last update
    prev = x.copy()  # their values before
    for rnd in range(max_rounds + 1):
        if not live.any():
            break
        if time_limit is not None and time.perf_counter() - t0 > time_limit:
            ureason[live] = 5
            break
        free = state == FREE
        x = np.where(state == LOWER, face.lo, np.where(state == UPPER, face.hi, x))
        row_target = np.where(row_state == UPPER, face.ru, face.rl)
        rs, too_many = face.row_system(free, row_state, max_rows_per_unit)
        if too_many.any():
            ureason[live & too_many] = 4
            live &= ~too_many
        x_try = face.restore(x, free, rs, row_target)
        for attempt in range(50):
            # an inconsistent face (a row and a cell that both needed a slot just put at its bound):
            # free again, per violated constraint, the newly bound slot that went least far out
            loose = _inconsistent(face, x_try, free, rs, row_target, fresh, prev, attempt >= 40)
            if not loose.any():
                break
            state = np.where(loose, FREE, state).astype(np.int8)
            fresh &= ~loose
            free = state == FREE
            rs, too_many = face.row_system(free, row_state, max_rows_per_unit)
            x_try = face.restore(np.where(loose, prev, x), free, rs, row_target)
        x = x_try
        x, its, stalled = _cg(face, x, free, rs, live, max_cg, 1e-13)
        cg_total += its
        g = face.hess(x) - face.b
        _lam, pi, nu = face.multipliers(g, free, rs, state)
        # small thresholds for moving between the working sets (the certificate has its own)
        sl = live[face.su]
        xt = 1e-12 * face.pscale[face.sp]
        gt = 1e-12 * np.maximum(np.abs(face.b), face.wsum * np.abs(x)).max(initial=1.0)
        new = state.copy()
        new[sl & free & (x < face.lo - xt)] = LOWER
        new[sl & free & (x > face.hi + xt)] = UPPER
        new[sl & ~fixed & (state == LOWER) & (nu < -gt)] = FREE
        new[sl & ~fixed & (state == UPPER) & (nu > gt)] = FREE
        new_rows = row_state.copy()
        if face.n_rows:
            ax = face.A2 @ x
            rl_live = live[np.where(face.runit >= 0, face.runit, 0)] & (face.runit >= 0)
            rt = 1e-12 * np.maximum(1.0, np.abs(ax))
            new_rows[rl_live & (row_state == INACTIVE) & (ax < face.rl - rt)] = LOWER
            new_rows[rl_live & (row_state == INACTIVE) & (ax > face.ru + rt)] = UPPER
            pt = 1e-12 * max(1.0, float(np.abs(pi).max(initial=0.0)))
            new_rows[rl_live & (row_state == LOWER) & (pi > pt)] = INACTIVE
            new_rows[rl_live & (row_state == UPPER) & (pi < -pt)] = INACTIVE
        if rnd >= conservative_after:
            # the simultaneous rule did not settle (it can cycle when H is not an M-matrix, or
            # with rows): one change per unit and update, the most violated condition first
            new, new_rows = _one_change(face, state, new, row_state, new_rows, x, nu, pi)
        new = _keep_free(face, new, nu, x)
        changed = np.zeros(U, bool)
        np.logical_or.at(changed, face.su, new != state)
        if face.n_rows:
            rch = (new_rows != row_state) & (face.runit >= 0)
            np.logical_or.at(changed, face.runit[rch], True)
        settled = live & ~changed
        urounds[live] = rnd
        if settled.any():
            done |= settled
            live &= ~settled
        if stalled.any():
            ureason[stalled & live] = 1
            live &= ~stalled
        fresh = live[face.su] & (new != FREE) & (state == FREE)
        prev = x.copy()
        state = np.where(live[face.su], new, state)
        if face.n_rows:
            row_state = np.where(live[np.where(face.runit >= 0, face.runit, 0)], new_rows, row_state)
    ureason[live & (ureason == 0)] = 2
    free = state == FREE
    x = np.where(state == LOWER, face.lo, np.where(state == UPPER, face.hi, x))
    rs, _ = face.row_system(free, row_state, max_rows_per_unit)
    ok, _code = face.certify(x, state, row_state, free, rs)
    uok = np.ones(U, bool)
    np.logical_and.at(uok, units, ok)
    ureason = np.where((ureason == 0) & ~uok, 1, ureason)
    ureason = np.where(~done & (ureason == 0), 2, ureason)
    x = np.clip(x, face.lo, face.hi)
    values[face.sc, face.sk] = x
    reason = ureason[units]
    return StructuredResult(values, reason == 0, urounds[units], cg_total, reason)


def _inconsistent(face: Face, x: np.ndarray, free: np.ndarray, rs: Any, row_target: np.ndarray, fresh: np.ndarray,
                  prev: np.ndarray, all_of_them: bool) -> np.ndarray:
    """Newly bound slots to free again: per unit whose cells or active rows the free slots cannot
    satisfy, the newly bound slot in them whose unconstrained value went least far beyond its bound
    (all of them if ``all_of_them``)."""
    tol = 1e-9 * face.pscale
    cell_bad = np.abs(np.bincount(face.eid, x, minlength=face.ne) - face.erhs) > tol[face.epar]
    # (constraint, slot) pairs of the violated constraints: cells, then active rows
    con = [face.eid[cell_bad[face.eid]]]
    slot = [np.flatnonzero(cell_bad[face.eid])]
    if rs is not None:
        r = np.abs(face.A2[rs.rows] @ x - row_target[rs.rows])
        rbad = np.flatnonzero(r > 1e-9 * np.maximum(1.0, np.abs(row_target[rs.rows])))
        if rbad.size:
            sub = face.A2[rs.rows[rbad]].tocoo()
            con.append(face.ne + sub.row)
            slot.append(sub.col)
    c, sl = np.concatenate(con), np.concatenate(slot)
    keep = fresh[sl]
    c, sl = c[keep], sl[keep]
    loose = np.zeros(face.n, bool)
    if sl.size == 0:
        return loose
    if all_of_them:
        loose[sl] = True
        return loose
    # one per unit and pass: freeing one slot can make several constraints consistent
    gone = np.where(prev[sl] < face.lo[sl], face.lo[sl] - prev[sl], prev[sl] - face.hi[sl])
    unit = face.su[sl]
    order = np.lexsort((gone, unit))
    first = np.r_[True, unit[order][1:] != unit[order][:-1]]
    loose[sl[order][first]] = True
    return loose


def _one_change(face: Face, state: np.ndarray, new: np.ndarray, row_state: np.ndarray, new_rows: np.ndarray,
                x: np.ndarray, nu: np.ndarray, pi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Keep, per unit, only the proposed change with the largest violation (slot or row)."""
    ch = np.flatnonzero(new != state)
    size = np.where(state[ch] == FREE, np.maximum(face.lo[ch] - x[ch], x[ch] - face.hi[ch]), np.abs(nu[ch]))
    unit = face.su[ch]
    kind = np.zeros(ch.size, np.int64)
    if face.n_rows:
        rch = np.flatnonzero((new_rows != row_state) & (face.runit >= 0))
        ax = face.A2[rch] @ x if rch.size else np.zeros(0)
        rsize = np.where(row_state[rch] == INACTIVE, np.maximum(face.rl[rch] - ax, ax - face.ru[rch]), np.abs(pi[rch]))
        ch = np.concatenate([ch, rch])
        size = np.concatenate([size, rsize])
        unit = np.concatenate([unit, face.runit[rch]])
        kind = np.concatenate([kind, np.ones(rch.size, np.int64)])
    out, out_rows = state.copy(), row_state.copy()
    if ch.size == 0:
        return out, out_rows
    order = np.lexsort((-size, unit))
    first = np.r_[True, unit[order][1:] != unit[order][:-1]]
    pick, pk = ch[order][first], kind[order][first]
    out[pick[pk == 0]] = new[pick[pk == 0]]
    out_rows[pick[pk == 1]] = new_rows[pick[pk == 1]]
    return out, out_rows


def kkt_check(chunk: LevelChunk, values: np.ndarray) -> np.ndarray:
    """``(P,)``: the KKT conditions of each parent's WLS at ``values`` (``(C, K)``), re-derived from
    the values alone: a slot within ``1e-9 · max(1, |parent|)`` of a bound is taken at that bound, a
    row within that distance of a bound is taken active; the multipliers are fitted on the other
    slots and checked as in the solver's own certificate (same tolerances). Parents with an
    unmeasured child fail."""
    P = chunk.shape[0]
    mq = structure_of(chunk)
    if mq is None:
        return np.zeros(P, bool)
    labels = chunk.coupled_parents()
    _, units = np.unique(labels, return_inverse=True)
    face = Face(chunk, mq, units.ravel())
    x = np.asarray(values, float)[face.sc, face.sk]
    # every cell outside the slots must be 0 (its parent cell is 0, or its upper bound is 0)
    outside = np.asarray(values, float).copy()
    outside[face.sc, face.sk] = 0.0
    bad_out = np.zeros(P, bool)
    np.logical_or.at(bad_out, chunk.child_parent, np.abs(outside).max(1, initial=0.0) > 0)
    tol = FEASIBILITY_RTOL * face.pscale[face.sp]
    state = np.full(face.n, FREE, np.int8)
    state[x <= face.lo + tol] = LOWER
    state[(x >= face.hi - tol) & (state == FREE)] = UPPER
    row_state = np.where(face.rl >= face.ru, EQUAL, INACTIVE).astype(np.int8)
    if face.n_rows:
        ax = face.A2 @ x
        rt = FEASIBILITY_RTOL * np.maximum(1.0, np.abs(ax))
        row_state[(row_state == INACTIVE) & (np.abs(ax - face.rl) <= rt)] = LOWER
        row_state[(row_state == INACTIVE) & (np.abs(ax - face.ru) <= rt)] = UPPER
    free = state == FREE
    rs, _ = face.row_system(free, row_state, max(face.n_rows, 1))
    ok, _ = face.certify(x, state, row_state, free, rs)
    W = chunk.group_weights()
    uniq, which = np.unique(W, axis=0, return_inverse=True)
    lo_ev, hi_ev = mq.eigenvalue_range(uniq)
    singular = ~(lo_ev > 1e-12 * np.maximum(hi_ev, 1e-300))
    bad = np.zeros(P, bool)
    np.logical_or.at(bad, chunk.child_parent, singular[which.ravel()])
    return ok & ~bad & ~bad_out


def _keep_free(face: Face, new: np.ndarray, nu: np.ndarray, x: np.ndarray) -> np.ndarray:
    """A parent cell whose value its bound slots cannot meet needs a free slot: free the bound
    slot whose multiplier is the least strongly held."""
    free = new == FREE
    nf = np.bincount(face.eid, free, minlength=face.ne)
    fixed_val = np.where(new == LOWER, face.lo, np.where(new == UPPER, face.hi, 0.0))
    gap = face.erhs - np.bincount(face.eid, np.where(free, 0.0, fixed_val), minlength=face.ne)
    tol = FEASIBILITY_RTOL * np.maximum(1.0, np.abs(face.erhs))
    stuck = (nf == 0) & (np.abs(gap) > tol)
    if not stuck.any():
        return new
    cand = np.flatnonzero(stuck[face.eid] & (face.lo < face.hi)
                          & (((new == LOWER) & (gap[face.eid] > 0)) | ((new == UPPER) & (gap[face.eid] < 0))))
    if cand.size == 0:
        return new
    key = np.where(new[cand] == LOWER, nu[cand], -nu[cand])
    order = np.lexsort((key, face.eid[cand]))
    e = face.eid[cand][order]
    first = np.r_[True, e[1:] != e[:-1]]
    out = new.copy()
    out[cand[order][first]] = FREE
    return out


class HistogramWLSSolver(Solver):
    """The structured exact WLS of histogram level chunks (module docstring)."""

    name = "histogram_wls"
    problem_kinds = frozenset({"histogram_wls"})

    @dataclass(frozen=True)
    class Options:
        """``max_rounds``: working-set updates per parent; ``max_cg``: CG iterations per update;
        ``max_rows_per_unit``: active rows a unit's dense Schur block may hold."""

        max_rounds: int = 60
        max_cg: int = 2000
        max_rows_per_unit: int = 512

    capabilities = Capabilities(
        objectives=frozenset({"l2"}), integer=False, continuous=True, structures=frozenset({"histogram"}),
        features=frozenset({"weights", "query_terms", "bounds", "linear_constraints"}),
        limits={"problem_kind": "histogram_wls (LevelChunk with marginal query groups)",
                "tolerance": f"KKT certified per parent: constraints {FEASIBILITY_RTOL:g} x max(1, |parent|), "
                             f"stationarity {STATIONARITY_RTOL:g} of the gradient's terms",
                "time_limit": "checked between working-set updates; uncertified parents say so",
                "rows": "any rows; coupled parents are solved together (at most max_rows_per_unit active)"},
        description="structured per-parent WLS of histogram chunks: active set + projected CG on marginal "
                    "structure, KKT-certified per parent (O(slots x groups) per iteration)",
    )

    def unsupported(self, problem: Any) -> list[str]:
        """Why this chunk cannot be posed here at all (per-parent refusals are reported in the
        solution's ``stats["reasons"]``)."""
        if isinstance(problem, Problem):
            return ["solves histogram level chunks (problem kind 'histogram_wls') only, not a general Problem"]
        if getattr(problem, "kind", None) != "histogram_wls":
            return [f"solves problem kind 'histogram_wls', not {getattr(problem, 'kind', type(problem).__name__)!r}"]
        if problem.chunk.queries is None:
            return ["the chunk carries no marginal query structure (LevelChunk.queries is None)"]
        return []

    def solve_problem(self, problem: Any, *, time_limit: float | None = None, **options: Any) -> Solution:
        """Solve every parent; status ``optimal`` only when every parent is certified (else
        ``iteration_limit`` / ``time_limit`` with ``stats["certified"]`` and ``stats["reasons"]``)."""
        opts = self.parse_options(options)
        t0 = time.perf_counter()
        assert isinstance(problem, HistogramWLS)
        res = solve_structured(problem.chunk, max_rounds=opts.max_rounds, max_cg=opts.max_cg,
                               max_rows_per_unit=opts.max_rows_per_unit, time_limit=time_limit)
        return chunk_solution(problem, res.values, res.certified, res.reason, self.name, t0,
                              {"rounds_max": int(res.rounds[res.certified].max(initial=0)),
                               "cg_iterations": res.cg_iterations})


def chunk_solution(problem: Any, values: np.ndarray, certified: np.ndarray, reason: np.ndarray, name: str,
                   t0: float, stats: dict[str, Any], reasons: dict[int, str] | None = None) -> Solution:
    """A :class:`Solution` of a chunk kind: ``values`` ``(C, K)``, status ``optimal`` when every
    parent is certified, else the first failure's status with the uncertified parents."""
    texts = REASONS if reasons is None else reasons
    st = dict(stats)
    st["certified"] = np.asarray(certified, bool)
    st["reasons"] = {int(p): texts.get(int(reason[p]), "not certified") for p in np.flatnonzero(~certified)}
    if certified.all():
        status = Status.OPTIMAL
        obj = problem.objective_value(values)
    else:
        status = Status.TIME_LIMIT if (reason == 5).any() else Status.ITERATION_LIMIT
        obj = float("nan")
        st["failed_groups"] = np.flatnonzero(~certified)
        first = int(np.flatnonzero(~certified)[0])
        st["message"] = f"{int((~certified).sum())} parent(s) not solved, e.g. parent {first}: {st['reasons'][first]}"
    return Solution(values=values, objective=obj, status=status, solver=name, wall_time=time.perf_counter() - t0,
                    stats=st, bound=obj if status == Status.OPTIMAL else None, gap=0.0 if status == Status.OPTIMAL
                    else None)
