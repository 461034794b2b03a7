"""Problem kinds other than :class:`~hierdp.models.Problem`: refusals, solving, verification and
chains of plug-ins, parent by parent.

A *problem kind* is an object with a ``kind`` name (e.g. ``"histogram_wls"``,
:mod:`hierdp.models.histogram`), ``n_parents`` independent sub-problems (parents; rows may couple
some, then they are solved together), ``subset(mask)``, ``violations(values)``,
``objective_value(values)`` and - to reach the general solvers - ``to_problem()``,
``translated_size()`` and ``values_from_problem(values)``.

* A plug-in *natively* solves the kinds in its ``problem_kinds`` class attribute; its
  ``unsupported`` says why not, and its :class:`~hierdp.solvers.base.Solution` holds ``(C, K)``
  values with ``stats["certified"]`` (per parent) and ``stats["reasons"]`` for the others.
* Every other plug-in solves a kind through its translation to a :class:`Problem`, refused up
  front (:data:`MAX_TRANSLATED_NONZEROS`) when the translation would be too large; then it is
  all-or-nothing, ``max_parents`` parents per posed Problem.
* :func:`solve` is :func:`hierdp.solve` for a kind (every parent solved, or
  :class:`~hierdp.solvers.base.SolverFailed` naming the parents); :func:`solve_parents` walks a chain
  of plug-ins, each getting the parents the previous ones did not solve; :func:`check` is the
  refusal before any noise (a probe of the release's shape).
* ``verify`` (default on): the returned values of every solved parent are checked against the
  kind's constraints independently of the plug-in (:meth:`violations`; integers exactly), and a
  native continuous answer's KKT conditions are re-derived from the values alone.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hierdp.models.histogram import MAX_TRANSLATED_NONZEROS
from hierdp.models.problem import Problem
from hierdp.solvers import registry
from hierdp.solvers.base import Solution, Solver, SolverFailed, Status, UnsupportedProblem

__all__ = ["GENERAL_AUTO", "MAX_TRANSLATED_NONZEROS", "ChainResult", "check", "is_kind", "solve", "solve_parents", "unsupported_kind"]


def is_kind(problem: Any) -> bool:
    """Whether ``problem`` is a problem kind of this module (not a :class:`Problem`)."""
    return not isinstance(problem, Problem) and isinstance(getattr(problem, "kind", None), str)


def _native(solver: Solver, problem: Any) -> bool:
    return problem.kind in getattr(solver, "problem_kinds", frozenset())


def _describe(problem: Any) -> str:
    describe = getattr(problem, "describe", None)
    return str(describe()) if callable(describe) else f"this {problem.kind} problem"


def unsupported_kind(solver: Solver, problem: Any) -> list[str]:
    """Why ``solver`` cannot solve the problem kind ``problem`` (empty: it can)."""
    if _native(solver, problem):
        return list(solver.unsupported(problem))
    if not hasattr(problem, "refusals"):
        return [f"problem kind {problem.kind!r} has no translation to a general Problem"]
    return list(problem.refusals(solver))


def _get(solver: str | Solver) -> Solver:
    return solver if isinstance(solver, Solver) else registry.get(solver)


#: in a chain: the first exact plug-in that takes the problem through its Problem translation
GENERAL_AUTO = "auto:general"


def _auto(problem: Any, skip: Sequence[str] = (), general: bool = False) -> Solver:
    reasons = []
    native = [n for n in registry.names() if problem.kind in getattr(registry.get(n), "problem_kinds", ())]
    order = [] if general else list(native)  # those that solve it natively first
    order += [n for n in registry.names() if n not in native]
    for n in order:
        if n in skip:
            continue
        s = registry.get(n)
        if not s.exact or not s.available():
            continue
        why = unsupported_kind(s, problem)
        if not why:
            return s
        reasons.append(f"{n}: " + "; ".join(why))
    raise UnsupportedProblem(f"no registered solver can solve {_describe(problem)} exactly:\n  " + "\n  ".join(reasons))


def check(solver: str | Solver | Sequence[str | Solver], probe: Any) -> list[Solver]:
    """The plug-ins of ``solver`` (a name, ``"auto"``, a plug-in or a chain) that accept the probe;
    raises :class:`UnsupportedProblem` (with every refusal) when none does, or for an unknown name."""
    chain = [solver] if isinstance(solver, (str, Solver)) else list(solver)
    ok, reasons = [], []
    for s in chain:
        if s in ("auto", GENERAL_AUTO):
            try:
                ok.append(_auto(probe, general=s == GENERAL_AUTO))
            except UnsupportedProblem as exc:
                reasons.append(str(exc))
            continue
        try:
            inst = _get(s)
        except KeyError as exc:
            raise UnsupportedProblem(str(exc.args[0])) from None
        why = unsupported_kind(inst, probe) if inst.available() else ["its back end cannot be imported here"]
        if why:
            reasons.append(f"{inst.name}: " + "; ".join(why))
        else:
            ok.append(inst)
    if not ok:
        raise UnsupportedProblem(f"no solver of {[getattr(s, 'name', s) for s in chain]} can solve "
                                 f"{_describe(probe)}:\n  " + "\n  ".join(reasons))
    return ok


def _verify_native(problem: Any, values: np.ndarray, certified: np.ndarray, name: str,
                   stats: dict[str, Any]) -> np.ndarray:
    """Independent checks of a native plug-in's certified parents: a violated constraint raises
    :class:`SolverFailed` (the plug-in is wrong); a continuous answer whose KKT conditions cannot
    be re-derived from the values alone is demoted to not certified (the next plug-in of a chain
    takes it). Returns the certified mask."""
    if not certified.any():
        return certified
    sub, kids = problem.subset(certified) if not certified.all() else (problem, np.arange(values.shape[0]))
    bad = sub.violations(values[kids])
    if bad:
        raise SolverFailed(name, Status.INFEASIBLE_RESULT, "; ".join(bad))
    if problem.kind == "histogram_wls" and sub.chunk.queries is not None:
        from hierdp.solvers.histogram_wls import kkt_check

        ok = kkt_check(sub.chunk, values[kids])
        if not ok.all():
            idx = np.flatnonzero(certified)[~ok]
            certified = certified.copy()
            certified[idx] = False
            reasons = stats.setdefault("reasons", {})
            for p in idx:
                reasons[int(p)] = "verify: the KKT conditions re-derived from the returned values were not confirmed"
            stats["message"] = f"{idx.size} parent(s) not confirmed by verify"
    return certified


def _solve_translated(problem: Any, s: Solver, time_limit: float | None, verify: bool, max_parents: int | None,
                      options: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """All parents through ``to_problem``, ``max_parents`` per posed Problem; returns (values,
    certified); a failure raises :class:`SolverFailed` naming the parents of the failing Problem."""
    P = problem.n_parents
    values = np.zeros(problem.chunk.targets.shape, np.int64 if problem.integer else float)
    units = problem.chunk.coupled_parents()
    _, units = np.unique(units, return_inverse=True)
    units = units.ravel()
    step = max(1, max_parents or P)
    order = np.unique(units)
    t0 = time.perf_counter()
    for start in range(0, order.size, step):
        keep = np.isin(units, order[start:start + step])
        sub, kids = problem.subset(keep) if not keep.all() else (problem, np.arange(values.shape[0]))
        left = None if time_limit is None else max(0.0, float(time_limit) - (time.perf_counter() - t0))
        p = sub.to_problem()
        try:
            sol = registry.solve(p, s, time_limit=left, verify=verify, **options)
        except SolverFailed as exc:
            idx = np.flatnonzero(keep)
            failing = idx
            if exc.groups is not None and exc.groups.size:
                npn = sub.chunk.n_parent_nodes
                kp = sub.chunk.parent_values.shape[1]
                anchors = p.group_anchors()[np.asarray(exc.groups, np.int64)]
                local = np.unique(anchors[anchors < npn] // kp)
                if local.size:
                    failing = idx[local]
            raise SolverFailed(exc.solver, exc.status, exc.message, groups=failing) from exc
        values[kids] = sub.values_from_problem(sol.values)
        if verify:
            bad = sub.violations(values[kids])
            if bad:
                raise SolverFailed(s.name, Status.INFEASIBLE_RESULT, "; ".join(bad), groups=np.flatnonzero(keep))
    return values, np.ones(P, bool)


def _solve_once(problem: Any, s: Solver, time_limit: float | None, verify: bool, max_parents: int | None,
                options: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """One plug-in on every parent: ``(values, certified (P,), stats)``."""
    if not _native(s, problem):
        values, cert = _solve_translated(problem, s, time_limit, verify, max_parents, options)
        return values, cert, {}
    sol = s.solve_problem(problem, time_limit=time_limit, **options)
    values = np.asarray(sol.values)
    stats = dict(sol.stats or {})
    certified = np.asarray(stats.get("certified", np.full(problem.n_parents, sol.status == Status.OPTIMAL)), bool)
    if verify:
        certified = _verify_native(problem, values, certified, s.name, stats)
    return values, certified, stats


def solve(problem: Any, solver: str | Solver = "auto", *, time_limit: float | None = None, verify: bool = True,
          cross_check: str | Solver | None = None, cross_check_tolerance: float = 1e-6,
          max_parents: int | None = None, **options: Any) -> Solution:
    """Every parent of ``problem`` with one plug-in (``"auto"``: the first that accepts it);
    ``Solution.values`` is ``(C, K)``.

    Raises:
        UnsupportedProblem: the plug-in refuses the problem (before solving).
        SolverFailed: some parents were not solved (``groups``: those parents), a verification
            failed, or the cross-check found another optimum.
    """
    s = _auto(problem) if solver == "auto" else _get(solver)
    why = unsupported_kind(s, problem)
    if why:
        raise UnsupportedProblem(f"solver {s.name!r} cannot solve {_describe(problem)} exactly: " + "; ".join(why))
    t0 = time.perf_counter()
    values, certified, stats = _solve_once(problem, s, time_limit, verify, max_parents, options)
    if not certified.all():
        failing = np.flatnonzero(~certified)
        reasons = stats.get("reasons", {})
        status = Status.TIME_LIMIT if any("time limit" in str(r) for r in reasons.values()) else Status.ITERATION_LIMIT
        first = int(failing[0])
        raise SolverFailed(s.name, status, f"{failing.size} parent(s) not solved, e.g. parent {first}: "
                           f"{reasons.get(first, 'not certified')}", groups=failing)
    sol = Solution(values=values, objective=problem.objective_value(values), status=Status.OPTIMAL, solver=s.name,
                   wall_time=time.perf_counter() - t0, stats=stats)
    sol.bound, sol.gap = sol.objective, 0.0
    if cross_check is not None:
        other = solve(problem, cross_check, time_limit=time_limit, verify=verify, max_parents=max_parents)
        diff = abs(sol.objective - other.objective)
        sol.stats["cross_check"] = {"solver": other.solver, "objective": other.objective, "difference": diff,
                                    "wall_time": other.wall_time}
        if diff > cross_check_tolerance * max(1.0, abs(other.objective)):
            raise SolverFailed(s.name, Status.CROSS_CHECK_MISMATCH,
                               f"objective {sol.objective!r} vs {other.solver!r}'s {other.objective!r}")
    return sol


@dataclass
class ChainResult:
    """Outcome of :func:`solve_parents`.

    Attributes:
        values: ``(C, K)`` values of every parent's children.
        solved_by: ``(P,)`` index into ``solvers`` of the plug-in that solved each parent.
        solvers: the plug-ins' names, in chain order.
        stats: per plug-in name, its statistics (parents solved, seconds, its own stats).
    """

    values: np.ndarray
    solved_by: np.ndarray
    solvers: list[str]
    stats: dict[str, dict[str, Any]] = field(default_factory=dict)


def solve_parents(problem: Any, chain: Sequence[str | Solver], *, time_limit: float | None = None,
                  verify: bool = True, max_parents: int | None = None,
                  options: dict[str, dict[str, Any]] | None = None) -> ChainResult:
    """Each plug-in of ``chain`` in turn on the parents the previous ones did not solve.

    A plug-in that refuses the remaining parents (``unsupported``) or fails on them is recorded and
    the next one tried; ``"auto"`` is the first exact registered plug-in not yet in the chain that
    accepts them (:data:`GENERAL_AUTO`: among those taking it through the Problem translation).
    ``time_limit`` bounds each plug-in call; ``options`` maps a plug-in name (or
    ``"auto"``) to its options.

    Raises:
        SolverFailed: some parents were solved by no plug-in (``groups``: those parents; the
            message gives every plug-in's reason).
    """
    P = problem.n_parents
    dtype = np.int64 if problem.integer else float
    values = np.zeros(problem.chunk.targets.shape, dtype)
    solved_by = np.full(P, -1, np.int64)
    stats: dict[str, dict[str, Any]] = {}
    reasons: list[str] = []
    names: list[str] = []
    last: SolverFailed | None = None
    for i, entry in enumerate(chain):
        todo = solved_by < 0
        if not todo.any():
            names.append(str(getattr(entry, "name", entry)))
            continue
        sub, kids = problem.subset(todo) if not todo.all() else (problem, np.arange(values.shape[0]))
        if entry in ("auto", GENERAL_AUTO):  # the first exact plug-in, not yet in the chain, that accepts them
            try:
                s = _auto(sub, skip=names, general=entry == GENERAL_AUTO)
            except UnsupportedProblem as exc:
                names.append("auto")
                reasons.append(f"auto: {exc}")
                continue
            opts = dict((options or {}).get(s.name, (options or {}).get("auto", {})))
        else:
            s = _get(entry)
            opts = dict((options or {}).get(s.name, {}))
        names.append(s.name)
        why = unsupported_kind(s, sub)
        if why:
            reasons.append(f"{s.name}: " + "; ".join(why))
            continue
        t0 = time.perf_counter()
        idx = np.flatnonzero(todo)
        try:
            vals, cert, st = _solve_once(sub, s, time_limit, verify, max_parents, opts)
        except SolverFailed as exc:
            last = exc
            reasons.append(f"{s.name}: {exc}")
            stats[s.name] = {"parents": 0, "seconds": time.perf_counter() - t0, "failed": str(exc)}
            continue
        keep_kids = cert[sub.chunk.child_parent]
        values[kids[keep_kids]] = vals[keep_kids]
        solved_by[idx[cert]] = i
        if not cert.all():
            reasons.append(f"{s.name}: {st.get('message') or f'{int((~cert).sum())} parent(s) not certified'}")
        st = {k: v for k, v in st.items() if k not in ("certified", "reasons", "failed_groups", "message")}
        stats[s.name] = {"parents": int(cert.sum()), "seconds": time.perf_counter() - t0, **st}
    left = np.flatnonzero(solved_by < 0)
    if left.size:
        status = last.status if last is not None else Status.ITERATION_LIMIT
        raise SolverFailed(names[-1] if names else "none", status,
                           f"{left.size} parent(s) solved by no plug-in of {names}:\n  " + "\n  ".join(reasons),
                           groups=left)
    return ChainResult(values, solved_by, names, stats)


registry._KIND_SOLVE = solve
