"""TDA baselines of paper 000 §5: TopDown with L2 (TDA_l2) or a black-box L∞ solver (TDA_linf)."""

from __future__ import annotations

from typing import Any

from hierdp.mechanisms.base import MechanismParameterError
from hierdp.mechanisms.topdown.mechanism import TopDownMechanism
from hierdp.mechanisms.topdown.level_solver import LevelSolver, check_level_solver
from hierdp.privacy.noise import NoiseModel
from hierdp.privacy.budget import Budget
from hierdp.privacy.unit import PrivacyUnit

__all__ = ["TDA"]


class TDA(TopDownMechanism):
    """TDA baselines of paper 000 §5 with the same noise and budget as :class:`InfTDA`.

    Args:
        objective: ``"l2"`` (TDA_l2) or ``"linf"`` (TDA_linf, the black-box Chebyshev baseline).
        rounding: for l2: ``"paper"`` = the continuous L2 projection then the paper's rounding rule
            (the ``paper_round`` solver plug-in: consistent, not the integer optimum);
            ``"exact"`` = the exact integer L2 optimum per group (the ``projection`` plug-in).
        solver: for l2 with ``rounding="paper"``, the solver of the continuous step (default
            ``"projection"``); with ``"exact"``, the integer L2 solver (default ``"projection"``);
            for linf, the integer L∞ solver (default ``"highs"``). A name or a Solver instance.
        solver_options: options for that solver.
        constraints, constraint_solver, on_infeasible: a public constraint set (docs/constraints.md).
            The groups its rows or node bounds reach are solved exactly by the constraint solver
            (integer L2 / L∞ optimum under the rows): with ``rounding="paper"`` those groups are
            not paper-rounded, and the level's statistics count them (``constrained_groups``).
        Other arguments as :class:`InfTDA`.
    """

    def __init__(self, objective: str = "l2", epsilon: float | None = None, delta: float | None = None, *,
                 rounding: str = "paper", solver: Any = None, rho: float | None = None, budget: Budget | None = None,
                 bounded: bool = True, contributions: int = 1, secure: bool = False, distinct: bool = False,
                 conversion: str = "analytic", time_limit: float | None = None,
                 solver_options: dict[str, Any] | None = None, unit: PrivacyUnit | None = None,
                 noise: str | NoiseModel = "discrete_gaussian", plan: Any = "uniform", engine: Any = None,
                 executor: Any = None, constraints: Any = None, constraint_solver: Any = None,
                 on_infeasible: str = "abort") -> None:
        if objective not in ("l2", "linf"):
            raise MechanismParameterError(f"objective must be 'l2' or 'linf', got {objective!r}")
        if rounding not in ("paper", "exact"):
            raise MechanismParameterError(f"rounding must be 'paper' or 'exact', got {rounding!r}")
        self.rounding = rounding
        if objective == "linf":
            self.name = "TDA_linf"
        else:
            self.name = "TDA_l2" if rounding == "paper" else "TDA_l2_exact"
        super().__init__(epsilon, delta, rho=rho, budget=budget, unit=unit, bounded=bounded,
                         contributions=contributions, distinct=distinct, secure=secure, conversion=conversion,
                         noise=noise, plan=plan, objective=objective, solver=solver, solver_options=solver_options,
                         time_limit=time_limit, integer=True, engine=engine, executor=executor,
                         constraints=constraints, constraint_solver=constraint_solver, on_infeasible=on_infeasible)

    def _make_level_solver(self, solver: Any, solver_options: Any, time_limit: Any, integer: bool) -> LevelSolver:
        if self.objective == "linf":
            return LevelSolver(solver if solver is not None else "highs", objective="linf", integer=True,
                               options=solver_options, time_limit=time_limit, **self._constraint_kwargs())
        if self.rounding == "exact":
            return LevelSolver(solver if solver is not None else "projection", objective="l2", integer=True,
                               options=solver_options, time_limit=time_limit, **self._constraint_kwargs())
        # the paper's rounding of a continuous L2 optimum: the paper_round plug-in, whose continuous
        # step is any solver of continuous L2 levels (checked here, before any noise)
        options: dict[str, Any] = {"continuous_options": dict(solver_options or {})}
        if solver is not None:
            check_level_solver(solver, "l2", integer=False)
            options["continuous_solver"] = solver
        return LevelSolver("paper_round", objective="l2", integer=True, options=options, time_limit=time_limit,
                           **self._constraint_kwargs())

    def params(self) -> dict[str, Any]:
        return {**super().params(), "rounding": self.rounding}
