"""Solver plug-ins and the registry. ``hierdp.solve(problem, solver="auto")`` is the entry point.

Plug-in modules (``intopt``, ``projection``, ``costtable``, ``highs``, ``ortools``) are imported
lazily so that a missing or broken back end never breaks ``import hierdp``.
"""

from hierdp.solvers.base import (
    Capabilities,
    GroupSolution,
    Solution,
    Solver,
    SolverError,
    SolverFailed,
    Status,
    UnsupportedProblem,
)
from hierdp.solvers.registry import (
    available,
    choose,
    describe_limits,
    get,
    limits_text,
    names,
    register,
    solve,
    solve_groups,
    unsupported_groups,
)

from hierdp.solvers import kinds

__all__ = [
    "Capabilities",
    "GroupSolution",
    "Solution",
    "Solver",
    "SolverError",
    "SolverFailed",
    "Status",
    "UnsupportedProblem",
    "available",
    "choose",
    "describe_limits",
    "get",
    "kinds",
    "limits_text",
    "names",
    "register",
    "solve",
    "solve_groups",
    "unsupported_groups",
]
