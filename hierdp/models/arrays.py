"""Translation of a :class:`~hierdp.models.problem.Problem` to solver-neutral numpy arrays.

:func:`model_arrays` turns a problem (or a subset of its groups, for batching) into plain arrays:
the free nodes that become variables, their bounds, the consistency rows (fixed nodes enter as
constants), the user constraint rows and query terms (read directly from the problem's CSR blocks,
no Python loop per row) and the objective terms. The ``highs`` plug-in turns these arrays into
``highspy`` matrices, ``ortools`` into CP-SAT / GLOP models, :mod:`hierdp.models.pyomo` into an
indexed Pyomo model.

Objectives (``w`` = weights, ``x`` = noisy target, only free nodes with a target and ``w > 0``):

* ``linf``: one ``alpha[g]`` per group, ``w_i |y_i - x_i| <= alpha[g]``, minimize ``sum alpha``;
  every query block is one more group;
* ``l1``: ``t[i] >= w_i |y_i - x_i|``, minimize ``sum t`` (query terms alike);
* ``l2`` continuous: minimize ``sum w_i (y_i - x_i)^2`` (a convex QP; query terms add
  ``w_q (a_q . y - t_q)^2``);
* ``l2`` integer: HiGHS has no MIQP, so the convex function ``f_i(y) = w_i (y - x_i)^2`` is
  replaced by its epigraph over integer breakpoints: for each integer ``k`` in ``[a_i, b_i - 1]``
  ``t_i >= w_i ((k - x_i)^2 + (2k + 1 - 2x_i)(y_i - k))`` (the chord of ``f_i`` between ``k`` and
  ``k + 1``) and ``a_i <= y_i <= b_i``. For every integer ``y`` in ``[a_i, b_i]`` the largest chord
  equals ``f_i(y)`` exactly (``f_i`` is convex, so chords of other segments lie below it at
  integer points), hence the MIP is exact as long as ``[a_i, b_i]`` contains an integer optimum.
  A query term with integer coefficients has an integer value at integer points and gets the same
  chords over the range of ``a_q . y``.

The window ``[a_i, b_i]`` and why it contains an integer optimum:

* *Domain* (always valid): ``a_i = ceil(effective lower bound)``, ``b_i = floor(upper bound)``,
  and, for a non-negative problem, ``b_i <= value of the nearest fixed ancestor`` (every node is
  the sum of its non-negative descendants, so it never exceeds a fixed ancestor). Any feasible
  integer point lies in it. Unbounded domains are refused.
* *Proximity window* (when ``l2_center`` = an optimal solution of the continuous relaxation is
  given and the batch has no user rows or query terms): ``a_i, b_i = ceil/floor(c_i -/+ r_g)``
  intersected with the domain. For a TopDown level group (free leaves under a fixed parent: one
  sum constraint, integer bounds) whose variables all have a term of the same weight ``w``,
  ``r_g = 1``: write ``c_i = clip(x_i - tau / w)`` (the continuous optimum, multiplier ``tau``) and
  count units: unit ``m`` of coordinate ``i`` costs ``w (2m - 1 - 2x_i)``. Units up to
  ``floor(c_i)`` cost at most ``-2 tau - w``, the next unit of a fractional ``c_i`` costs in
  ``(-2 tau - w, -2 tau + w]``, every further unit more than ``-2 tau + w`` (a coordinate clipped
  at a bound has no unit on the far side). The ``c = sum c_i`` cheapest units (an optimum of a
  separable convex allocation, Gross 1956) are therefore the floor units plus some next units:
  ``floor(c) <= z <= ceil(c)`` (the same argument as :func:`hierdp.solvers.projection.integer_l2`).
  Unequal weights or nodes without a term void it; then, and for general trees, the next bound.
  For general trees ``r_g = n_g`` (number of variables of the group):
  groups are independent blocks (fixed nodes separate them); within a block the constraint
  matrix has one row per node with children, ``sum(children) - node = const``; each variable
  appears with +1 in its parent's row and -1 in its own row, a network matrix, totally
  unimodular, and bound rows keep it so, hence its largest subdeterminant is ``Delta = 1``.
  Hochbaum & Shanthikumar (J. ACM 37(4), 1990, proximity theorem for separable convex integer
  programs) show that for an optimal continuous solution ``c`` there is an optimal integer solution
  ``z`` with ``||z - c||_inf <= n Delta``. A margin of ``1e-4`` absorbs the QP solver's round-off
  on ``c``. User rows may break total unimodularity, so with them only the domain is used.

Recentring (``shift``): large counts (10^6 ... 2^52) make MIP solvers slow or wrong, since their
absolute tolerances (1e-6 integrality, 1e-7 feasibility) no longer resolve units. Every array can
be expressed in ``d = y - z`` for a point ``z`` (:func:`consistent_point`) that is integral, equal
to the fixed values and consistent: the consistency right-hand sides become 0, the targets
``x - z`` small, and the solver sees the same problem (same optimum, translated).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from hierdp.models.blocks import KIND_CUMULATIVE
from hierdp.errors import exact_number
from hierdp.models.feasibility import row_violations
from hierdp.models.problem import Problem, ProblemError

#: refuse integer-L2 epigraphs with more chord rows than this per group (and for all query terms of a
#: batch): beyond it the exact MIP is hopeless anyway, and a batch of groups stays within memory
MAX_PWL_PIECES = 500_000
_WINDOW_MARGIN = 1e-4


class ModelInfeasible(ProblemError):
    """The problem is infeasible before any solver runs (e.g. a user constraint over fixed nodes only)."""


class ModelTooLarge(ProblemError):
    """The model would be too large to build (e.g. an unbounded or huge integer-L2 domain)."""


@dataclass
class ModelArrays:
    """A problem (or a batch of its groups) as numpy arrays; variables are free nodes.

    Attributes:
        objective: the problem's objective.
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
        lin_ids: row numbers (in ``problem.constraints``) of the user rows in this batch.
        lin_ptr, lin_col, lin_coef, lin_lower, lin_upper: CSR of those rows over variables (fixed
            nodes moved into the bounds).
        obj_var: variable positions with an objective term; ``obj_target``, ``obj_weight`` theirs.
        obj_group: position in ``groups`` of each objective term (for ``linf``).
        pwl_lo, pwl_hi: integer-L2 window per objective term (empty otherwise).
        q_ids: term numbers (in ``problem.queries``) of the query terms in this batch;
            ``q_ptr, q_col, q_coef`` their CSR over variables; ``q_target`` (fixed nodes moved
            into it), ``q_weight``; ``q_group`` the linf group of each term (positions after
            ``groups``: ``groups.size + k`` for the k-th query block of the batch);
            ``q_pwl_lo, q_pwl_hi`` the integer-L2 range of each term's value.
        shift: the recentring point of the variables (zeros when not recentred): the model's
            variables are ``y - shift``.
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
    q_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    q_ptr: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    q_col: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    q_coef: np.ndarray = field(default_factory=lambda: np.zeros(0))
    q_target: np.ndarray = field(default_factory=lambda: np.zeros(0))
    q_weight: np.ndarray = field(default_factory=lambda: np.zeros(0))
    q_group: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    q_pwl_lo: np.ndarray = field(default_factory=lambda: np.zeros(0))
    q_pwl_hi: np.ndarray = field(default_factory=lambda: np.zeros(0))
    shift: np.ndarray | None = None

    @property
    def n_vars(self) -> int:
        """Number of node variables."""
        return int(self.nodes.size)

    @property
    def n_queries(self) -> int:
        """Number of query terms in this batch."""
        return int(self.q_ids.size)

    @property
    def n_linf_groups(self) -> int:
        """Number of ``alpha`` variables of a linf model (node groups, then query blocks)."""
        extra = int(self.q_group.max()) + 1 - self.groups.size if self.q_group.size else 0
        return int(self.groups.size + max(extra, 0))

    @property
    def pwl_pieces(self) -> np.ndarray:
        """Number of chord rows per objective term of an integer-L2 epigraph."""
        return np.maximum(self.pwl_hi - self.pwl_lo, 1)

    def unshift(self, d: np.ndarray) -> np.ndarray:
        """Values of the variables from the model's solution ``d`` (adds the shift back)."""
        return d if self.shift is None else d + self.shift


# ---------------------------------------------------------------------------------- tree helpers
def anchor_values(problem: Problem) -> np.ndarray:
    """Value of each node's nearest fixed proper ancestor (NaN when it has none).

    Pointer doubling over the problem's anchors (exact at any depth).
    """
    parent = problem.parent
    out = np.full(problem.n, np.nan)
    has = parent >= 0
    t = problem._anchor()[parent[has]]
    fx = problem.is_fixed[t]
    idx = np.flatnonzero(has)
    out[idx[fx]] = problem.fixed[t[fx]]
    return out


def consistent_point(problem: Problem) -> np.ndarray:
    """A point ``z`` equal to the fixed values, consistent (every parent the sum of its children),
    integral for integer problems, and close to the targets: the recentring point of a model.

    Bottom-up, every node gets an estimate (its rounded target, or the sum of its children's
    estimates when it has none); top-down, every node keeps its determined value
    (:meth:`Problem.determined_values`) or estimate, and the difference to its parent's value goes
    to the undetermined child with the largest estimate. Bounds are not enforced (``z`` only
    recentres the model). ``O(n)`` work in ``depth`` vectorized rounds.
    """
    n = problem.n
    parent = problem.parent
    det = problem.determined_values()
    known = ~np.isnan(det)
    est = np.rint(problem.target) if problem.integer else problem.target.copy()
    est = np.where(known, det, est)
    depth = problem.depth()
    if not np.any(parent >= 0):
        return np.where(np.isnan(est), 0.0, est)
    order = np.argsort(depth, kind="stable")
    ptr = np.searchsorted(depth[order], np.arange(int(depth.max()) + 2))
    levels = [order[ptr[d]:ptr[d + 1]] for d in range(int(depth.max()) + 1)]
    # bottom-up: nodes without a target estimate the sum of their children; a node is "informed"
    # when it or a descendant has a target or a determined value
    informed = ~np.isnan(est)
    sub = np.zeros(n)
    for d in range(len(levels) - 1, 0, -1):
        kids = levels[d]
        val = np.where(np.isnan(est[kids]), sub[kids], est[kids])
        sub += np.bincount(parent[kids], weights=val, minlength=n)
        inf_kids = kids[informed[kids]]
        informed[np.unique(parent[inf_kids])] = True
    est = np.where(np.isnan(est), sub, est)
    # top-down: distribute every parent's value; the difference goes to the uninformed children
    # (shared equally: nothing says where it belongs), else to the child with the largest estimate
    z = np.where(known, det, np.nan)
    roots = levels[0]
    z[roots] = est[roots]
    for d in range(1, len(levels)):
        kids = levels[d]
        par = parent[kids]
        z[kids] = np.where(known[kids], det[kids], np.where(informed[kids], est[kids], 0.0))
        diff = z - np.bincount(par, weights=z[kids], minlength=n)  # per parent
        free_kids = kids[~known[kids] & ~informed[kids]]
        if free_kids.size:
            k = np.bincount(parent[free_kids], minlength=n)
            fp = parent[free_kids]
            share = diff[fp] / k[fp]
            if problem.integer:
                q = np.floor(diff[fp] / k[fp])
                rem = diff[fp] - q * k[fp]  # 0 <= rem < k: one more unit to the first rem children
                rank = np.zeros(free_kids.size, np.int64)
                order = np.argsort(fp, kind="stable")
                first = np.searchsorted(fp[order], fp[order])
                rank[order] = np.arange(free_kids.size) - first
                share = q + (rank < rem)
            z[free_kids] = share
            diff[np.unique(fp)] = 0.0
        cand = kids[~known[kids]]
        pars = np.unique(parent[cand]) if cand.size else cand
        pars = pars[diff[pars] != 0]
        if pars.size:
            cand = cand[np.isin(parent[cand], pars)]
            best = np.full(n, -np.inf)
            np.maximum.at(best, parent[cand], est[cand])
            is_best = est[cand] == best[parent[cand]]
            first = np.full(n, n, np.int64)
            np.minimum.at(first, parent[cand[is_best]], cand[is_best])
            z[first[pars]] += diff[pars]
    return z


def recentred_magnitude(problem: Problem) -> float:
    """Largest ``|target - z|`` over objective terms after recentring on :func:`consistent_point`
    (query terms included): the size of the numbers a recentred model holds near its optimum."""
    z = consistent_point(problem)
    term = problem.is_free & ~np.isnan(problem.target)
    big = float(np.abs(problem.target[term] - z[term]).max()) if term.any() else 0.0
    if problem.n_query_terms:
        q = problem.queries
        big = max(big, float(np.abs(q.target - q.matrix @ z).max()))
    return big


# ---------------------------------------------------------------------------------- batching
def batch_components(problem: Problem) -> np.ndarray:
    """Component id per group: groups coupled by a user row or a query term share a component
    (for ``linf`` a query block couples every group it touches).

    Components are the units that may be solved separately (batching never splits one).
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    ng = problem.n_groups
    grp = problem.groups()
    edges_g: list[np.ndarray] = []
    edges_c: list[np.ndarray] = []
    n_couplers = 0
    mats: list[tuple[Any, np.ndarray | None]] = []
    if problem.n_constraints:
        mats.append((problem.constraints.matrix, None))
    if problem.n_query_terms:
        q = problem.queries
        mats.append((q.matrix, q.block if problem.objective == "linf" else None))
    for mat, block in mats:
        row = np.repeat(np.arange(mat.shape[0], dtype=np.int64), np.diff(mat.indptr))
        g = grp[mat.indices]
        keep = g >= 0
        coupler = (block[row] if block is not None else row)[keep]
        edges_g.append(g[keep])
        edges_c.append(coupler + n_couplers)
        n_couplers += int((block.max() + 1) if block is not None and block.size else mat.shape[0])
    if ng == 0 or not edges_g or not sum(e.size for e in edges_g):
        return np.arange(ng, dtype=np.int64)
    eg = np.concatenate(edges_g)
    ec = np.concatenate(edges_c) + ng
    graph = coo_matrix((np.ones(eg.size), (eg, ec)), shape=(ng + n_couplers, ng + n_couplers))
    _, labels = connected_components(graph, directed=False)
    return labels[:ng].astype(np.int64)


# ---------------------------------------------------------------------------------- arrays
def model_arrays(
    problem: Problem,
    *,
    subset: np.ndarray | None = None,
    l2_center: np.ndarray | None = None,
    max_pwl_pieces: int = MAX_PWL_PIECES,
    relax: bool = False,
    anchors: np.ndarray | None = None,
    shift: np.ndarray | None = None,
) -> ModelArrays:
    """Arrays of the problem restricted to the groups in ``subset`` (all groups when None).

    Args:
        problem: the problem.
        subset: group ids (``problem.groups()`` numbering) to include; a user row or query term
            must not couple a group inside ``subset`` with one outside.
        l2_center: optimal solution of the continuous relaxation (length n, node-indexed), used
            for the proven integer-L2 window (see module docstring); ignored otherwise.
        max_pwl_pieces: refuse integer-L2 epigraphs larger than this.
        relax: build the continuous relaxation (integer bounds are still rounded inward, which
            leaves the integer problem unchanged).
        anchors: ``anchor_values(problem)`` if already computed (saves a pass per batch).
        shift: a :func:`consistent_point` (length n): express the model in ``y - shift``.

    Raises:
        ModelInfeasible: a user row over fixed nodes only is violated, or bounds cross.
        ModelTooLarge: an integer-L2 domain is unbounded or too large.
        ProblemError: ``subset`` splits a coupled row or names unknown groups.
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
        in_subset = np.zeros(max(ng, 1), bool)
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
        raise ModelInfeasible(f"{problem.label(i)}: no integer value between its bounds")

    cons = _consistency_rows(problem, sel, col_of, fixed0)
    lin = _user_rows(problem, sel, col_of, fixed0)
    qry = _query_rows(problem, sel, col_of, fixed0, groups.size)

    # objective terms
    tgt = problem.target[nodes]
    w = problem.weights[nodes]
    obj_mask = ~np.isnan(tgt) & (w > 0)
    obj_var = np.flatnonzero(obj_mask)
    var_group = grp[nodes]
    arrays = ModelArrays(
        objective=problem.objective, nodes=nodes, col_of=col_of, lower=lower, upper=upper,
        integer=integer, groups=groups, var_group=var_group,
        cons_node=cons[0], cons_ptr=cons[1], cons_col=cons[2], cons_coef=cons[3], cons_rhs=cons[4],
        lin_ids=lin[0], lin_ptr=lin[1], lin_col=lin[2], lin_coef=lin[3], lin_lower=lin[4], lin_upper=lin[5],
        obj_var=obj_var, obj_target=tgt[obj_var], obj_weight=w[obj_var],
        obj_group=gpos[var_group[obj_var]] if obj_var.size else np.zeros(0, np.int64),
        pwl_lo=np.zeros(0), pwl_hi=np.zeros(0),
        q_ids=qry[0], q_ptr=qry[1], q_col=qry[2], q_coef=qry[3], q_target=qry[4], q_weight=qry[5],
        q_group=qry[6],
    )
    if problem.objective == "l2" and integer:
        _integer_l2_window(problem, arrays, l2_center, max_pwl_pieces, anchors)
    if shift is not None:
        arrays = _apply_shift(arrays, np.asarray(shift, dtype=float)[nodes])
    return arrays


def _consistency_rows(problem: Problem, sel: np.ndarray, col_of: np.ndarray, fixed0: np.ndarray
                      ) -> tuple[np.ndarray, ...]:
    """Every node with children that touches a variable of the batch: ``sum(children) - node = rhs``."""
    n = problem.n
    parent = problem.parent
    ptr, kids = problem.children_csr()
    nch = np.diff(ptr)
    kid_sel = np.zeros(n, bool)
    kid_sel_idx = np.flatnonzero(sel & (parent >= 0))
    kid_sel[parent[kid_sel_idx]] = True
    row_node = np.flatnonzero((nch > 0) & (sel | kid_sel))
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
    rhs = np.where(sel[row_node], 0.0, fixed0[row_node])
    const_kids = ~is_var & (entry_coef > 0)
    rhs -= np.bincount(row_of_entry[const_kids], weights=fixed0[entry_node[const_kids]], minlength=row_node.size)
    ptr_, col_, coef_ = _csr(row_of_entry[is_var], col_of[entry_node[is_var]], entry_coef[is_var], row_node.size)
    return row_node, ptr_, col_, coef_, rhs


def _batch_rows(mat: Any, sel: np.ndarray, free: np.ndarray, what: str, name: Any
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of ``mat`` with a free node in the batch: ``(row ids, nnz row, nnz mask in batch)``.

    Raises ProblemError when a row mixes free nodes inside and outside the batch.
    """
    row = np.repeat(np.arange(mat.shape[0], dtype=np.int64), np.diff(mat.indptr))
    col = mat.indices
    fr = free[col]
    inside = fr & sel[col]
    m = mat.shape[0]
    n_free = np.bincount(row[fr], minlength=m)
    n_in = np.bincount(row[inside], minlength=m)
    split = (n_in > 0) & (n_in < n_free)
    if split.any():
        raise ProblemError(f"subset splits {what} {name(int(np.flatnonzero(split)[0]))} between batches")
    return np.flatnonzero(n_in > 0), row, fr


def _user_rows(problem: Problem, sel: np.ndarray, col_of: np.ndarray, fixed0: np.ndarray) -> tuple[np.ndarray, ...]:
    if not problem.n_constraints:
        return (np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0),
                np.zeros(0), np.zeros(0))
    rows = problem.constraints
    mat = rows.matrix
    free = problem.is_free
    ids, row, fr = _batch_rows(mat, sel, free, "linear constraint", rows.name)
    const = np.bincount(row[~fr], weights=mat.data[~fr] * fixed0[mat.indices[~fr]], minlength=mat.shape[0])
    n_free = np.bincount(row[fr], minlength=mat.shape[0])
    fixed_only = np.flatnonzero(n_free == 0)
    if fixed_only.size:
        # checked as Problem.violations checks rows: exactly in integers for integer problems (a
        # relative tolerance let a row over fixed counts of 10^12 be violated by 2 units: n2)
        sub = mat[fixed_only]
        point = fixed0 if not problem.integer else np.rint(fixed0).astype(np.int64)
        bad = row_violations(sub, rows.lower[fixed_only], rows.upper[fixed_only], point, integer=problem.integer)
        if bad.any():
            r = int(fixed_only[np.flatnonzero(bad)[0]])
            raise ModelInfeasible(f"linear constraint {rows.name(r)} over fixed nodes only is violated: "
                                  f"{exact_number(rows.lower[r])} <= {exact_number(const[r])} <= "
                                  f"{exact_number(rows.upper[r])} fails")
    pos = np.full(mat.shape[0], -1, np.int64)
    pos[ids] = np.arange(ids.size)
    take = fr & (pos[row] >= 0)
    ptr, col, coef = _csr(pos[row[take]], col_of[mat.indices[take]], mat.data[take], ids.size)
    return ids, ptr, col, coef, rows.lower[ids] - const[ids], rows.upper[ids] - const[ids]


def _query_rows(problem: Problem, sel: np.ndarray, col_of: np.ndarray, fixed0: np.ndarray, n_groups: int
                ) -> tuple[np.ndarray, ...]:
    if not problem.n_query_terms:
        return (np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0),
                np.zeros(0), np.zeros(0), np.zeros(0, np.int64))
    q = problem.queries
    mat = q.matrix
    free = problem.is_free
    ids, row, fr = _batch_rows(mat, sel, free, "query term", lambda r: f"#{r}")
    ids = ids[q.weight[ids] > 0]
    const = np.bincount(row[~fr], weights=mat.data[~fr] * fixed0[mat.indices[~fr]], minlength=mat.shape[0])
    pos = np.full(mat.shape[0], -1, np.int64)
    pos[ids] = np.arange(ids.size)
    take = fr & (pos[row] >= 0)
    ptr, col, coef = _csr(pos[row[take]], col_of[mat.indices[take]], mat.data[take], ids.size)
    _, block_pos = np.unique(q.block[ids], return_inverse=True)
    return ids, ptr, col, coef, q.target[ids] - const[ids], q.weight[ids].astype(float), n_groups + block_pos.ravel()


def _apply_shift(arr: ModelArrays, z: np.ndarray) -> ModelArrays:
    """The same arrays in ``d = y - z`` (``z`` per variable)."""
    cons_act = _csr_dot(arr.cons_ptr, arr.cons_col, arr.cons_coef, z)
    lin_act = _csr_dot(arr.lin_ptr, arr.lin_col, arr.lin_coef, z)
    q_act = _csr_dot(arr.q_ptr, arr.q_col, arr.q_coef, z)
    zt = z[arr.obj_var]
    return replace(
        arr,
        lower=arr.lower - z, upper=arr.upper - z,
        cons_rhs=arr.cons_rhs - cons_act,
        lin_lower=arr.lin_lower - lin_act, lin_upper=arr.lin_upper - lin_act,
        obj_target=arr.obj_target - zt,
        pwl_lo=arr.pwl_lo - zt if arr.pwl_lo.size else arr.pwl_lo,
        pwl_hi=arr.pwl_hi - zt if arr.pwl_hi.size else arr.pwl_hi,
        q_target=arr.q_target - q_act,
        q_pwl_lo=arr.q_pwl_lo - q_act if arr.q_pwl_lo.size else arr.q_pwl_lo,
        q_pwl_hi=arr.q_pwl_hi - q_act if arr.q_pwl_hi.size else arr.q_pwl_hi,
        shift=z,
    )


def _csr_dot(ptr: np.ndarray, col: np.ndarray, coef: np.ndarray, x: np.ndarray) -> np.ndarray:
    rows = ptr.size - 1
    if rows == 0:
        return np.zeros(0)
    return np.bincount(np.repeat(np.arange(rows), np.diff(ptr)), weights=coef * x[col], minlength=rows)


def query_ranges(problem: Problem, arr: ModelArrays, anchors: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Range ``[lo, hi]`` of every query term's value over the variables' domains (may be infinite)."""
    lo_v, hi_v = arr.lower.copy(), arr.upper.copy()
    if problem.nonnegative:
        anc = (anchor_values(problem) if anchors is None else anchors)[arr.nodes]
        hi_v = np.where(np.isnan(anc), hi_v, np.minimum(hi_v, np.floor(np.nan_to_num(anc) + 1e-9)))
    rows = np.repeat(np.arange(arr.n_queries), np.diff(arr.q_ptr))
    a = arr.q_coef
    with np.errstate(invalid="ignore"):
        low_part = np.where(a > 0, a * lo_v[arr.q_col], a * hi_v[arr.q_col])
        high_part = np.where(a > 0, a * hi_v[arr.q_col], a * lo_v[arr.q_col])
    lo = np.bincount(rows, weights=low_part, minlength=arr.n_queries)
    hi = np.bincount(rows, weights=high_part, minlength=arr.n_queries)
    return lo, hi


def _integer_l2_window(problem: Problem, arr: ModelArrays, center: np.ndarray | None, max_pieces: int,
                       anchors: np.ndarray | None) -> None:
    """Set ``arr.pwl_lo/pwl_hi`` (see the module docstring for the proof) and tighten bounds."""
    j = arr.obj_var
    lo = arr.lower[j].copy()
    hi = arr.upper[j].copy()
    if problem.nonnegative:
        anc = (anchor_values(problem) if anchors is None else anchors)[arr.nodes[j]]
        hi = np.where(np.isnan(anc), hi, np.minimum(hi, np.floor(np.nan_to_num(anc) + 1e-9)))
    if center is not None and arr.lin_ids.size == 0 and arr.q_ids.size == 0:
        c = np.asarray(center, dtype=float)[arr.nodes[j]]
        if not np.all(np.isfinite(c)):
            raise ProblemError("l2_center must be finite on the free nodes of the batch")
        nb = int(arr.var_group.max()) + 1 if arr.var_group.size else 1
        size = np.bincount(arr.var_group, minlength=nb)
        radius = size[arr.var_group[j]].astype(float) + _WINDOW_MARGIN
        if problem.structure == "level":
            # radius 1 where the simple-allocation argument holds: every variable of the group has
            # a term and the group's weights are equal (strictly convex, same marginal scale)
            g = arr.var_group[j]
            terms = np.bincount(g, minlength=nb)
            wmin = np.full(nb, np.inf)
            wmax = np.full(nb, -np.inf)
            np.minimum.at(wmin, g, arr.obj_weight)
            np.maximum.at(wmax, g, arr.obj_weight)
            simple = (terms == size) & (wmin == wmax)
            radius = np.where(simple[g], 1.0 + _WINDOW_MARGIN, radius)
        lo = np.maximum(lo, np.ceil(c - radius))
        hi = np.minimum(hi, np.floor(c + radius))
    if np.any(~np.isfinite(lo) | ~np.isfinite(hi)):
        i = int(arr.nodes[j[np.flatnonzero(~np.isfinite(lo) | ~np.isfinite(hi))[0]]])
        raise ModelTooLarge(f"integer L2 epigraph needs a bounded domain: {problem.label(i)} is unbounded "
                            "(give bounds, fix an ancestor, or pass the continuous optimum as l2_center)")
    if np.any(lo > hi):
        i = int(arr.nodes[j[np.flatnonzero(lo > hi)[0]]])
        raise ModelInfeasible(f"{problem.label(i)}: empty integer domain")
    per_group = np.bincount(arr.obj_group, weights=np.maximum(hi - lo, 1), minlength=max(arr.groups.size, 1))
    if per_group.size and per_group.max() > max_pieces:
        g = int(arr.groups[int(np.argmax(per_group))]) if arr.groups.size else 0
        raise ModelTooLarge(f"integer L2 epigraph of group {g} would need {int(per_group.max())} chord rows "
                            f"(> {max_pieces}); the domain is too large for an exact MIP")
    if arr.q_ids.size:
        qlo, qhi = query_ranges(problem, arr, anchors)
        if np.any(~np.isfinite(qlo) | ~np.isfinite(qhi)):
            k = int(arr.q_ids[np.flatnonzero(~np.isfinite(qlo) | ~np.isfinite(qhi))[0]])
            raise ModelTooLarge(f"integer L2 epigraph needs a bounded domain: query term #{k} is unbounded")
        if np.any(arr.q_coef != np.rint(arr.q_coef)):
            raise ModelTooLarge("integer L2 query terms need integer coefficients (their value must be an integer)")
        arr.q_pwl_lo, arr.q_pwl_hi = np.ceil(qlo - 1e-9), np.floor(qhi + 1e-9)
        q_pieces = float(np.maximum(arr.q_pwl_hi - arr.q_pwl_lo, 1).sum())
        if q_pieces > max_pieces:
            raise ModelTooLarge(f"integer L2 query terms would need {int(q_pieces)} chord rows (> {max_pieces})")
    arr.pwl_lo = lo
    arr.pwl_hi = hi
    arr.lower[j] = np.maximum(arr.lower[j], lo)
    arr.upper[j] = np.minimum(arr.upper[j], hi)


def pwl_rows(arr: ModelArrays, queries: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Chord rows of the integer-L2 epigraph: ``(term, k, slope, intercept)`` per row.

    Row ``r`` reads ``t[term[r]] - slope[r] * v >= intercept[r]`` with ``v`` the term's value
    (``y`` of a node term, ``a_q . y`` of a query term, when ``queries``),
    ``slope = w (2k + 1 - 2x)`` and ``intercept = w ((k - x)^2 - (2k + 1 - 2x) k)``.
    """
    lo, hi = (arr.q_pwl_lo, arr.q_pwl_hi) if queries else (arr.pwl_lo, arr.pwl_hi)
    x_all, w_all = (arr.q_target, arr.q_weight) if queries else (arr.obj_target, arr.obj_weight)
    pieces = np.maximum(hi - lo, 1).astype(np.int64)
    term = np.repeat(np.arange(pieces.size), pieces)
    first = np.repeat(np.cumsum(pieces) - pieces, pieces)
    k = np.repeat(lo, pieces) + (np.arange(term.size) - first)
    x = x_all[term]
    w = w_all[term]
    slope = w * (2 * k + 1 - 2 * x)
    intercept = w * ((k - x) ** 2 - (2 * k + 1 - 2 * x) * k)
    return term, k, slope, intercept


def _csr(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, nrows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    order = np.lexsort((cols, rows))
    ptr = np.zeros(nrows + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=nrows), out=ptr[1:])
    return ptr, cols[order].astype(np.int64), vals[order].astype(float)


def chain_rows_only(problem: Problem) -> bool:
    """True when every user row is a two-term monotone-chain row."""
    return bool(problem.n_constraints) and bool(np.all(problem.constraints.kind == KIND_CUMULATIVE))
