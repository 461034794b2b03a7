"""What every solver plug-in is: capabilities, typed options, a refusal check, statuses and results.

* :class:`Status` is the one vocabulary of outcomes (a ``str`` enum: ``status == "optimal"`` works).
* :class:`Capabilities` declares, as sets, what a plug-in solves *exactly*: objectives,
  integrality, structures, problem *features* (weights, bounds, linear constraints, cumulative
  chains, query terms, Pyomo hooks, free sign, missing targets) and its *limits* (largest
  magnitude, ...). A new constraint kind is one more feature name, not one more field in every
  plug-in.
* :class:`Solver` is the plug-in base: ``unsupported(problem)`` is the single source of truth for
  refusals (anything ``solve_problem`` would refuse, it says first, with the reason);
  ``solve_problem(problem, time_limit=..., **options)`` is the public override point (``_solve``
  stays as an alias); ``Options`` is a small dataclass of the plug-in's typed options (unknown
  names are refused).
* :class:`Solution` carries the status, objective, bound and gap where the back end gives them;
  :class:`SolverFailed` carries the status, the failing groups and the best feasible point.
"""

from __future__ import annotations

import dataclasses
import importlib
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar
from collections.abc import Iterable, Mapping

import numpy as np

from hierdp.errors import HierdpError
from hierdp.models.problem import FEATURES, Problem

__all__ = ["Capabilities", "GroupSolution", "NoOptions", "Solution", "Solver", "SolverError", "SolverFailed",
           "Status", "UnsupportedProblem", "finish", "parse_options"]


class Status(str, Enum):
    """Outcome of a solve. A ``str`` enum: ``Status.OPTIMAL == "optimal"``."""

    OPTIMAL = "optimal"
    TIME_LIMIT = "time_limit"
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    INFEASIBLE_OR_UNBOUNDED = "infeasible_or_unbounded"
    ITERATION_LIMIT = "iteration_limit"
    INTERRUPTED = "interrupted"
    NUMERICAL = "numerical"
    ERROR = "error"
    #: the returned point violates a constraint (caught by ``verify``)
    INFEASIBLE_RESULT = "infeasible_result"
    #: the returned point is feasible but provably not optimal (caught by a certificate)
    NOT_OPTIMAL = "not_optimal"
    #: ``cross_check`` found a different optimum
    CROSS_CHECK_MISMATCH = "cross_check_mismatch"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @property
    def text(self) -> str:
        """A few words for messages ("time limit reached", ...)."""
        return _STATUS_TEXT[self]

    @classmethod
    def coerce(cls, value: Status | str) -> Status:
        """A :class:`Status` from a status or a string (``"time limit"`` and ``"time_limit"`` alike;
        an unknown string is :attr:`ERROR`)."""
        if isinstance(value, Status):
            return value
        key = str(value).strip().lower().replace(" ", "_").replace("-", "_")
        try:
            return cls(key)
        except ValueError:
            for s in cls:
                if key.startswith(s.value):
                    return s
            return cls.ERROR


_STATUS_TEXT = {
    Status.OPTIMAL: "optimal",
    Status.TIME_LIMIT: "time limit reached",
    Status.INFEASIBLE: "infeasible",
    Status.UNBOUNDED: "unbounded",
    Status.INFEASIBLE_OR_UNBOUNDED: "infeasible or unbounded",
    Status.ITERATION_LIMIT: "iteration limit reached",
    Status.INTERRUPTED: "interrupted",
    Status.NUMERICAL: "numerical trouble",
    Status.ERROR: "solver error",
    Status.INFEASIBLE_RESULT: "infeasible result",
    Status.NOT_OPTIMAL: "result not optimal",
    Status.CROSS_CHECK_MISMATCH: "cross-check mismatch",
}


class SolverError(HierdpError, RuntimeError):
    """Base class of solver errors."""


class UnsupportedProblem(SolverError):
    """The chosen solver cannot solve this problem exactly; the message says why."""


@dataclass
class Solution:
    """The result of a plug-in.

    Attributes:
        values: one value per node of the problem (fixed nodes included); int64 for integer
            problems, float64 otherwise. Returned by ``hierdp.solve`` only when optimal.
        objective: the problem's objective at ``values`` (:meth:`Problem.objective_value`); NaN
            when the status is not optimal and no feasible point exists.
        status: a :class:`Status` (``"optimal"`` for every solution ``hierdp.solve`` returns).
        solver: the plug-in's name.
        wall_time: seconds spent in the plug-in.
        stats: solver-specific statistics (batches, nodes, iterations, ...).
        bound: a proven lower bound of the optimum where the back end gives one (equal to
            ``objective`` for an exact fast path), else None.
        gap: relative gap ``(objective - bound) / max(1, |objective|)`` when both are known.
    """

    values: np.ndarray
    objective: float
    status: Status | str
    solver: str
    wall_time: float
    stats: dict[str, Any] = field(default_factory=dict)
    bound: float | None = None
    gap: float | None = None

    def __post_init__(self) -> None:
        self.status = Status.coerce(self.status)


class SolverFailed(SolverError):
    """The solver ran but did not prove an optimal solution (time limit, infeasible, error, ...).

    Attributes:
        solver: the plug-in's name.
        status: a :class:`Status`.
        message: the details (which constraint or node, when the back end says).
        groups: group ids (``problem.groups()`` numbering; for ``solve_groups`` the caller's group
            indices) of the batch that failed, when known, else None.
        best: the best feasible :class:`Solution` found (e.g. on a time limit), or None.
    """

    def __init__(self, solver: str, status: Status | str, message: str = "", *,
                 groups: np.ndarray | None = None, best: Solution | None = None) -> None:
        self.solver = solver
        self.status = Status.coerce(status)
        raw = str(status.value if isinstance(status, Status) else status)
        self.message = message if self.status != Status.ERROR or raw == "error" else f"{raw}: {message}".rstrip(": ")
        self.groups = None if groups is None else np.asarray(groups, dtype=np.int64)
        self.best = best
        detail = self.status.text + (f": {self.message}" if self.message else "")
        if self.groups is not None and self.groups.size:
            shown = ", ".join(str(int(g)) for g in self.groups[:5]) + (", ..." if self.groups.size > 5 else "")
            detail += f" (groups {shown})"
        super().__init__(f"solver {solver!r} did not return an optimal solution: status {self.status.value!r} "
                         f"({detail})")


# ---------------------------------------------------------------------------------- capabilities
#: bool flags of the first Capabilities (kept as constructor arguments and properties)
_FLAG_FEATURES = ("weights", "bounds", "linear_constraints", "pyomo_hooks", "free_sign", "missing_targets")


class Capabilities:
    """What a plug-in solves *exactly* (immutable).

    Args:
        objectives: subset of {"l2", "l1", "linf"}.
        integer: solves integer problems exactly.
        continuous: solves continuous problems exactly.
        structures: subset of {"level", "tree"} (see :attr:`Problem.structure`).
        features: the problem features it honours (see :data:`hierdp.models.FEATURES`);
            ``"linear_constraints"`` implies ``"cumulative"`` (chain rows are linear rows).
        limits: documented limits, e.g. ``{"max_magnitude": 2**52}`` (plain numbers or text),
            shown by :func:`hierdp.solvers.describe_limits`; ``unsupported()`` enforces them.
        description: one line for ``hierdp solvers``.
        weights, bounds, linear_constraints, pyomo_hooks, free_sign, missing_targets: the older
            boolean form of ``features`` (each True adds that feature; ``free_sign`` and
            ``missing_targets`` default to True as before).
    """

    __slots__ = ("continuous", "description", "features", "integer", "limits", "objectives", "structures")

    def __init__(self, objectives: Iterable[str], integer: bool, continuous: bool, structures: Iterable[str],
                 weights: bool = False, bounds: bool = False, linear_constraints: bool = False,
                 pyomo_hooks: bool = False, free_sign: bool = True, missing_targets: bool = True,
                 description: str = "", *, features: Iterable[str] | None = None,
                 limits: Mapping[str, Any] | None = None) -> None:
        if features is None:
            flags = dict(weights=weights, bounds=bounds, linear_constraints=linear_constraints,
                         pyomo_hooks=pyomo_hooks, free_sign=free_sign, missing_targets=missing_targets)
            feats = {k for k, v in flags.items() if v}
        else:
            feats = set(features)
        unknown = feats - FEATURES
        if unknown:
            raise ValueError(f"unknown capability feature(s) {sorted(unknown)}; known: {sorted(FEATURES)}")
        if "linear_constraints" in feats:
            feats.add("cumulative")
        set_ = object.__setattr__
        set_(self, "objectives", frozenset(objectives))
        set_(self, "integer", bool(integer))
        set_(self, "continuous", bool(continuous))
        set_(self, "structures", frozenset(structures))
        set_(self, "features", frozenset(feats))
        set_(self, "limits", dict(limits or {}))
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
                f"features={sorted(self.features)}, limits={self.limits})")

    def __getattr__(self, name: str) -> Any:
        if name in _FLAG_FEATURES:  # the older boolean view of features
            return name in object.__getattribute__(self, "features")
        raise AttributeError(name)

    def supports(self, feature: str) -> bool:
        """Whether the plug-in honours ``feature``."""
        return feature in self.features

    def as_dict(self) -> dict[str, Any]:
        """Plain-dict form (for printing)."""
        d: dict[str, Any] = {
            "objectives": sorted(self.objectives),
            "integer": self.integer,
            "continuous": self.continuous,
            "structures": sorted(self.structures),
        }
        for f in _FLAG_FEATURES:
            d[f] = f in self.features
        d["features"] = sorted(self.features)
        d["limits"] = dict(self.limits)
        d["description"] = self.description
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


def finish(problem: Problem, values: np.ndarray, status: Status | str, solver: str, t0: float,
           stats: dict[str, Any], *, bound: float | None = None) -> Solution:
    """A :class:`Solution` timed from ``t0``; the objective only for an optimal status (NaN
    otherwise, so a failed run never looks like a result)."""
    status = Status.coerce(status)
    obj = problem.objective_value(values) if status == Status.OPTIMAL else float("nan")
    gap = None
    if bound is not None and np.isfinite(obj):
        gap = max(0.0, (obj - bound) / max(1.0, abs(obj)))
    return Solution(values=values, objective=obj, status=status, solver=solver,
                    wall_time=time.perf_counter() - t0, stats=stats, bound=bound, gap=gap)


# ---------------------------------------------------------------------------------- plug-in base
class Solver:
    """A solver plug-in.

    Subclasses set ``name``, ``capabilities`` (and ``Options``, ``requires``) and implement
    :meth:`solve_problem` (the public override point; overriding the older ``_solve`` still works).
    Plug-in specific refusals go in :meth:`extra_checks`, so that :meth:`unsupported` says
    everything the plug-in would refuse before solving.
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
            why.append(f"magnitude {problem.magnitude():.4g} is beyond this plug-in's limit {limit:.4g} "
                       "(see hierdp.solvers.describe_limits())")
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
        """Solve a supported problem (the public override point for plug-ins).

        Returns a :class:`Solution`; a non-optimal outcome is returned with its status (and the
        best feasible point as ``values`` when there is one) or raised as :class:`SolverFailed`.
        ``time_limit`` (seconds) bounds the whole call. Called by :func:`hierdp.solve` after
        :meth:`unsupported` returned nothing.
        """
        if type(self)._solve is Solver._solve:
            raise NotImplementedError(f"{type(self).__name__} implements neither solve_problem nor _solve")
        return self._solve(problem, time_limit=time_limit, **options)

    def _solve(self, problem: Problem, *, time_limit: float | None = None, **options: Any) -> Solution:
        """The older name of :meth:`solve_problem` (kept for plug-ins that override it)."""
        if type(self).solve_problem is Solver.solve_problem:
            raise NotImplementedError(f"{type(self).__name__} implements neither solve_problem nor _solve")
        return self.solve_problem(problem, time_limit=time_limit, **options)

    def solve_groups(self, values: np.ndarray, offsets: np.ndarray, totals: np.ndarray, *,
                     objective: str, integer: bool = True, weights: np.ndarray | None = None,
                     time_limit: float | None = None, **options: Any) -> GroupSolution:
        """Solve a batch of independent groups ("children of group g sum to ``totals[g]``,
        non-negative"): the shape of every TopDown level.

        The default poses the batch as :meth:`Problem.from_groups` and goes through
        :func:`hierdp.solvers.registry.solve` (capability check, verification); a failure names the
        caller's group indices (``SolverFailed.groups``) and its ``best`` holds children values only. Fast paths override this to skip the
        general :class:`Problem` (a level of 10^6 children costs ~0.4 s to pose) and must then
        check their own output (sums, signs, integrality) and refuse, before solving, what they
        cannot do.
        """
        from hierdp.solvers.registry import solve

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
                best = Solution(values=best.values[g:], objective=best.objective, status=best.status,
                                solver=best.solver, wall_time=best.wall_time, stats=best.stats, bound=best.bound,
                                gap=best.gap)
            raise SolverFailed(exc.solver, exc.status, exc.message, groups=groups, best=best) from exc
        return GroupSolution(values=sol.values[g:], objective=sol.objective, solver=sol.solver,
                             wall_time=sol.wall_time, stats=dict(sol.stats or {}))
