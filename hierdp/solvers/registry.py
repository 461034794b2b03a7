"""The solver registry: name → plug-in, ``solve(problem, solver=...)``, entry-point discovery.

Built-in plug-ins are imported lazily (their back ends are heavy and highspy/ortools must not be
imported unless used). Third-party plug-ins register either by calling :func:`register` or through
the entry-point group ``hierdp.solvers`` whose objects are :class:`Solver` subclasses or instances.
"""

from __future__ import annotations

import importlib
import time
from importlib.metadata import entry_points
from typing import Any

import numpy as np

from hierdp.models.problem import Problem
from hierdp.solvers.base import GroupSolution, Solution, Solver, SolverFailed, UnsupportedProblem

# name -> "module:attribute"; order = preference of solver="auto" (fastest exact first)
_BUILTIN: dict[str, str] = {
    "intopt": "hierdp.solvers.intopt:IntOptSolver",
    "projection": "hierdp.solvers.projection:ProjectionSolver",
    "costtable": "hierdp.solvers.costtable:CostTableSolver",
    "twopass": "hierdp.solvers.twopass:TwoPassSolver",
    "highs": "hierdp.solvers.highs:HighsSolver",
    "ortools": "hierdp.solvers.ortools:OrToolsSolver",
    "paper_round": "hierdp.solvers.paper_round:PaperRoundSolver",
}
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


def choose(problem: Problem) -> Solver:
    """The first plug-in, in preference order, that solves ``problem`` exactly."""
    reasons = []
    for n in names():
        try:
            s = get(n)
        except Exception as exc:
            reasons.append(f"{n}: failed to load ({exc})")
            continue
        if not s.available():
            reasons.append(f"{n}: back end not importable")
            continue
        why = s.unsupported(problem)
        if not why:
            return s
        reasons.append(f"{n}: " + "; ".join(why))
    raise UnsupportedProblem("no registered solver can solve this problem exactly:\n  " + "\n  ".join(reasons))


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
        time_limit: seconds; a plug-in that hits it raises :class:`SolverFailed`.
        verify: check every constraint of the returned values (cheap, vectorized).
        cross_check: solve again with this second solver and require the same optimal objective
            (within ``cross_check_tolerance``, relative); the comparison is recorded in
            ``solution.stats["cross_check"]``. ``options`` go to the first solver only.
        options: plug-in specific options (e.g. ``batch_size``, ``executor``, ``order``).

    Raises:
        UnsupportedProblem: the plug-in cannot solve this problem exactly.
        SolverFailed: the plug-in did not prove optimality (time limit, infeasible, error), or the
            cross-check solver found a different optimum.
    """
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
    sol = s._solve(problem, time_limit=time_limit, **options)
    if sol.status != "optimal":
        raise SolverFailed(s.name, sol.status)
    sol.wall_time = sol.wall_time or (time.perf_counter() - t0)
    if verify:
        bad = problem.violations(sol.values)
        if bad:
            raise SolverFailed(s.name, "infeasible-result", "; ".join(bad))
    if problem.integer:
        sol.values = np.rint(sol.values).astype(np.int64)
    if cross_check is not None:
        other = solve(problem, cross_check, time_limit=time_limit, verify=verify)
        diff = abs(sol.objective - other.objective)
        sol.stats["cross_check"] = {"solver": other.solver, "objective": other.objective,
                                    "difference": diff, "wall_time": other.wall_time}
        if diff > cross_check_tolerance * max(1.0, abs(other.objective)):
            raise SolverFailed(s.name, "cross-check mismatch",
                               f"objective {sol.objective!r} vs {other.solver!r}'s {other.objective!r}")
    return sol


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
    ``objective`` distance to the targets. ``solver="auto"`` picks the first capable plug-in.
    Mechanisms call this (never a fast path directly), so every level solve goes through the
    registry's capability checks.
    """
    if isinstance(solver, Solver):
        s = solver
    elif solver == "auto":
        probe = Problem.from_groups([0.6, 0.4], [0, 2], [1.0], objective=objective, integer=integer,
                                    weights=None if weights is None else [1.0, 2.0])
        s = choose(probe)
    else:
        s = get(solver)
    return s.solve_groups(np.asarray(values), np.asarray(offsets, dtype=np.int64), np.asarray(totals),
                          objective=objective, integer=integer, weights=weights, time_limit=time_limit, **options)
