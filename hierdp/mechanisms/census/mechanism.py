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
copied down; all-zero parents give all-zero children.
The root is estimated the same way with its total fixed (bounded neighbours: the total is public).
**Invariants**: ``invariant_levels`` (a prefix of geolevels, default the root) are published exactly;
the release states every invariant beyond the root as an assumption.

A solver failure inside a geolevel raises :class:`~hierdp.mechanisms.base.ReleaseAborted` naming the
parent geounit(s), with the spends recorded so far; no partial release is returned.
"""

from __future__ import annotations

import time
from fractions import Fraction
from typing import Any
from collections.abc import Iterable

import numpy as np

from hierdp.mechanisms.base import Mechanism, MechanismParameterError, ReleaseAborted
from hierdp.mechanisms.census.level_solver import CensusLevelSolver, ParentSolveFailed
from hierdp.mechanisms.census.problems import LevelChunk
from hierdp.mechanisms.census.strategy import QueryStrategy
from hierdp.privacy.noise import NoiseModel, noise_model
from hierdp.privacy.budget import Accountant, Budget
from hierdp.privacy.calibration import exact
from hierdp.privacy.unit import PrivacyUnit
from hierdp.release.histogram import NodeHistogramRelease
from hierdp.spines.core import Spine, SpineError
import itertools

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


class CensusTopDown(Mechanism):
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
    """

    name = "CensusTopDown"

    def __init__(self, epsilon: float | None = None, delta: float | None = None, *, rho: float | None = None,
                 budget: Budget | None = None, strategy: QueryStrategy | None = None,
                 noise: str | NoiseModel = "discrete_gaussian", unit: PrivacyUnit | None = None, bounded: bool = True,
                 contributions: int = 1, distinct: bool = False, secure: bool = False, conversion: str = "analytic",
                 invariant_levels: Iterable[str | int] | None = None, solver: Any = "auto", rounder: Any = "auto",
                 solver_options: dict[str, Any] | None = None, time_limit: float | None = None,
                 chunk_parents: int = 200, rounding: str = "cells", fast_path: bool = True,
                 max_active_set_updates: int = 50, batch_children: int = 512) -> None:
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
        return p

    # ------------------------------------------------------------------ run
    def release(self, data: Any, *, seed: int | None = None, rng: Any = None, secure: bool | None = None,
                accountant: Accountant | None = None, progress: bool = False) -> NodeHistogramRelease:
        """Run on ``data`` (a :class:`SpineHistograms`).

        Raises:
            ObservedDomainError: the spine's geography was not declared public.
            BudgetExceeded: the accountant cannot pay; nothing is spent.
            ReleaseAborted: a solver failed inside a geolevel (the parent is named; spends attached).
        """
        spine, counts = getattr(data, "spine", None), getattr(data, "counts", None)
        if not isinstance(spine, Spine) or counts is None:
            raise MechanismParameterError("CensusTopDown releases a SpineHistograms (a spine with block histograms)")
        spine.check_path_sums()  # Theorem 3, exactly, before any noise
        K = int(counts.shape[1])
        strategy = self.strategy or QueryStrategy((K,), {"total": (), "detailed": (0,)}, {"total": Fraction(1, 2),
                                                                                           "detailed": Fraction(1, 2)})
        self._strategy = strategy
        if strategy.n_cells != K:
            raise MechanismParameterError(f"strategy has {strategy.n_cells} cells; the data has {K}")
        inv_levels = self._invariant_levels(spine)
        hist = data.true_histograms() if hasattr(data, "true_histograms") else \
            _TrueHistograms(spine, np.asarray(counts, np.int64))
        groups = list(strategy.groups)
        det = strategy.detailed
        mats = {g: strategy.group_matrix(g) for g in groups}
        total = exact(self.spec.budget, "budget")
        sens = self.noise.sensitivity(self.unit, finest=False)
        # every noise scale now, before any noise: one per (geolevel, geounit proportion, group share)
        params: dict[tuple[int, int, str], float] = {}
        ptr = spine.level_ptr
        for lev in range(spine.n_levels):
            shares = strategy.shares_at(spine.level_names[lev])
            idx = np.arange(ptr[lev], ptr[lev + 1])
            for gnum in np.unique(spine.gamma_num[idx][spine.measured[idx]]):
                for g in groups:
                    if shares[g] > 0:
                        amount = total * Fraction(int(gnum), spine.gamma_den) * shares[g]
                        params[(lev, int(gnum), g)] = self.noise.calibrate(amount, sens, culprit=self._culprit)
        self._check_solvers(spine, strategy, groups, det, inv_levels)
        parts = self._level_parts(spine)
        assumptions_extra = [f"the totals of geolevel {spine.level_names[lv]!r} are invariant (published exactly, "
                             "outside the differential privacy guarantee)" for lv in inv_levels if lv > 0]
        ctx = self.start(data, seed=seed, rng=rng, secure=secure, accountant=accountant)
        est = np.zeros((spine.n, K), np.int64)
        timings: dict[str, float] = {}
        n_measured = 0
        self._stats: list[dict[str, Any]] = []
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=spine.n_levels, desc=self.name, unit="geolevel")
        try:
            for lev in range(spine.n_levels):
                t0 = time.perf_counter()
                idx = np.arange(ptr[lev], ptr[lev + 1])
                meas = idx[spine.measured[idx]]
                part = parts[lev]
                self._spend(ctx, spine, lev, part, meas, params, sens)
                self._stats.append({"geolevel": spine.level_names[lev], "parents": 0, "wls_fast": 0, "wls_general": 0,
                                    "rounding_fast": 0, "rounding_general": 0, "max_active_set_updates": 0})
                clock = {"noise": 0.0}

                def measure(nodes: np.ndarray, lev: int = lev, clock: dict = clock) -> dict:
                    # the children of one batch of parents, measured when they are solved (a level
                    # of 10^5 blocks x 2,016 cells is never held at once)
                    t = time.perf_counter()
                    nodes = nodes[spine.measured[nodes]]
                    out = self._measure(hist, nodes, spine, groups, mats, params, ctx.rng, lev)
                    self._n_measured += nodes.size
                    clock["noise"] += time.perf_counter() - t
                    return out

                self._n_measured = 0
                try:
                    if lev == 0:
                        est[0] = self._root(hist, measure(meas), det, groups, mats, 0 in inv_levels)
                    else:
                        self._level(spine, lev, est, hist, measure, det, groups, mats, lev in inv_levels)
                except ParentSolveFailed as failed:
                    raise self._aborted(ctx, spine, lev, failed) from failed.cause
                n_measured += self._n_measured
                timings[f"{spine.level_names[lev]}_noise"] = clock["noise"]
                timings[f"{spine.level_names[lev]}_solve"] = time.perf_counter() - t0 - clock["noise"]
                if bar is not None:
                    bar.update(1)
        finally:
            if bar is not None:
                bar.close()
        acc = ctx.accounting(assumptions=assumptions_extra,
                             details={"noise": self.noise.name, "measured_geounits": n_measured,
                                      "strategy": strategy.describe()})
        return NodeHistogramRelease(
            names=spine.names, parent=spine.parent, level=spine.level, level_names=list(spine.level_names),
            cells=strategy.cell_labels(), values=est, accounting=acc, mechanism=self.name, solver=self.solver_name,
            params=ctx.params(post_processing=self._stats), timings=timings,
            level_totals=hist.total if 0 in inv_levels else None)

    # ------------------------------------------------------------------ pieces
    def _check_solvers(self, spine: Spine, strategy: QueryStrategy, groups: list[str], det: str | None,
                       inv_levels: list[int]) -> None:
        """The solver layer's refusal before any noise: a probe of this release's shape (public
        structure only: the histogram, the largest fanout, invariant totals) through every plug-in."""
        from hierdp.solvers.base import UnsupportedProblem

        ptr, _ = spine.children_csr()
        fanout = int(np.diff(ptr).max(initial=1))
        try:
            self.level_solver.check(strategy.query_structure([g for g in groups if g != det]), max_children=fanout,
                                    root=False, totals=len(inv_levels) > 1)
        except UnsupportedProblem as exc:
            raise MechanismParameterError(f"solver: {exc}") from None

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

    def _spend(self, ctx: Any, spine: Spine, lev: int, part: Fraction, meas: np.ndarray,
               params: dict[tuple[int, int, str], float], sens: int) -> None:
        amount = self.spec.budget._scaled(part) if part > 0 else Budget._zero(self.spec.budget.calculus)
        name = spine.level_names[lev]
        nums = set(spine.gamma_num[meas].tolist())
        used = sorted({p for (lv, g, _), p in params.items() if lv == lev and g in nums})
        details = {"noise": self.noise.name, "measured_geounits": int(meas.size),
                   self.noise.sensitivity_name: self.noise.sensitivity_value(sens), "path_share": str(part),
                   "note": f"({meas.size} measured geounit(s), path share {part})"}
        if used:
            details[f"{self.noise.parameter_name}_min"] = used[0]
            details[f"{self.noise.parameter_name}_max"] = used[-1]
        ctx.spend(amount, f"geolevel {lev} ({name})", **details)

    def _measure(self, hist: _TrueHistograms, meas: np.ndarray, spine: Spine, groups: list[str],
                 mats: dict[str, np.ndarray], params: dict[tuple[int, int, str], float], rng: Any, lev: int
                 ) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Noisy answers of the measured geounits: group -> (geounits, answers, weights); a group
        with share 0 at this geolevel is not measured (no geounits)."""
        out = {}
        # few distinct proportions: look the scales up once per distinct numerator
        gnums, which = np.unique(spine.gamma_num[meas], return_inverse=True)
        rows = hist.rows(meas)
        for gi, g in enumerate(groups):
            Q = mats[g]
            if meas.size and (lev, int(gnums[0]), g) not in params:
                out[g] = (meas[:0], np.zeros((0, Q.shape[0])), np.zeros(0))
                continue
            true = self._strategy.queries.answer(gi, rows)  # integer marginals, O(K) per geounit
            scale = np.array([params[(lev, int(x), g)] for x in gnums], dtype=float)
            p = scale[which.ravel()] if meas.size else np.zeros(0)
            if meas.size:
                draw = self.noise.draw(np.repeat(p, Q.shape[0]), true.size, rng).reshape(true.shape)
            else:
                draw = np.zeros_like(true)
            w = np.array([1.0 / _variance(self.noise, float(x)) for x in scale])[which.ravel()] if meas.size \
                else np.zeros(0)
            out[g] = (meas, (true + draw).astype(float), w)
        return out

    def _chunk(self, parent_values: np.ndarray, child_parent: np.ndarray, children: np.ndarray,
               noisy: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]], det: str | None, groups: list[str],
               mats: dict[str, np.ndarray], totals: np.ndarray | None, n_total: int,
               cell_map: np.ndarray | None = None) -> LevelChunk:
        C, K = children.size, next(iter(mats.values())).shape[1]
        targets = np.full((C, K), np.nan)
        tw = np.zeros(C)
        qm, qa, qw = [], [], []
        for g in groups:
            nodes, ans, w = noisy[g]
            if np.array_equal(nodes, children):
                pos = np.arange(C)
            else:
                where = np.full(n_total, -1, np.int64)
                where[nodes] = np.arange(nodes.size)
                pos = where[children]
            has = pos >= 0
            if g == det:
                targets[has] = ans[pos[has]]
                tw[has] = w[pos[has]]
                continue
            a = np.full((C, mats[g].shape[0]), np.nan)
            a[has] = ans[pos[has]]
            ww = np.zeros(C)
            ww[has] = w[pos[has]]
            qm.append(mats[g])
            qa.append(a)
            qw.append(ww)
        structure = self._strategy.query_structure([g for g in groups if g != det])
        return LevelChunk(parent_values, child_parent, targets, tw, qm, qa, qw, totals, cell_map, queries=structure)

    def _root(self, hist: _TrueHistograms, noisy: dict, det: str | None, groups: list[str], mats: dict,
              invariant: bool) -> np.ndarray:
        K = hist.counts.shape[1]
        if not invariant:
            # no public total: the root's cells sum to nothing fixed; pose it under a free parent
            # cell that is the sum of all cells (no target), which is the same problem
            raise MechanismParameterError("the Census-style TopDown needs the root total invariant (bounded "
                                          "neighbours); unbounded releases are not supported")
        # the root's K cells all sum to the one public total: every cell's parent is that total
        chunk = self._chunk(np.array([[hist.total]]), np.array([0]), np.array([0]), noisy, det, groups, mats,
                            None, 1, cell_map=np.zeros(K, np.int64))
        return self.level_solver.solve(chunk, np.array([0]), self._stats[-1])[0]

    def _level(self, spine: Spine, lev: int, est: np.ndarray, hist: _TrueHistograms, measure: Any, det: str | None,
               groups: list[str], mats: dict, invariant: bool) -> None:
        ptr, child = spine.children_csr()
        lp = spine.level_ptr
        parents = np.arange(lp[lev - 1], lp[lev])
        nch = np.diff(ptr)[parents]
        single = parents[nch == 1]
        est[child[ptr[single]]] = est[single]
        multi = parents[nch > 1]
        multi = multi[est[multi].sum(1) > 0]  # children of an all-zero parent stay 0 (est starts at 0)
        if multi.size == 0:
            return
        counts = np.diff(ptr)[multi]
        # batches of whole parents with at most batch_children children (a wider parent alone)
        cum = np.cumsum(counts)
        bounds = [0]
        while bounds[-1] < multi.size:
            base = cum[bounds[-1] - 1] if bounds[-1] else 0
            nxt = int(np.searchsorted(cum, base + self.batch_children, side="right"))
            bounds.append(max(nxt, bounds[-1] + 1))
        for s, e in itertools.pairwise(bounds):
            ps, cnt = multi[s:e], counts[s:e]
            first = np.concatenate([[0], np.cumsum(cnt)[:-1]])
            kids = child[np.repeat(ptr[ps] - first, cnt) + np.arange(cnt.sum())]
            if not spine.measured[kids].all():
                u = kids[~spine.measured[kids]][0]
                raise SpineError(f"geounit {spine.names[u]!r} is unmeasured but has siblings")
            local = np.repeat(np.arange(ps.size), cnt)
            totals = hist.rows(kids).sum(1) if invariant else None
            chunk = self._chunk(est[ps], local, kids, measure(kids), det, groups, mats, totals, spine.n)
            est[kids] = self.level_solver.solve(chunk, ps, self._stats[-1])

    def _aborted(self, ctx: Any, spine: Spine, lev: int, failed: ParentSolveFailed) -> ReleaseAborted:
        shown = [str(spine.names[p]) for p in failed.parents[:5]]
        more = f" and {len(failed.parents) - 5} more" if len(failed.parents) > 5 else ""
        return ctx.aborted(failed.cause, where=f"at geolevel {lev} ({spine.level_names[lev]}), {failed.stage} stage, "
                           f"parent {', '.join(shown)}{more}", level=lev, level_name=spine.level_names[lev],
                           parents=np.asarray(spine.names[failed.parents], dtype=object))
