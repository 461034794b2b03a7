"""An indexed Pyomo model of a :class:`~hierdp.models.problem.Problem` (the declarative layer users extend).

:func:`build_pyomo_model` turns the arrays of :func:`hierdp.models.arrays.model_arrays` into ONE
Pyomo ``ConcreteModel`` with indexed components for a whole batch of groups (one component per
kind, never one per parent), then runs the problem's Pyomo hooks so users may add their own
components. :func:`values_from_model` reads a solved model back into a node vector. The
formulations (and the exactness proof of the integer-L2 epigraph) are in
:mod:`hierdp.models.arrays`.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from hierdp.models.arrays import model_arrays, pwl_rows
from hierdp.models.problem import Problem

__all__ = ["build_pyomo_model", "values_from_model"]


def build_pyomo_model(
    problem: Problem,
    *,
    subset: np.ndarray | None = None,
    integer_l2: Literal["pwl"] = "pwl",
    l2_center: np.ndarray | None = None,
    run_hooks: bool = True,
    shift: np.ndarray | None = None,
) -> Any:
    """One Pyomo ``ConcreteModel`` with indexed components for ``problem`` (or a batch of groups).

    Components (all indexed; node indices are the problem's integer indices, use
    ``problem.index_of(name)`` in hooks):

    * ``model.free`` set of variable nodes, ``model.y[i]`` (Integers or Reals, bounds from
      ``effective_lower``/``upper``);
    * ``model.consistency[p]`` for every node ``p`` with children (fixed nodes as constants);
    * ``model.linear[k]`` user rows (``k`` indexes ``problem.constraints``);
    * ``linf``: ``model.groups``, ``model.alpha[g]``, ``model.dev_up[i]``/``model.dev_down[i]``;
      ``l1``: ``model.t[i]`` with ``dev_up``/``dev_down``; integer ``l2``: ``model.t[i]`` and
      ``model.pwl[r]`` chords; query terms: ``model.queries``, ``model.q_up/q_down`` (linf, l1,
      with ``model.alpha`` / ``model.tq``), ``model.q_pwl`` (integer l2); ``model.obj``.

    Args:
        problem: the problem.
        subset: group ids to include (batching); default all.
        integer_l2: formulation of the integer L2 objective; only ``"pwl"`` (exact epigraph).
        l2_center: continuous optimum for the proven integer-L2 window (else the domain is used).
        run_hooks: call ``problem.pyomo_hooks`` on the model (default True).
        shift: recentring point (see :mod:`hierdp.models.arrays`); ``model.y`` then holds
            ``y - shift`` (the plug-ins use it only when the problem has no hooks, since hooks are
            written in the original variables).

    Raises:
        ModelInfeasible, ModelTooLarge, ProblemError: see :func:`model_arrays`.
    """
    if integer_l2 != "pwl":
        raise ValueError(f"integer_l2 must be 'pwl', got {integer_l2!r}")
    import pyomo.environ as pyo

    arr = model_arrays(problem, subset=subset, l2_center=l2_center, shift=shift)
    m = pyo.ConcreteModel(name="hierdp")
    m._hierdp_nodes = arr.nodes  # for values_from_model
    m._hierdp_shift = arr.shift
    nodes = arr.nodes.tolist()
    lo = dict(zip(nodes, _none_if_inf(arr.lower), strict=True))
    hi = dict(zip(nodes, _none_if_inf(arr.upper), strict=True))
    m.free = pyo.Set(initialize=nodes, ordered=True)
    m.y = pyo.Var(m.free, domain=pyo.Integers if arr.integer else pyo.Reals,
                  bounds=lambda _m, i: (lo[i], hi[i]))
    y = m.y

    def rows(ptr: np.ndarray, col: np.ndarray, coef: np.ndarray) -> list[Any]:
        cols = [nodes[j] for j in col.tolist()]
        coefs = coef.tolist()
        p = ptr.tolist()
        return [sum(a * y[c] if a != 1.0 else y[c] for c, a in zip(cols[p[r]:p[r + 1]], coefs[p[r]:p[r + 1]], strict=True))
                for r in range(len(p) - 1)]

    cons = rows(arr.cons_ptr, arr.cons_col, arr.cons_coef)
    rhs = arr.cons_rhs.tolist()
    cons_rows = {int(p): r for r, p in enumerate(arr.cons_node)}
    m.consistency = pyo.Constraint(list(cons_rows), rule=lambda _m, p: cons[cons_rows[p]] == rhs[cons_rows[p]])
    lin = rows(arr.lin_ptr, arr.lin_col, arr.lin_coef)
    lin_lo, lin_hi = _none_if_inf(arr.lin_lower), _none_if_inf(arr.lin_upper)
    lin_rows = {int(k): r for r, k in enumerate(arr.lin_ids)}
    m.linear = pyo.Constraint(list(lin_rows),
                              rule=lambda _m, k: (lin_lo[lin_rows[k]], lin[lin_rows[k]], lin_hi[lin_rows[k]]))

    term_node = [nodes[int(j)] for j in arr.obj_var]
    tx = dict(zip(term_node, arr.obj_target.tolist(), strict=True))
    tw = dict(zip(term_node, arr.obj_weight.tolist(), strict=True))
    qexpr = rows(arr.q_ptr, arr.q_col, arr.q_coef)
    qids = arr.q_ids.tolist()
    qx = dict(zip(qids, arr.q_target.tolist(), strict=True))
    qw = dict(zip(qids, arr.q_weight.tolist(), strict=True))
    qe = dict(zip(qids, qexpr, strict=True))
    if qids:
        m.queries = pyo.Set(initialize=qids, ordered=True)
    if problem.objective in ("linf", "l1"):
        m.terms = pyo.Set(initialize=term_node, ordered=True)
        if problem.objective == "linf":
            gid = dict(zip(term_node, arr.groups[arr.obj_group].tolist(), strict=True))
            n_node_groups = arr.groups.size
            qgid = {k: int(arr.groups[-1] + 1 + g - n_node_groups) if arr.groups.size else int(g)
                    for k, g in zip(qids, arr.q_group.tolist(), strict=True)}
            all_groups = sorted(set(arr.groups.tolist()) | set(qgid.values()))
            m.groups = pyo.Set(initialize=all_groups, ordered=True)
            m.alpha = pyo.Var(m.groups, domain=pyo.NonNegativeReals)
            bound = lambda i: m.alpha[gid[i]]
            qbound = lambda k: m.alpha[qgid[k]]
            m.obj = pyo.Objective(expr=sum(m.alpha[g] for g in m.groups), sense=pyo.minimize)
        else:
            m.t = pyo.Var(m.terms, domain=pyo.NonNegativeReals)
            if qids:
                m.tq = pyo.Var(m.queries, domain=pyo.NonNegativeReals)
            bound = lambda i: m.t[i]
            qbound = lambda k: m.tq[k]
            m.obj = pyo.Objective(expr=sum(m.t[i] for i in m.terms) + sum(m.tq[k] for k in qids),
                                  sense=pyo.minimize)
        m.dev_up = pyo.Constraint(m.terms, rule=lambda _m, i: tw[i] * (m.y[i] - tx[i]) <= bound(i))
        m.dev_down = pyo.Constraint(m.terms, rule=lambda _m, i: tw[i] * (tx[i] - m.y[i]) <= bound(i))
        if qids:
            m.q_up = pyo.Constraint(m.queries, rule=lambda _m, k: qw[k] * (qe[k] - qx[k]) <= qbound(k))
            m.q_down = pyo.Constraint(m.queries, rule=lambda _m, k: qw[k] * (qx[k] - qe[k]) <= qbound(k))
    elif not arr.integer:
        m.obj = pyo.Objective(expr=sum(tw[i] * (m.y[i] - tx[i]) ** 2 for i in term_node)
                              + sum(qw[k] * (qe[k] - qx[k]) ** 2 for k in qids), sense=pyo.minimize)
    else:
        term, _, slope, intercept = pwl_rows(arr)
        m.terms = pyo.Set(initialize=term_node, ordered=True)
        m.t = pyo.Var(m.terms, domain=pyo.NonNegativeReals)
        m.pieces = pyo.RangeSet(0, term.size - 1)
        prow = list(zip([term_node[int(q)] for q in term], slope.tolist(), intercept.tolist(), strict=True))
        m.pwl = pyo.Constraint(
            m.pieces, rule=lambda _m, r: m.t[prow[r][0]] - prow[r][1] * m.y[prow[r][0]] >= prow[r][2])
        if qids:
            m.tq = pyo.Var(m.queries, domain=pyo.NonNegativeReals)
            qterm, _, qslope, qint = pwl_rows(arr, queries=True)
            qrow = list(zip([qids[int(q)] for q in qterm], qslope.tolist(), qint.tolist(), strict=True))
            m.q_pieces = pyo.RangeSet(0, qterm.size - 1)
            m.q_pwl = pyo.Constraint(
                m.q_pieces, rule=lambda _m, r: m.tq[qrow[r][0]] - qrow[r][1] * qe[qrow[r][0]] >= qrow[r][2])
        m.obj = pyo.Objective(expr=sum(m.t[i] for i in m.terms) + sum(m.tq[k] for k in qids),
                              sense=pyo.minimize)
    if run_hooks:
        for hook in problem.pyomo_hooks:
            hook(m, problem)
    return m


def values_from_model(model: Any, problem: Problem) -> np.ndarray:
    """Full node vector from a solved model: fixed values, model values, NaN for nodes not in it."""
    out = np.where(problem.is_fixed, problem.fixed, np.nan)
    nodes = [int(i) for i in model.free]
    vals = np.array([model.y[i].value if model.y[i].value is not None else np.nan for i in nodes], dtype=float)
    shift = getattr(model, "_hierdp_shift", None)
    if shift is not None:
        vals = vals + shift
    out[np.asarray(nodes, dtype=np.int64)] = vals
    return out


def _none_if_inf(a: np.ndarray) -> list[float | None]:
    return [None if not np.isfinite(v) else float(v) for v in a]
