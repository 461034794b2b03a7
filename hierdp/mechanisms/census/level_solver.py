"""The per-parent post-processing of the Census-style TopDown: one chunk of parents in, integer
histograms out.

This is the seam between the level loop (:mod:`.mechanism`: which parents, their measurements,
the ledger) and the solve: the loop builds a :class:`~hierdp.models.histogram.LevelChunk` and
calls :meth:`CensusLevelSolver.solve`. Both stages are problem kinds of the solver registry
(:class:`~hierdp.models.histogram.HistogramWLS`, :class:`~hierdp.models.histogram.HistogramRounding`)
solved by a *chain* of registered plug-ins (:func:`hierdp.solvers.kinds.solve_parents`), each
taking the parents the previous ones did not solve:

* stage 1 (weighted least squares): ``histogram_wls`` (structured, KKT-certified; with
  ``fast_path``), then ``solver`` (``"auto"``: the dense oracle ``histogram_wls_dense`` on
  histograms of at most 512 cells, then the general QP solver through the Problem translation);
* stage 2 (rounding): ``histogram_cells`` (closed form, exact; with ``fast_path``), then
  ``rounder`` (``"auto"``: the general MIP solver through the Problem translation).

:meth:`CensusLevelSolver.check` is the refusal before any noise: a probe chunk of the release's
shape through :func:`hierdp.solvers.kinds.check`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hierdp.models.histogram import HistogramRounding, HistogramWLS, LevelChunk
from hierdp.models.marginals import MarginalQueries
from hierdp.solvers.kinds import GENERAL_AUTO

__all__ = ["DEFAULT_TIME_LIMIT", "CensusLevelSolver", "ParentSolveFailed", "probe_chunk"]

#: seconds per general-solver call (one posed Problem) when the caller sets no time limit
DEFAULT_TIME_LIMIT = 120.0


class ParentSolveFailed(Exception):
    """A stage failed on some parents of a chunk.

    Attributes:
        cause: the solver's exception; parents: the failing parents (ids the caller passed);
        stage: ``"continuous"`` or ``"rounding"``.
    """

    def __init__(self, cause: BaseException, parents: np.ndarray, stage: str) -> None:
        super().__init__(str(cause))
        self.cause, self.parents, self.stage = cause, np.asarray(parents, np.int64), stage


def probe_chunk(queries: MarginalQueries, *, children: int = 2, root: bool = False, totals: bool = False,
                bounds: bool = False, rows: bool = False) -> LevelChunk:
    """A one-parent chunk of the release's shape (no data: it carries only public structure), to
    ask plug-ins before any noise whether they take the release's problems."""
    K = queries.n_cells
    C = max(1, int(children))
    cell_map = np.zeros(K, np.int64) if root else None
    pv = np.full((1, 1 if root else K), float(C))
    ones = np.ones((C, K))
    mats = [queries.matrix(q) for q in range(queries.n_groups)] if K <= 4096 else []
    answers = [queries.answer(q, ones) for q in range(queries.n_groups)]
    weights = [np.ones(C) for _ in range(queries.n_groups)]
    if not mats:  # a huge histogram: the dense matrices are not needed to probe
        mats = [np.zeros((queries.n_answers(q), 0)) for q in range(queries.n_groups)]
    return LevelChunk(pv, np.zeros(C, np.int64), ones, np.ones(C), mats, answers, weights,
                      np.full(C, float(K)) if totals else None, cell_map, queries=queries,
                      upper=np.full((C, K), np.inf) if bounds else None,
                      rows=np.ones((1, C * K)) if rows else None, row_lower=np.zeros(1) if rows else None,
                      row_upper=np.full(1, np.inf) if rows else None)


@dataclass
class CensusLevelSolver:
    """How a chunk of parents is solved (both stages); see :class:`~.mechanism.CensusTopDown` for
    the meaning of each option."""

    solver: Any = "auto"
    rounder: Any = "auto"
    rounding: str = "cells"
    solver_options: dict[str, Any] = field(default_factory=dict)
    time_limit: float | None = None
    chunk_parents: int = 200
    fast_path: bool = True
    max_active_set_updates: int = 50

    def chains(self) -> tuple[list[Any], list[Any]]:
        """The plug-ins of both stages, in order (names or instances)."""
        def general(s: Any, dense: bool) -> list[Any]:
            if isinstance(s, (list, tuple)):
                return list(s)
            if s == "auto":
                return (["histogram_wls_dense"] if dense else []) + [GENERAL_AUTO]
            return [s]

        wls = (["histogram_wls"] if self.fast_path else []) + general(self.solver, self.fast_path)
        rnd = (["histogram_cells"] if self.fast_path else []) + general(self.rounder, False)
        return wls, rnd

    def check(self, queries: MarginalQueries, *, max_children: int = 2, root: bool = True, totals: bool = False,
              bounds: bool = False, rows: bool = False) -> None:
        """Refuse, before any noise, plug-ins that cannot take the release's problems.

        Every named plug-in must accept a small probe of the release's shape (e.g. ``intopt`` is
        refused: query-term objectives); without ``fast_path`` the first plug-in of each stage
        must also accept the largest parent (``max_children`` children) it will be given.

        Raises:
            UnsupportedProblem: with every plug-in's reason.
        """
        from hierdp.solvers import kinds

        wls, rnd = self.chains()
        small = probe_chunk(queries, children=2, root=root, totals=totals, bounds=bounds, rows=rows)
        xhat = np.ones(small.targets.shape)

        def named(s: Any, fast: str) -> list[Any]:  # the fast plug-in and what the caller named
            given = list(s) if isinstance(s, (list, tuple)) else [s]
            return ([fast] if self.fast_path else []) + [x for x in given if x not in ("auto", GENERAL_AUTO)]

        for s in named(self.solver, "histogram_wls"):
            kinds.check(s, HistogramWLS(small))
        for s in named(self.rounder, "histogram_cells"):
            kinds.check(s, HistogramRounding(small, xhat, self.rounding))
        if not self.fast_path:
            big = probe_chunk(queries, children=max_children, root=False, totals=totals, bounds=bounds, rows=rows)
            kinds.check(wls[0], HistogramWLS(big))
            kinds.check(rnd[0], HistogramRounding(big, np.ones(big.targets.shape), self.rounding))

    def _options(self) -> dict[str, dict[str, Any]]:
        return {"histogram_wls": {"max_rounds": self.max_active_set_updates},
                "histogram_wls_dense": {"max_active_set_updates": self.max_active_set_updates}}

    def solve(self, chunk: LevelChunk, parent_ids: np.ndarray, stats: dict[str, Any]) -> np.ndarray:
        """Both stages on one chunk; returns the ``(C, K)`` integer histograms and adds, per stage,
        the parents each plug-in solved to ``stats`` (``wls_<plug-in>``, ``rounding_<plug-in>``).

        Raises:
            ParentSolveFailed: a stage left parents unsolved; they are named by ``parent_ids``.
        """
        from hierdp.solvers.base import SolverError
        from hierdp.solvers.kinds import solve_parents

        P, _C, _K = chunk.shape
        stats["parents"] = stats.get("parents", 0) + P
        wls, rnd = self.chains()
        limit = DEFAULT_TIME_LIMIT if self.time_limit is None else self.time_limit
        opts = self._options()
        general = dict(self.solver_options)
        try:
            res = solve_parents(HistogramWLS(chunk), wls, time_limit=limit, max_parents=self.chunk_parents,
                                options={**{_name(s): general for s in wls if _name(s) not in opts}, **opts})
        except SolverError as exc:
            raise ParentSolveFailed(exc, parent_ids[_failing(exc, P)], "continuous") from exc
        _count(stats, "wls", res)
        xhat = res.values
        try:
            rres = solve_parents(HistogramRounding(chunk, xhat, self.rounding), rnd, time_limit=limit,
                                 max_parents=self.chunk_parents,
                                 options={_name(s): general for s in rnd if _name(s) != "histogram_cells"})
        except SolverError as exc:
            raise ParentSolveFailed(exc, parent_ids[_failing(exc, P)], "rounding") from exc
        _count(stats, "rounding", rres)
        return np.asarray(np.rint(rres.values), np.int64)


def _name(s: Any) -> str:
    return s if isinstance(s, str) else getattr(s, "name", str(s))


def _failing(exc: BaseException, P: int) -> np.ndarray:
    groups = getattr(exc, "groups", None)
    if groups is None or not len(groups):
        return np.arange(P)
    return np.asarray(groups, np.int64)


def _count(stats: dict[str, Any], stage: str, res: Any) -> None:
    fast = {"wls": "histogram_wls", "rounding": "histogram_cells"}[stage]
    for i, name in enumerate(res.solvers):
        n = int((res.solved_by == i).sum())
        if n:
            key = f"{stage}_{name}"
            stats[key] = stats.get(key, 0) + n
        kind = "fast" if name == fast else "general"
        stats[f"{stage}_{kind}"] = stats.get(f"{stage}_{kind}", 0) + n
    rounds = res.stats.get("histogram_wls", {}).get("rounds_max")
    if stage == "wls" and rounds is not None:
        stats["max_active_set_updates"] = max(stats.get("max_active_set_updates", 0), int(rounds))
