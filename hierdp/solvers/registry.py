"""The solver registry: name → plug-in, ``solve(problem, solver=...)``, entry-point discovery.

Built-in plug-ins are imported lazily (their back ends are heavy and highspy/ortools must not be
imported unless used). Third-party plug-ins register either by calling :func:`register` or through
the entry-point group ``hierdp.solvers`` whose objects are :class:`Solver` subclasses or instances.

``solver="auto"`` walks the exact plug-ins in the measured order for the problem's class
(:func:`preference`) and tries those whose ``unsupported(problem)`` is empty: refusals are decided
there, before solving (e.g. a fast path refusing counts beyond its float64 range hands the problem
on); a plug-in that then stops without a verified optimum (time limit, error) hands it to the next,
within the caller's time limit. Named heuristics (``Solver.exact = False``, e.g. ``paper_round``)
run only when asked for by name.

:func:`check_solver` is the one door through which every mechanism family checks its solver,
before any noise, on a probe problem of its own shape.
"""

from __future__ import annotations

import importlib
import time
from importlib.metadata import entry_points
from typing import Any
from collections.abc import Callable

import numpy as np

from hierdp.errors import exact_number
from hierdp.models.problem import Problem
from hierdp.solvers import _verify
from hierdp.solvers import base as _base
from hierdp.solvers.base import (
    GroupSolution,
    Solution,
    SolutionStatus,
    Solver,
    SolverFailed,
    Termination,
    UnsupportedProblem,
)

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
    "pdlp": "hierdp.solvers.pdlp:PdlpSolver",
    "paper_round": "hierdp.solvers.paper_round:PaperRoundSolver",
    "histogram_wls": "hierdp.solvers.histogram_wls:HistogramWLSSolver",
    "histogram_wls_dense": "hierdp.solvers.histogram_dense:DenseHistogramWLSSolver",
    "histogram_cells": "hierdp.solvers.histogram_rounding:HistogramCellsRounder",
}
#: solves / checks the other problem kinds; hierdp.solvers.kinds sets them when hierdp.solvers is imported
_KIND_SOLVE: Callable[..., Solution] | None = None
_KIND_CHECK: Callable[..., list[Solver]] | None = None
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
    ``auto``), ``objectives, integer, continuous, structures, features, max_magnitude``,
    ``tolerance`` (the relative tolerance of continuous answers, which ``verify`` applies; integer
    answers are exact), then every other limit a plug-in declares (``time_limit``: how a per-call
    limit is honoured, ...), then ``description``.
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
            "tolerance": cap.tolerance,
        }
        for k, v in cap.limits.items():
            if k not in ("max_magnitude", "tolerance"):
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
            if key == "tolerance":
                parts = ([f"{value!r} relative on continuous answers (scaled to each check's magnitude)"]
                         if row["continuous"] else []) + (["integer answers exact"] if row["integer"] else [])
                lines.append(f"  tolerance: {'; '.join(parts)}")
                continue
            lines.append(f"  {key}: {_limit_text(value)}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------- auto's order
#: ``auto``'s order of the general solvers per problem class ``(objective, integer, rows)`` where
#: ``rows`` says whether the problem has user rows, chains or query terms. The fast paths always
#: come first (each refuses, before solving, what it cannot do exactly), third-party plug-ins last.
#: The order is the measured one: ``python -m experiments.bench.solver_matrix`` (docs/solvers.md,
#: "The researchers' table"), with the figure each entry rests on.
#: Figures: each line's "solved/accepted in median seconds" per solver, from the full run (174 cells,
#: 5 s per call, 2 loaded cores, with sx's exact encodings merged); classes not listed keep the
#: default order (highs first: it leads every other class, e.g. integer L1 rows 15/16 in 0.06 s vs
#: ortools 9/10 in 0.25 s, integer L2 rows 15/16 in 0.25 s vs ortools 6/7 in 0.08 s). Integer L∞
#: without rows is a tie since HiGHS's integer objective per group (same cells, same median): ortools
#: stays first.
GENERAL_ORDER: dict[tuple[str, bool, bool], tuple[str, ...]] = {
    ("linf", True, False): ("ortools", "highs", "pdlp"),  # ortools 12/13 in 0.19 s; highs 12/13 in 0.19 s
    ("linf", True, True): ("ortools", "highs", "pdlp"),  # ortools 9/10 in 0.23 s; highs 12/16 in 0.43 s
    ("l2", False, False): ("pdlp", "highs", "ortools"),  # pdlp 13/13 in 0.01 s; highs 12/13 in 0.09 s
    ("l2", False, True): ("pdlp", "highs", "ortools"),  # pdlp 13/13 in 0.01 s; highs 14/16 in 0.13 s
}
_DEFAULT_GENERAL = ("highs", "ortools", "pdlp")
_FAST = ("intopt", "projection", "costtable", "twopass", "chain")


def problem_class(problem: Problem) -> tuple[str, bool, bool]:
    """The class ``auto`` orders solvers by: ``(objective, integer, has rows / chains / query terms)``."""
    return problem.objective, bool(problem.integer), bool(problem.n_constraints or problem.n_query_terms)


def preference(cls: tuple[str, bool, bool] | None = None) -> list[str]:
    """Registered plug-in names in ``auto``'s order for a problem class (:func:`problem_class`): the
    fast paths, the general solvers in the measured order of :data:`GENERAL_ORDER`, then the
    others."""
    every = names()
    general = _DEFAULT_GENERAL if cls is None else GENERAL_ORDER.get(cls, _DEFAULT_GENERAL)
    ordered = [n for n in _FAST if n in every] + [n for n in general if n in every]
    return ordered + [n for n in every if n not in ordered]


def _exact_candidates(why_not: Callable[[Solver], list[str]], order: list[str]
                      ) -> tuple[list[Solver], list[str]]:
    """The exact, available plug-ins (in ``order``) for which ``why_not`` gives no reason, and
    every other plug-in's reasons."""
    ok: list[Solver] = []
    reasons: list[str] = []
    for n in order:
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
        if why:
            reasons.append(f"{n}: " + "; ".join(why))
        else:
            ok.append(s)
    return ok, reasons


def _refusal(task: str, reasons: list[str]) -> UnsupportedProblem:
    return UnsupportedProblem(f"no registered solver can {task} exactly:\n  " + "\n  ".join(reasons))


def choose(problem: Problem) -> Solver:
    """The first plug-in, in ``auto``'s order for this problem, that solves it exactly
    (heuristics skipped).

    Raises:
        UnsupportedProblem: every plug-in's reasons when none accepts it.
    """
    ok, reasons = _exact_candidates(lambda s: s.unsupported(problem), preference(problem_class(problem)))
    if not ok:
        raise _refusal("solve this problem", reasons)
    return ok[0]


# ---------------------------------------------------------------------------------- the door
def check_solver(solver: str | Solver, probe: Problem, *, task: str = "solve this problem") -> Solver:
    """The one door to the solvers: the plug-in that will solve problems shaped like ``probe``,
    checked before any noise is drawn.

    Every mechanism family calls this with a probe of its own shape, built from public structure
    only (the same objective, integrality, features, bounds and rows, and the public magnitude:
    e.g. a TopDown level at the public root total, PGSR's whole model over ``nodes x G``), so that
    whatever depends only on public structure is refused before the budget is spent.

    Args:
        solver: a registered name, ``"auto"`` (the first exact plug-in that accepts the probe), or
            a :class:`Solver` instance.
        probe: the family's probe problem (a :class:`Problem`, or another problem kind of
            :mod:`hierdp.solvers.kinds`, e.g. a census level chunk: then ``solver`` may be a chain).
        task: what the family asks, for messages ("post-process a TopDown level (linf, integer)").

    Returns:
        The plug-in (for ``"auto"``: the one ``auto`` picks for the probe; the mechanism may keep
        ``"auto"`` for its real problems, whose magnitudes may lead elsewhere).

    Raises:
        UnsupportedProblem: an unknown name, a back end that cannot be imported, or the plug-in's
            (for ``"auto"``: every plug-in's) reasons to refuse the probe.
    """
    if not isinstance(probe, Problem):  # another problem kind (hierdp.solvers.kinds: a census level chunk)
        if _KIND_CHECK is None:
            raise UnsupportedProblem(f"cannot {task}: not a Problem and no solver of its kind")
        try:
            return _KIND_CHECK(solver, probe)[0]
        except UnsupportedProblem as exc:
            raise UnsupportedProblem(f"cannot {task}: {exc}") from None
    if isinstance(solver, Solver):
        s = solver
    elif isinstance(solver, str) and solver == "auto":
        ok, reasons = _exact_candidates(lambda c: c.unsupported(probe), preference(problem_class(probe)))
        if not ok:
            raise _refusal(task, reasons)
        return ok[0]
    elif isinstance(solver, str):
        try:
            s = get(solver)
        except KeyError as exc:
            raise UnsupportedProblem(f"cannot {task}: {exc.args[0]}") from None
    else:
        raise UnsupportedProblem(f"cannot {task}: the solver must be a registered name, 'auto' or a "
                                 f"hierdp.solvers.Solver, got {type(solver).__name__}")
    if not s.available():
        raise UnsupportedProblem(f"solver {s.name!r} cannot {task}: its back end cannot be imported here")
    why = s.unsupported(probe)
    if why:
        raise UnsupportedProblem(f"solver {s.name!r} cannot {task} exactly: " + "; ".join(why))
    return s


# ---------------------------------------------------------------------------------- solving
#: terminations after which ``auto`` does not try the next plug-in (the problem has no solution;
#: another exact plug-in would say the same)
def _walks_on(exc: SolverFailed) -> bool:
    return exc.refuted_by is not None or not exc.termination.proves_no_solution


def _option_refusal(s: Solver, options: dict[str, Any]) -> list[str]:
    """With ``"auto"``, a plug-in that does not take the caller's options is skipped (not tried)."""
    if not options:
        return []
    try:
        s.parse_options(options)
    except (TypeError, ValueError) as exc:
        return [f"does not take the options given ({exc})"]
    return []


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.perf_counter())


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
    """Solve ``problem`` with the named plug-in (``"auto"``: the exact plug-ins in order).

    Args:
        problem: the problem.
        solver: a registered name, ``"auto"``, or a :class:`Solver` instance. ``"auto"`` tries the
            exact plug-ins that accept the problem in the measured order for its class
            (:func:`preference`); when one stops without a proven optimum (time limit, error, an
            answer that verification refutes) it tries the next, within ``time_limit`` overall
            (each try gets an equal share of the time left). ``stats["auto"]`` lists every try.
        time_limit: seconds for the whole call; a plug-in that reaches it raises
            :class:`SolverFailed` with termination ``time_limit`` (and ``best``, the best feasible
            point, when it has one).
        verify: check the returned values independently of the plug-in: every constraint (from
            the parent array, not from derived structure; exactly in integers for integer
            problems, within the plug-in's stated tolerance scaled to each check's magnitude for
            continuous ones), ``bound <= objective``, the L∞ group structure recomputed as graph
            components, the objective, and for L∞ an optimality certificate (integer: no integer
            point in the strict box below each group's optimum, on totally unimodular problems;
            continuous: an independent LP). Cheap next to a solve.
        cross_check: solve again with this second solver and require the same optimal objective
            (within ``cross_check_tolerance``, relative); the comparison is recorded in
            ``solution.stats["cross_check"]``. ``options`` go to the first solver only.
        options: plug-in specific options (e.g. ``batch_size``, ``executor``, ``order``); see each
            plug-in's ``Options``. With ``"auto"`` every plug-in tried receives them, and those that
            do not take them are skipped.

    Returns:
        A :class:`Solution` with termination ``optimal`` (for a named heuristic: ``completed``
        and a ``feasible`` point).

    Other problem kinds (histogram level chunks, :mod:`hierdp.models.histogram`) go to
    :func:`hierdp.solvers.kinds.solve`: the same contract, parent by parent.

    Raises:
        UnsupportedProblem: the plug-in (every plug-in, for ``"auto"``) cannot solve this problem
            exactly (said before solving).
        SolverFailed: no proven optimum (time limit, infeasible, error), an answer that failed
            verification, or a cross-check that found a different optimum.
    """
    if not isinstance(problem, Problem):
        if _KIND_SOLVE is None:
            raise UnsupportedProblem(f"not a Problem and no solver of its kind: {type(problem).__name__}")
        return _KIND_SOLVE(problem, solver, time_limit=time_limit, verify=verify, cross_check=cross_check,
                           cross_check_tolerance=cross_check_tolerance, **options)
    t0 = time.perf_counter()
    deadline = None if time_limit is None else t0 + float(time_limit)
    if isinstance(solver, str) and solver == "auto":
        candidates, reasons = _exact_candidates(lambda c: c.unsupported(problem) + _option_refusal(c, options),
                                                preference(problem_class(problem)))
        if not candidates:
            raise _refusal("solve this problem", reasons)
        sol = _solve_walking(problem, candidates, deadline, verify, options)
    else:
        s = solver if isinstance(solver, Solver) else get(solver)
        why = s.unsupported(problem)
        if why:
            raise UnsupportedProblem(f"solver {s.name!r} cannot solve this problem exactly: " + "; ".join(why))
        if not s.available():
            raise UnsupportedProblem(f"solver {s.name!r}: its back end cannot be imported here")
        sol = _solve_with(problem, s, time_limit, verify, options)
    if cross_check is not None:
        other = solve(problem, cross_check, time_limit=_left(deadline) if deadline is not None else None,
                      verify=verify)
        diff = abs(sol.objective - other.objective)
        sol.stats["cross_check"] = {"solver": other.solver, "objective": other.objective,
                                    "difference": diff, "wall_time": other.wall_time}
        if diff > cross_check_tolerance * max(1.0, abs(other.objective)):
            raise SolverFailed(sol.solver, Termination.OPTIMAL,
                               f"objective {sol.objective!r} vs {other.solver!r}'s {other.objective!r}",
                               solution_status=SolutionStatus.FEASIBLE, refuted_by="cross_check")
    return sol


def _walk(candidates: list[Solver], deadline: float | None,
          attempt: Callable[[Solver, float | None], Any]) -> tuple[Any, Solver, list[dict[str, Any]], SolverFailed | None]:
    """``auto``'s walk: each candidate in turn, with an equal share of the time left, until one
    returns; a stop that proves nothing about the problem (a time-out, a refuted answer) walks on.

    Returns the answer (None if none), the solver that gave it (or the last candidate), one record
    per try (solver, termination, solution status, refutation, time share, seconds; the last one is
    the answer's when there is one) and the last failure."""
    tried: list[dict[str, Any]] = []
    last: SolverFailed | None = None
    for k, s in enumerate(candidates):
        left = _left(deadline)
        if left is not None and left <= 0:
            break
        share = None if left is None else left / (len(candidates) - k)
        t = time.perf_counter()
        try:
            out = attempt(s, share)
        except SolverFailed as exc:
            tried.append({"solver": s.name, "termination": exc.termination.value,
                          "solution_status": exc.solution_status.value, "refuted_by": exc.refuted_by,
                          "time_limit": share, "seconds": time.perf_counter() - t})
            last = exc
            if not _walks_on(exc):
                break
            continue
        tried.append({"solver": s.name, "termination": "optimal", "solution_status": "optimal", "refuted_by": None,
                      "time_limit": share, "seconds": time.perf_counter() - t})
        return out, s, tried, last
    return None, candidates[-1], tried, last


def _walk_failed(candidates: list[Solver], tried: list[dict[str, Any]], last: SolverFailed | None) -> SolverFailed:
    """The last failure of a walk, its message saying what ``auto`` tried (and what it had no time for)."""
    assert last is not None  # candidates is not empty and the first try ran (no time was spent before it)
    names_tried = ", ".join(f"{t['solver']} ({t['termination']}"
                            + (f", refuted by {t['refuted_by']}" if t["refuted_by"] else "") + ")" for t in tried)
    not_tried = [c.name for c in candidates[len(tried):]]
    note = f"auto tried {names_tried}" + (f"; no time left for {', '.join(not_tried)}" if not_tried and
                                          _walks_on(last) else "")
    out = SolverFailed(last.solver, last.termination, f"{last.message}; {note}" if last.message else note,
                       solution_status=last.solution_status, refuted_by=last.refuted_by, groups=last.groups,
                       best=last.best)
    out.__cause__ = last
    return out


def _solve_walking(problem: Problem, candidates: list[Solver], deadline: float | None, verify: bool,
                   options: dict[str, Any]) -> Solution:
    """``auto``: each candidate in turn until one returns a verified optimum."""
    sol, s, tried, last = _walk(candidates, deadline, lambda s, share: _solve_with(problem, s, share, verify, options))
    if sol is None:
        raise _walk_failed(candidates, tried, last)
    tried[-1].update(termination=sol.termination.value, solution_status=sol.solution_status.value)
    sol.stats["auto"] = {"tried": tried, "chosen": s.name}
    return sol



def _solve_with(problem: Problem, s: Solver, time_limit: float | None, verify: bool,
                options: dict[str, Any]) -> Solution:
    """One plug-in: solve, demand a proven optimum (or a named heuristic's completed point), verify."""
    t0 = time.perf_counter()
    if not problem.is_free.any():
        return _determined(problem, s, t0)
    sol = s.solve_problem(problem, time_limit=time_limit, **options)
    accepted = Termination.OPTIMAL if s.exact else Termination.COMPLETED
    if sol.termination != accepted:
        raise _failure(problem, s, sol)
    sol.wall_time = sol.wall_time or (time.perf_counter() - t0)
    if problem.integer:  # the answer is the integer point (a MIP's values are integers within 1e-6);
        sol.values = _integer_point(sol.values)  # it is what verification checks, exactly
    if verify:
        left = None if time_limit is None else max(0.0, t0 + float(time_limit) - time.perf_counter())
        _check(problem, s, sol, left)
    return sol


def _determined(problem: Problem, s: Solver, t0: float) -> Solution:
    """A problem whose every node is fixed has one candidate point: it is checked here (exactly, for
    integer problems) instead of being handed to the plug-in (plug-ins returned such points as
    optimal without checking their rows: the fuzz suite's fixed_rows family)."""
    values = problem.fixed.copy()
    if problem.integer:
        values = _integer_point(values)
    bad = problem.violations(values, s.capabilities.tolerance)
    if bad:
        raise SolverFailed(s.name, Termination.INFEASIBLE, "every node is fixed, and the fixed values break: "
                           + "; ".join(bad))
    obj = problem.objective_value(values)
    return Solution(values=values, objective=obj, termination=Termination.OPTIMAL, solver=s.name,
                    wall_time=time.perf_counter() - t0, bound=obj, gap=0.0,
                    stats={"determined": "every node is fixed: its one point checked, nothing solved"})


def _integer_point(values: np.ndarray) -> np.ndarray:
    """``values`` rounded to int64 (int64 input unchanged; non-finite or beyond int64 stays float,
    which verification then refuses)."""
    v = np.asarray(values)
    if np.issubdtype(v.dtype, np.integer):
        return v.astype(np.int64)
    f = np.asarray(v, dtype=float)
    if not np.all(np.isfinite(f)) or (f.size and np.abs(f).max() >= 2.0 ** 62):
        return f
    return np.rint(f).astype(np.int64)


def _failure(problem: Problem, s: Solver, sol: Solution) -> SolverFailed:
    """The :class:`SolverFailed` of a non-optimal solution, with its best feasible point if valid."""
    stats = sol.stats or {}
    best = None
    vals = np.asarray(sol.values, dtype=float) if sol.values is not None else None
    if vals is not None and problem.integer:
        vals = _integer_point(vals)
    if vals is not None and vals.shape == (problem.n,) and np.all(np.isfinite(vals)) and \
            not problem.violations(vals, s.capabilities.tolerance):
        values = vals
        best = Solution(values=values, objective=problem.objective_value(values), termination=sol.termination,
                        solver=s.name, wall_time=sol.wall_time, stats=dict(stats), bound=sol.bound, gap=None,
                        solution_status=SolutionStatus.FEASIBLE)
        if best.bound is not None:
            best.gap = max(0.0, (best.objective - best.bound) / max(1.0, abs(best.objective)))
    status = SolutionStatus.FEASIBLE if best is not None else (
        SolutionStatus.INFEASIBLE if sol.solution_status == SolutionStatus.INFEASIBLE else SolutionStatus.NONE)
    return SolverFailed(s.name, sol.termination, str(stats.get("message", "")), solution_status=status,
                        groups=stats.get("failed_groups"), best=best)


#: seconds an optimality certificate that needs an LP may use at least (when the solve's time is up)
CERTIFICATE_MIN_TIME = 1.0


def _refuted(s: Solver, check: str, message: str, status: SolutionStatus = SolutionStatus.FEASIBLE,
             groups: np.ndarray | None = None) -> SolverFailed:
    return SolverFailed(s.name, Termination.OPTIMAL, message, solution_status=status, refuted_by=check,
                        groups=groups)


def _objective_resolution(problem: Problem, values: np.ndarray) -> float:
    """How much the objective at ``values`` can move when every value moves by a few ulps of its
    own magnitude (continuous problems at 10^12 hold values to 1.2e-4): a bound within this of
    the objective does not contradict it. Zero for integer problems (exact values)."""
    if problem.integer:
        return 0.0
    v = np.asarray(values, dtype=float)
    term = problem.is_free & ~np.isnan(problem.target)
    d = np.abs(v[term] - problem.target[term])
    w = problem.weights[term]
    ulp = 4 * np.spacing(np.maximum(np.abs(v[term]), np.abs(problem.target[term])))
    slope = 2 * d + ulp if problem.objective == "l2" else np.ones_like(d)
    total = float(np.sum(w * slope * ulp))
    if problem.n_query_terms:
        q = problem.queries
        act = abs(q.matrix) @ np.abs(v)
        qd = np.abs(q.deviations(v))
        qulp = 4 * np.spacing(np.maximum(act, np.abs(q.target))) * max(1, int(np.diff(q.matrix.indptr).max()))
        total += float(np.sum(q.weight * (2 * qd + qulp if problem.objective == "l2" else 1.0) * qulp))
    return total


def _check(problem: Problem, s: Solver, sol: Solution, time_left: float | None = None) -> None:
    """``verify=True``: independent feasibility, bound, structure, objective and L∞ certificates.

    Certificates that need an LP (trees) get the solve's remaining time (at least
    :data:`CERTIFICATE_MIN_TIME`); one that does not finish is recorded as skipped in
    ``sol.stats["certificate"]``, never as passed.
    """
    tol = s.capabilities.tolerance
    bad = problem.violations(sol.values, tol)
    if bad:
        raise _refuted(s, "feasibility", "; ".join(bad), SolutionStatus.INFEASIBLE)
    if sol.bound is not None and np.isfinite(sol.bound) and np.isfinite(sol.objective):
        slack = max(tol, 1e-9) * max(1.0, abs(sol.objective)) + _objective_resolution(problem, sol.values)
        if sol.bound > sol.objective + slack:
            raise _refuted(s, "bound", f"the stated lower bound {exact_number(sol.bound)} exceeds the objective "
                                       f"{exact_number(sol.objective)}: the bound or the objective is wrong")
    labels = _verify.independent_groups(problem)
    mismatch = _verify.structure_mismatch(problem, labels)
    if mismatch:
        raise _refuted(s, "structure", f"internal error: {mismatch}")
    if problem.objective != "linf" or not s.exact:
        return
    values = np.asarray(sol.values, dtype=float)
    indep = _verify.linf_objective(problem, values, labels)
    if abs(indep - sol.objective) > 1e-9 * max(1.0, abs(indep)):
        raise _refuted(s, "objective", f"reported objective {sol.objective!r} but the L∞ objective on the "
                                       f"independent groups is {indep!r}")
    lp_time = None if time_left is None else max(time_left, CERTIFICATE_MIN_TIME)
    if _verify.certificate_applies(problem):
        failing = _verify.integer_linf_uncertified(problem, values, labels, lp_time)
        if failing is None:
            sol.stats["certificate"] = "skipped (the certificate LP reached its time limit)"
        elif failing.size:
            free = np.flatnonzero(labels >= 0)
            _, first = np.unique(labels[free], return_index=True)
            raise _refuted(s, "certificate", f"{failing.size} group(s) have an integer point strictly better than "
                                             "the returned one (the strict-box certificate)",
                           groups=problem.groups()[free[first[failing]]])
        else:
            sol.stats["certificate"] = "integer L-inf optimum certified (strict box empty in every group)"
    elif not problem.integer:
        gap = _verify.continuous_linf_gap(problem, sol.objective, lp_time)
        if gap is None:
            sol.stats["certificate"] = "skipped (the independent LP did not finish)"
        else:
            sol.stats["certificate"] = f"continuous L-inf optimum matches an independent computation ({gap!r})"
            scale = max(1.0, abs(sol.objective))
            # the independent LP meets 1e-7 feasibility tolerances, the plug-in its own; the
            # inputs themselves are known to a few ulps of their magnitude
            limit = max(1e-6, tol) * scale + 64 * np.finfo(float).eps * problem.magnitude()
            if abs(gap) > limit:
                raise _refuted(s, "certificate", f"objective {sol.objective!r} differs from an independent LP "
                                                 f"optimum by {gap!r}")


# ---------------------------------------------------------------------------------- groups
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
    ``objective`` distance to the targets. ``solver="auto"`` tries the capable exact plug-ins for
    *these* values (magnitudes included) in ``auto``'s order, walking on as :func:`solve` does;
    ``stats["auto"]`` lists the tries. Mechanisms call this (never a fast path directly), so every
    level solve goes through the registry's capability checks.

    Raises:
        UnsupportedProblem: the plug-in cannot solve these groups exactly (said before solving).
        SolverFailed: see :func:`solve`; ``groups`` holds the caller's group indices of the
            failing batch when known.
    """
    values = np.asarray(values)
    offsets = np.asarray(offsets, dtype=np.int64)
    totals = np.asarray(totals)
    if not (isinstance(solver, str) and solver == "auto"):
        s = solver if isinstance(solver, Solver) else get(solver)
        return s.solve_groups(values, offsets, totals, objective=objective, integer=integer, weights=weights,
                              time_limit=time_limit, **options)
    order = preference((objective, bool(integer), False))
    candidates, reasons = _exact_candidates(
        lambda c: unsupported_groups(c, values, offsets, totals, objective=objective, integer=integer,
                                     weights=weights) + _option_refusal(c, options), order)
    if not candidates:
        raise _refusal("solve these groups", reasons)
    deadline = None if time_limit is None else time.perf_counter() + float(time_limit)
    sol, s, tried, last = _walk(candidates, deadline, lambda s, share: s.solve_groups(
        values, offsets, totals, objective=objective, integer=integer, weights=weights, time_limit=share, **options))
    if sol is None:
        raise _walk_failed(candidates, tried, last)
    if len(tried) > 1:  # record the walk only when there was one (a level's stats stay small)
        sol.stats["auto"] = {"tried": tried, "chosen": s.name}
    return sol


_base._VERIFIED_SOLVE = solve  # the default Solver.solve_groups goes through the checked solve
