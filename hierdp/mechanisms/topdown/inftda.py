"""InfTDA (paper 000, Alg. 1 bounded / Alg. 3 unbounded): TopDown with integer L∞ post-processing."""

from __future__ import annotations

from typing import Any

from hierdp.mechanisms.base import MechanismParameterError
from hierdp.mechanisms.topdown.mechanism import TopDownMechanism
from hierdp.privacy.noise import NoiseModel
from hierdp.privacy.budget import Budget
from hierdp.privacy.unit import PrivacyUnit

__all__ = ["InfTDA"]


class InfTDA(TopDownMechanism):
    """InfTDA (paper 000, Alg. 1 / Alg. 3): TopDown with Chebyshev-distance post-processing.

    Args:
        epsilon, delta: target (ε, δ)-DP, converted to ρ-zCDP with ``conversion``.
        rho: total ρ-zCDP instead of (ε, δ).
        budget: a :class:`~hierdp.privacy.budget.Budget` instead of the above.
        bounded: True = bounded neighbours (Alg. 1, root public); False = Alg. 3 (noisy root).
        solver: ``"intopt"`` (Alg. 4, vectorized, the default), any registered solver able to
            solve integer L∞ levels (``"highs"``, ``"ortools"``), or a Solver instance. The L∞
            optimum is not unique: different solvers return different optima of equal objective
            (e.g. different leaf errors), so a release names the solver it used.
        solver_options: options for the solver (``executor=``, ``batch_size=``, ...).
        contributions: m, records per person; ``distinct``: whether they are distinct finest pairs;
            or ``unit=`` a :class:`~hierdp.privacy.unit.PrivacyUnit`.
        secure: draw noise from OS randomness with exact samplers (real releases).
        order: IntOpt's lowering order, ``"ascending"`` (paper: fewer false positives) or
            ``"descending"`` (fewer false negatives); an IntOpt option.
        time_limit: seconds per solver call, for general solvers.
        noise, plan: see :class:`~hierdp.mechanisms.topdown.mechanism.TopDownMechanism` (paper 000
            uses the defaults: discrete Gaussian, uniform).
        engine, executor: where levels run (``"serial"``, ``"processes"``, ``"dask"``; see
            :mod:`hierdp.scale.executors`); a seeded release is the same on every engine.
        constraints, constraint_solver, on_infeasible: a public constraint set honoured level by
            level (see :class:`~hierdp.mechanisms.topdown.mechanism.TopDownMechanism` and
            docs/constraints.md); groups reached by its rows are solved by an exact general solver.
    """

    name = "InfTDA"

    def __init__(self, epsilon: float | None = None, delta: float | None = None, *, rho: float | None = None,
                 budget: Budget | None = None, bounded: bool = True, solver: Any = "intopt", contributions: int = 1,
                 secure: bool = False, distinct: bool = False, conversion: str = "analytic",
                 order: str = "ascending", time_limit: float | None = None,
                 solver_options: dict[str, Any] | None = None, unit: PrivacyUnit | None = None,
                 noise: str | NoiseModel = "discrete_gaussian", plan: Any = "uniform", engine: Any = None,
                 executor: Any = None, constraints: Any = None, constraint_solver: Any = None,
                 on_infeasible: str = "abort") -> None:
        if order not in ("ascending", "descending"):
            raise MechanismParameterError(f"order must be 'ascending' or 'descending', got {order!r}")
        solver = "intopt" if solver is None else solver
        options = dict(solver_options or {})
        is_intopt = (solver if isinstance(solver, str) else getattr(solver, "name", "")) == "intopt"
        if is_intopt:
            options.setdefault("order", order)
        elif order != "ascending":
            raise MechanismParameterError(f"order={order!r} is an option of the 'intopt' solver, not of {solver!r}")
        self.order = order
        super().__init__(epsilon, delta, rho=rho, budget=budget, unit=unit, bounded=bounded,
                         contributions=contributions, distinct=distinct, secure=secure, conversion=conversion,
                         noise=noise, plan=plan, objective="linf", solver=solver, solver_options=options,
                         time_limit=time_limit, integer=True, engine=engine, executor=executor,
                         constraints=constraints, constraint_solver=constraint_solver, on_infeasible=on_infeasible)

    def params(self) -> dict[str, Any]:
        return {**super().params(), "order": self.order}
