"""Resolve a constraint set against a tree: bind names, check numbers, carry up, check feasibility.

All of it before any noise, from the constraint set, the tree's public structure and (bounded DP)
the public root count:

1. every node reference is bound to ``(level, key)`` (:mod:`hierdp.constraints.nodes`); unknown
   nodes, unknown levels and ambiguous names are refused, naming the entry and its line;
2. numbers must fit integer counts: integer coefficients (|c| <= 2^31) and bounds (|b| <= 2^52);
3. bounds, zeros, invariants and rows over one node become node intervals; rows over several
   nodes stay rows;
4. rows and intervals are carried up where they aggregate exactly (:mod:`hierdp.constraints.carry`);
5. the user's entries are decided together as one integer program on the reduced tree
   (:mod:`hierdp.constraints.public_model`); an infeasible set is refused with an irreducible
   subset of its entries.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from hierdp.constraints.bound import BoundRows, Intervals, merge_duplicate_terms
from hierdp.constraints.carry import carry_intervals, carry_rows, single_node_intervals
from hierdp.constraints.cells import bind_cells
from hierdp.constraints.entries import (
    CellRule,
    LinearRow,
    NodeBounds,
    StructuralZero,
    describe_entry,
    entry_label,
)
from hierdp.constraints.errors import ConstraintError, ConstraintsInfeasible
from hierdp.constraints.integers import check_numbers
from hierdp.constraints.nodes import locator_for
from hierdp.constraints.resolved import ResolvedConstraints

__all__ = ["resolve"]

log = logging.getLogger(__name__)


def resolve(constraints: Any, tree: Any, *, root_public: bool = True, check: bool = True,
            time_limit: float | None = 60.0, solver: Any = "auto") -> ResolvedConstraints:
    """See :meth:`hierdp.Constraints.resolve`."""
    from hierdp.hierarchy.topdown_tree import as_topdown_tree

    t0 = time.perf_counter()
    tree = as_topdown_tree(tree)
    entries = constraints.entries
    cells = None
    if callable(getattr(tree, "cell_space", None)):  # a tree of histogram cells (group sizes' dynamic program)
        cells = bind_cells(constraints, tree.cell_space())
        iv_level, iv_key, iv_lo, iv_hi, iv_item, user_rows = _bind_cells_to_tree(cells, tree, entries)
    else:
        iv_level, iv_key, iv_lo, iv_hi, iv_item, user_rows = _bind_nodes(entries, tree)
    multi, s_lvl, s_key, s_lo, s_hi, empty = single_node_intervals(user_rows)
    for r in empty:  # every term cancelled: the row reads 0
        if not user_rows.lo[r] <= 0 <= user_rows.hi[r]:
            e = entries[int(user_rows.origin[r])]
            raise ConstraintsInfeasible(f"row {entry_label(e)}: its terms cancel (they name the same node), and 0 is "
                                        "outside its bounds", entries=[e.name])
    s_item = user_rows.origin[np.diff(user_rows.ptr) == 1]

    # the user's intervals (bounds, zeros, invariants, single-node rows), then carried up
    user_iv = Intervals()
    for L in np.unique(np.concatenate([iv_level, s_lvl])):
        m1, m2 = iv_level == L, s_lvl == L
        user_iv.intersect(int(L), np.concatenate([iv_key[m1], s_key[m2]]), np.concatenate([iv_lo[m1], s_lo[m2]]),
                          np.concatenate([iv_hi[m1], s_hi[m2]]))
    names = [str(x) for x in tree.level_names]
    base = np.array([e.name for e in entries], dtype=object)
    carried = carry_rows(multi, tree, names, base)
    if cells is not None:  # a cell rule in every child of a node holds, summed, in the node
        carried = BoundRows.concat([carried, _rows_on_tree(cells.carried_rules(), cells, tree, entries,
                                                           carried=True)])
    c_multi, c_lvl, c_key, c_lo, c_hi, _ = single_node_intervals(carried)
    all_iv = user_iv.copy()
    for L in np.unique(c_lvl):
        m = c_lvl == L
        all_iv.intersect(int(L), c_key[m], c_lo[m], c_hi[m])
    intervals = carry_intervals(all_iv, tree)
    rows = BoundRows.concat([multi, c_multi])

    root_value = int(tree.root_count) if root_public else None
    if check and len(entries):
        _check_feasible(tree, entries, (np.concatenate([iv_level, s_lvl]), np.concatenate([iv_key, s_key]),
                                        np.concatenate([iv_lo, s_lo]), np.concatenate([iv_hi, s_hi]),
                                        np.concatenate([iv_item, s_item]).astype(np.int64)),
                        multi, root_value, solver=solver, time_limit=time_limit)

    deepest = rows.deepest()
    by_level = {names[int(L)]: int((deepest == L).sum()) for L in np.unique(deepest)}
    kinds: dict[str, int] = {}
    for e in entries:
        kinds[e.kind] = kinds.get(e.kind, 0) + 1
    stats = {"sha256": constraints.digest(), "entries": len(entries), "kinds": kinds,
             "rows_by_level": by_level, "carried_rows": int(carried.n_rows),
             "intervals": intervals.count(), "implied_intervals": max(0, intervals.count() - user_iv.count()),
             "feasibility_checked": bool(check), "resolve_s": round(time.perf_counter() - t0, 4)}
    user_intervals = (iv_level, iv_key, iv_lo, iv_hi, iv_item)
    if cells is not None:
        cells.stats.update(feasibility_checked=bool(check), resolve_s=stats["resolve_s"])
    return ResolvedConstraints(constraints, tree, rows=rows, intervals=intervals, user_rows=user_rows,
                               user_intervals=user_intervals, stats=stats, cells=cells)


def _bind_nodes(entries: tuple[Any, ...], tree: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                                               np.ndarray, BoundRows]:
    """The entries bound to a tree with one count per node: ``(level, key, lo, hi, entry)`` of the
    bounds, zeros and invariants, and every linear entry as a row over ``(level, key)``."""
    for e in entries:
        if isinstance(e, CellRule) or getattr(e, "cells", None) is not None:
            raise ConstraintError(f"{e.kind} {entry_label(e)} is about histogram cells; this tree has one count per "
                                  "node (cell entries apply to histogram mechanisms such as census_topdown)")
        check_numbers(e)
    refs, owner = [], []
    for i, e in enumerate(entries):
        if isinstance(e, LinearRow):
            refs += [node for node, _ in e.terms]
            owner += [i] * len(e.terms)
        else:
            refs.append(e.node)
            owner.append(i)
    level, key, problems = locator_for(tree).locate(refs)
    bad = [j for j, p in enumerate(problems) if p is not None]
    if bad:
        shown = [f"{entries[owner[j]].kind} {entry_label(entries[owner[j]])}: {problems[j]}" for j in bad[:3]]
        more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
        raise ConstraintError("; ".join(shown) + more)
    owner_arr = np.asarray(owner, dtype=np.int64)

    # intervals of the bounds, zeros and invariants
    iv_pos = [j for j, o in enumerate(owner) if not isinstance(entries[o], LinearRow)]
    iv_item = owner_arr[iv_pos] if iv_pos else np.zeros(0, np.int64)
    iv_lo = np.array([_lo_of(entries[o]) for o in iv_item], dtype=float)
    iv_hi = np.array([_hi_of(entries[o]) for o in iv_item], dtype=float)
    iv_level, iv_key = level[iv_pos], key[iv_pos]

    # linear rows, bound to the tree (several references to one node are merged)
    lin = [i for i, e in enumerate(entries) if isinstance(e, LinearRow)]
    term_pos = np.flatnonzero(np.isin(owner_arr, lin)) if lin else np.zeros(0, np.int64)
    row_of = {e_idx: r for r, e_idx in enumerate(lin)}
    t_row = np.array([row_of[int(o)] for o in owner_arr[term_pos]], dtype=np.int64)
    t_coef = np.array([c for i in lin for _, c in entries[i].terms], dtype=np.int64)
    ptr, t_lvl, t_key, t_coef = merge_duplicate_terms(t_row, level[term_pos], key[term_pos], t_coef, len(lin))
    user_rows = BoundRows(ptr, t_lvl, t_key, t_coef,
                          np.array([_lo_of(entries[i]) for i in lin], dtype=float),
                          np.array([_hi_of(entries[i]) for i in lin], dtype=float),
                          np.array([entries[i].name for i in lin], dtype=object),
                          np.asarray(lin, dtype=np.int64), np.zeros(len(lin), np.int64))
    return iv_level, iv_key, iv_lo, iv_hi, iv_item, user_rows


def _bind_cells_to_tree(cells: Any, tree: Any, entries: tuple[Any, ...]
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, BoundRows]:
    """The entries of a histogram tree (``tree.cell_space()``, ``tree.cell_keys(node, cell)``) as
    rows over its ``(level, key)`` nodes: every entry is a row over (node, cell) variables, each
    variable one node of the tree; no separate intervals (single-variable rows become intervals
    downstream)."""
    z = np.zeros(0, np.int64)
    return z, z.copy(), np.zeros(0), np.zeros(0), z.copy(), _rows_on_tree(cells.entry_rows, cells, tree, entries)


def _rows_on_tree(er: Any, cells: Any, tree: Any, entries: tuple[Any, ...], *, carried: bool = False) -> BoundRows:
    """Rows over (node, cell) variables as rows over the histogram tree's ``(level, key)`` nodes."""
    level, key = tree.cell_keys(er.node, er.cell)
    ptr, t_lvl, t_key, t_coef = merge_duplicate_terms(er.row_of_term, np.asarray(level, np.int64),
                                                      np.asarray(key, np.int64), er.coef, er.n_rows)
    base = [e.name for e in entries]
    how = "carried to" if carried else "at"
    names = np.array([base[o] if a < 0 else f"{base[o]} ({how} {cells.space.names[a]})"
                      for o, a in zip(er.origin.tolist(), er.at.tolist(), strict=True)], dtype=object)
    return BoundRows(ptr, t_lvl, t_key, t_coef, er.lo.copy(), er.hi.copy(), names, er.origin.copy(),
                     np.full(er.n_rows, int(carried), np.int64))


def _lo_of(e: Any) -> float:
    if isinstance(e, (LinearRow, NodeBounds)):
        return -np.inf if e.lower is None else float(e.lower)
    if isinstance(e, StructuralZero):
        return 0.0
    return float(e.value)


def _hi_of(e: Any) -> float:
    if isinstance(e, (LinearRow, NodeBounds)):
        return np.inf if e.upper is None else float(e.upper)
    if isinstance(e, StructuralZero):
        return 0.0
    return float(e.value)


def _check_feasible(tree: Any, entries: tuple[Any, ...],
                    iv: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray], rows: BoundRows,
                    root_value: int | None, *, solver: Any, time_limit: float | None) -> None:
    """Decide the user's entries together; refuse an infeasible set with an irreducible subset."""
    from hierdp.constraints.feasibility import MAX_FILTER_ITEMS, decide, irreducible_subset
    from hierdp.constraints.public_model import PublicModel
    from hierdp.models import ProblemError

    hook = getattr(tree, "public_rows", None)  # what the mechanism imposes on public values, if anything
    imposed = hook(np.concatenate([iv[0], rows.level]), np.concatenate([iv[1], rows.key])) if callable(hook) else None
    model = PublicModel(tree, *iv, rows, root_value, public_rows=imposed)

    def feasible(items: list[int] | None) -> bool | None:
        try:
            p = model.problem(items)
        except ProblemError:
            return False
        return decide(p, solver=solver, time_limit=time_limit)

    verdict = feasible(None)
    if verdict is True:
        return
    public = "" if root_value is None else f" with the public root total {root_value:,} (bounded DP)"
    if imposed is not None and imposed.n_rows:
        public += f" and {getattr(tree, 'public_rows_text', 'the public values the mechanism imposes')}"
    if verdict is None:
        raise ConstraintError(f"could not decide within {time_limit} s whether the constraints can all hold on this "
                              f"tree{public}; nothing was released (raise the time limit, or simplify the set)")
    items = sorted(set(iv[4].tolist()) | set(rows.origin.tolist()))
    subset = irreducible_subset(items, feasible)
    if subset is None:
        why = (f"{len(items)} entries: more than {MAX_FILTER_ITEMS} to search" if len(items) > MAX_FILTER_ITEMS
               else "a subset could not be decided")
        raise ConstraintsInfeasible(f"the constraints cannot all hold on this tree{public} (no irreducible subset "
                                    f"named: {why}); nothing was released")
    named = [entries[i] for i in subset]
    lines = "; ".join(describe_entry(e) + (f" ({e.where})" if e.where else "") for e in named)
    what = (f"entry {lines} cannot hold" if len(named) == 1 else
            f"these {len(named)} cannot hold together (each of them is needed for the conflict): {lines}")
    raise ConstraintsInfeasible(f"the constraints cannot all hold on this tree{public}: {what}; nothing was released",
                                entries=[e.name for e in named])
