"""How a TopDown level is post-processed: any registered solver, through the registry.

A level is a batch of independent groups - the children of each released parent - that must become
non-negative values (integers) summing to the parent. :class:`LevelSolver` hands that batch to
:func:`hierdp.solvers.solve_groups` with the plug-in chosen by name (or a
:class:`~hierdp.solvers.Solver` instance) and its options (``executor=`` for a process pool or a
Dask cluster, ``batch_size``, ``order`` for IntOpt, ...). Nothing here calls a fast path directly:
fast paths are plug-ins that override ``Solver.solve_groups``, so ``hierdp solvers`` lists
everything a mechanism can use, and a release names the registered solver it used.

The solver is checked when the mechanism is built (before any noise) on a probe level of the same
kind: a plug-in that cannot solve such levels exactly is refused with its reasons, and options it
does not take (a typo, an option of another plug-in) are refused by solving that probe with them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["LevelSolver", "check_level_solver"]


def _plugin(solver: Any) -> Any:
    from hierdp.solvers import Solver, get

    if isinstance(solver, Solver):
        return solver
    if not isinstance(solver, str):
        raise TypeError(f"solver must be a registered name or a hierdp.solvers.Solver, got {type(solver).__name__}")
    return get(solver)  # KeyError names the registered solvers


def check_level_solver(solver: Any, objective: str, integer: bool, *, missing_targets: bool = False) -> None:
    """Fail at construction, before any noise is drawn, if ``solver`` cannot solve a TopDown level.

    Raises:
        KeyError: unknown solver name. UnsupportedProblem: it cannot solve such a level exactly
            (or its back end cannot be imported here).
    """
    from hierdp.models import Problem
    from hierdp.solvers import UnsupportedProblem

    plugin = _plugin(solver)
    values = [0.6, float("nan")] if missing_targets else [0.6, 0.4]
    probe = Problem.from_groups(values, [0, 2], [1.0], objective=objective, integer=integer)
    why = plugin.unsupported(probe)
    if why:
        raise UnsupportedProblem(f"solver {plugin.name!r} cannot post-process a TopDown level "
                                 f"({objective}, {'integer' if integer else 'continuous'}): " + "; ".join(why))
    if not plugin.available():
        raise UnsupportedProblem(f"solver {plugin.name!r}: its back end cannot be imported here")


class LevelSolver:
    """Post-processes TopDown levels with one registered solver.

    Args:
        solver: a registered name or a :class:`~hierdp.solvers.Solver` instance.
        objective: ``"linf"``, ``"l2"`` or ``"l1"`` distance to the noisy children.
        integer: integer solutions (TopDown releases counts).
        options: plug-in options passed on every call (``executor``, ``batch_size``, ``order``, ...).
        time_limit: seconds per call (one call per chunk of a level); a plug-in that hits it
            raises :class:`~hierdp.solvers.SolverFailed`.
    """

    def __init__(self, solver: Any, *, objective: str, integer: bool = True,
                 options: Mapping[str, Any] | None = None, time_limit: float | None = None,
                 missing_targets: bool = False) -> None:
        if options is not None and not isinstance(options, Mapping):
            raise TypeError(f"solver_options must be a mapping of option -> value, got {type(options).__name__}")
        if time_limit is not None and (isinstance(time_limit, bool) or not isinstance(time_limit, (int, float))
                                       or not time_limit > 0):
            raise ValueError(f"time_limit must be a positive number of seconds, got {time_limit!r}")
        check_level_solver(solver, objective, integer, missing_targets=missing_targets)
        self.solver = solver
        self.objective = objective
        self.integer = bool(integer)
        self.options = dict(options or {})
        self.time_limit = time_limit
        if self.options:
            self._check_options(missing_targets)

    def _check_options(self, missing_targets: bool) -> None:
        """Solve a one-group probe level with the options: a plug-in refuses options it does not
        take with ``TypeError`` only when it solves, which in a release is after the level's noise.

        Raises:
            MechanismParameterError: the plug-in refused the options (naming them and the reason).
        """
        from hierdp.mechanisms.base import MechanismParameterError
        from hierdp.solvers import solve_groups

        probe = np.array([0.6, np.nan if missing_targets else 0.4])
        try:
            solve_groups(probe, np.array([0, 2]), np.array([1.0]), solver=self.solver, objective=self.objective,
                         integer=self.integer, time_limit=self.time_limit, **self.options)
        except TypeError as exc:
            raise MechanismParameterError(f"solver_options {sorted(self.options)} are not options of solver "
                                          f"{self.name!r}: {exc}") from None

    @property
    def name(self) -> str:
        """The registered name of the plug-in."""
        return self.solver if isinstance(self.solver, str) else self.solver.name

    def solve(self, noisy: np.ndarray, offsets: np.ndarray, totals: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        """One batch of groups: values (int64 when integer) in the order of ``noisy``, and stats."""
        from hierdp.solvers import solve_groups

        t0 = time.perf_counter()
        # values go as they are (int64 noisy counts stay exact for plug-ins that take integers)
        sol = solve_groups(np.asarray(noisy), offsets, np.asarray(totals),
                           solver=self.solver, objective=self.objective, integer=self.integer,
                           time_limit=self.time_limit, **self.options)
        values = np.asarray(sol.values)
        if self.integer:
            values = np.rint(values).astype(np.int64)
        stats = {"solver": sol.solver, "objective": float(sol.objective),
                 "solver_s": float(sol.wall_time or (time.perf_counter() - t0)), **dict(sol.stats or {})}
        return values, stats

    def params(self) -> dict[str, Any]:
        """For the release's parameters."""
        shown = {k: (v if isinstance(v, (int, float, str, bool, type(None))) else type(v).__name__)
                 for k, v in self.options.items()}
        return {"solver": self.name, "objective": self.objective, "solver_options": shown,
                "time_limit": self.time_limit}
