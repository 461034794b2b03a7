"""The solver registry: name → plug-in, ``solve(problem, solver=...)``, entry-point discovery.

Built-in plug-ins are imported lazily (their back ends are heavy and highspy/ortools must not be
imported unless used). Third-party plug-ins register either by calling :func:`register` or through
the entry-point group ``hierdp.solvers`` whose objects are :class:`Solver` subclasses or instances.

``solver="auto"`` walks the exact plug-ins in preference order and takes the first whose
``unsupported(problem)`` is empty: refusals are decided there, before solving, so auto falls back
to the next capable plug-in (e.g. to ``highs`` when counts exceed a fast path's float64 range).
Named heuristics (``Solver.exact = False``, e.g. ``paper_round``) run only when asked for by name.
"""

from __future__ import annotations

import importlib
import time
from importlib.metadata import entry_points
from typing import Any
from collections.abc import Callable

import numpy as np

from hierdp.models.problem import Problem
from hierdp.solvers import _verify
from hierdp.solvers.base import GroupSolution, Solution, Solver, SolverFailed, Status, UnsupportedProblem

# name -> "module:attribute"; order = preference of solver="auto" (fastest exact first); the
# histogram plug-ins solve their own problem kinds (hierdp.solvers.kinds: natives first) and refuse
# Problems
_BUILTIN: dict[str, str] = {
    "intopt": "hierdp.solvers.intopt:IntOptSolver",
    "projection": "hierdp.solvers.projection:ProjectionSolver",
    "costtable": "hierdp.solvers.costtable:CostTableSolver",
    "twopass": "hierdp.solvers.twopass:TwoPassSolver",
    "chain": "hierdp.solvers.chain:ChainSolver",
    "highs": "hierdp.solvers.highs:HighsSolver",
    "ortools": "hierdp.solvers.ortools:OrToolsSolver",
    "paper_round": "hierdp.solvers.paper_round:PaperRoundSolver",
    "histogram_wls": "hierdp.solvers.histogram_wls:HistogramWLSSolver",
    "histogram_wls_dense": "hierdp.solvers.histogram_dense:DenseHistogramWLSSolver",
    "histogram_cells": "hierdp.solvers.histogram_rounding:HistogramCellsRounder",
}
#: solves the other problem kinds; hierdp.solvers.kinds sets it when hierdp.solvers is imported
_KIND_SOLVE: Callable[..., Solution] | None = None
_EXTRA: dict[str, Solver] = {}
_LOADED: dict[str, Solver] = {}
_ENTRY_POINTS_SCANNED = False


def register(solver: Solver | type[Solver], *, replace: bool = False) -> Solver:
    """Register a plug-in (instance or class). Returns the registered instance."""
    inst = solver() if isinstance(solver, type) else solver
    if not isinstance(inst, Solver) or not inst.name:
        raise TypeError("a solver plug-in must be a hierdp.solvers.Solver with a non-empty name")
    if not replace and (inst.name in _BUILTIN or inst.name in _EXTRA):
        raise ValueError(f"a solver named {inst.name!r} is already registered (pass replace=True)")
    _EXTRA[inst.name] = inst
    _LOADED.pop(inst.name, None)
    return inst


def _scan_entry_points() -> None:
    global _ENTRY_POINTS_SCANNED
    if _ENTRY_POINTS_SCANNED:
        return
    _ENTRY_POINTS_SCANNED = True
    for ep in entry_points(group="hierdp.solvers"):
        if ep.name in _BUILTIN or ep.name in _EXTRA:
            continue
        try:
            obj = ep.load()
            inst = obj() if isinstance(obj, type) else obj
            if isinstance(inst, Solver):
                _EXTRA[ep.name] = inst
        except Exception:  # a broken third-party plug-in must not break hierdp
            continue


def names() -> list[str]:
    """Names of all registered plug-ins, in ``auto`` preference order."""
    _scan_entry_points()
    return list(_BUILTIN) + [n for n in _EXTRA if n not in _BUILTIN]


def get(name: str) -> Solver:
    """The plug-in registered under ``name``."""
    _scan_entry_points()
    if name in _EXTRA:
        return _EXTRA[name]
    if name in _LOADED:
        return _LOADED[name]
    if name not in _BUILTIN:
        raise KeyError(f"unknown solver {name!r}; registered: {', '.join(names())}")
    module, attr = _BUILTIN[name].split(":")
    inst = getattr(importlib.import_module(module), attr)()
    _LOADED[name] = inst
    return inst


def available() -> dict[str, dict[str, Any]]:
    """Name → capabilities (plus whether its back end imports) of every registered plug-in."""
    out: dict[str, dict[str, Any]] = {}
    for n in names():
        try:
            s = get(n)
            d = s.capabilities.as_dict()
            d["available"] = s.available()
        except Exception as exc:  # report, don't crash, a plug-in that fails to load
            d = {"available": False, "error": str(exc)}
        out[n] = d
    return out


def describe_limits() -> Any:
    """A ``pandas.DataFrame``, one row per registered plug-in: what it solves and its limits.

    Generated from each plug-in's :class:`~hierdp.solvers.base.Capabilities` (objectives,
    integrality, structures, features, ``limits``), so it always says why ``auto`` chose what it
    chose. Columns: ``solver, available, exact`` (False: a named heuristic, never chosen by
    ``auto``), ``objectives, integer, continuous, structures, features, max_magnitude``, then every
    other limit a plug-in declares (``time_limit``: how a per-call limit is honoured, ``tolerance``:
    how close to the optimum an accepted problem's answer is, ...), then ``description``.
    Print it with ``hierdp solvers --limits``.
    """
    import pandas as pd

    rows = []
    for n in names():
        try:
            s = get(n)
            cap = s.capabilities
        except Exception as exc:
            rows.append({"solver": n, "available": False, "description": f"failed to load: {exc}"})
            continue
        row: dict[str, Any] = {
            "solver": n,
            "available": s.available(),
            "exact": s.exact,
            "objectives": ", ".join(sorted(cap.objectives)),
            "integer": cap.integer,
            "continuous": cap.continuous,
            "structures": ", ".join(sorted(cap.structures)),
            "features": ", ".join(sorted(cap.features)),
            "max_magnitude": cap.limits.get("max_magnitude", np.nan),
        }
        for k, v in cap.limits.items():
            if k != "max_magnitude":
                row[k] = v
        row["description"] = cap.description
        rows.append(row)
    frame = pd.DataFrame(rows)
    cols = [c for c in frame.columns if c != "description"] + ["description"]
    return frame[cols]


def _limit_text(value: Any) -> str:
    """A limit as people read it: powers of two as ``2^k``, big integers with separators."""
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, float, np.integer, np.floating)):
        v = float(value)
        if v > 0 and np.isfinite(v) and v == 2.0 ** round(np.log2(v)) and v >= 1024:
            return f"2^{round(np.log2(v))}"
        return f"{int(v):,}" if v == int(v) else f"{v:g}"
    return str(value)


def limits_text() -> str:
    """:func:`describe_limits` as text, one block per plug-in (``hierdp solvers --limits``)."""
    frame = describe_limits()
    fixed = {"solver", "available", "exact", "objectives", "integer", "continuous", "structures", "features",
             "description"}
    lines = []
    for row in frame.to_dict("records"):
        kind = "exact" if row.get("exact", True) else "HEURISTIC (not an optimum; never chosen by auto)"
        avail = "available" if row.get("available") else "NOT available here"
        lines.append(f"{row['solver']}: {row.get('description', '')}")
        if "objectives" not in row or not isinstance(row.get("objectives"), str):
            lines.append(f"  {avail}")
            continue
        types = "/".join(t for t, ok in (("integer", row["integer"]), ("continuous", row["continuous"])) if ok)
        lines.append(f"  {kind}, {avail}; objectives {row['objectives']}; {types}; structures {row['structures']}")
        lines.append(f"  features: {row['features'] or '-'}")
        for key, value in row.items():
            if key in fixed or value is None or (isinstance(value, float) and np.isnan(value)):
                continue
            lines.append(f"  {key}: {_limit_text(value)}")
    return "\n".join(lines)


def _first_exact(why_not: Callable[[Solver], list[str]], what: str) -> Solver:
    """The first exact plug-in, in preference order, for which ``why_not`` gives no reason."""
    reasons = []
    for n in names():
        try:
            s = get(n)
        except Exception as exc:
            reasons.append(f"{n}: failed to load ({exc})")
            continue
        if not s.exact:
            continue
        if not s.available():
            reasons.append(f"{n}: back end not importable")
            continue
        why = why_not(s)
        if not why:
            return s
        reasons.append(f"{n}: " + "; ".join(why))
    raise UnsupportedProblem(f"no registered solver can solve {what} exactly:\n  " + "\n  ".join(reasons))


def choose(problem: Problem) -> Solver:
    """The first plug-in, in preference order, that solves ``problem`` exactly (heuristics skipped)."""
    return _first_exact(lambda s: s.unsupported(problem), "this problem")


def solve(
    problem: Problem,
    solver: str | Solver = "auto",
    *,
    time_limit: float | None = None,
    verify: bool = True,
    cross_check: str | Solver | None = None,
    cross_check_tolerance: float = 1e-6,
    **options: Any,
) -> Solution:
    """Solve ``problem`` with the named plug-in (``"auto"``: fastest exact one).

    Args:
        problem: the problem.
        solver: a registered name, ``"auto"``, or a :class:`Solver` instance.
        time_limit: seconds for the plug-in call; a plug-in that reaches it raises
            :class:`SolverFailed` with status ``time_limit`` (and ``best``, the best feasible
            point, when it has one).
        verify: check the returned values independently of the plug-in: every constraint (from
            the parent array, not from derived structure), the L∞ group structure recomputed as
            graph components, the objective, and for L∞ an optimality certificate (integer:
            no integer point in the strict box below each group's optimum, on totally unimodular
            problems; continuous: an independent LP). Cheap next to a solve.
        cross_check: solve again with this second solver and require the same optimal objective
            (within ``cross_check_tolerance``, relative); the comparison is recorded in
            ``solution.stats["cross_check"]``. ``options`` go to the first solver only.
        options: plug-in specific options (e.g. ``batch_size``, ``executor``, ``order``); see each
            plug-in's ``Options``.

    Other problem kinds (histogram level chunks, :mod:`hierdp.models.histogram`) go to
    :func:`hierdp.solvers.kinds.solve`: the same contract, parent by parent.

    Raises:
        UnsupportedProblem: the plug-in cannot solve this problem exactly (said before solving).
        SolverFailed: the plug-in did not prove optimality (time limit, infeasible, error), its
            answer failed verification, or the cross-check solver found a different optimum.
    """
    if not isinstance(problem, Problem):
        if _KIND_SOLVE is None:
            raise UnsupportedProblem(f"not a Problem and no solver of its kind: {type(problem).__name__}")
        return _KIND_SOLVE(problem, solver, time_limit=time_limit, verify=verify, cross_check=cross_check,
                           cross_check_tolerance=cross_check_tolerance, **options)
    if isinstance(solver, Solver):
        s, why = solver, solver.unsupported(problem)
    elif solver == "auto":
        s, why = choose(problem), []  # choose() already checked it
    else:
        s = get(solver)
        why = s.unsupported(problem)
    if why:
        raise UnsupportedProblem(f"solver {s.name!r} cannot solve this problem exactly: " + "; ".join(why))
    if not s.available():
        raise UnsupportedProblem(f"solver {s.name!r}: its back end cannot be imported here")
    t0 = time.perf_counter()
    sol = s.solve_problem(problem, time_limit=time_limit, **options)
    if sol.status != Status.OPTIMAL:
        raise _failure(problem, s.name, sol)
    sol.wall_time = sol.wall_time or (time.perf_counter() - t0)
    if verify:
        left = None if time_limit is None else max(0.0, t0 + float(time_limit) - time.perf_counter())
        _check(problem, s.name, sol, left)
    if problem.integer:
        sol.values = np.rint(sol.values).astype(np.int64)
    if cross_check is not None:
        other = solve(problem, cross_check, time_limit=time_limit, verify=verify)
        diff = abs(sol.objective - other.objective)
        sol.stats["cross_check"] = {"solver": other.solver, "objective": other.objective,
                                    "difference": diff, "wall_time": other.wall_time}
        if diff > cross_check_tolerance * max(1.0, abs(other.objective)):
            raise SolverFailed(s.name, Status.CROSS_CHECK_MISMATCH,
                               f"objective {sol.objective!r} vs {other.solver!r}'s {other.objective!r}")
    return sol


def _failure(problem: Problem, name: str, sol: Solution) -> SolverFailed:
    """The :class:`SolverFailed` of a non-optimal solution, with its best feasible point if valid."""
    stats = sol.stats or {}
    best = None
    vals = np.asarray(sol.values, dtype=float) if sol.values is not None else None
    if vals is not None and vals.shape == (problem.n,) and np.all(np.isfinite(vals)) and not problem.violations(vals):
        if problem.integer:
            vals = np.rint(vals)
        best = Solution(values=vals.astype(np.int64) if problem.integer else vals,
                        objective=problem.objective_value(vals), status=sol.status, solver=name,
                        wall_time=sol.wall_time, stats=dict(stats), bound=sol.bound, gap=None)
        if best.bound is not None:
            best.gap = max(0.0, (best.objective - best.bound) / max(1.0, abs(best.objective)))
    groups = stats.get("failed_groups")
    return SolverFailed(name, sol.status, str(stats.get("message", "")), groups=groups, best=best)


#: seconds an optimality certificate that needs an LP may use at least (when the solve's time is up)
CERTIFICATE_MIN_TIME = 1.0


def _check(problem: Problem, name: str, sol: Solution, time_left: float | None = None) -> None:
    """``verify=True``: independent feasibility, structure, objective and L∞ certificates.

    Certificates that need an LP (trees) get the solve's remaining time (at least
    :data:`CERTIFICATE_MIN_TIME`); one that does not finish is recorded as skipped in
    ``sol.stats["certificate"]``, never as passed.
    """
    bad = problem.violations(sol.values)
    if bad:
        raise SolverFailed(name, Status.INFEASIBLE_RESULT, "; ".join(bad))
    labels = _verify.independent_groups(problem)
    mismatch = _verify.structure_mismatch(problem, labels)
    if mismatch:
        raise SolverFailed(name, Status.ERROR, f"internal error: {mismatch}")
    if problem.objective != "linf":
        return
    values = np.asarray(sol.values, dtype=float)
    indep = _verify.linf_objective(problem, values, labels)
    if abs(indep - sol.objective) > 1e-9 * max(1.0, abs(indep)):
        raise SolverFailed(name, Status.ERROR, f"reported objective {sol.objective!r} but the L∞ objective on the "
                                               f"independent groups is {indep!r}")
    lp_time = None if time_left is None else max(time_left, CERTIFICATE_MIN_TIME)
    if _verify.certificate_applies(problem):
        failing = _verify.integer_linf_uncertified(problem, values, labels, lp_time)
        if failing is None:
            sol.stats["certificate"] = "skipped (the certificate LP reached its time limit)"
        elif failing.size:
            free = np.flatnonzero(labels >= 0)
            _, first = np.unique(labels[free], return_index=True)
            raise SolverFailed(name, Status.NOT_OPTIMAL,
                               f"{failing.size} group(s) have an integer point strictly better than the returned "
                               "one (the strict-box certificate)",
                               groups=problem.groups()[free[first[failing]]])
        else:
            sol.stats["certificate"] = "integer L-inf optimum certified (strict box empty in every group)"
    elif not problem.integer:
        gap = _verify.continuous_linf_gap(problem, sol.objective, lp_time)
        if gap is None:
            sol.stats["certificate"] = "skipped (the independent LP did not finish)"
        else:
            sol.stats["certificate"] = f"continuous L-inf optimum matches an independent computation ({gap:.3g})"
            scale = max(1.0, abs(sol.objective))
            # solvers meet 1e-7 feasibility tolerances; the inputs themselves are known to a few
            # ulps of their magnitude
            tol = 1e-6 * scale + 64 * np.finfo(float).eps * problem.magnitude()
            if abs(gap) > tol:
                raise SolverFailed(name, Status.NOT_OPTIMAL,
                                   f"objective {sol.objective!r} differs from an independent LP optimum by {gap:.3g}")


def _fast_choice(values: np.ndarray, offsets: np.ndarray, totals: np.ndarray, objective: str, integer: bool,
                 weights: np.ndarray | None) -> Solver:
    """``auto`` for a batch of groups: the first exact plug-in whose ``unsupported_groups`` is empty."""
    return _first_exact(lambda s: unsupported_groups(s, values, offsets, totals, objective=objective,
                                                     integer=integer, weights=weights), "these groups")


def unsupported_groups(s: Solver, values: np.ndarray, offsets: np.ndarray, totals: np.ndarray, *,
                       objective: str, integer: bool, weights: np.ndarray | None = None) -> list[str]:
    """Why plug-in ``s`` cannot solve this batch of groups (its own fast check when it has one)."""
    own = getattr(s, "unsupported_groups", None)
    if callable(own):
        return own(values, offsets, totals, objective=objective, integer=integer, weights=weights)
    problem = Problem.from_groups(np.asarray(values, dtype=float), offsets, np.asarray(totals, dtype=float),
                                  objective=objective, integer=integer, nonnegative=True, weights=weights)
    return s.unsupported(problem)


def solve_groups(
    values: np.ndarray,
    offsets: np.ndarray,
    totals: np.ndarray,
    *,
    solver: str | Solver = "auto",
    objective: str = "linf",
    integer: bool = True,
    weights: np.ndarray | None = None,
    time_limit: float | None = None,
    **options: Any,
) -> GroupSolution:
    """Solve a batch of independent groups (a TopDown level) with the named plug-in.

    Group ``g``'s children are ``values[offsets[g]:offsets[g+1]]`` (noisy targets); the result's
    children are non-negative (integers when ``integer``), sum to ``totals[g]`` and minimise the
    ``objective`` distance to the targets. ``solver="auto"`` picks the first capable plug-in for
    *these* values (magnitudes included). Mechanisms call this (never a fast path directly), so
    every level solve goes through the registry's capability checks.

    Raises:
        UnsupportedProblem: the plug-in cannot solve these groups exactly (said before solving).
        SolverFailed: see :func:`solve`; ``groups`` holds the caller's group indices of the
            failing batch when known.
    """
    values = np.asarray(values)
    offsets = np.asarray(offsets, dtype=np.int64)
    totals = np.asarray(totals)
    if isinstance(solver, Solver):
        s = solver
    elif solver == "auto":
        s = _fast_choice(values, offsets, totals, objective, integer, weights)
    else:
        s = get(solver)
    return s.solve_groups(values, offsets, totals, objective=objective, integer=integer, weights=weights,
                          time_limit=time_limit, **options)
