"""Translation of a :class:`~hierdp.models.problem.Problem` to arrays and to an indexed Pyomo model.

Two layers share one preparation step, :func:`model_arrays`:

* :func:`model_arrays` turns a problem (or a subset of its groups, for batching) into plain numpy
  arrays: the free nodes that become variables, their bounds, the consistency rows (fixed nodes
  enter as constants), the user linear constraints and the objective terms. The ``highs`` plug-in
  turns these arrays into sparse matrices for ``highspy`` directly.
* :func:`build_pyomo_model` turns the same arrays into ONE Pyomo ``ConcreteModel`` with indexed
  components (``model.y[i]``, ``model.consistency[p]``, ``model.alpha[g]``, ...) for a whole batch
  of groups, then runs the problem's Pyomo hooks so users can add their own components.

Objectives (``w`` = weights, ``x`` = noisy target, only free nodes with a target and ``w > 0``):

* ``linf``: one ``alpha[g]`` per group, ``w_i |y_i - x_i| <= alpha[g]``, minimize ``sum alpha``;
* ``l1``: ``t[i] >= w_i |y_i - x_i|``, minimize ``sum t``;
* ``l2`` continuous: minimize ``sum w_i (y_i - x_i)^2`` (a convex QP);
* ``l2`` integer: HiGHS has no MIQP, so the convex function ``f_i(y) = w_i (y - x_i)^2`` is
  replaced by its epigraph over integer breakpoints: for each integer ``k`` in ``[a_i, b_i - 1]``
  ``t_i >= w_i ((k - x_i)^2 + (2k + 1 - 2x_i)(y_i - k))`` (the chord of ``f_i`` between ``k`` and
  ``k + 1``) and ``a_i <= y_i <= b_i``. For every integer ``y`` in ``[a_i, b_i]`` the largest chord
  equals ``f_i(y)`` exactly (``f_i`` is convex, so chords of other segments lie below it at
  integer points), hence the MIP is exact as long as ``[a_i, b_i]`` contains an integer optimum.

The window ``[a_i, b_i]`` and why it contains an integer optimum:

* *Domain* (always valid): ``a_i = ceil(effective lower bound)``, ``b_i = floor(upper bound)``,
  and, for a non-negative problem, ``b_i <= value of the nearest fixed ancestor`` (every node is
  the sum of its non-negative descendants, so it never exceeds a fixed ancestor). Any feasible
  integer point lies in it. Unbounded domains are refused.
* *Proximity window* (when ``l2_center`` = an optimal solution of the continuous relaxation is
  given and the batch has no user linear constraints): ``a_i, b_i = ceil/floor(c_i -/+ n_g)``
  intersected with the domain, ``n_g`` = number of variables of node i's group. Proof: groups are
  independent blocks (fixed nodes separate them). Within a block the constraint matrix has one
  row per node with children, ``sum(children) - node = const``; each variable appears with +1 in
  its parent's row and -1 in its own row, so every column has at most one +1 and one -1: a network
  matrix, totally unimodular, and appending bound rows keeps it so, hence its largest
  subdeterminant is ``Delta = 1``. Hochbaum & Shanthikumar (J. ACM 37(4), 1990, proximity theorem
  for separable convex integer programs) show that for an optimal continuous solution ``c`` there
  is an optimal integer solution ``z`` with ``||z - c||_inf <= n Delta``. So ``z`` lies in the
  window, and restricting the integer problem to it keeps its optimum. A margin of ``1e-4`` is
  added to absorb the QP solver's round-off on ``c``. User linear constraints may break total
  unimodularity, so with them only the domain is used.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from hierdp.models.problem import Problem, ProblemError

#: refuse integer-L2 epigraphs with more chord rows than this (memory and solve time explode)
MAX_PWL_PIECES = 2_000_000
_WINDOW_MARGIN = 1e-4


class ModelInfeasible(ProblemError):
    """The problem is infeasible before any solver runs (e.g. a user constraint over fixed nodes only)."""


class ModelTooLarge(ProblemError):
    """The model would be too large to build (e.g. an unbounded or huge integer-L2 domain)."""


@dataclass
class ModelArrays:
    """A problem (or a batch of its groups) as numpy arrays; variables are free nodes.

    Attributes:
        nodes: node index of variable ``j`` (sorted).
        col_of: length-n map node -> variable position, -1 when the node is not a variable here.
        lower, upper: variable bounds (integer-rounded for integer problems).
        integer: integrality of the variables.
        groups: group ids in this batch (``problem.groups()`` numbering).
        var_group: group id of each variable.
        cons_node: node whose consistency row this is (one row per node with children touching a
            variable of the batch).
        cons_ptr, cons_col, cons_coef: CSR of the consistency rows over variables.
        cons_rhs: right-hand side (fixed nodes moved to it).
        lin_ids: indices into ``problem.linear`` of the user constraints in this batch.
        lin_ptr, lin_col, lin_coef, lin_lower, lin_upper: CSR of those constraints over variables
            (fixed nodes moved into the bounds).
        obj_var: variable positions with an objective term; ``obj_target``, ``obj_weight`` theirs.
        obj_group: position in ``groups`` of each objective term (for ``linf``).
        pwl_lo, pwl_hi: integer-L2 window per objective term (empty otherwise).
    """

    objective: str
    nodes: np.ndarray
    col_of: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    integer: bool
    groups: np.ndarray
    var_group: np.ndarray
    cons_node: np.ndarray
    cons_ptr: np.ndarray
    cons_col: np.ndarray
    cons_coef: np.ndarray
    cons_rhs: np.ndarray
    lin_ids: np.ndarray
    lin_ptr: np.ndarray
    lin_col: np.ndarray
    lin_coef: np.ndarray
    lin_lower: np.ndarray
    lin_upper: np.ndarray
    obj_var: np.ndarray
    obj_target: np.ndarray
    obj_weight: np.ndarray
    obj_group: np.ndarray
    pwl_lo: np.ndarray
    pwl_hi: np.ndarray

    @property
    def n_vars(self) -> int:
        """Number of node variables."""
        return int(self.nodes.size)

    @property
    def pwl_pieces(self) -> np.ndarray:
        """Number of chord rows per objective term of an integer-L2 epigraph."""
        return np.maximum(self.pwl_hi - self.pwl_lo, 1)


def anchor_values(problem: Problem) -> np.ndarray:
    """Value of each node's nearest fixed proper ancestor (NaN when it has none), vectorized."""
    parent = problem.parent
    fixed = problem.fixed
    anc = parent.copy()
    out = np.full(problem.n, np.nan)
    todo = anc >= 0
    # pointer walk one level per round, all nodes at once; depth bounds the number of rounds
    while todo.any():
        hit = todo & ~np.isnan(fixed[np.maximum(anc, 0)])
        out[hit] = fixed[anc[hit]]
        todo &= ~hit
        anc = np.where(todo, parent[np.maximum(anc, 0)], -1)
        todo &= anc >= 0
    return out


def batch_components(problem: Problem) -> np.ndarray:
    """Component id per group: groups coupled by a user linear constraint share a component.

    Components are the units that may be solved separately (batching never splits one).
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    ng = problem.n_groups
    grp = problem.groups()
    rows, cols = [], []
    for c in problem.linear:
        g = np.unique(grp[c.index][grp[c.index] >= 0])
        if g.size > 1:
            rows.append(g[:-1])
            cols.append(g[1:])
    if not rows or ng == 0:
        return np.arange(ng, dtype=np.int64)
    r = np.concatenate(rows)
    c = np.concatenate(cols)
    graph = coo_matrix((np.ones(r.size), (r, c)), shape=(ng, ng))
    _, labels = connected_components(graph, directed=False)
    return labels.astype(np.int64)


def model_arrays(
    problem: Problem,
    *,
    subset: np.ndarray | None = None,
    l2_center: np.ndarray | None = None,
    max_pwl_pieces: int = MAX_PWL_PIECES,
    relax: bool = False,
    anchors: np.ndarray | None = None,
) -> ModelArrays:
    """Arrays of the problem restricted to the groups in ``subset`` (all groups when None).

    Args:
        problem: the problem.
        subset: group ids (``problem.groups()`` numbering) to include; a user linear constraint
            must not couple a group inside ``subset`` with one outside.
        l2_center: optimal solution of the continuous relaxation (length n, node-indexed), used
            for the proven integer-L2 window (see module docstring); ignored otherwise.
        max_pwl_pieces: refuse integer-L2 epigraphs larger than this.
        relax: build the continuous relaxation (integer bounds are still rounded inward, which
            leaves the integer problem unchanged).
        anchors: ``anchor_values(problem)`` if already computed (saves a pass per batch).

    Raises:
        ModelInfeasible: a user constraint over fixed nodes only is violated, or bounds cross.
        ModelTooLarge: an integer-L2 domain is unbounded or too large.
        ProblemError: ``subset`` splits a coupled constraint or names unknown groups.
    """
    n = problem.n
    grp = problem.groups()
    free = problem.is_free
    ng = problem.n_groups
    fixed0 = np.nan_to_num(problem.fixed)
    if subset is None:
        groups = np.arange(ng, dtype=np.int64)
        sel = free.copy()
    else:
        groups = np.unique(np.asarray(subset, dtype=np.int64).ravel())
        if groups.size and (groups[0] < 0 or groups[-1] >= ng):
            raise ProblemError(f"subset names group ids outside 0..{ng - 1}")
        in_subset = np.zeros(ng, bool)
        in_subset[groups] = True
        sel = free & in_subset[np.maximum(grp, 0)]
    nodes = np.flatnonzero(sel)
    col_of = np.full(n, -1, np.int64)
    col_of[nodes] = np.arange(nodes.size)
    gpos = np.full(max(ng, 1), -1, np.int64)
    gpos[groups] = np.arange(groups.size)

    integer = problem.integer and not relax
    lower = problem.effective_lower[nodes].astype(float) + 0.0  # + 0.0 turns -0.0 into 0.0
    upper = problem.upper[nodes].astype(float)
    if problem.integer:
        lower = np.ceil(lower - 1e-9)
        upper = np.floor(upper + 1e-9)
    if np.any(lower > upper):
        i = int(nodes[np.flatnonzero(lower > upper)[0]])
        raise ModelInfeasible(f"{problem._label(i)}: no integer value between its bounds")

    # consistency rows: every node with children that touches a variable of this batch
    parent = problem.parent
    ptr, kids = problem.children_csr()
    nch = np.diff(ptr)
    kid_sel = np.zeros(n, bool)
    has_parent = parent >= 0
    kid_sel_idx = np.flatnonzero(sel & has_parent)
    kid_sel[parent[kid_sel_idx]] = True
    row_node = np.flatnonzero((nch > 0) & (sel | kid_sel))
    # entries: children (+1) then the node itself (-1) when it is a variable
    counts = nch[row_node]
    starts = ptr[row_node]
    row_of_entry = np.repeat(np.arange(row_node.size), counts)
    entry_node = kids[np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(counts.sum())]
    entry_coef = np.ones(entry_node.size)
    self_rows = np.flatnonzero(sel[row_node])
    row_of_entry = np.concatenate([row_of_entry, self_rows])
    entry_node = np.concatenate([entry_node, row_node[self_rows]])
    entry_coef = np.concatenate([entry_coef, -np.ones(self_rows.size)])
    is_var = col_of[entry_node] >= 0
    # constants: fixed parent value minus fixed children
    rhs = np.where(sel[row_node], 0.0, fixed0[row_node])
    const_kids = ~is_var & (entry_coef > 0)
    rhs -= np.bincount(row_of_entry[const_kids], weights=fixed0[entry_node[const_kids]], minlength=row_node.size)
    cons_ptr, cons_col, cons_coef = _csr(row_of_entry[is_var], col_of[entry_node[is_var]], entry_coef[is_var],
                                         row_node.size)

    # user linear constraints of this batch
    lin_ids, lin_rows, lin_cols, lin_coefs, lin_lo, lin_hi = [], [], [], [], [], []
    for k, c in enumerate(problem.linear):
        fr = free[c.index]
        const = float(np.dot(c.coef[~fr], fixed0[c.index[~fr]]))
        if not fr.any():
            a = const
            if a < c.lower - 1e-9 * max(1, abs(c.lower)) or a > c.upper + 1e-9 * max(1, abs(c.upper)):
                raise ModelInfeasible(f"linear constraint {c.name or k} over fixed nodes only is violated: "
                                      f"{c.lower} <= {a} <= {c.upper}")
            continue
        inside = sel[c.index[fr]]
        if not inside.any():
            continue
        if not inside.all():
            raise ProblemError(f"subset splits linear constraint {c.name or k} between batches")
        lin_ids.append(k)
        r = len(lin_lo)
        lin_rows.append(np.full(int(fr.sum()), r))
        lin_cols.append(col_of[c.index[fr]])
        lin_coefs.append(c.coef[fr])
        lin_lo.append(c.lower - const)
        lin_hi.append(c.upper - const)
    nl = len(lin_lo)
    if nl:
        lin_ptr, lin_col, lin_coef = _csr(np.concatenate(lin_rows), np.concatenate(lin_cols),
                                          np.concatenate(lin_coefs), nl)
    else:
        lin_ptr, lin_col, lin_coef = np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0)

    # objective terms
    tgt = problem.target[nodes]
    w = problem.weights[nodes]
    obj_mask = ~np.isnan(tgt) & (w > 0)
    obj_var = np.flatnonzero(obj_mask)
    var_group = grp[nodes]
    arrays = ModelArrays(
        objective=problem.objective, nodes=nodes, col_of=col_of, lower=lower, upper=upper,
        integer=integer, groups=groups, var_group=var_group,
        cons_node=row_node, cons_ptr=cons_ptr, cons_col=cons_col, cons_coef=cons_coef, cons_rhs=rhs,
        lin_ids=np.asarray(lin_ids, np.int64), lin_ptr=lin_ptr, lin_col=lin_col, lin_coef=lin_coef,
        lin_lower=np.asarray(lin_lo, float), lin_upper=np.asarray(lin_hi, float),
        obj_var=obj_var, obj_target=tgt[obj_var], obj_weight=w[obj_var],
        obj_group=gpos[var_group[obj_var]] if obj_var.size else np.zeros(0, np.int64),
        pwl_lo=np.zeros(0), pwl_hi=np.zeros(0),
    )
    if problem.objective == "l2" and integer:
        _integer_l2_window(problem, arrays, l2_center, max_pwl_pieces, anchors)
    return arrays


def _integer_l2_window(problem: Problem, arr: ModelArrays, center: np.ndarray | None, max_pieces: int,
                       anchors: np.ndarray | None) -> None:
    """Set ``arr.pwl_lo/pwl_hi`` (see the module docstring for the proof) and tighten bounds."""
    j = arr.obj_var
    lo = arr.lower[j].copy()
    hi = arr.upper[j].copy()
    if problem.nonnegative:
        anc = (anchor_values(problem) if anchors is None else anchors)[arr.nodes[j]]
        hi = np.where(np.isnan(anc), hi, np.minimum(hi, np.floor(np.nan_to_num(anc) + 1e-9)))
    if center is not None and arr.lin_ids.size == 0:
        c = np.asarray(center, dtype=float)[arr.nodes[j]]
        if not np.all(np.isfinite(c)):
            raise ProblemError("l2_center must be finite on the free nodes of the batch")
        size = np.bincount(arr.var_group, minlength=int(arr.var_group.max()) + 1 if arr.var_group.size else 1)
        radius = size[arr.var_group[j]].astype(float) + _WINDOW_MARGIN
        lo = np.maximum(lo, np.ceil(c - radius))
        hi = np.minimum(hi, np.floor(c + radius))
    if np.any(~np.isfinite(lo) | ~np.isfinite(hi)):
        i = int(arr.nodes[j[np.flatnonzero(~np.isfinite(lo) | ~np.isfinite(hi))[0]]])
        raise ModelTooLarge(f"integer L2 epigraph needs a bounded domain: {problem._label(i)} is unbounded "
                            "(give bounds, fix an ancestor, or pass the continuous optimum as l2_center)")
    if np.any(lo > hi):
        i = int(arr.nodes[j[np.flatnonzero(lo > hi)[0]]])
        raise ModelInfeasible(f"{problem._label(i)}: empty integer domain")
    pieces = np.maximum(hi - lo, 1)
    if pieces.sum() > max_pieces:
        raise ModelTooLarge(f"integer L2 epigraph would need {int(pieces.sum())} chord rows "
                            f"(> {max_pieces}); the domain is too large for an exact MIP")
    arr.pwl_lo = lo
    arr.pwl_hi = hi
    arr.lower[j] = np.maximum(arr.lower[j], lo)
    arr.upper[j] = np.minimum(arr.upper[j], hi)


def pwl_rows(arr: ModelArrays) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Chord rows of the integer-L2 epigraph: ``(term, k, slope, intercept)`` per row.

    Row ``r`` reads ``t[term[r]] - slope[r] * y >= intercept[r]`` with
    ``slope = w (2k + 1 - 2x)`` and ``intercept = w ((k - x)^2 - (2k + 1 - 2x) k)``.
    """
    pieces = arr.pwl_pieces.astype(np.int64)
    term = np.repeat(np.arange(pieces.size), pieces)
    first = np.repeat(np.cumsum(pieces) - pieces, pieces)
    k = np.repeat(arr.pwl_lo, pieces) + (np.arange(term.size) - first)
    x = arr.obj_target[term]
    w = arr.obj_weight[term]
    slope = w * (2 * k + 1 - 2 * x)
    intercept = w * ((k - x) ** 2 - (2 * k + 1 - 2 * x) * k)
    return term, k, slope, intercept


def _csr(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, nrows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    order = np.lexsort((cols, rows))
    ptr = np.zeros(nrows + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=nrows), out=ptr[1:])
    return ptr, cols[order].astype(np.int64), vals[order].astype(float)


def build_pyomo_model(
    problem: Problem,
    *,
    subset: np.ndarray | None = None,
    integer_l2: Literal["pwl"] = "pwl",
    l2_center: np.ndarray | None = None,
    run_hooks: bool = True,
) -> Any:
    """One Pyomo ``ConcreteModel`` with indexed components for ``problem`` (or a batch of groups).

    Components (all indexed; node indices are the problem's integer indices, use
    ``problem.index_of(name)`` in hooks):

    * ``model.free`` set of variable nodes, ``model.y[i]`` (Integers or Reals, bounds from
      ``effective_lower``/``upper``);
    * ``model.consistency[p]`` for every node ``p`` with children (fixed nodes as constants);
    * ``model.linear[k]`` user linear constraints (``k`` indexes ``problem.linear``);
    * ``linf``: ``model.groups``, ``model.alpha[g]``, ``model.dev_up[i]``/``model.dev_down[i]``;
      ``l1``: ``model.t[i]`` with ``dev_up``/``dev_down``; integer ``l2``: ``model.t[i]`` and
      ``model.pwl[r]`` chords (see module docstring); ``model.obj`` the objective.

    Args:
        problem: the problem.
        subset: group ids to include (batching); default all.
        integer_l2: formulation of the integer L2 objective; only ``"pwl"`` (exact epigraph).
        l2_center: continuous optimum for the proven integer-L2 window (else the domain is used).
        run_hooks: call ``problem.pyomo_hooks`` on the model (default True).

    Raises:
        ModelInfeasible, ModelTooLarge, ProblemError: see :func:`model_arrays`.
    """
    if integer_l2 != "pwl":
        raise ValueError(f"integer_l2 must be 'pwl', got {integer_l2!r}")
    import pyomo.environ as pyo

    arr = model_arrays(problem, subset=subset, l2_center=l2_center)
    m = pyo.ConcreteModel(name="hierdp")
    m._hierdp_nodes = arr.nodes  # for values_from_model
    nodes = arr.nodes.tolist()
    lo = dict(zip(nodes, _none_if_inf(arr.lower)))
    hi = dict(zip(nodes, _none_if_inf(arr.upper)))
    m.free = pyo.Set(initialize=nodes, ordered=True)
    m.y = pyo.Var(m.free, domain=pyo.Integers if arr.integer else pyo.Reals,
                  bounds=lambda _m, i: (lo[i], hi[i]))

    def row_expr(ptr: np.ndarray, col: np.ndarray, coef: np.ndarray, r: int) -> Any:
        s, e = int(ptr[r]), int(ptr[r + 1])
        return sum(float(a) * m.y[nodes[int(j)]] for j, a in zip(col[s:e], coef[s:e]))

    cons_rows = {int(p): r for r, p in enumerate(arr.cons_node)}
    m.consistency = pyo.Constraint(
        list(cons_rows),
        rule=lambda _m, p: row_expr(arr.cons_ptr, arr.cons_col, arr.cons_coef, cons_rows[p])
        == float(arr.cons_rhs[cons_rows[p]]))
    lin_rows = {int(k): r for r, k in enumerate(arr.lin_ids)}
    m.linear = pyo.Constraint(
        list(lin_rows),
        rule=lambda _m, k: _bounds_or_none(arr.lin_lower[lin_rows[k]], arr.lin_upper[lin_rows[k]],
                                           row_expr(arr.lin_ptr, arr.lin_col, arr.lin_coef, lin_rows[k])))

    term_node = [nodes[int(j)] for j in arr.obj_var]
    tx = dict(zip(term_node, arr.obj_target.tolist()))
    tw = dict(zip(term_node, arr.obj_weight.tolist()))
    if problem.objective in ("linf", "l1"):
        m.terms = pyo.Set(initialize=term_node, ordered=True)
        if problem.objective == "linf":
            gid = dict(zip(term_node, arr.groups[arr.obj_group].tolist()))
            m.groups = pyo.Set(initialize=arr.groups.tolist(), ordered=True)
            m.alpha = pyo.Var(m.groups, domain=pyo.NonNegativeReals)
            bound = lambda i: m.alpha[gid[i]]  # noqa: E731
            m.obj = pyo.Objective(expr=sum(m.alpha[g] for g in m.groups), sense=pyo.minimize)
        else:
            m.t = pyo.Var(m.terms, domain=pyo.NonNegativeReals)
            bound = lambda i: m.t[i]  # noqa: E731
            m.obj = pyo.Objective(expr=sum(m.t[i] for i in m.terms), sense=pyo.minimize)
        m.dev_up = pyo.Constraint(m.terms, rule=lambda _m, i: tw[i] * (m.y[i] - tx[i]) <= bound(i))
        m.dev_down = pyo.Constraint(m.terms, rule=lambda _m, i: tw[i] * (tx[i] - m.y[i]) <= bound(i))
    elif not problem.integer:
        m.obj = pyo.Objective(expr=sum(tw[i] * (m.y[i] - tx[i]) ** 2 for i in term_node), sense=pyo.minimize)
    else:
        term, k, slope, intercept = pwl_rows(arr)
        m.terms = pyo.Set(initialize=term_node, ordered=True)
        m.t = pyo.Var(m.terms, domain=pyo.NonNegativeReals)
        m.pieces = pyo.RangeSet(0, term.size - 1)
        rows = list(zip([term_node[int(q)] for q in term], slope.tolist(), intercept.tolist()))
        m.pwl = pyo.Constraint(
            m.pieces, rule=lambda _m, r: m.t[rows[r][0]] - rows[r][1] * m.y[rows[r][0]] >= rows[r][2])
        m.obj = pyo.Objective(expr=sum(m.t[i] for i in m.terms), sense=pyo.minimize)
    if run_hooks:
        for hook in problem.pyomo_hooks:
            hook(m, problem)
    return m


def values_from_model(model: Any, problem: Problem) -> np.ndarray:
    """Full node vector from a solved model: fixed values, model values, NaN for nodes not in it."""
    out = np.where(problem.is_fixed, problem.fixed, np.nan)
    nodes = [int(i) for i in model.free]
    vals = np.array([model.y[i].value if model.y[i].value is not None else np.nan for i in nodes], dtype=float)
    out[np.asarray(nodes, dtype=np.int64)] = vals
    return out


def _none_if_inf(a: np.ndarray) -> list[float | None]:
    return [None if not np.isfinite(v) else float(v) for v in a]


def _bounds_or_none(lo: float, hi: float, expr: Any) -> tuple[Any, Any, Any]:
    return (None if not np.isfinite(lo) else float(lo), expr, None if not np.isfinite(hi) else float(hi))
