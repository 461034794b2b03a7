"""Post-processing of noisy measurements made elsewhere: the Census-style TopDown without its noise.

The Census Bureau publishes the noisy measurements of the 2020 Disclosure Avoidance System, and
researchers post-process them again - with other objectives, integer and non-negative, on one
machine or a cluster. :class:`CensusPostProcess` reads
:class:`~hierdp.mechanisms.census.measurements.NoisyMeasurements` (a measurements file, or what
:meth:`CensusTopDown.measure <hierdp.mechanisms.census.CensusTopDown.measure>` drew) and runs only
the post-processing of the Census-style TopDown over the spine, geolevel by geolevel, per parent:

* ``objective="l2"`` (default): the DAS's two stages - weighted least squares (weights 1/variance)
  under consistency and non-negativity, then the integer rounder - exactly as
  :class:`~hierdp.mechanisms.census.CensusTopDown` does after its own noise (same solver, same
  batches): post-processing the measurements that ``CensusTopDown(...).measure(data, seed=s)``
  wrote gives ``CensusTopDown(...).release(data, seed=s)``, value for value;
* ``objective="l1"``: integer, non-negative, consistent children closest to the noisy answers in
  the sum of standardized absolute deviations ``sum |answer - noisy| / sd`` over every answer of
  every query group;
* ``objective="linf"``: the same, minimizing per parent the largest standardized deviation over
  its children's answers; both are integer programs posed per chunk of parents as
  :class:`~hierdp.models.Problem` s and solved through the solver registry (``solver=``, default
  ``"highs"``), sized for small histograms (their models grow with children x cells).

It runs on the level-wise engine of every TopDown (:mod:`hierdp.mechanisms.levelwise`): any engine
(``engine=``), progress, checkpoints and resume. **Accounting**: hierdp draws no noise and spends no
budget. The release says so; its guarantee is the one the measurements were published with, which
hierdp cannot check - state it with ``measurement_budget=`` (e.g. ``Budget.zcdp(2.63)``) to have it
carried, as stated, into the release (post-processing never weakens it); without it the release
states no guarantee. Public inputs: the spine, the strategy, the total (and any invariant totals).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any

import numpy as np
from scipy import sparse

from hierdp.mechanisms.base import MechanismParameterError, RunContext
from hierdp.mechanisms.census.level_solver import ParentSolveFailed
from hierdp.mechanisms.census.measurements import NoisyMeasurements
from hierdp.mechanisms.census.mechanism import CensusTopDown, _Plan
from hierdp.mechanisms.census.problems import LevelChunk
from hierdp.mechanisms.levelwise import LevelState
from hierdp.privacy.budget import Accountant, Budget
from hierdp.privacy.spec import PrivacySpec
from hierdp.privacy.unit import PrivacyUnit
from hierdp.release.accounting import Accounting
from hierdp.release.histogram import NodeHistogramRelease

__all__ = ["OBJECTIVES", "CensusPostProcess", "PostProcessingAccounting"]

#: what the post-processing minimizes
OBJECTIVES = ("l2", "l1", "linf")

_MADE_ELSEWHERE = ("post-processing of noisy measurements made elsewhere: hierdp drew no noise and spent no "
                   "privacy budget")


@dataclass(frozen=True, kw_only=True)
class PostProcessingAccounting(Accounting):
    """The accounting of a release post-processed from given measurements: no spend; the guarantee
    is the measurements' own, as the user stated it (``declared``), or none."""

    declared: bool = False

    @cached_property
    def guarantees(self) -> tuple[Any, ...]:
        return super().guarantees if self.declared else ()

    def text(self) -> str:
        if self.declared:
            return (f"{super().text()} - the guarantee the measurements were published with, as stated by the user "
                    f"(not checked by hierdp); {_MADE_ELSEWHERE}")
        return f"no guarantee stated: {_MADE_ELSEWHERE} (the measurements' publisher states their guarantee)"


class _MeasuredTree:
    """The spine with given measurements, as the level-wise engine walks it (no counts)."""

    def __init__(self, measurements: NoisyMeasurements, total: int, totals: np.ndarray | None) -> None:
        from hierdp.mechanisms.census.spine_tree import TOTAL_LEVEL, _SpineNamer

        spine = measurements.spine
        self.spine = spine
        self.n_cells = int(measurements.strategy.n_cells)
        self.answers = measurements.answers
        with np.errstate(divide="ignore"):
            self.weights = np.where(np.isnan(measurements.variances), 0.0, 1.0 / measurements.variances)
        self._totals = totals
        self._ptr, self._child = spine.children_csr()
        self.n_levels = int(spine.n_levels) + 1
        self.level_names = [TOTAL_LEVEL, *[str(x) for x in spine.level_names]]
        self.root_key = 0
        self.root_count = int(total)
        self.namer = _SpineNamer(np.asarray(spine.names, dtype=object))
        self.domain_source = spine.domain_source
        self.domain_assumption = spine.domain_assumption
        self._fingerprint: str | None = None

    def expand(self, level: int, parent_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        from hierdp._segments import gather_ranges

        pk = np.asarray(parent_keys, dtype=np.int64)
        if level == 0:
            kids, offsets = np.zeros(pk.size, np.int64), np.arange(pk.size + 1, dtype=np.int64)
        else:
            starts = self._ptr[pk]
            pos, offsets = gather_ranges(starts, self._ptr[pk + 1] - starts)
            kids = self._child[pos]
        return kids, offsets, np.zeros((kids.size, self.n_cells), np.int64)  # no counts: only the structure

    def child_counts(self, level: int, parent_keys: np.ndarray) -> np.ndarray:
        pk = np.asarray(parent_keys, dtype=np.int64)
        return np.ones(pk.size, np.int64) if level == 0 else (self._ptr[pk + 1] - self._ptr[pk]).astype(np.int64)

    def totals(self, keys: np.ndarray) -> np.ndarray:
        assert self._totals is not None
        return self._totals[np.asarray(keys, dtype=np.int64)]

    def measured(self, keys: np.ndarray) -> np.ndarray:
        return ~np.isnan(self.answers[np.asarray(keys, dtype=np.int64)]).all(axis=1)

    def key_names(self, level: int, keys: np.ndarray) -> np.ndarray:
        return self.namer.key_names(level, keys)

    def fingerprint(self) -> str:
        """SHA-256 of the spine, the measurements and the public totals."""
        if self._fingerprint is None:
            import hashlib

            import pandas as pd

            s = self.spine
            h = hashlib.sha256()
            for part in ("hierdp.MeasuredSpine/1", *s.level_names, str(self.root_count)):
                h.update(str(part).encode("utf-8") + b"\0")
            for arr in (s.parent, s.level):
                h.update(np.ascontiguousarray(arr, dtype=np.int64).tobytes())
            for farr in (self.answers, self.weights):
                h.update(np.ascontiguousarray(farr, dtype=np.float64).tobytes())
            if self._totals is not None:
                h.update(np.ascontiguousarray(self._totals, dtype=np.int64).tobytes())
            h.update(pd.util.hash_array(np.asarray(s.names, dtype=object).astype(str).astype(object)).tobytes())
            self._fingerprint = h.hexdigest()
        return self._fingerprint


class _IntegerChunkSolver:
    """The per-parent integer L1 / L∞ solve of a chunk, posed as one Problem through the registry."""

    def __init__(self, objective: str, solver: Any, time_limit: float | None, options: dict[str, Any]) -> None:
        self.objective, self.solver, self.time_limit, self.options = objective, solver, time_limit, options

    def solve(self, chunk: LevelChunk, parent_ids: np.ndarray, stats: dict[str, Any]) -> np.ndarray:
        from hierdp.models.problem import ProblemError
        from hierdp.solvers import solve
        from hierdp.solvers.base import SolverError

        P, C, K = chunk.shape
        stats["parents"] = stats.get("parents", 0) + P
        try:
            problem = self.problem(chunk)
            sol = solve(problem, self.solver, time_limit=self.time_limit, **self.options)
        except (SolverError, ProblemError) as exc:
            raise ParentSolveFailed(exc, parent_ids, f"integer {self.objective}") from exc
        stats["integer_solves"] = stats.get("integer_solves", 0) + 1
        return np.rint(np.asarray(sol.values)[chunk.n_parent_nodes:]).astype(np.int64).reshape(C, K)

    def problem(self, chunk: LevelChunk) -> Any:
        """The chunk's Problem (see the module docstring)."""
        from hierdp.models import Problem

        P, C, K = chunk.shape
        kp = chunk.parent_values.shape[1]
        npn = chunk.n_parent_nodes
        parent = np.concatenate([np.full(npn, -1, np.int64),
                                 (chunk.child_parent[:, None] * kp + chunk.cell_map[None, :]).ravel()])
        fixed = np.concatenate([chunk.parent_values.astype(float).ravel(), np.full(C * K, np.nan)])
        nodes = npn + np.arange(C * K, dtype=np.int64)
        # every answer as a query term (the detailed one is the identity): answers (C, R) with the
        # group's matrix; a child's weight is 1/sd of its group
        blocks = [(np.eye(K), chunk.targets, chunk.target_weight)] if not np.isnan(chunk.targets).all() else []
        blocks += list(zip(chunk.query_mats, chunk.query_answers, chunk.query_weight, strict=True))
        if self.objective == "l1":
            p = Problem(parent, np.full(npn + C * K, np.nan), fixed=fixed, objective="l1", integer=True,
                        nonnegative=True)
            for q, (mat, ans, w) in enumerate(blocks):
                rows = np.flatnonzero(~np.isnan(ans).any(axis=1))
                if rows.size:
                    p.add_query_terms(_per_child(mat, rows, C), ans[rows].ravel(),
                                      np.repeat(np.sqrt(w[rows]), mat.shape[0]), nodes=nodes, name=f"group {q}")
        else:
            p = Problem(parent, np.full(npn + C * K, np.nan), fixed=fixed, objective="linf", integer=True,
                        nonnegative=True)
            for parent_index in range(P):  # one L∞ block per parent: its children's answers
                kids = np.flatnonzero(chunk.child_parent == parent_index)
                mats, targets, weights = [], [], []
                for mat, ans, w in blocks:
                    rows = kids[~np.isnan(ans[kids]).any(axis=1)]
                    if rows.size:
                        mats.append(_per_child(mat, rows, C))
                        targets.append(ans[rows].ravel())
                        weights.append(np.repeat(np.sqrt(w[rows]), mat.shape[0]))
                if mats:
                    p.add_query_terms(sparse.vstack(mats, format="csr"), np.concatenate(targets),
                                      np.concatenate(weights), nodes=nodes, name=f"parent {parent_index}")
        if chunk.totals is not None:
            mat = sparse.kron(sparse.identity(C, format="csr"), sparse.csr_matrix(np.ones((1, K))), format="csr")
            t = chunk.totals.astype(float)
            p.add_constraints(mat, t, t, nodes=nodes, name="invariant total")
        return p


def _per_child(mat: np.ndarray, rows: np.ndarray, C: int) -> Any:
    """``kron(I_C, mat)`` restricted to children ``rows`` (CSR over the children's cell columns)."""
    block = sparse.kron(sparse.identity(C, format="csr"), sparse.csr_matrix(mat), format="csr")
    keep = (rows[:, None] * mat.shape[0] + np.arange(mat.shape[0])[None, :]).ravel()
    return block[keep]


class CensusPostProcess(CensusTopDown):
    """Post-process given noisy measurements over their spine (see the module docstring).

    Args:
        objective: ``"l2"`` (the DAS's WLS and rounder, default), ``"l1"`` or ``"linf"``.
        solver, rounder, rounding, solver_options, time_limit, chunk_parents, fast_path,
            max_active_set_updates, batch_children: as :class:`CensusTopDown` (``solver`` is the
            integer solver of ``"l1"`` / ``"linf"``).
        invariant_levels: geolevels (a prefix from the root) whose totals are fixed; their totals
            are given to :meth:`release`.
        measurement_budget: the guarantee the measurements were published with (a
            :class:`~hierdp.privacy.budget.Budget`), stated by the user; ``delta`` for its
            (ε, δ) figures.
        engine, executor: where geolevels run.
    """

    name = "post-processing of given measurements"

    def __init__(self, *, objective: str = "l2", solver: Any = "highs", rounder: Any = "highs",
                 rounding: str = "cells", solver_options: dict[str, Any] | None = None,
                 time_limit: float | None = None, chunk_parents: int = 200, fast_path: bool = True,
                 max_active_set_updates: int = 50, batch_children: int = 512,
                 invariant_levels: Any = None, measurement_budget: Budget | None = None,
                 delta: float | None = None, engine: Any = None, executor: Any = None) -> None:
        if objective not in OBJECTIVES:
            raise MechanismParameterError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
        if measurement_budget is not None and not isinstance(measurement_budget, Budget):
            raise MechanismParameterError(f"measurement_budget must be a hierdp.privacy.Budget, got "
                                          f"{type(measurement_budget).__name__}")
        super().__init__(rho=1.0, solver=solver, rounder=rounder, rounding=rounding, solver_options=solver_options,
                         time_limit=time_limit, chunk_parents=chunk_parents, fast_path=fast_path,
                         max_active_set_updates=max_active_set_updates, batch_children=batch_children,
                         invariant_levels=invariant_levels, engine=engine, executor=executor)
        self.objective = objective
        self.measurement_budget = measurement_budget
        # the run's ledger needs a total; nothing is ever spent from it, and the release states the
        # declared budget or none (PostProcessingAccounting)
        budget = measurement_budget if measurement_budget is not None else Budget.zcdp(1)
        self.spec = PrivacySpec(budget, delta, None)
        self.unit = PrivacyUnit.resolve(None, bounded=True, contributions=1, distinct=False)
        if objective != "l2":
            self.level_solver: Any = _IntegerChunkSolver(objective, solver, time_limit, self.solver_options)

    @property
    def solver_name(self) -> str:
        if self.objective == "l2":
            return super().solver_name
        return self.solver if isinstance(self.solver, str) else getattr(self.solver, "name", str(self.solver))

    def params(self) -> dict[str, Any]:
        strategy = self.strategy
        return {"objective": self.objective, "solver": self.solver_name, "rounding": self.rounding,
                "fast_path": self.fast_path, "invariant_levels": self.invariant_levels,
                "strategy": None if strategy is None else dict(strategy.groups),
                "measurement_budget": None if self.measurement_budget is None else str(self.measurement_budget),
                "delta": self.spec.delta}

    def release(self, data: Any, *, total: int | None = None, invariant_totals: Any = None, seed: Any = None,
                rng: Any = None, secure: bool | None = None, accountant: Accountant | None = None,
                progress: bool = False, checkpoint: Any = None, resume: Any = None) -> NodeHistogramRelease:
        """Post-process ``data`` (:class:`NoisyMeasurements`, or the path of a measurements file
        written by hierdp - another file needs :meth:`NoisyMeasurements.read_parquet` with its
        spine).

        Args:
            total: the public total (the root's), required.
            invariant_totals: totals of every geounit of the invariant levels below the root (a
                mapping of geounit name -> total, or a ``pandas.Series``), if any.
            progress, checkpoint, resume: as every TopDown (``seed``/``rng``/``secure`` are not
                used: nothing is drawn).

        Raises:
            MechanismParameterError: a missing or negative total, missing invariant totals, an
                unmeasured geounit with siblings (all before any solve).
        """
        if not isinstance(data, NoisyMeasurements):
            raise MechanismParameterError("CensusPostProcess post-processes NoisyMeasurements "
                                          "(hierdp.mechanisms.census.NoisyMeasurements.read_parquet(path, spine))")
        if accountant is not None:
            raise MechanismParameterError("accountant: post-processing spends no budget; nothing would be charged")
        if total is None or isinstance(total, bool) or int(total) != total or total < 0:
            raise MechanismParameterError(f"total must be the public total (a non-negative integer), got {total!r}")
        spine = data.spine
        strategy = data.strategy
        if self.strategy is not None and dict(self.strategy.groups) != dict(strategy.groups):
            raise MechanismParameterError("the measurements answer another strategy than the one given")
        measured = data.measured
        nch = spine.n_children
        lonely = np.flatnonzero(~measured & (spine.parent >= 0))
        lonely = lonely[nch[spine.parent[lonely]] > 1]
        if lonely.size:
            raise MechanismParameterError(f"geounit {spine.names[lonely[0]]!r} has no measurement but has siblings; "
                                          "only single children may go unmeasured")
        if not measured[0]:
            raise MechanismParameterError(f"the root geounit {spine.names[0]!r} has no measurement")
        self.strategy = strategy
        plan = self._post_plan(spine, strategy)
        totals = self._totals(spine, plan, invariant_totals)
        tree = _MeasuredTree(data, int(total), totals)
        ctx, state = self._release_levels(tree, _Domain(spine), plan, seed=None, rng=None, secure=False,
                                          accountant=None, progress=progress, checkpoint=checkpoint, resume=resume)
        return self._make_release(tree, ctx, state, False, plan)

    def _post_plan(self, spine: Any, strategy: Any) -> _Plan:
        """The census plan without noise: the strategy's layout, no noise scales."""
        inv = self._invariant_levels(spine)
        groups = list(strategy.groups)
        det = strategy.detailed
        queries = strategy.queries
        sizes = [int(queries.n_answers(j)) for j in range(len(groups))]
        first = dict(zip(groups, np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int).tolist(), strict=True))
        mats = {g: strategy.group_matrix(g) for g in groups if g != det}
        none = np.zeros((spine.n_levels, 0, len(groups)))
        return _Plan(groups, det, mats, first, int(sum(sizes)), np.zeros(0, np.int64), none, none, none,
                     [Fraction(0)] * spine.n_levels, 0, frozenset(inv), [0] * spine.n_levels,
                     [np.zeros(0, np.int64)] * spine.n_levels, queries,
                     strategy.query_structure([g for g in groups if g != det]))

    def _totals(self, spine: Any, plan: _Plan, given: Any) -> np.ndarray | None:
        below = sorted(lv for lv in plan.invariant if lv > 0)
        if not below:
            return None
        if given is None:
            raise MechanismParameterError(f"invariant_totals: give the totals of geolevel(s) "
                                          f"{[spine.level_names[lv] for lv in below]}")
        items = dict(given.items()) if hasattr(given, "items") else dict(given)
        out = np.full(spine.n, -1, np.int64)
        for lv in below:
            idx = np.flatnonzero(spine.level == lv)
            for u in idx.tolist():
                v = items.get(spine.names[u])
                if v is None or int(v) != v or v < 0:
                    raise MechanismParameterError(f"invariant_totals: geounit {spine.names[u]!r} needs a non-negative "
                                                  f"integer total, got {v!r}")
                out[u] = int(v)
        return out

    # -- the loop's hooks: nothing drawn, nothing spent -------------------------------------------
    def _noise_source(self, ctx: RunContext, run: Any, *, given: bool, seed: Any) -> Any:
        return None

    def _spend_level(self, ctx: RunContext, L: int, state: LevelState, prep: _Plan) -> None:
        return None

    def _noisy_answers(self, tree: Any, plan: _Plan, source: Any, lev: int, kids: np.ndarray,
                       true: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The given answers and weights (1 / variance) of the geounits."""
        return tree.answers[kids], tree.weights[kids]

    def _make_release(self, tree: Any, ctx: RunContext, state: LevelState, partial: bool,
                      prep: _Plan) -> NodeHistogramRelease:
        rel = super()._make_release(tree, ctx, state, partial, prep)
        acc = rel.accounting
        declared = self.measurement_budget is not None
        fields = {k: getattr(acc, k) for k in ("mechanism", "unit", "delta", "spends", "assumptions")}
        notes = (_MADE_ELSEWHERE, *acc.notes)
        details = {**{k: v for k, v in acc.details.items() if k not in ("noise", "measured_geounits", "ledger")},
                   "objective": self.objective, "measurements": "given (made elsewhere)", "spent_by_hierdp": None,
                   "measurement_budget": None if not declared else str(self.measurement_budget)}
        total = self.measurement_budget if self.measurement_budget is not None else Budget._zero("zcdp")
        rel.accounting = PostProcessingAccounting(**fields, total=total, notes=notes, details=details,
                                                  declared=declared)
        rel.params = {**rel.params, "randomness": "none (post-processing)", "seed": None}
        return rel


class _Domain:
    """What the domain check reads: the spine's statement (its geography is public input)."""

    def __init__(self, spine: Any) -> None:
        self.domain_source = spine.domain_source
        self.domain_assumption = spine.domain_assumption
