"""The ``chain`` plug-in: paper 001's chain dynamic program (§9.2, Model 3, eq. 8a/8b), exact.

It solves weighted L2 problems whose only constraints are *difference constraints along chains*:
``y_b - y_a >= 0`` (a monotone chain row, :meth:`Problem.add_monotone_chains`, or a linear row
``+1, -1`` with bounds ``[0, inf)`` / ``(-inf, 0]``) and ``y_b - y_a = 0`` (a linear row with
bounds ``[0, 0]``), plus fixed nodes (C7: the chain's last node fixed at ``G``) and
non-negativity. Nodes tied by equalities are merged; the merged nodes must then form disjoint
paths (every node at most one predecessor and one successor). Anything else is refused in
:meth:`ChainSolver.unsupported` with the reason: tree consistency (parent links), rows that are
not difference constraints, branching or cyclic chains, per-node bounds, query terms, Pyomo hooks,
nodes without a target or with weight 0, inconsistent fixed values.

Method: eq. 8's tables are convex (Lemma 7) and the top-down pass only needs each table's
minimiser. Along a chain split at its fixed nodes into *runs* with common bounds, the continuous
optimum is the weighted isotonic regression clipped to the bounds (PAVA, scipy's compiled one), and
the integer optimum is its rounding ``ceil(x - 1/2)``: the integer tables are the continuous ones
sampled at half-integers (proof in :mod:`hierdp.solvers._isotonic`). No window is involved, so
nothing can be cut off; every integer answer is nevertheless certified by the L♮-convex local
optimality test, summed over the nodes' own targets and weights (exact in int64 for targets and
weights on a short binary grid; otherwise float64 with a rigorous error bound, and exact rational
sums for the blocks the bound leaves undecided), and a run that fails it is re-solved with exact
rational arithmetic. Reproducer n1 (real targets at 2^46, where the float PAVA rounds a pooled
mean across a half-integer) is caught there. Work: ``O(N)`` for a chain of ``N`` nodes (plus
``O(N log N)`` to order the chain), independent of the counts (paper Theorem 5 is ``O(N d)`` with
``d`` the domain width).
"""

from __future__ import annotations

import time
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from hierdp.errors import exact_number
from hierdp.models.problem import Problem
from hierdp.solvers._isotonic import Runs, continuous_runs, integer_runs
from hierdp.solvers.base import Capabilities, Solution, Solver, SolverFailed, Termination, finish

__all__ = ["ChainSolver", "ChainStructure", "NotAChain", "chain_structure"]


class NotAChain(ValueError):
    """The problem is not a chain of difference constraints (the message says why)."""


@dataclass
class ChainStructure:
    """A problem compiled to runs.

    Attributes:
        rep: per node, its merged (equality) component.
        order: merged components in chain order (paths concatenated).
        run_offsets: free runs as index ranges into ``run_nodes``.
        run_nodes: merged free components, run by run.
        run_lo, run_hi: bounds of each run (previous / next fixed value, and the lower bound).
        comp_fixed: fixed value per component (NaN: free).
        S, W: per component ``sum w t`` and ``sum w``.
        member_ptr, member_nodes: the nodes of every run position (``run_nodes`` order):
            ``member_nodes[member_ptr[p]:member_ptr[p + 1]]``.
    """

    rep: np.ndarray
    run_offsets: np.ndarray
    run_nodes: np.ndarray
    run_lo: np.ndarray
    run_hi: np.ndarray
    comp_fixed: np.ndarray
    S: np.ndarray
    W: np.ndarray
    n_paths: int
    member_ptr: np.ndarray
    member_nodes: np.ndarray


def _difference_rows(problem: Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(a, b, equal)`` per row: ``y_b >= y_a`` (or ``y_b == y_a``); raises NotAChain."""
    if not problem.n_constraints:
        z = np.zeros(0, np.int64)
        return z, z, np.zeros(0, bool)
    rows = problem.constraints
    m = rows.matrix
    nnz = np.diff(m.indptr)
    bad = np.flatnonzero(nnz != 2)
    if bad.size:
        raise NotAChain(f"row {rows.name(int(bad[0]))} has {int(nnz[bad[0]])} terms; a chain row has two "
                        "(y_b - y_a)")
    cols = m.indices.reshape(-1, 2)
    coef = m.data.reshape(-1, 2)
    ok = (np.abs(coef) == 1).all(axis=1) & (coef.sum(axis=1) == 0)
    if not ok.all():
        raise NotAChain(f"row {rows.name(int(np.flatnonzero(~ok)[0]))} is not a difference y_b - y_a "
                        "(coefficients must be +1 and -1)")
    lo, hi = rows.lower, rows.upper
    plus = np.where(coef[:, 0] > 0, cols[:, 0], cols[:, 1])
    minus = np.where(coef[:, 0] > 0, cols[:, 1], cols[:, 0])
    ge = (lo == 0) & np.isposinf(hi)  # plus - minus >= 0: minus <= plus
    le = np.isneginf(lo) & (hi == 0)  # plus <= minus
    eq = (lo == 0) & (hi == 0)
    if not (ge | le | eq).all():
        r = int(np.flatnonzero(~(ge | le | eq))[0])
        raise NotAChain(f"row {rows.name(r)} has bounds [{exact_number(lo[r])}, {exact_number(hi[r])}]; a chain row is "
                        ">= 0, <= 0 or = 0")
    a = np.where(le, plus, minus)
    b = np.where(le, minus, plus)
    return a.astype(np.int64), b.astype(np.int64), eq


def chain_structure(problem: Problem) -> ChainStructure:
    """Compile a chain problem (raises :class:`NotAChain` with the reason)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n = problem.n
    if np.any(problem.parent >= 0):
        i = int(np.flatnonzero(problem.parent >= 0)[0])
        raise NotAChain(f"{problem.label(i)} has a parent: tree consistency is not a chain of difference "
                        "constraints (use costtable for trees)")
    free = problem.is_free
    tgt = problem.target
    if np.any(free & np.isnan(tgt)):
        raise NotAChain(f"{problem.label(int(np.flatnonzero(free & np.isnan(tgt))[0]))} has no target")
    if np.any(free & (problem.weights <= 0)):
        raise NotAChain(f"{problem.label(int(np.flatnonzero(free & (problem.weights <= 0))[0]))} has weight 0")
    a, b, eq = _difference_rows(problem)
    # merge equality components
    g = coo_matrix((np.ones(int(eq.sum())), (a[eq], b[eq])), shape=(n, n))
    n_comp, rep = connected_components(g, directed=False)
    rep = rep.astype(np.int64)
    fixed = problem.fixed
    fx = ~np.isnan(fixed)
    comp_fixed = np.full(n_comp, np.nan)
    if fx.any():
        cmin = np.full(n_comp, np.inf)
        cmax = np.full(n_comp, -np.inf)
        np.minimum.at(cmin, rep[fx], fixed[fx])
        np.maximum.at(cmax, rep[fx], fixed[fx])
        clash = np.isfinite(cmin) & (cmin != cmax)
        if clash.any():
            c = int(np.flatnonzero(clash)[0])
            raise NotAChain(f"infeasible: nodes tied by equality rows are fixed at {exact_number(cmin[c])} and "
                            f"{exact_number(cmax[c])}")
        comp_fixed = np.where(np.isfinite(cmin), cmin, np.nan)
    w = np.where(free, problem.weights, 0.0)
    W = np.bincount(rep, weights=w, minlength=n_comp)
    S = np.bincount(rep, weights=w * np.nan_to_num(tgt), minlength=n_comp)
    # inequality edges between components: disjoint paths
    ca, cb = rep[a[~eq]], rep[b[~eq]]
    keep = ca != cb
    key = np.sort(ca[keep] * np.int64(n_comp) + cb[keep])
    key = key[np.concatenate([[True], key[1:] != key[:-1]])] if key.size else key  # repeated rows count once
    ca, cb = key // n_comp, key % n_comp
    outdeg = np.bincount(ca, minlength=n_comp)
    indeg = np.bincount(cb, minlength=n_comp)
    if np.any(outdeg > 1) or np.any(indeg > 1):
        c = int(np.flatnonzero((outdeg > 1) | (indeg > 1))[0])
        node = int(np.flatnonzero(rep == c)[0])
        raise NotAChain(f"{problem.label(node)} has {'two successors' if outdeg[c] > 1 else 'two predecessors'}: "
                        "the constraints branch (a chain is a path)")
    succ = np.full(n_comp, -1, np.int64)
    succ[ca] = cb
    idx = np.arange(n_comp, dtype=np.int64)
    # distance to the path's tail and the tail itself, by pointer doubling (a cycle never settles)
    jump = np.where(succ >= 0, succ, idx)
    dist = (succ >= 0).astype(np.int64)
    for _ in range(int(np.ceil(np.log2(n_comp + 1))) + 2):
        moving = jump != jump[jump]
        if not moving.any():
            break
        dist = dist + np.where(moving, dist[jump], 0)
        jump = jump[jump]
    if np.any(succ[jump] >= 0):
        node = int(np.flatnonzero(rep == int(np.flatnonzero(succ[jump] >= 0)[0]))[0])
        raise NotAChain(f"the chain constraints through {problem.label(node)} form a cycle")
    order = np.lexsort((-dist, jump))  # path by path (tail id), head first
    tail = jump[order]
    # split every path at its fixed components into free runs with bounds
    is_fixed = ~np.isnan(comp_fixed[order])
    path_start = np.ones(order.size, bool)
    path_start[1:] = tail[1:] != tail[:-1]
    n_paths = int(path_start.sum())
    lower_all = 0.0 if problem.nonnegative else -np.inf
    # previous fixed value along the path (forward fill), next fixed value (backward fill)
    pos = np.arange(order.size)
    fval = comp_fixed[order]
    path_id = np.cumsum(path_start) - 1
    first_pos = np.flatnonzero(path_start)[path_id]
    path_end = np.concatenate([np.flatnonzero(path_start)[1:], [order.size]])[path_id]
    last_fixed = np.maximum.accumulate(np.where(is_fixed, pos, -1))  # at or before each position
    prev_fixed = np.where(last_fixed >= first_pos, fval[np.maximum(last_fixed, 0)], -np.inf)
    nxt = np.minimum.accumulate(np.where(is_fixed, pos, order.size)[::-1])[::-1]  # at or after
    next_fixed = np.where(nxt < path_end, fval[np.minimum(nxt, order.size - 1)], np.inf)
    # fixed values must be non-decreasing along each path and respect the lower bound
    if is_fixed.any():
        fpos = np.flatnonzero(is_fixed)
        earlier = np.where(fpos > first_pos[fpos], prev_fixed[np.maximum(fpos - 1, 0)], -np.inf)
        bad = fval[fpos] < np.maximum(earlier, lower_all)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            node = int(np.flatnonzero(rep == order[fpos[k]])[0])
            raise NotAChain(f"infeasible: {problem.label(node)} is fixed at {exact_number(fval[fpos[k]])}, below an earlier "
                            "fixed value or the lower bound of its chain")
    free_pos = np.flatnonzero(~is_fixed)
    run_start = np.ones(free_pos.size, bool)
    if free_pos.size:
        run_start[1:] = (np.diff(free_pos) != 1) | path_start[free_pos[1:]]
    starts = np.flatnonzero(run_start)
    run_offsets = np.concatenate([starts, [free_pos.size]]).astype(np.int64)
    first = free_pos[starts]
    run_lo = np.maximum(prev_fixed[first], lower_all)
    run_hi = next_fixed[first]
    if np.any(run_lo > run_hi):
        r = int(np.flatnonzero(run_lo > run_hi)[0])
        raise NotAChain(f"infeasible: a run of the chain lies between {exact_number(run_lo[r])} and "
                        f"{exact_number(run_hi[r])}")
    run_nodes = order[free_pos]
    # the nodes of every run position (the certificate sums marginals over nodes, not over the
    # rounded component sums)
    pos_of_comp = np.full(n_comp, -1, np.int64)
    pos_of_comp[run_nodes] = np.arange(run_nodes.size)
    node_pos = pos_of_comp[rep]
    members = np.flatnonzero(node_pos >= 0)
    members = members[np.argsort(node_pos[members], kind="stable")]
    member_ptr = np.zeros(run_nodes.size + 1, np.int64)
    np.cumsum(np.bincount(node_pos[members], minlength=run_nodes.size), out=member_ptr[1:])
    return ChainStructure(rep=rep, run_offsets=run_offsets, run_nodes=run_nodes, run_lo=run_lo,
                          run_hi=run_hi, comp_fixed=comp_fixed, S=S, W=W, n_paths=n_paths, member_ptr=member_ptr,
                          member_nodes=members)


class ChainSolver(Solver):
    """Exact L2 over chains of difference constraints (paper 001 §9.2, eq. 8); see the module docstring."""

    name = "chain"
    capabilities = Capabilities(
        objectives=frozenset({"l2"}),
        integer=True,
        continuous=True,
        structures=frozenset({"tree"}),
        features=frozenset({"weights", "linear_constraints", "cumulative", "free_sign"}),
        limits={"max_magnitude": 2.0 ** 50, "structure": "difference constraints along disjoint paths only",
                "time_limit": "not needed (linear work)",
                "optimality": "integer: exact (certified in exact arithmetic); continuous: isotonic regression in "
                              "float64"},
        tolerance=1e-9,
        description="paper 001 chain DP (eq. 8): exact L2 under monotone / equality chains (isotonic, certified)",
    )

    def __init__(self) -> None:
        self._last: tuple[Any, tuple, ChainStructure] | None = None

    def _compiled(self, problem: Problem) -> ChainStructure:
        key = (id(problem.fixed), id(problem.target), id(problem.weights), problem.n_constraints)
        if self._last is not None and self._last[0]() is problem and self._last[1] == key:
            return self._last[2]
        st = chain_structure(problem)
        self._last = (weakref.ref(problem), key, st)
        return st

    def extra_checks(self, problem: Problem) -> list[str]:
        """Refuse anything that is not a chain of difference constraints (with the reason)."""
        if problem.objective != "l2":
            return []
        try:
            self._compiled(problem)
        except NotAChain as exc:
            return [f"not a chain: {exc}"]
        return []

    def solve_problem(self, problem: Problem, *, time_limit: float | None = None, **options: Any) -> Solution:
        """Solve a supported problem exactly (``time_limit`` is not needed: the work is linear)."""
        if options:
            raise TypeError(f"chain takes no options, got {sorted(options)}")
        t0 = time.perf_counter()
        try:
            st = self._compiled(problem)
        except NotAChain as exc:
            raise SolverFailed(self.name, Termination.INFEASIBLE if "infeasible" in str(exc) else Termination.ERROR,
                               str(exc)) from exc
        finally:
            self._last = None
        S, W = st.S[st.run_nodes], st.W[st.run_nodes]
        stats: dict[str, Any] = {"paths": st.n_paths, "runs": int(st.run_offsets.size - 1),
                                 "chain_nodes": int(st.run_nodes.size)}
        if problem.integer:
            m = st.member_nodes
            runs = Runs(problem.target[m], problem.weights[m], st.member_ptr, st.run_offsets, st.run_lo, st.run_hi)
            comp_vals, more = integer_runs(runs)
            stats.update(more)
        else:
            comp_vals = continuous_runs(S, W, st.run_offsets, st.run_lo, st.run_hi)
        comp = st.comp_fixed.copy()
        comp[st.run_nodes] = comp_vals
        values = comp[st.rep]
        if problem.integer:
            values = np.rint(values).astype(np.int64)
        return finish(problem, values, Termination.OPTIMAL, self.name, t0, stats)
