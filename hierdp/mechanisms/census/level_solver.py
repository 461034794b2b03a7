"""The per-parent post-processing of the Census-style TopDown: one chunk of parents in, integer
histograms out.

This is the seam between the level loop (:mod:`.mechanism`: which parents, their measurements,
the ledger) and the solve (this module and below: weighted least squares with consistency and
non-negativity, then the integer rounder). The loop builds a :class:`~.problems.LevelChunk` and
calls :meth:`CensusLevelSolver.solve`; everything about *how* a chunk is solved - the exact
vectorized fast paths, the general solvers through the registry, batching - lives here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hierdp.mechanisms.census.fastpath import round_cells_fast, wls_fast
from hierdp.mechanisms.census.problems import LevelChunk, continuous_problem, rounding_problem

__all__ = ["CensusLevelSolver", "ParentSolveFailed"]


class ParentSolveFailed(Exception):
    """A stage failed on some parents of a chunk.

    Attributes:
        cause: the solver's exception; parents: the failing parents (ids the caller passed);
        stage: ``"continuous"`` or ``"rounding"``.
    """

    def __init__(self, cause: BaseException, parents: np.ndarray, stage: str) -> None:
        super().__init__(str(cause))
        self.cause, self.parents, self.stage = cause, np.asarray(parents, np.int64), stage


@dataclass
class CensusLevelSolver:
    """How a chunk of parents is solved (both stages); see :class:`~.mechanism.CensusTopDown` for
    the meaning of each option."""

    solver: Any = "highs"
    rounder: Any = "highs"
    rounding: str = "cells"
    solver_options: dict[str, Any] = field(default_factory=dict)
    time_limit: float | None = None
    chunk_parents: int = 200
    fast_path: bool = True
    max_active_set_updates: int = 50

    def solve(self, chunk: LevelChunk, parent_ids: np.ndarray, stats: dict[str, Any]) -> np.ndarray:
        """Both stages on one chunk (fast paths first, then the general solvers for the parents
        they did not certify); returns the ``(C, K)`` integer histograms and adds its counts to
        ``stats``.

        Raises:
            ParentSolveFailed: a stage failed; the failing parents are named by ``parent_ids``.
        """
        P, C, K = chunk.shape
        stats["parents"] = stats.get("parents", 0) + P
        xhat = np.zeros((C, K))
        todo = np.ones(P, bool)
        if self.fast_path:
            res = wls_fast(chunk, max_iter=self.max_active_set_updates)
            xhat[:] = res.values
            todo = ~res.certified
            stats["wls_fast"] = stats.get("wls_fast", 0) + int(res.certified.sum())
            if res.certified.any():
                stats["max_active_set_updates"] = max(stats.get("max_active_set_updates", 0),
                                                      int(res.iterations[res.certified].max()))
        if todo.any():
            sub, kids = chunk.subset(todo)
            xhat[kids] = self.solve_general(sub, parent_ids[todo], "continuous")
            stats["wls_general"] = stats.get("wls_general", 0) + int(todo.sum())
        y = np.zeros((C, K), np.int64)
        todo = np.ones(P, bool)
        if self.fast_path and self.rounding == "cells" and chunk.totals is None:
            y[:], ok = round_cells_fast(chunk, xhat)
            todo = ~ok
            stats["rounding_fast"] = stats.get("rounding_fast", 0) + int(ok.sum())
        if todo.any():
            sub, kids = chunk.subset(todo)
            y[kids] = self.solve_general(sub, parent_ids[todo], "rounding", xhat[kids])
            stats["rounding_general"] = stats.get("rounding_general", 0) + int(todo.sum())
        return y

    def solve_general(self, chunk: LevelChunk, parent_ids: np.ndarray, stage: str,
                      xhat: np.ndarray | None = None) -> np.ndarray:
        """One stage through the solver registry, ``chunk_parents`` parents per posed Problem."""
        P, C, K = chunk.shape
        out = np.zeros((C, K))
        for s in range(0, P, self.chunk_parents):
            keep = np.zeros(P, bool)
            keep[s:s + self.chunk_parents] = True
            sub, kids = chunk.subset(keep) if self.chunk_parents < P else (chunk, np.arange(C))
            out[kids] = self._solve_stage(sub, parent_ids[keep], stage, None if xhat is None else xhat[kids])
        return out if stage == "continuous" else np.rint(out).astype(np.int64)

    def _solve_stage(self, chunk: LevelChunk, parent_ids: np.ndarray, stage: str,
                     xhat: np.ndarray | None) -> np.ndarray:
        from hierdp.models.problem import ProblemError
        from hierdp.solvers import solve
        from hierdp.solvers.base import SolverError

        _, C, K = chunk.shape
        npn = chunk.n_parent_nodes
        kp = chunk.parent_values.shape[1]
        problem = None
        try:
            if stage == "continuous":
                problem = continuous_problem(chunk)
                solver = self.solver
            else:
                assert xhat is not None
                problem = rounding_problem(chunk, xhat, queries=self.rounding == "queries")
                solver = self.rounder
            sol = solve(problem, solver, time_limit=self.time_limit, **self.solver_options)
        except (SolverError, ProblemError) as exc:
            groups = getattr(exc, "groups", None)
            failing = parent_ids
            if groups is not None and len(groups) and problem is not None:
                anchors = problem.group_anchors()[np.asarray(groups, np.int64)]
                failing = parent_ids[np.unique(anchors[anchors < npn] // kp)]
            raise ParentSolveFailed(exc, failing, stage) from exc
        return np.asarray(sol.values, dtype=float)[npn:].reshape(C, K)
