"""What every solver plug-in is: capabilities, typed options, a refusal check, two status axes, results.

* Two status axes, as Pyomo keeps them (``TerminationCondition``, ``SolutionStatus``):
  :class:`Termination` says why the solver stopped (``optimal``, ``time_limit``, ``infeasible``,
  ``error``, ...) and :class:`SolutionStatus` what the returned point is (``optimal``,
  ``feasible``, ``infeasible``, ``none``). Both are ``str`` enums (``termination == "optimal"``
  works). A plug-in states only the termination (through :func:`finish`); the point's status is
  derived from it and from an independent feasibility check.
* :class:`Capabilities` declares, as sets, what a plug-in solves *exactly*: objectives,
  integrality, structures, problem *features* (weights, bounds, linear constraints, cumulative
  chains, query terms, Pyomo hooks, free sign, missing targets), its *limits* (largest
  magnitude, ...) and its *tolerance* on continuous problems (integer ones are always exact).
* :class:`Solver` is the plug-in base: ``unsupported(problem)`` is the single source of truth for
  refusals (anything ``solve_problem`` would refuse, it says first, with the reason);
  ``solve_problem(problem, time_limit=..., **options)`` is what a plug-in implements; ``Options``
  is a small dataclass of the plug-in's typed options (unknown names are refused).
* :class:`Solution` carries both statuses, the objective, bound and gap where the back end gives
  them; :class:`SolverFailed` carries both statuses, which independent check refuted a claimed
  optimum (if one did), the failing groups and the best feasible point.
"""

from __future__ import annotations

import dataclasses
import importlib
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar

import numpy as np

from hierdp.errors import HierdpError, exact_number
from hierdp.models.problem import FEATURES, Problem

__all__ = ["DEFAULT_TOLERANCE", "Capabilities", "GroupSolution", "NoOptions", "Solution", "SolutionStatus", "Solver",
           "SolverError", "SolverFailed", "Termination", "UnsupportedProblem", "finish", "parse_options"]


class _TextEnum(str, Enum):
    """A ``str`` enum that prints its value and reads loosely written strings."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @classmethod
    def coerce(cls, value: Any) -> Any:
        """A member from a member or a string (``"time limit"`` and ``"time_limit"`` alike)."""
        if isinstance(value, cls):
            return value
        key = str(getattr(value, "value", value)).strip().lower().replace(" ", "_").replace("-", "_")
        try:
            return cls(key)
        except ValueError:
            for s in cls:
                if key.startswith(str(s.value)):
                    return s
            raise ValueError(f"unknown {cls.__name__} {value!r}; known: {[str(s.value) for s in cls]}") from None


class Termination(_TextEnum):
    """Why a solver stopped (the first status axis; Pyomo's ``TerminationCondition``)."""

    #: the solver proved an optimum of the problem (within its stated tolerance)
    OPTIMAL = "optimal"
    #: a named heuristic (``Solver.exact = False``) finished its rule: no optimality claim
    COMPLETED = "completed"
    TIME_LIMIT = "time_limit"
    ITERATION_LIMIT = "iteration_limit"
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    INFEASIBLE_OR_UNBOUNDED = "infeasible_or_unbounded"
    INTERRUPTED = "interrupted"
    NUMERICAL = "numerical"
    ERROR = "error"

    @property
    def text(self) -> str:
        """A few words for messages ("time limit reached", ...)."""
        return _TERMINATION_TEXT[self]

    @classmethod
    def coerce(cls, value: Any) -> Termination:
        """A :class:`Termination` from a member or a string (an unknown string is :attr:`ERROR`)."""
        try:
            member: Termination = super().coerce(value)
            return member
        except ValueError:
            return cls.ERROR

    @property
    def proves_no_solution(self) -> bool:
        """The solver proved there is nothing to return (infeasible or unbounded): another exact
        solver would say the same, so ``auto`` does not walk on."""
        return self in (Termination.INFEASIBLE, Termination.UNBOUNDED, Termination.INFEASIBLE_OR_UNBOUNDED)


_TERMINATION_TEXT = {
    Termination.OPTIMAL: "optimal",
    Termination.COMPLETED: "heuristic completed",
    Termination.TIME_LIMIT: "time limit reached",
    Termination.ITERATION_LIMIT: "iteration limit reached",
    Termination.INFEASIBLE: "infeasible",
    Termination.UNBOUNDED: "unbounded",
    Termination.INFEASIBLE_OR_UNBOUNDED: "infeasible or unbounded",
    Termination.INTERRUPTED: "interrupted",
    Termination.NUMERICAL: "numerical trouble",
    Termination.ERROR: "solver error",
}

#: the name the plug-ins of the general solvers still import; removed with their migration
Status = Termination


class SolutionStatus(_TextEnum):
    """What the returned point is (the second status axis; Pyomo's ``SolutionStatus``)."""

    #: feasible and proven optimal (by the solver; and not refuted by verification)
    OPTIMAL = "optimal"
    #: feasible (checked independently), optimality not proven
    FEASIBLE = "feasible"
    #: a point was returned but it violates a constraint
    INFEASIBLE = "infeasible"
    #: no point
    NONE = "none"


#: relative tolerance of continuous answers for a plug-in that states none (a general solver's
#: usual feasibility tolerance): every check is scaled to its own magnitude
DEFAULT_TOLERANCE = 1e-7


class SolverError(HierdpError, RuntimeError):
    """Base class of solver errors."""


class UnsupportedProblem(SolverError):
    """The chosen solver cannot solve this problem exactly; the message says why.

    The one error type of every refusal before solving: :meth:`Solver.unsupported` through
    :func:`hierdp.solve`, and the registry's check of a mechanism's solver before any noise
    (:func:`hierdp.solvers.check_solver`)."""


@dataclass
class Solution:
    """The result of a plug-in.

    Attributes:
        values: one value per node of the problem (fixed nodes included); int64 for integer
            problems, float64 otherwise.
        objective: the problem's objective at ``values``; NaN when there is no point.
        termination: why the solver stopped (:class:`Termination`).
        solver: the plug-in's name.
        wall_time: seconds spent in the plug-in.
        stats: solver-specific statistics (batches, nodes, iterations; ``auto``'s tries, ...).
        bound: a proven lower bound of the optimum where the back end gives one (equal to
            ``objective`` for an exact fast path), else None.
        gap: relative gap ``(objective - bound) / max(1, |objective|)`` when both are known.
        solution_status: what ``values`` are (:class:`SolutionStatus`; ``optimal`` for an optimal
            termination, ``feasible`` for a completed heuristic unless stated otherwise).
    """

    values: np.ndarray
    objective: float
    termination: Termination
    solver: str
    wall_time: float
    stats: dict[str, Any] = field(default_factory=dict)
    bound: float | None = None
    gap: float | None = None
    solution_status: SolutionStatus = SolutionStatus.NONE

    def __post_init__(self) -> None:
        self.termination = Termination.coerce(self.termination)
        status = SolutionStatus.coerce(self.solution_status)
        if status == SolutionStatus.NONE:  # an optimum is an optimal point; a completed heuristic a feasible one
            status = {Termination.OPTIMAL: SolutionStatus.OPTIMAL,
                      Termination.COMPLETED: SolutionStatus.FEASIBLE}.get(self.termination, status)
        self.solution_status = status


class SolverFailed(SolverError):
    """The solver did not return a proven optimum, or an independent check refuted its claim.

    Attributes:
        solver: the plug-in's name.
        termination: why the solver stopped (:class:`Termination`); ``optimal`` when the solver
            claimed an optimum that ``refuted_by`` refutes.
        solution_status: what its point is (``feasible`` for a ``best`` point, ``infeasible`` for a
            point that failed verification, ``none``).
        refuted_by: the independent check that refuted a claimed optimum (``"feasibility"``,
            ``"structure"``, ``"objective"``, ``"certificate"``, ``"bound"``, ``"cross_check"``), or
            None.
        message: the details (which constraint or node, when the back end says).
        groups: group ids (``problem.groups()`` numbering; for ``solve_groups`` the caller's group
            indices) of the batch that failed, when known, else None.
        best: the best feasible :class:`Solution` found (e.g. on a time limit), or None.
    """

    def __init__(self, solver: str, termination: Termination | str, message: str = "", *,
                 solution_status: SolutionStatus | str | None = None, refuted_by: str | None = None,
                 groups: np.ndarray | None = None, best: Solution | None = None) -> None:
        self.solver = solver
        self.termination = Termination.coerce(termination)
        raw = str(getattr(termination, "value", termination))
        known = raw.strip().lower().replace(" ", "_").replace("-", "_") in {str(t.value) for t in Termination}
        self.message = message if known else f"{raw}: {message}".rstrip(": ")
        if solution_status is None:
            solution_status = SolutionStatus.FEASIBLE if best is not None else SolutionStatus.NONE
        self.solution_status = SolutionStatus.coerce(solution_status)
        self.refuted_by = refuted_by
        self.groups = None if groups is None else np.asarray(groups, dtype=np.int64)
        self.best = best
        where = ""
        if self.groups is not None and self.groups.size:
            where = " (groups " + ", ".join(str(int(g)) for g in self.groups[:5]) + \
                (", ..." if self.groups.size > 5 else "") + ")"
        detail = f": {self.message}" if self.message else ""
        if refuted_by is not None:
            head = (f"solver {solver!r} claimed an optimum that an independent check ({refuted_by}) refutes "
                    f"(point {self.solution_status.value})")
        else:
            head = (f"solver {solver!r} did not return an optimal solution: stopped with "
                    f"{self.termination.value!r} ({self.termination.text}), point {self.solution_status.value}")
        super().__init__(head + detail + where)


# ---------------------------------------------------------------------------------- capabilities
class Capabilities:
    """What a plug-in solves *exactly* (immutable).

    Args:
        objectives: subset of {"l2", "l1", "linf"}.
        integer: solves integer problems exactly.
        continuous: solves continuous problems exactly (within ``tolerance``).
        structures: subset of {"level", "tree"} (see :attr:`Problem.structure`).
        features: the problem features it honours (see :data:`hierdp.models.FEATURES`);
            ``"linear_constraints"`` implies ``"cumulative"`` (chain rows are linear rows).
        limits: documented limits, e.g. ``{"max_magnitude": 2**52}`` (plain numbers or text),
            shown by :func:`hierdp.solvers.describe_limits`; ``unsupported()`` enforces a numeric
            ``max_magnitude``. State at least ``time_limit`` (how a per-call limit is honoured).
        tolerance: relative tolerance of continuous answers: every row, sum and bound holds within
            ``tolerance`` times the magnitude of its own terms, and the objective is optimal within
            ``tolerance`` relative (``verify`` checks with it). Integer answers are exact, always.
        description: one line for ``hierdp solvers``.
    """

    __slots__ = ("continuous", "description", "features", "integer", "limits", "objectives", "structures",
                 "tolerance")
    objectives: frozenset[str]
    integer: bool
    continuous: bool
    structures: frozenset[str]
    features: frozenset[str]
    limits: dict[str, Any]
    tolerance: float
    description: str

    def __init__(self, objectives: Iterable[str], integer: bool, continuous: bool, structures: Iterable[str], *,
                 features: Iterable[str] = (), limits: Mapping[str, Any] | None = None,
                 tolerance: float = DEFAULT_TOLERANCE, description: str = "") -> None:
        feats = set(features)
        unknown = feats - FEATURES
        if unknown:
            raise ValueError(f"unknown capability feature(s) {sorted(unknown)}; known: {sorted(FEATURES)}")
        if "linear_constraints" in feats:
            feats.add("cumulative")
        tol = float(tolerance)
        if not (0.0 <= tol < 1e-2):
            raise ValueError(f"tolerance must be a small relative tolerance in [0, 0.01), got {tolerance!r}")
        set_ = object.__setattr__
        set_(self, "objectives", frozenset(objectives))
        set_(self, "integer", bool(integer))
        set_(self, "continuous", bool(continuous))
        set_(self, "structures", frozenset(structures))
        set_(self, "features", frozenset(feats))
        set_(self, "limits", dict(limits or {}))
        set_(self, "tolerance", tol)
        set_(self, "description", description)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Capabilities are immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Capabilities) and all(getattr(self, s) == getattr(other, s) for s in self.__slots__)

    def __hash__(self) -> int:
        return hash((self.objectives, self.integer, self.continuous, self.structures, self.features, self.description))

    def __repr__(self) -> str:
        return (f"Capabilities(objectives={sorted(self.objectives)}, integer={self.integer}, "
                f"continuous={self.continuous}, structures={sorted(self.structures)}, "
                f"features={sorted(self.features)}, limits={self.limits}, tolerance={self.tolerance!r})")

    def supports(self, feature: str) -> bool:
        """Whether the plug-in honours ``feature``."""
        return feature in self.features

    def as_dict(self) -> dict[str, Any]:
        """Plain-dict form (for printing): also one yes/no entry per feature name, flat."""
        d: dict[str, Any] = {
            "objectives": sorted(self.objectives),
            "integer": self.integer,
            "continuous": self.continuous,
            "structures": sorted(self.structures),
        }
        d.update({f: f in self.features for f in sorted(FEATURES)})
        d.update({"features": sorted(self.features), "limits": dict(self.limits), "tolerance": self.tolerance,
                  "description": self.description})
        return d


_FEATURE_REFUSAL = {
    "weights": "non-uniform objective weights not supported",
    "bounds": "per-node bounds not supported",
    "linear_constraints": "user linear constraints not supported",
    "cumulative": "cumulative chain constraints not supported",
    "query_terms": "query-term objectives not supported",
    "pyomo_hooks": "Pyomo model hooks not supported",
    "free_sign": "problems without non-negativity not supported",
    "missing_targets": "every free node needs a finite target (NaN targets not supported)",
}


# ---------------------------------------------------------------------------------- options
@dataclass(frozen=True)
class NoOptions:
    """A plug-in without options."""


def parse_options(options_type: type, solver: str, options: Mapping[str, Any]) -> Any:
    """``options_type(**options)``, refusing unknown names with the list of known ones.

    ``None`` values mean "the default" (as the older ``options.get(name) or default`` did).
    """
    known = {f.name for f in dataclasses.fields(options_type)}
    unknown = set(options) - known
    if unknown:
        raise TypeError(f"{solver}: unknown option(s) {sorted(unknown)}; known: {sorted(known) or 'none'}")
    return options_type(**{k: v for k, v in options.items() if v is not None})


# ---------------------------------------------------------------------------------- results
@dataclass
class GroupSolution:
    """An optimal solution of a batch of groups (see :meth:`Solver.solve_groups`).

    Attributes:
        values: the children's values, in the order of the input ``values``.
        objective: the batch's objective (sum over groups for ``linf``).
        solver: the plug-in's name.
        wall_time: seconds spent.
        stats: solver-specific statistics.
    """

    values: np.ndarray
    objective: float
    solver: str
    wall_time: float
    stats: dict[str, Any] = field(default_factory=dict)


def finish(problem: Problem, values: np.ndarray | None, termination: Termination | str, solver: str, t0: float,
           stats: dict[str, Any], *, bound: float | None = None, tolerance: float | None = None) -> Solution:
    """The :class:`Solution` of a plug-in, timed from ``t0``: what a plug-in returns.

    The plug-in states why it stopped (``termination``); the point's status follows: ``optimal``
    for an optimal termination, ``feasible`` for a completed heuristic or for a non-optimal stop
    whose point passes :meth:`Problem.violations` (with ``tolerance`` on continuous problems),
    ``infeasible`` when it does not, ``none`` without a point. The objective is computed for
    every feasible point (NaN otherwise, so a failed run never looks like a result).
    """
    termination = Termination.coerce(termination)
    status = SolutionStatus.NONE
    if termination == Termination.OPTIMAL:
        status = SolutionStatus.OPTIMAL
    elif values is not None and np.asarray(values).shape == (problem.n,):
        bad = problem.violations(values, tolerance)
        status = SolutionStatus.INFEASIBLE if bad else SolutionStatus.FEASIBLE
    if values is None:
        values = np.full(problem.n, np.nan)
    feasible = status in (SolutionStatus.OPTIMAL, SolutionStatus.FEASIBLE)
    obj = problem.objective_value(values) if feasible else float("nan")
    gap = None
    if bound is not None and np.isfinite(obj):
        gap = max(0.0, (obj - bound) / max(1.0, abs(obj)))
    return Solution(values=values, objective=obj, termination=termination, solver=solver,
                    wall_time=time.perf_counter() - t0, stats=stats, bound=bound, gap=gap, solution_status=status)


# ---------------------------------------------------------------------------------- plug-in base
#: :func:`hierdp.solvers.registry.solve` (capability check, verification), installed by the registry
#: when ``hierdp.solvers`` loads: the default :meth:`Solver.solve_groups` goes through it without
#: an import of the registry, which imports this module.
_VERIFIED_SOLVE: Callable[..., Solution] | None = None


class Solver:
    """A solver plug-in.

    Subclasses set ``name``, ``capabilities`` (and ``Options``, ``requires``) and implement
    :meth:`solve_problem`. Plug-in specific refusals go in :meth:`extra_checks`, so that
    :meth:`unsupported` says everything the plug-in would refuse before solving.
    """

    name: str = ""
    capabilities: Capabilities
    #: the plug-in's typed options (a dataclass); unknown option names are refused
    Options: ClassVar[type] = NoOptions
    #: modules the back end needs; :meth:`available` tries to import them (lazily, on demand)
    requires: tuple[str, ...] = ()
    #: False for a named heuristic (e.g. ``paper_round``): it returns a feasible point, not a
    #: proven optimum, so ``solver="auto"`` never picks it and :func:`describe_limits` says so
    exact: ClassVar[bool] = True

    # ------------------------------------------------------------------ refusals
    def unsupported(self, problem: Problem) -> list[str]:
        """Reasons why this plug-in cannot solve ``problem`` exactly (empty: it can)."""
        if not isinstance(problem, Problem):  # another problem kind (hierdp.solvers.kinds): it says
            refusals = getattr(problem, "refusals", None)  # how a general plug-in would take it
            return list(refusals(self)) if callable(refusals) else [f"not a Problem: {type(problem).__name__}"]
        cap = self.capabilities
        why: list[str] = []
        if problem.objective not in cap.objectives:
            why.append(f"objective {problem.objective!r} not supported (supports {sorted(cap.objectives)})")
        if problem.integer and not cap.integer:
            why.append("integer problems not supported")
        if not problem.integer and not cap.continuous:
            why.append("continuous problems not supported")
        if problem.structure not in cap.structures:
            why.append(f"{problem.structure!r} structure not supported (supports {sorted(cap.structures)})")
        for feat in sorted(problem.features() - cap.features):
            why.append(_FEATURE_REFUSAL.get(feat, f"feature {feat!r} not supported"))
        limit = cap.limits.get("max_magnitude")
        if isinstance(limit, (int, float)) and problem.magnitude() >= limit:
            why.append(f"magnitude {exact_number(problem.magnitude())} is beyond this plug-in's limit "
                       f"{exact_number(limit)} (see hierdp.solvers.describe_limits())")
        why.extend(self.extra_checks(problem))
        return why

    def extra_checks(self, problem: Problem) -> list[str]:
        """Plug-in specific refusals beyond the capability sets."""
        return []

    def available(self) -> bool:
        """Whether the plug-in's back end (:attr:`requires`) can be imported here."""
        try:
            for module in self.requires:
                importlib.import_module(module)
        except Exception:
            return False
        return True

    def parse_options(self, options: Mapping[str, Any]) -> Any:
        """This plug-in's :attr:`Options` from keyword options (typos refused with ``TypeError``)."""
        return parse_options(self.Options, self.name, options)

    # ------------------------------------------------------------------ solving
    def solve_problem(self, problem: Problem, *, time_limit: float | None = None, **options: Any) -> Solution:
        """Solve a supported problem (what a plug-in implements).

        Returns a :class:`Solution` (built with :func:`finish`): a proven optimum with termination
        ``optimal``, or another termination (``time_limit`` with the best feasible point as
        ``values`` when there is one, ``infeasible``, ``error``, ...); may also raise
        :class:`SolverFailed`. ``time_limit`` (seconds) bounds the whole call. Called by
        :func:`hierdp.solve` after :meth:`unsupported` returned nothing.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement solve_problem")

    def solve_groups(self, values: np.ndarray, offsets: np.ndarray, totals: np.ndarray, *,
                     objective: str, integer: bool = True, weights: np.ndarray | None = None,
                     time_limit: float | None = None, **options: Any) -> GroupSolution:
        """Solve a batch of independent groups ("children of group g sum to ``totals[g]``,
        non-negative"): the shape of every TopDown level.

        The default poses the batch as :meth:`Problem.from_groups` and goes through
        :func:`hierdp.solvers.registry.solve` (capability check, verification); a failure names the
        caller's group indices (``SolverFailed.groups``) and its ``best`` holds children values
        only. Fast paths override this to skip the general :class:`Problem` (a level of 10^6 children costs ~0.4 s to pose) and must then
        check their own output (sums, signs, integrality) and refuse, before solving, what they
        cannot do.
        """
        solve = _VERIFIED_SOLVE
        assert solve is not None, "hierdp.solvers.registry installs its solve when the package loads"
        problem = Problem.from_groups(np.asarray(values, dtype=float), offsets, np.asarray(totals, dtype=float),
                                      objective=objective, integer=integer, nonnegative=True, weights=weights)
        g = np.asarray(totals).size
        try:
            sol = solve(problem, self, time_limit=time_limit, **options)
        except SolverFailed as exc:
            anchors = problem.group_anchors()
            groups = None if exc.groups is None else anchors[exc.groups[exc.groups < anchors.size]]
            best = exc.best
            if best is not None:  # the children only, in the order of ``values``
                best = dataclasses.replace(best, values=best.values[g:])
            raise SolverFailed(exc.solver, exc.termination, exc.message, solution_status=exc.solution_status,
                               refuted_by=exc.refuted_by, groups=groups, best=best) from exc
        return GroupSolution(values=sol.values[g:], objective=sol.objective, solver=sol.solver,
                             wall_time=sol.wall_time, stats=dict(sol.stats or {}))
