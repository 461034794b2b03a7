"""What every solver plug-in is: capabilities, a refusal check, and a :class:`Solution`."""

from __future__ import annotations

from hierdp.errors import HierdpError

import importlib
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hierdp.models.problem import Problem


class SolverError(HierdpError, RuntimeError):
    """Base class of solver errors."""


class UnsupportedProblem(SolverError):
    """The chosen solver cannot solve this problem exactly; the message says why."""


class SolverFailed(SolverError):
    """The solver ran but did not prove an optimal solution (time limit, infeasible, error).

    ``status`` holds the solver's status; no values are returned as if they were optimal.
    """

    def __init__(self, solver: str, status: str, message: str = "") -> None:
        self.solver = solver
        self.status = status
        super().__init__(f"solver {solver!r} did not return an optimal solution: status {status!r}"
                         + (f" ({message})" if message else ""))


@dataclass(frozen=True)
class Capabilities:
    """What a plug-in solves *exactly*.

    Attributes:
        objectives: subset of {"l2", "l1", "linf"}.
        integer: solves integer problems exactly.
        continuous: solves continuous problems exactly.
        structures: subset of {"level", "tree"} (see :attr:`Problem.structure`).
        weights: honours non-uniform objective weights.
        bounds: honours per-node bounds beyond non-negativity.
        linear_constraints: honours user linear constraints.
        pyomo_hooks: honours user hooks on the Pyomo model.
        free_sign: can solve problems without non-negativity.
        missing_targets: accepts free nodes without a noisy target (NaN: no objective term).
        description: one line for ``hierdp solvers``.
    """

    objectives: frozenset[str]
    integer: bool
    continuous: bool
    structures: frozenset[str]
    weights: bool = False
    bounds: bool = False
    linear_constraints: bool = False
    pyomo_hooks: bool = False
    free_sign: bool = True
    missing_targets: bool = True
    description: str = ""

    def as_dict(self) -> dict[str, Any]:
        """Plain-dict form (for printing)."""
        return {
            "objectives": sorted(self.objectives),
            "integer": self.integer,
            "continuous": self.continuous,
            "structures": sorted(self.structures),
            "weights": self.weights,
            "bounds": self.bounds,
            "linear_constraints": self.linear_constraints,
            "pyomo_hooks": self.pyomo_hooks,
            "free_sign": self.free_sign,
            "missing_targets": self.missing_targets,
            "description": self.description,
        }


@dataclass
class Solution:
    """An optimal solution.

    Attributes:
        values: one value per node of the problem (fixed nodes included); int64 for integer
            problems, float64 otherwise.
        objective: the problem's objective at ``values`` (computed by :meth:`Problem.objective_value`).
        status: ``"optimal"``.
        solver: the plug-in's name.
        wall_time: seconds spent in the plug-in.
        stats: solver-specific statistics (batches, nodes, iterations, ...).
    """

    values: np.ndarray
    objective: float
    status: str
    solver: str
    wall_time: float
    stats: dict[str, Any] = field(default_factory=dict)


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


def finish(problem: Problem, values: np.ndarray, status: str, solver: str, t0: float,
           stats: dict[str, Any]) -> Solution:
    """A :class:`Solution` timed from ``t0``; the objective only for an optimal status (NaN
    otherwise, so a failed run never looks like a result)."""
    obj = problem.objective_value(values) if status == "optimal" else float("nan")
    return Solution(values=values, objective=obj, status=status, solver=solver,
                    wall_time=time.perf_counter() - t0, stats=stats)


class Solver(ABC):
    """A solver plug-in. Subclasses set ``name`` and ``capabilities`` and implement ``_solve``."""

    name: str = ""
    capabilities: Capabilities

    def unsupported(self, problem: Problem) -> list[str]:
        """Reasons why this plug-in cannot solve ``problem`` exactly (empty: it can)."""
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
        if problem.has_weights and not cap.weights:
            why.append("non-uniform objective weights not supported")
        if problem.has_custom_bounds and not cap.bounds:
            why.append("per-node bounds not supported")
        if problem.linear and not cap.linear_constraints:
            why.append("user linear constraints not supported")
        if problem.pyomo_hooks and not cap.pyomo_hooks:
            why.append("Pyomo model hooks not supported")
        if not problem.nonnegative and not cap.free_sign:
            why.append("problems without non-negativity not supported")
        if not cap.missing_targets and np.any(np.isnan(problem.target[problem.is_free])):
            why.append("every free node needs a finite target (NaN targets not supported)")
        why.extend(self.extra_checks(problem))
        return why

    def extra_checks(self, problem: Problem) -> list[str]:
        """Plug-in specific refusals beyond the capability flags."""
        return []

    #: modules the back end needs; :meth:`available` tries to import them (lazily, on demand)
    requires: tuple[str, ...] = ()

    def available(self) -> bool:
        """Whether the plug-in's back end (:attr:`requires`) can be imported here."""
        try:
            for module in self.requires:
                importlib.import_module(module)
        except Exception:
            return False
        return True

    @abstractmethod
    def _solve(self, problem: Problem, *, time_limit: float | None = None, **options: Any) -> Solution:
        """Solve a supported problem; raise :class:`SolverFailed` if optimality is not proven."""

    def solve_groups(self, values: np.ndarray, offsets: np.ndarray, totals: np.ndarray, *,
                     objective: str, integer: bool = True, weights: np.ndarray | None = None,
                     time_limit: float | None = None, **options: Any) -> "GroupSolution":
        """Solve a batch of independent groups ("children of group g sum to ``totals[g]``,
        non-negative"): the shape of every TopDown level.

        The default poses the batch as :meth:`Problem.from_groups` and goes through
        :func:`hierdp.solvers.registry.solve` (capability check, verification). Fast paths override
        this to skip the general :class:`Problem` (a level of 10^6 children costs ~0.4 s to pose)
        and must then check their own output (sums, signs, integrality) before returning.
        """
        from hierdp.solvers.registry import solve

        problem = Problem.from_groups(np.asarray(values, dtype=float), offsets, np.asarray(totals, dtype=float),
                                      objective=objective, integer=integer, nonnegative=True, weights=weights)
        sol = solve(problem, self, time_limit=time_limit, **options)
        g = np.asarray(totals).size
        return GroupSolution(values=sol.values[g:], objective=sol.objective, solver=sol.solver,
                             wall_time=sol.wall_time, stats=dict(sol.stats or {}))
