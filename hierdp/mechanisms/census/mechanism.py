"""The Census-style TopDown over a geographic spine (paper 003 with the DAS's post-processing).

**Measurement** (Theorems 1 and 3): every measured geounit u (γ_u > 0) answers every query group q
of the :class:`~hierdp.mechanisms.census.strategy.QueryStrategy` with independent noise at budget
``total · γ_u · α_q``: discrete Gaussian with σ² = Δ₂²/(2ρ γ α) (ρ-zCDP) or geometric with scale
Δ₁/(ε γ α) (pure ε-DP), where Δ₂² = 2m² and Δ₁ = 2m for bounded neighbours (Lemma 4: a query group's
columns each hold one 1). Scales are rounded in the safe direction. Unmeasured geounits (γ = 0,
bypassed) get no noise at all. The whole release is ρ-zCDP (ε-DP) because γ summed along every
root-to-block path is 1 (the spine's Theorem 3 check); the ledger records, per geolevel, the
increase of the largest path sum reached so far, so it states exactly what has been spent at every
moment (an aborted run never understates it).

**Post-processing** (the DAS's two stages), geolevel by geolevel, per parent:

1. weighted least squares (weights 1/variance) over the children's query answers, subject to
   consistency with the parent in every cell and non-negativity (a convex QP);
2. an integer rounder: L1 distance of all query answers to the continuous solution, over
   floor + {0, 1} per cell, keeping consistency (a MIP).

Both are problem kinds of the solver registry over a :class:`~hierdp.models.histogram.LevelChunk`
(:mod:`.level_solver`): with ``fast_path=True`` (default) the exact structured plug-ins
``histogram_wls`` (KKT-certified per parent) and ``histogram_cells`` go first, and the parents they
do not certify go to ``solver`` / ``rounder`` (registry plug-ins, checked before any noise).
Children are measured batch by batch, when their parents are solved. Single-child parents are
copied down; all-zero parents give all-zero children (they are not expanded). The root is estimated
the same way under its public total: the level-wise engine sees one level above the spine, a
virtual node holding the total (:class:`~.spine_tree.SpineTree`). **Invariants**:
``invariant_levels`` (a prefix of geolevels, default the root) are published exactly; the release
states every invariant beyond the root as an assumption. **Constraints** (``constraints=``) reach
each chunk as the :class:`LevelChunk`'s per-(child, cell) bounds and rows over its (child, cell)
variables, which the solver chain honours.

**The level-wise engine** (:mod:`hierdp.mechanisms.levelwise`): the same loop, accounting path,
engines and checkpoints as every TopDown. Seeded noise is counter-based: answer ``a`` of geounit
``u`` at engine level ``l`` draws from the stream of key ``u · A + a`` (A: the strategy's answers
per geounit), so a seeded release is the same on the serial, process and Dask engines
(``engine=`` / ``executor=``) and after a resume (``release(..., checkpoint=DIR)`` /
``resume=DIR``). The per-parent solve runs in *batches* of whole parents of about
``batch_children`` children, cut by the driver for the whole level (chunks end only between
batches), so every engine solves the same batches: the vectorized solve sees the same inputs
whatever the engine. Secure mode draws from the OS with the exact samplers.

A solver failure inside a geolevel raises :class:`~hierdp.mechanisms.base.ReleaseAborted` naming the
parent geounit(s), with the spends recorded so far; no partial release is returned.
"""

from __future__ import annotations

import itertools
import time
from fractions import Fraction
from typing import Any, NamedTuple
from collections.abc import Iterable

import numpy as np

from hierdp._segments import gather_ranges
from hierdp.mechanisms.base import MechanismParameterError, ReleaseAborted, RunContext
from hierdp.mechanisms.census.level_solver import CensusLevelSolver, ParentSolveFailed
from hierdp.mechanisms.census.problems import LevelChunk
from hierdp.mechanisms.census.spine_tree import SpineTree
from hierdp.mechanisms.census.strategy import QueryStrategy
from hierdp.mechanisms.levelwise import LevelState, LevelwiseMechanism, level_randomness
from hierdp.privacy.budget import Accountant, Budget
from hierdp.privacy.calibration import exact
from hierdp.privacy.noise import NoiseModel, noise_model
from hierdp.privacy.unit import PrivacyUnit
from hierdp.release import ReleaseLevel
from hierdp.release.histogram import NodeHistogramRelease
from hierdp.scale.levels import ChunkFailed, ChunkResult
from hierdp.spines.core import Spine, SpineError

__all__ = ["CensusTopDown", "SpineHistograms"]


class SpineHistograms:
    """Block-level histograms over a spine: the data of a Census-style TopDown.

    Args:
        spine: the (possibly optimized) :class:`~hierdp.spines.Spine`.
        counts: ``(n_blocks, K)`` non-negative integer counts, rows in the spine's block order, or a
            ``pandas.DataFrame`` indexed by block id with K columns (reordered to the spine).
    """

    def __init__(self, spine: Spine, counts: Any) -> None:
        if not isinstance(spine, Spine):
            raise MechanismParameterError("SpineHistograms needs a hierdp.spines.Spine")
        if hasattr(counts, "reindex") and hasattr(counts, "columns"):
            pos = spine.block_positions(counts.index, what="counts")
            if np.unique(pos).size != pos.size or pos.size != spine.n_blocks:
                raise SpineError("counts: the frame must list every block of the spine exactly once")
            arr = np.empty((spine.n_blocks, counts.shape[1]), dtype=object)
            arr[pos] = counts.to_numpy()
            counts = arr
        arr = np.asarray(counts)
        if arr.ndim != 2 or arr.shape[0] != spine.n_blocks:
            raise MechanismParameterError(f"counts must have shape (n_blocks={spine.n_blocks}, K), got {arr.shape}")
        self.spine = spine
        if arr.dtype.kind in "iu" and arr.dtype.itemsize <= 8 and arr.dtype != np.uint64:
            # integers: checked and kept without a float copy (10^5 blocks x 2,016 cells is 1.6 GB)
            if arr.size and arr.min() < 0:
                b, k = np.argwhere(arr < 0)[0]
                raise MechanismParameterError(f"counts: block {spine.block_names[b]!r}, cell {k} has {arr[b, k]} "
                                              "(counts must be non-negative integers)")
            self.counts = arr.astype(np.int64, copy=False)
            return
        try:
            f = arr.astype(float)
        except (TypeError, ValueError):
            raise MechanismParameterError("counts must be numbers") from None
        bad = ~np.isfinite(f) | (f < 0) | (f != np.round(f))
        if bad.any():
            b, k = np.argwhere(bad)[0]
            raise MechanismParameterError(f"counts: block {spine.block_names[b]!r}, cell {k} has {f[b, k]:g} "
                                          "(counts must be non-negative integers)")
        self.counts = f.astype(np.int64)

    @property
    def domain_source(self) -> str:
        """The spine's: its geography is public input."""
        return self.spine.domain_source

    @property
    def domain_assumption(self) -> str | None:
        """The spine's domain assumption, if any."""
        return self.spine.domain_assumption

    @property
    def n_cells(self) -> int:
        """Number of histogram cells K."""
        return int(self.counts.shape[1])

    def true_histograms(self) -> _TrueHistograms:
        """The true histograms of every geounit without a dense copy of the blocks'."""
        return _TrueHistograms(self.spine, self.counts)

    def geounit_histograms(self) -> np.ndarray:
        """True ``(n_geounits, K)`` histograms (sums of their blocks)."""
        s = self.spine
        out = np.zeros((s.n, self.n_cells), np.int64)
        out[s.blocks] = self.counts
        ptr = s.level_ptr
        for lev in range(s.block_level, 0, -1):
            kids = np.arange(ptr[lev], ptr[lev + 1])
            np.add.at(out, s.parent[kids], out[kids])
        return out


class _TrueHistograms:
    """True histograms by geounit: the geounits above the blocks summed once (sparse products, level
    by level), the blocks read from the counts (no copy)."""

    def __init__(self, spine: Spine, counts: np.ndarray) -> None:
        from scipy import sparse

        ptr = spine.level_ptr
        self.first_block = int(ptr[spine.block_level])
        self.counts = counts
        self.block_pos = np.empty(spine.n - self.first_block, np.int64)
        self.block_pos[np.asarray(spine.blocks) - self.first_block] = np.arange(spine.n_blocks)
        K = counts.shape[1]
        self.upper = np.zeros((self.first_block, K), np.int64)
        below: np.ndarray = counts
        below_nodes = np.asarray(spine.blocks)
        for lev in range(spine.block_level, 0, -1):
            lo, hi = int(ptr[lev - 1]), int(ptr[lev])
            par = spine.parent[below_nodes] - lo
            agg = sparse.csr_matrix((np.ones(par.size, np.int64), (par, np.arange(par.size))), shape=(hi - lo, par.size))
            self.upper[lo:hi] = agg @ below
            below, below_nodes = self.upper[lo:hi], np.arange(lo, hi)

    def rows(self, idx: np.ndarray) -> np.ndarray:
        """The histograms of geounits ``idx`` (all of one geolevel)."""
        idx = np.asarray(idx, np.int64)
        if idx.size and idx[0] >= self.first_block:
            return self.counts[self.block_pos[idx - self.first_block]]
        return self.upper[idx]

    @property
    def total(self) -> int:
        """The root's total."""
        return int(self.upper[0].sum()) if self.first_block else int(self.counts.sum())


def _variance(noise: NoiseModel, param: float) -> float:
    """Variance of one noise draw (the WLS weight is its inverse)."""
    if noise.calculus == "pure":
        q = np.exp(-1.0 / param)  # discrete Laplace with scale b: 2q / (1 - q)^2
        return float(2.0 * q / (1.0 - q) ** 2)
    return float(param)  # discrete Gaussian: below sigma^2 by < 3e-7 for sigma^2 >= 1 (paper fn. 6)


class _Plan(NamedTuple):
    """What a census run fixes before any noise (sent to the workers once, with the mechanism)."""

    groups: list[str]              #: the strategy's query groups, in order
    det: str | None                #: the detailed group's name, if any
    mats: dict[str, np.ndarray]    #: each non-detailed group's (R_q, K) matrix
    first: dict[str, int]          #: the first answer index of each group (answers of a geounit: 0 .. A-1)
    n_answers: int                 #: A
    gnums: np.ndarray              #: the distinct γ numerators of measured geounits (sorted)
    param: np.ndarray              #: (geolevels, len(gnums), len(groups)) noise parameters (NaN: share 0)
    variance: np.ndarray           #: the same shape: variances of one draw
    weight: np.ndarray             #: the same shape: WLS weights (1 / variance; 0 where not measured)
    parts: list[Fraction]          #: per geolevel, the increase of the largest path share
    sens: int                      #: the sensitivity of every group's answers
    invariant: frozenset[int]      #: geolevels whose totals are invariant
    level_measured: list[int]      #: per geolevel, its measured geounits
    level_gnums: list[np.ndarray]  #: per geolevel, the γ numerators of its measured geounits
    queries: Any = None            #: the strategy's MarginalQueries (every group, in order): exact answers
    structure: Any = None          #: the MarginalQueries of the non-detailed groups (a LevelChunk's queries)


class _Job(NamedTuple):
    """What every chunk of a level needs besides the tree and the plan."""

    L: int                 #: the parents' engine level (geolevel L - 1; 0: the virtual total)
    source: Any            #: the run's randomness
    batch_of_row: np.ndarray  #: per row of the parents' level, its solve batch (fixed by the driver)
    constraints: Any = None  #: the level's constraints over (geounit, cell) keys (LevelConstraints)


class _CensusTask:
    """The engine's task of a census run: the mechanism (without its engine) and the run's plan."""

    def __init__(self, mech: CensusTopDown, plan: _Plan) -> None:
        self.mech = mech
        self.plan = plan
        self.chunk_children = mech.chunk_children

    def run_chunk(self, tree: SpineTree, job: _Job, rows: np.ndarray, parent_keys: np.ndarray,
                  parent_values: np.ndarray, parent_paths: np.ndarray | None) -> ChunkResult:
        return self.mech._run_census_chunk(tree, self.plan, job, rows, parent_keys, parent_values)


class _StageFailed(ChunkFailed):
    """A census chunk failed in one stage of the per-parent solve (the stage travels with it)."""

    def __init__(self, cause: BaseException, parent_keys: np.ndarray, stage: str) -> None:
        super().__init__(cause, parent_keys)
        self.stage = stage

    def __reduce__(self) -> tuple:
        return (_StageFailed, (self.cause, self.parent_keys, self.stage))


class CensusTopDown(LevelwiseMechanism):
    """Census-style TopDown over a spine (see the module docstring).

    Args:
        epsilon, delta / rho / budget: the privacy spec (one of them).
        strategy: the :class:`QueryStrategy` (default: total + detailed cells, equal shares).
        noise: ``"discrete_gaussian"`` (ρ-zCDP, default) or ``"geometric"`` (pure ε-DP).
        unit, bounded, contributions: the privacy unit (bounded neighbours, as the Census).
        invariant_levels: geolevels (names or numbers, a prefix from the root) whose histograms'
            totals are published exactly; default the root under bounded neighbours, none otherwise.
        solver: registered plug-in(s) of the continuous stage for the parents the structured
            ``histogram_wls`` does not certify (or for all with ``fast_path=False``): a name, a
            plug-in or a list; ``"auto"`` (default): the dense oracle ``histogram_wls_dense`` on
            histograms of at most 512 cells, then the first general solver that accepts the
            translated Problem (HiGHS). Checked before any noise (``hierdp solvers``).
        rounder: registered plug-in(s) of the integer rounder after ``histogram_cells``; ``"auto"``
            (default): the first general solver that accepts the translated MIP.
        rounding: the rounder's objective: ``"cells"`` (default; L1 over the cells: a
            transportation problem, totally unimodular, fast) or ``"queries"`` (L1 over every query
            answer, the DAS's objective; an exact MIP that HiGHS solves in seconds per parent).
        solver_options: options passed to both (e.g. ``{"executor": pool}``).
        time_limit: seconds per solver call (one chunk of parents); default
            :data:`~.level_solver.DEFAULT_TIME_LIMIT` (120 s) for the general solvers.
        chunk_parents: parents per posed Problem (bounded memory; each is solved parent by parent).
        fast_path: solve both stages with the exact structured plug-ins first (``histogram_wls``,
            ``histogram_cells``; default True); parents they cannot certify go to ``solver`` /
            ``rounder``.
        max_active_set_updates: active-set updates the fast WLS path may take per parent before it
            hands the parent to ``solver`` (default 50; 0 accepts only the first guess).
        batch_children: children per vectorized fast-path batch (default 512: its K x K arrays stay
            in cache, measured 2x faster than 8192 at K = 24; memory ~K² · 24 bytes per child; a
            parent with more children is one batch).
        secure: OS randomness and exact samplers (real releases).
        engine, executor: where geolevels run (``"serial"``, ``"processes"``, ``"dask"`` or an
            engine object; :mod:`hierdp.scale.executors`); a seeded release is the same on each.
        constraints: a :class:`~hierdp.Constraints` (or the path of a constraint file) over the
            geounits and cells (DAS-style: ``add_cell_rule(..., levels=[...])`` edit constraints,
            ``add_zero(node, cells=[...])`` structural zeros, ``add_invariant(node, value,
            cells=[...])``, bounds and rows over geounit quantities); resolved against the spine
            and checked for feasibility before any noise, carried up where they aggregate exactly,
            and honoured in every geounit by the per-parent solve (:mod:`.constrained`). Public
            input: stated in the accounting; the noise and the ledger do not change.
    """

    name = "CensusTopDown"

    def __init__(self, epsilon: float | None = None, delta: float | None = None, *, rho: float | None = None,
                 budget: Budget | None = None, strategy: QueryStrategy | None = None,
                 noise: str | NoiseModel = "discrete_gaussian", unit: PrivacyUnit | None = None, bounded: bool = True,
                 contributions: int = 1, distinct: bool = False, secure: bool = False, conversion: str = "analytic",
                 invariant_levels: Iterable[str | int] | None = None, solver: Any = "auto", rounder: Any = "auto",
                 solver_options: dict[str, Any] | None = None, time_limit: float | None = None,
                 chunk_parents: int = 200, rounding: str = "cells", fast_path: bool = True,
                 max_active_set_updates: int = 50, batch_children: int = 512, engine: Any = None,
                 executor: Any = None, constraints: Any = None) -> None:
        self.set_engine(engine, executor)
        self.constraints = _read_constraints(constraints)
        if rounding not in ("cells", "queries"):
            raise MechanismParameterError(f"rounding must be 'cells' or 'queries', got {rounding!r}")
        self.rounding = rounding
        self.noise = noise_model(noise)
        self.resolve_privacy(epsilon, delta, rho, budget, unit=unit, bounded=bounded, contributions=contributions,
                             distinct=distinct, conversion=conversion, calculus=self.noise.calculus, secure=secure)
        if strategy is not None and not isinstance(strategy, QueryStrategy):
            raise MechanismParameterError("strategy must be a hierdp.mechanisms.census.QueryStrategy")
        self.strategy = strategy
        self.invariant_levels = None if invariant_levels is None else list(invariant_levels)
        if not self.unit.bounded and self.invariant_levels:
            raise MechanismParameterError("invariant_levels: with unbounded neighbours no total is public")
        from hierdp.solvers import registry

        for what, s in (("solver", solver), ("rounder", rounder)):
            for one in (s if isinstance(s, (list, tuple)) else [s]):
                if isinstance(one, str) and one != "auto":
                    try:
                        registry.get(one)
                    except KeyError as exc:
                        raise MechanismParameterError(f"{what}: {exc.args[0]}") from None
        self.solver, self.rounder = solver, rounder
        self.solver_options = dict(solver_options or {})
        self.time_limit = time_limit
        if isinstance(chunk_parents, bool) or int(chunk_parents) < 1:
            raise MechanismParameterError(f"chunk_parents must be a positive integer, got {chunk_parents!r}")
        self.chunk_parents = int(chunk_parents)
        for what, v in (("max_active_set_updates", max_active_set_updates), ("batch_children", batch_children)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < (0 if what[0] == "m" else 1):
                raise MechanismParameterError(f"{what} must be a {'non-negative' if what[0] == 'm' else 'positive'} "
                                              f"integer, got {v!r}")
        self.fast_path = bool(fast_path)
        self.max_active_set_updates = int(max_active_set_updates)
        self.batch_children = int(batch_children)
        self.level_solver = CensusLevelSolver(solver=solver, rounder=rounder, rounding=rounding,
                                              solver_options=self.solver_options, time_limit=time_limit,
                                              chunk_parents=self.chunk_parents, fast_path=self.fast_path,
                                              max_active_set_updates=self.max_active_set_updates)

    @property
    def _culprit(self) -> str:
        s = self.spec
        if s.epsilon_target is not None:
            return f"epsilon={s.epsilon_target!r}"
        return ", ".join(f"{k}={v!r}" for k, v in s.budget.parameters.items())

    @property
    def solver_name(self) -> str:
        """``"<continuous solver>+<rounder>"``."""
        def name(s: Any) -> str:
            if isinstance(s, (list, tuple)):
                return ",".join(name(x) for x in s)
            return s if isinstance(s, str) else getattr(s, "name", str(s))

        fast = self.fast_path
        return f"{'histogram_wls,' if fast else ''}{name(self.solver)}+{'histogram_cells,' if fast else ''}" \
               f"{name(self.rounder)}"

    def params(self) -> dict[str, Any]:
        p = super().params()
        p.update({"noise": self.noise.name, "solver": self.solver_name, "invariant_levels": self.invariant_levels,
                  "rounding": self.rounding, "fast_path": self.fast_path,
                  "strategy": None if self.strategy is None else self.strategy.describe()})
        if getattr(self, "constraints", None) is not None:
            p["constraints"] = self.constraints.digest()  # part of a checkpoint's identity
        return p

    # ------------------------------------------------------------------ run
    def release(self, data: Any, *, seed: int | None = None, rng: Any = None, secure: bool | None = None,
                accountant: Accountant | None = None, progress: bool = False, checkpoint: Any = None,
                resume: Any = None) -> NodeHistogramRelease:
        """Run on ``data`` (a :class:`SpineHistograms`).

        Args:
            seed, rng, secure, accountant, progress: as every mechanism.
            checkpoint, resume: a directory where every finished geolevel is written / a checkpoint
                to continue (:mod:`hierdp.scale.checkpoint`, docs/scale.md).

        Raises:
            ObservedDomainError: the spine's geography was not declared public.
            BudgetExceeded: the accountant cannot pay; nothing is spent.
            CheckpointError: a checkpoint of another input, other parameters or another seed.
            ReleaseAborted: a solver failed inside a geolevel (the parent is named; spends attached).
        """
        spine, counts = getattr(data, "spine", None), getattr(data, "counts", None)
        if not isinstance(spine, Spine) or counts is None:
            raise MechanismParameterError("CensusTopDown releases a SpineHistograms (a spine with block histograms)")
        spine.check_path_sums()  # Theorem 3, exactly, before any noise
        if not self.unit.bounded:
            raise MechanismParameterError("the Census-style TopDown needs the root total invariant (bounded "
                                          "neighbours); unbounded releases are not supported")
        K = int(counts.shape[1])
        strategy = self._strategy(K)
        plan = self._plan(spine, strategy)
        self._check_solvers(spine, plan)
        tree = SpineTree(data)
        ctx, state = self._release_levels(tree, data, plan, seed=seed, rng=rng, secure=secure, accountant=accountant,
                                          progress=progress, checkpoint=checkpoint, resume=resume)
        return self._make_release(tree, ctx, state, False, plan)

    def measure(self, data: Any, *, seed: int | None = None, rng: Any = None, secure: bool | None = None,
                accountant: Accountant | None = None, batch_geounits: int = 4096) -> Any:
        """Only the measurement: every measured geounit's noisy answers to every query group, with
        the ledger of :meth:`release` (the same spends, recorded before each geolevel's noise), as
        :class:`~hierdp.mechanisms.census.measurements.NoisyMeasurements` (``.accounting`` set;
        ``.write_parquet(path)`` writes the measurements file).

        A seeded measurement draws exactly the noise :meth:`release` with the same seed draws, so
        post-processing the measurements (:class:`~hierdp.mechanisms.census.CensusPostProcess`)
        gives that release. The answers are the noisy outputs of the mechanism: publishing them is
        covered by the guarantee, like the Census Bureau's noisy measurement files.

        Raises:
            as :meth:`release` (before any noise).
        """
        from hierdp.mechanisms.census.measurements import NoisyMeasurements

        spine, counts = getattr(data, "spine", None), getattr(data, "counts", None)
        if not isinstance(spine, Spine) or counts is None:
            raise MechanismParameterError("CensusTopDown measures a SpineHistograms (a spine with block histograms)")
        spine.check_path_sums()
        if not self.unit.bounded:
            raise MechanismParameterError("the Census-style TopDown needs the root total invariant (bounded "
                                          "neighbours); unbounded releases are not supported")
        strategy = self._strategy(int(counts.shape[1]))
        plan = self._plan(spine, strategy)
        tree = SpineTree(data)
        ctx = self.start(data, seed=seed, rng=rng, secure=secure, accountant=accountant)
        source = self._noise_source(ctx, None, given=True, seed=seed)
        answers = np.full((spine.n, plan.n_answers), np.nan)
        variances = np.full((spine.n, len(plan.groups)), np.nan)
        state = LevelState(list(tree.level_names))
        ptr = spine.level_ptr
        for lev in range(spine.n_levels):
            self._spend_level(ctx, lev + 1, state, plan)
            idx = np.arange(ptr[lev], ptr[lev + 1])
            idx = idx[spine.measured[idx]]
            for s in range(0, idx.size, max(1, int(batch_geounits))):
                u = idx[s:s + batch_geounits]
                answers[u], _ = self._noisy_answers(tree, plan, source, lev, u, tree.true_rows(u))
                variances[u] = plan.variance[lev, np.searchsorted(plan.gnums, spine.gamma_num[u])]
        acc = ctx.accounting(details={"noise": self.noise.name, "measured_geounits": int(spine.measured.sum()),
                                      "strategy": strategy.describe()},
                             notes=("the noisy measurements only (not post-processed)",))
        return NoisyMeasurements(spine, strategy, answers, variances, accounting=acc, params=ctx.params())

    def _strategy(self, K: int) -> QueryStrategy:
        strategy = self.strategy or QueryStrategy((K,), {"total": (), "detailed": (0,)},
                                                  {"total": Fraction(1, 2), "detailed": Fraction(1, 2)})
        if strategy.n_cells != K:
            raise MechanismParameterError(f"strategy has {strategy.n_cells} cells; the data has {K}")
        return strategy

    def _plan(self, spine: Spine, strategy: QueryStrategy) -> _Plan:
        """Every noise scale now, before any noise: one per (geolevel, geounit proportion, group
        share; a group with share 0 at a geolevel is not measured there)."""
        inv_levels = self._invariant_levels(spine)
        groups = list(strategy.groups)
        det = strategy.detailed
        queries = strategy.queries
        sizes = [int(queries.n_answers(j)) for j in range(len(groups))]
        mats = {g: strategy.group_matrix(g) for g in groups if g != det}
        first = dict(zip(groups, np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int).tolist(), strict=True))
        total = exact(self.spec.budget, "budget")
        sens = self.noise.sensitivity(self.unit, finest=False)
        gnums = np.unique(spine.gamma_num[spine.measured]).astype(np.int64)
        param = np.full((spine.n_levels, gnums.size, len(groups)), np.nan)
        ptr = spine.level_ptr
        meas = [np.flatnonzero(spine.measured[ptr[lev]:ptr[lev + 1]]) + ptr[lev] for lev in range(spine.n_levels)]
        for lev in range(spine.n_levels):
            shares = strategy.shares_at(spine.level_names[lev])
            for gnum in np.unique(spine.gamma_num[meas[lev]]).tolist():
                i = int(np.searchsorted(gnums, gnum))
                for j, g in enumerate(groups):
                    if shares[g] > 0:
                        amount = total * Fraction(int(gnum), spine.gamma_den) * shares[g]
                        param[lev, i, j] = self.noise.calibrate(amount, sens, culprit=self._culprit)
        variance = np.full(param.shape, np.nan)
        has = ~np.isnan(param)
        variance[has] = [_variance(self.noise, float(x)) for x in param[has]]
        weight = np.where(has, 1.0 / np.where(has, variance, 1.0), 0.0)
        return _Plan(groups, det, mats, first, int(sum(sizes)), gnums, param, variance, weight,
                     self._level_parts(spine), sens, frozenset(inv_levels), [int(m.size) for m in meas],
                     [np.unique(spine.gamma_num[m]) for m in meas], queries,
                     strategy.query_structure([g for g in groups if g != det]))

    def _check_solvers(self, spine: Spine, plan: _Plan) -> None:
        """The solver layer's refusal before any noise: a probe of this release's shape (public
        structure only: the histogram, the largest fanout, invariant totals, constraints) through
        every plug-in."""
        from hierdp.solvers.base import UnsupportedProblem

        ptr, _ = spine.children_csr()
        fanout = int(np.diff(ptr).max(initial=1))
        constrained = self.constraints is not None
        try:
            self.level_solver.check(plan.structure, max_children=fanout, root=False,
                                    totals=len(plan.invariant) > 1, bounds=constrained, rows=constrained)
        except UnsupportedProblem as exc:
            raise MechanismParameterError(f"solver: {exc}") from None

    def _task(self, prep: _Plan) -> _CensusTask:
        mech = self.for_workers()
        assert isinstance(mech, CensusTopDown)
        return _CensusTask(mech, prep)

    def _level_cells(self, tree: Any, L: int) -> int | None:
        return 1 if L == 0 else int(tree.n_cells)

    # ------------------------------------------------------------------ the loop's hooks
    def _release_root(self, tree: SpineTree, ctx: RunContext, state: LevelState, source: Any, prep: _Plan) -> None:
        """Level 0: the virtual node holding the public total (nothing measured)."""
        state.levels.append(ReleaseLevel(np.array([0], np.int64), np.array([-1], np.int64),
                                         np.array([[tree.root_count]], np.int64)))
        state.paths.append(None)
        state.timings.append(0.0)
        state.stats.append({"released": 1})

    def _spend_level(self, ctx: RunContext, L: int, state: LevelState, prep: _Plan) -> None:
        """Record geolevel L - 1's spend before its noise (drawn in the chunks)."""
        lev = L - 1
        part = prep.parts[lev]
        amount = self.spec.budget._scaled(part) if part > 0 else Budget._zero(self.spec.budget.calculus)
        used = prep.param[lev][np.isin(prep.gnums, prep.level_gnums[lev])].ravel()
        used = np.unique(used[~np.isnan(used)])
        n = prep.level_measured[lev]
        details: dict[str, Any] = {"noise": self.noise.name, "measured_geounits": n,
                   self.noise.sensitivity_name: self.noise.sensitivity_value(prep.sens), "path_share": str(part),
                   "note": f"({n} measured geounit(s), path share {part})"}
        if used.size:
            details[f"{self.noise.parameter_name}_min"] = float(used[0])
            details[f"{self.noise.parameter_name}_max"] = float(used[-1])
        ctx.spend(amount, f"geolevel {lev} ({state.names[L]})", **details)

    def _level_job(self, L: int, state: LevelState, source: Any, plan: Any, prep: _Plan, rows: np.ndarray,
                   cuts: np.ndarray | None) -> _Job:
        batch_of_row = np.full(len(state.levels[-1]), -1, np.int64)
        if cuts is not None:
            batch_of_row[rows] = np.searchsorted(cuts, np.arange(rows.size), side="right")
        return _Job(L - 1, source, batch_of_row, plan)

    def _parents_to_expand(self, tree: Any, state: LevelState, L: int, plan: Any
                           ) -> tuple[np.ndarray, np.ndarray | None]:
        """The non-zero parents in order, cut into solve batches of whole parents with about
        ``batch_children`` children (a wider parent alone): chunks end only between batches, so the
        per-parent solve sees the same batches on every engine."""
        prev = state.levels[-1]
        alive = np.flatnonzero((np.asarray(prev.values) > 0).any(axis=1))
        allowed = None
        if plan is not None and plan.couples_parents and L >= 2:  # parents a row couples: one batch
            from hierdp.mechanisms.levelwise import coupled_order

            alive, allowed = coupled_order(alive, _parent_components(plan, prev.keys[alive], int(tree.n_cells)))
        sizes = tree.child_counts(L - 1, prev.keys[alive])
        weight = np.where((sizes > 1) | (L == 1), sizes, 0)  # single children are copied, not solved
        ends = []
        if alive.size:
            cum = np.cumsum(weight)
            start = 0
            while start < alive.size:  # one step per batch, not per parent
                base = cum[start - 1] if start else 0
                start = max(int(np.searchsorted(cum, base + self.batch_children, side="right")), start + 1)
                if allowed is not None:  # end a batch only between coupled components
                    start = int(allowed[np.searchsorted(allowed, start)])
                ends.append(start)
        return alive, np.asarray(ends, dtype=np.int64)

    # ------------------------------------------------------------------ constraints
    def _resolve_constraints(self, tree: Any) -> Any:
        """Bind the constraint set to the spine's (geounit, cell) variables, carry it up and check
        it for feasibility under the public total (public structure only, before any noise)."""
        if self.constraints is None:
            return None
        from hierdp.mechanisms.census.spine_tree import SpineCells

        cells = SpineCells(tree, self._strategy(int(tree.n_cells)).cell_labels())
        return self.constraints.resolve(cells, root_public=True, time_limit=max(60.0, float(self.time_limit or 0)))

    def _level_plan(self, state: LevelState, L: int) -> Any:
        """Engine level L's constraints once levels 0 .. L - 1 are released (None without any).

        Raises:
            ConstraintsInfeasible: a row over released (fixed) cells only does not hold.
        """
        resolved = state.constraints
        if resolved is None:
            return None
        plan = resolved.at_level(L, _cell_levels(state.levels))
        if plan.fixed_violations:
            from hierdp.constraints import ConstraintsInfeasible

            shown = "; ".join(f"{plan.rows.name[r]!r} reads {act:,.0f}" for r, act in plan.fixed_violations[:5])
            raise ConstraintsInfeasible(f"rows whose cells are all fixed once the geolevels above "
                                        f"{state.names[L]} were released do not hold: {shown}",
                                        entries=[str(plan.rows.name[r]) for r, _ in plan.fixed_violations], level=L)
        return plan if plan.has_work else None

    # ------------------------------------------------------------------ one chunk (on any engine)
    def _run_census_chunk(self, tree: SpineTree, plan: _Plan, job: _Job, rows: np.ndarray, parent_keys: np.ndarray,
                          parent_values: np.ndarray) -> ChunkResult:
        """Expand, measure and solve the children of some parents of engine level ``job.L`` (see
        the module docstring); returns the children released non-zero."""
        t0, cpu0 = time.perf_counter(), time.process_time()
        child_keys, offsets, true = tree.expand(job.L, parent_keys)
        sizes = np.diff(offsets)
        C, K = true.shape
        out = np.zeros((C, K), np.int64)
        st: dict[str, Any] = {"parents": 0, "children": int(C), "released": 0, "chunks": 1,
                              "max_group": int(sizes.max(initial=0)), "wls_fast": 0, "wls_general": 0,
                              "rounding_fast": 0, "rounding_general": 0, "max_active_set_updates": 0,
                              "expand_s": time.perf_counter() - t0, "noise_s": 0.0, "solve_s": 0.0}
        below_total = job.L == 0  # the root, under the virtual node holding the public total
        single = (sizes == 1) & (not below_total)
        out[offsets[:-1][single]] = parent_values[single]  # a single child equals its parent
        solved = np.flatnonzero(~single & (sizes > 0))
        batch = job.batch_of_row[rows[solved]]
        cuts = np.concatenate([[0], np.flatnonzero(np.diff(batch)) + 1, [solved.size]]) if solved.size else [0]
        lev = job.L  # the children's geolevel
        for s, e in itertools.pairwise(np.asarray(cuts).tolist()):
            ps = solved[s:e]
            kids, _ = gather_ranges(offsets[:-1][ps], sizes[ps])
            t1 = time.perf_counter()
            chunk, row_names = self._chunk_of(tree, plan, job, lev, child_keys[kids], true[kids], parent_values[ps],
                                              np.repeat(np.arange(ps.size), sizes[ps]), below_total)
            t2 = time.perf_counter()
            try:
                out[kids] = self._solve_batch(chunk, parent_keys[ps], row_names, st)
            except ParentSolveFailed as failed:
                raise _StageFailed(failed.cause, failed.parents, failed.stage) from failed.cause
            st["noise_s"] += t2 - t1
            st["solve_s"] += time.perf_counter() - t2
        keep = out.any(axis=1)
        st["released"] = int(keep.sum())
        st["cpu_s"] = time.process_time() - cpu0
        return ChunkResult(child_keys[keep], np.repeat(rows, sizes)[keep], out[keep], None, st)

    def _solve_batch(self, chunk: LevelChunk, parent_ids: np.ndarray, row_names: np.ndarray | None,
                     st: dict[str, Any]) -> np.ndarray:
        """One batch of parents through the level solver (both stages; a chunk's constraints are
        its bounds and rows), the answer checked exactly in integers against them. A constrained
        batch that has no solution names its rows (they cannot hold under the released parents)."""
        constrained = chunk.n_rows or chunk.lower is not None or chunk.upper is not None
        try:
            out = self.level_solver.solve(chunk, parent_ids, st)
        except ParentSolveFailed as failed:
            from hierdp.constraints.feasibility import is_infeasible

            if not constrained or not is_infeasible(failed.cause):
                raise
            from hierdp.constraints.errors import ConstraintsInfeasible

            names = [str(n) for n in (row_names if row_names is not None else [])]
            shown = ", ".join(repr(n) for n in names[:5]) + (" ..." if len(names) > 5 else "")
            cause = ConstraintsInfeasible(f"the public constraints cannot hold under the released parents: "
                                          f"{'rows ' + shown if names else 'the cell bounds'} ({failed.cause})",
                                          entries=names)
            raise ParentSolveFailed(cause, failed.parents, failed.stage) from failed.cause
        if constrained:
            _check_constraints(chunk, out, parent_ids)
            st["constrained_parents"] = st.get("constrained_parents", 0) + int(chunk.shape[0])
        return out

    def _chunk_of(self, tree: SpineTree, plan: _Plan, job: _Job, lev: int, kids: np.ndarray, true: np.ndarray,
                  parent_values: np.ndarray, child_parent: np.ndarray, below_total: bool
                  ) -> tuple[LevelChunk, np.ndarray | None]:
        """The children's measurements (:meth:`_noisy_answers`) and their constraints (the level's
        plan, as per-(child, cell) bounds and rows over the chunk's (child, cell) variables) as a
        :class:`LevelChunk` of their parents, and the names of its rows (None without rows)."""
        C, K = len(kids), int(tree.n_cells)
        answers, weights = self._noisy_answers(tree, plan, job.source, lev, kids, true)
        measured = ~np.isnan(answers).all(axis=1) if answers.shape[1] else np.zeros(C, bool)
        if not below_total and not measured.all():
            u = kids[~measured][0]
            raise SpineError(f"geounit {tree.spine.names[u]!r} is unmeasured but has siblings")
        targets = np.full((C, K), np.nan)
        tw = np.zeros(C)
        qa, qw = [], []
        for j, g in enumerate(plan.groups):
            ans = answers[:, plan.first[g]:plan.first[g] + int(plan.queries.n_answers(j))]
            if g == plan.det:
                targets, tw = ans, weights[:, j]
            else:
                qa.append(ans)
                qw.append(weights[:, j])
        totals = tree.totals(kids) if lev in plan.invariant and not below_total else None
        cell_map = np.zeros(K, np.int64) if below_total else None
        fields: dict[str, Any] = {}
        names = None
        if job.constraints is not None:
            block = job.constraints.block((kids[:, None] * K + np.arange(K)[None, :]).ravel())
            if block is not None and not block.empty:
                if block.child_lower is not None and block.child_upper is not None:
                    fields["lower"] = np.asarray(block.child_lower, float).reshape(C, K)
                    fields["upper"] = np.asarray(block.child_upper, float).reshape(C, K)
                if block.n_rows:
                    fields.update(rows=block.matrix, row_lower=block.lower, row_upper=block.upper)
                    names = np.asarray(block.names, dtype=object)
        mats = [plan.mats[g] for g in plan.groups if g != plan.det]
        return LevelChunk(parent_values, child_parent, targets, tw, mats, qa, qw, totals, cell_map,
                          queries=plan.structure, **fields), names

    def _noisy_answers(self, tree: SpineTree, plan: _Plan, source: Any, lev: int, kids: np.ndarray,
                       true: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The geounits' noisy answers to every query group, drawn now: ``(C, A)`` (NaN where a
        geounit is unmeasured, or a group has no share at its geolevel; answer ``a`` of geounit
        ``u`` of geolevel ``lev`` draws from the counter stream of key ``u · A + a`` at engine
        level ``lev + 1`` in seeded mode) and the WLS weights ``(C, n_groups)`` (0 where none)."""
        C = len(kids)
        measured = tree.measured(kids)
        m = np.flatnonzero(measured)
        answers = np.full((C, plan.n_answers), np.nan)
        weights = np.zeros((C, len(plan.groups)))
        if not m.size:
            return answers, weights
        gi = np.searchsorted(plan.gnums, tree.gamma_num(kids[m]))  # row of each measured geounit in the tables
        rows = true[m]
        for j, g in enumerate(plan.groups):
            params = plan.param[lev, gi, j]
            if np.isnan(params).all():  # no share of the budget at this geolevel: not measured
                continue
            exact_answers = plan.queries.answer(j, rows)  # integer marginals, O(K) per geounit
            R = exact_answers.shape[1]
            keys = (kids[m, None] * plan.n_answers + plan.first[g] + np.arange(R)[None, :]).ravel()
            noise = self.noise.draw(np.repeat(params, R), keys.size, level_randomness(source, lev + 1, keys))
            answers[m, plan.first[g]:plan.first[g] + R] = exact_answers + np.asarray(noise).reshape(m.size, R)
            weights[m, j] = plan.weight[lev, gi, j]
        return answers, weights

    # ------------------------------------------------------------------ the release
    def _make_release(self, tree: SpineTree, ctx: RunContext, state: LevelState, partial: bool,
                      prep: _Plan) -> NodeHistogramRelease:
        spine = tree.spine
        K = tree.n_cells
        est = np.zeros((spine.n, K), np.int64)
        for lv in state.levels[1:]:
            est[lv.keys] = lv.values
        strategy = self._strategy(K)
        stats, timings = [], {}
        for st, wall, name in zip(state.stats[1:], state.timings[1:], spine.level_names, strict=False):
            # counts only (their values follow the noisy histograms); seconds go to the timings
            stats.append({"geolevel": name, **{k: v for k, v in st.items()
                                              if k != "cpu_by_worker" and not k.endswith("_s")}})
            timings[f"{name}_wall"] = float(wall)  # the geolevel, start to end, on this process's clock
            timings[f"{name}_noise"] = float(st.get("noise_s", 0.0))
            timings[f"{name}_solve"] = float(st.get("solve_s", 0.0))
            timings[f"{name}_cpu"] = float(st.get("cpu_s", 0.0))  # CPU seconds of the level's chunks, all workers'
            if st.get("cpu_by_worker"):
                timings[f"{name}_cpu_busiest_worker"] = float(max(st["cpu_by_worker"].values()))
        extra = [f"the totals of geolevel {spine.level_names[lv]!r} are invariant (published exactly, outside the "
                 "differential privacy guarantee)" for lv in sorted(prep.invariant) if lv > 0]
        details: dict[str, Any] = {"noise": self.noise.name, "measured_geounits": int(spine.measured.sum()),
                                   "strategy": strategy.describe()}
        notes: tuple[str, ...] = ()
        if state.constraints is not None:
            from hierdp.constraints.report import accounting_parts

            details["constraints"], notes = accounting_parts(state.constraints, on_infeasible="abort",
                                                             level_names=state.names)
        acc = ctx.accounting(assumptions=extra, partial=partial, details=details, notes=notes)
        return NodeHistogramRelease(
            names=spine.names, parent=spine.parent, level=spine.level, level_names=list(spine.level_names),
            cells=strategy.cell_labels(), values=est, accounting=acc, mechanism=self.name, solver=self.solver_name,
            params=ctx.params(post_processing=stats), timings=timings,
            level_totals=int(tree.root_count) if 0 in prep.invariant else None)

    def _abort(self, tree: Any, ctx: RunContext, state: LevelState, L: int, cause: BaseException,
               parent_keys: np.ndarray | None, prep: Any, failure: ChunkFailed | None = None) -> ReleaseAborted:
        spine = tree.spine
        lev = L - 1
        stage = f", {failure.stage} stage" if isinstance(failure, _StageFailed) else ""
        where = f"at geolevel {lev} ({spine.level_names[lev]}){stage}"
        names = None
        if parent_keys is not None and len(parent_keys):
            names = np.asarray(spine.names[np.asarray(parent_keys, np.int64)], dtype=object)
            shown = [str(x) for x in names[:5]]
            more = f" and {len(names) - 5} more" if len(names) > 5 else ""
            where += f", parent {', '.join(shown)}{more}"
        return ctx.aborted(cause, where=where, level=lev, level_name=spine.level_names[lev], parents=names)

    def _invariant_levels(self, spine: Spine) -> list[int]:
        levels = self.invariant_levels
        if levels is None:
            return [0] if self.unit.bounded else []
        try:
            idx = sorted({spine.level_index(lv) for lv in levels})
        except SpineError as exc:
            raise MechanismParameterError(f"invariant_levels: {exc}") from None
        if idx != list(range(len(idx))):
            raise MechanismParameterError(f"invariant_levels must be a prefix of the geolevels from the root, got "
                                          f"{[spine.level_names[i] for i in idx]}")
        if self.unit.bounded and 0 not in idx:
            raise MechanismParameterError("invariant_levels: under bounded neighbours the root total is public; "
                                          "include the root")
        return idx

    @staticmethod
    def _level_parts(spine: Spine) -> list[Fraction]:
        """Per geolevel, the increase of the largest root-to-geounit path sum (exact fractions)."""
        acc = spine.gamma_num.copy()
        ptr = spine.level_ptr
        out, prev = [], 0
        for lev in range(spine.n_levels):
            idx = np.arange(ptr[lev], ptr[lev + 1])
            if lev:
                acc[idx] += acc[spine.parent[idx]]
            cur = int(acc[idx].max())
            out.append(Fraction(cur - prev, spine.gamma_den))
            prev = cur
        return out


def _read_constraints(constraints: Any) -> Any:
    """A constraint set, read now when given as a file path (a bad file is refused before any data)."""
    if constraints is None:
        return None
    import os

    from hierdp.constraints import Constraints

    if not isinstance(constraints, Constraints):
        if not isinstance(constraints, (str, os.PathLike)):
            raise MechanismParameterError(f"constraints must be a hierdp.Constraints or the path of a constraint file, "
                                          f"got {type(constraints).__name__}")
        constraints = Constraints.read(constraints)
    return constraints if len(constraints) else None


class _CellLevel(NamedTuple):
    keys: np.ndarray
    values: np.ndarray


def _cell_levels(levels: list[Any]) -> list[_CellLevel]:
    """Released levels as the cell view names them (key ``u * K + k`` per geounit u and cell k)."""
    out = []
    for lv in levels:
        v = np.asarray(lv.values)
        K = v.shape[1]
        out.append(_CellLevel((np.asarray(lv.keys, np.int64)[:, None] * K + np.arange(K)[None, :]).ravel(),
                              v.ravel()))
    return out


def _parent_components(plan: Any, parent_keys: np.ndarray, K: int) -> np.ndarray:
    """Per census parent, the component of the parents a constraint row couples (-1: none): a
    parent joins every component one of its cells is in."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n = parent_keys.size
    lab = plan.coupling((parent_keys[:, None] * K + np.arange(K)[None, :]).ravel()).reshape(n, K)
    p, k = np.nonzero(lab >= 0)
    if not p.size:
        return np.full(n, -1, np.int64)
    labels, inv = np.unique(lab[p, k], return_inverse=True)
    m = n + labels.size
    graph = coo_matrix((np.ones(p.size), (p, n + inv.ravel())), shape=(m, m))
    _, comp = connected_components(graph, directed=False)
    out = comp[:n].astype(np.int64)
    out[~(lab >= 0).any(axis=1)] = -1
    return out


def _check_constraints(chunk: LevelChunk, values: np.ndarray, parent_ids: np.ndarray) -> None:
    """The chunk's bounds and rows hold for the integer ``values``, checked exactly in integers.

    Raises:
        ParentSolveFailed: naming the parents of a broken row or bound (stage ``"constraints"``).
    """
    from hierdp.constraints.errors import ConstraintsInfeasible

    C, K = values.shape
    v = np.asarray(values, np.int64)
    bad = np.zeros(C, bool)
    if chunk.lower is not None:
        bad |= (v < np.ceil(chunk.lower - 1e-9)).any(axis=1)
    if chunk.upper is not None:
        bad |= (v > np.floor(chunk.upper + 1e-9)).any(axis=1)
    if chunk.n_rows:
        r = chunk.rows
        coef = np.rint(r.data).astype(np.int64)
        act = np.zeros(r.shape[0], np.int64)
        np.add.at(act, np.repeat(np.arange(r.shape[0]), np.diff(r.indptr)), coef * v.ravel()[r.indices])
        lo = np.asarray(chunk.row_lower, float)
        hi = np.asarray(chunk.row_upper, float)
        broken = (np.isfinite(lo) & (act < lo)) | (np.isfinite(hi) & (act > hi))
        if broken.any():
            bad[np.unique(r[np.flatnonzero(broken)].indices // K)] = True
    if bad.any():
        parents = parent_ids[np.unique(chunk.child_parent[bad])]
        raise ParentSolveFailed(ConstraintsInfeasible("the solver's integer answer breaks a public constraint "
                                                      "(a row or a cell bound)"), parents, "constraints")
