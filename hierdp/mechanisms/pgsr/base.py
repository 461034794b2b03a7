"""The shared flow of paper 001's group-size mechanisms: options, solver check, measurement, the
release (see :mod:`hierdp.mechanisms.pgsr.mechanisms` for the six mechanisms on it)."""

from __future__ import annotations

import time
from typing import Any
from collections.abc import Sequence

import numpy as np

from hierdp.hierarchy.count_of_counts import CountOfCounts, DynProgTree
from hierdp.mechanisms.base import Mechanism, MechanismParameterError, RunContext
from hierdp.mechanisms.pgsr.transforms import cumulative, level_vectors
from hierdp.mechanisms.pgsr.unit import CUMULATIVE_L1, HISTOGRAM_L1, GroupSizeUnit, level_vector_l1
from hierdp.privacy.budget import Accountant, Budget
from hierdp.privacy.calibration import laplace_scale
from hierdp.privacy.domain import ObservedDomainError
from hierdp.privacy.noise import GeometricNoise
from hierdp.release.histogram import NodeHistogramRelease

__all__ = ["REGION_TOTALS_ASSUMPTION", "GroupSizeMechanism"]

#: every group-size mechanism measures with the geometric (discrete Laplace) mechanism: pure ε-DP
GEOMETRIC = GeometricNoise()

REGION_TOTALS_ASSUMPTION = "per-region group totals G_r are public (invariant under the neighbour relation)"


class GroupSizeMechanism(Mechanism):
    """Shared flow of the group-size mechanisms: measure every level, post-process, release.

    Args:
        epsilon: the pure-DP budget (or ``budget=`` a pure :class:`Budget`); ``delta`` only sets
            the δ of the reported (ε, δ) figures.
        level_split: ``"uniform"`` (ε/L per level, Theorem 1) or one proportion per region level.
        solver: the post-processing plug-in (each mechanism has its default).
        time_limit: seconds for the post-processing solve.
        region_totals_public: also impose ``sum_k c_r^k = G_r`` for every region (public under the
            neighbour relation); couples the size subtrees, so only general solvers honour it.
        secure: OS randomness and exact samplers.
    """

    name = "group sizes"
    #: which vector each level measures: "histogram", "cumulative" or "level_vector"
    measurement = "histogram"
    default_solver = "costtable"
    consistent = True

    def __init__(self, epsilon: float | None = None, delta: float | None = None, *, budget: Budget | None = None,
                 level_split: Any = "uniform", solver: Any = None, time_limit: float | None = None,
                 region_totals_public: bool = False, secure: bool = False,
                 solver_options: dict[str, Any] | None = None, contributions: Any = 1) -> None:
        from hierdp.privacy.unit import check_contributions

        if check_contributions(contributions) != 1:
            raise MechanismParameterError(
                f"contributions={contributions!r}: group-size neighbours add or remove one person in one group; "
                "the sensitivities of paper 001 (Lemma 4 and 6) are for one person (m = 1)")
        self.resolve_privacy(epsilon, delta, None, budget, unit=GroupSizeUnit(), bounded=True, contributions=1,
                             distinct=False, calculus="pure", secure=secure)
        if not (isinstance(level_split, str) and level_split == "uniform"):
            try:
                props = [float(p) for p in level_split]
            except TypeError:
                raise MechanismParameterError(f"level_split must be 'uniform' or a list of proportions, got "
                                              f"{level_split!r}") from None
            self.level_split: Any = props
        else:
            self.level_split = "uniform"
        if region_totals_public not in (True, False):
            raise MechanismParameterError(f"region_totals_public must be True or False, got {region_totals_public!r}")
        self.region_totals_public = bool(region_totals_public)
        if time_limit is not None and not (float(time_limit) > 0):
            raise MechanismParameterError(f"time_limit must be > 0 seconds, got {time_limit!r}")
        self.time_limit = None if time_limit is None else float(time_limit)
        self.solver_options = dict(solver_options or {})
        self.solver = self._check_solver(solver if solver is not None else self.default_solver)

    # ------------------------------------------------------------------ the solver, through the registry's door
    def _model(self, data: CountOfCounts, noisy: np.ndarray, scales: Sequence[float] = ()) -> Any:
        """The post-processing :class:`~hierdp.models.Problem` posed from the noisy ``(K, n_regions)``
        vectors (the mechanisms that solve one model implement it)."""
        raise NotImplementedError

    def _probes(self, data: CountOfCounts) -> list[tuple[Any, Any]]:
        """``(solver, problem)`` for every registry solve of the post-processing, posed on ``data``'s
        public structure with placeholder targets (no noise, no private count)."""
        L = data.n_levels
        return [(self.solver, self._model(data, np.zeros((data.K, data.n_regions), np.int64), [1.0] * L))]

    def _check_solver(self, solver: Any) -> Any:
        """Refuse, before any data, a solver that cannot post-process this mechanism's models: the
        registry's one door (:func:`hierdp.solvers.check_solver`) on each model posed on a tiny
        public instance (three regions, ``K = 2``)."""
        self.solver = solver
        self._through_door(_probe_data())
        return solver

    def _through_door(self, data: CountOfCounts) -> None:
        """Every post-processing model of ``data``'s public structure through the registry's door
        (placeholder targets: a consistent point; the shape, size, bounds and magnitude are the
        release's own), so a model the solver refuses on public grounds is refused before noise."""
        from hierdp.solvers import check_solver

        for solver, problem in self._probes(data):
            check_solver(solver, _placeholder_targets(problem), task=f"post-process {self.name}")

    @property
    def solver_name(self) -> str:
        """The post-processing plug-in's name."""
        return self.solver if isinstance(self.solver, str) else self.solver.name

    def params(self) -> dict[str, Any]:
        return {**super().params(), "solver": self.solver_name, "level_split": self.level_split,
                "measurement": self.measurement, "region_totals_public": self.region_totals_public,
                "time_limit": self.time_limit}

    # ------------------------------------------------------------------ measurement
    def level_sensitivities(self, data: CountOfCounts) -> list[int]:
        """L1 sensitivity of the vector measured at each region level."""
        if self.measurement == "histogram":
            return [HISTOGRAM_L1] * data.n_levels
        if self.measurement == "cumulative":
            return [CUMULATIVE_L1] * data.n_levels
        lp = data.regions.level_ptr
        return [level_vector_l1(int(lp[lev + 1] - lp[lev])) for lev in range(data.n_levels)]

    def _parts(self, L: int) -> list[Budget]:
        total = self.spec.budget
        if self.level_split == "uniform":
            return total.split_uniform(L)
        if len(self.level_split) != L:
            raise MechanismParameterError(f"level_split has {len(self.level_split)} proportions for {L} region "
                                          "levels")
        return total.split(self.level_split)

    def _true_vectors(self, data: CountOfCounts) -> np.ndarray:
        if self.measurement == "histogram":
            return data.by_size
        if self.measurement == "cumulative":
            return cumulative(data.by_size)
        return level_vectors(data.by_size, data.regions.level_ptr)

    def _measure(self, ctx: RunContext, data: CountOfCounts, parts: list[Budget], scales: list[float],
                 sens: list[int]) -> np.ndarray:
        """Noisy vectors, ``(K, n_regions)`` int64, one level at a time (spend before noise)."""
        true = self._true_vectors(data)
        noisy = np.empty(true.shape, np.int64)
        lp = data.regions.level_ptr
        names = data.regions.level_names
        for lev in range(data.n_levels):
            a, b = int(lp[lev]), int(lp[lev + 1])
            noisy[:, a:b] = ctx.measure(true[:, a:b], parts[lev], f"level {lev} ({names[lev]})", GEOMETRIC,
                                        sensitivity=sens[lev], parameter=scales[lev], measured=self.measurement,
                                        regions=b - a)
        return noisy

    # ------------------------------------------------------------------ the run
    def release(self, data: Any, *, seed: int | None = None, rng: Any = None, secure: bool | None = None,
                accountant: Accountant | None = None, progress: bool = False) -> NodeHistogramRelease:
        """Measure ``data`` (a :class:`CountOfCounts`) and post-process.

        Raises (before any noise): ``TypeError`` for other data, ``ObservedDomainError`` when the
        region domain or ``K`` came from the data and was not declared public,
        ``MechanismParameterError`` for options that do not fit the data, ``UnsupportedProblem``
        when the solver refuses this release's model on its public structure, ``BudgetExceeded``.
        After noise, a solver failure raises :class:`ReleaseAborted` (spends attached).
        """
        _check_count_of_counts(data, self.name)
        missing = getattr(data, "_missing_public", [])
        if missing:
            raise ObservedDomainError(
                f"refusing to release with {self.name}: " + " and ".join(missing) + " came from the private rows; "
                "declare it public input or state that it is public")
        L = data.n_levels
        parts = self._parts(L)
        sens = self.level_sensitivities(data)
        culprit = f"epsilon={float(self.spec.budget.epsilon)!r}"
        scales = [laplace_scale(parts[lev], sens[lev], culprit=culprit) for lev in range(L)]
        self._check_data(data)
        # the models of this release's public structure (regions, K, G): a solver that refuses one
        # (e.g. too large an exact model, nodes x G) is refused now, before any noise
        self._through_door(data)
        t0 = time.perf_counter()
        ctx = self.start(data, seed=seed, rng=rng, secure=secure, accountant=accountant)
        noisy = self._measure(ctx, data, parts, scales, sens)
        t1 = time.perf_counter()
        try:
            values, info = self.post_process(data, noisy, scales)
        except Exception as exc:
            raise ctx.aborted(exc, where="in post-processing", level_name="post-processing") from exc
        t2 = time.perf_counter()
        assumptions = tuple(data.assumptions) + ((REGION_TOTALS_ASSUMPTION,) if self.region_totals_public else ())
        acc = ctx.accounting(assumptions=assumptions, notes=self.notes(),
                             details={"split": self.level_split, "noise": GEOMETRIC.name,
                                      "measurement": self.measurement})
        regions = data.regions
        return NodeHistogramRelease(
            names=regions.names, parent=regions.parent, level=regions.level, level_names=list(regions.level_names),
            cells=data.sizes, values=values.T.copy(), accounting=acc, mechanism=self.name, solver=self.solver_name,
            params=ctx.params(K=data.K, G=data.G, **info),
            timings={"measure_s": t1 - t0, "post_process_s": t2 - t1}, nonnegative=True, integer=True,
            level_totals=data.G if self.consistent else None, consistent=self.consistent, cell_name="size")

    def notes(self) -> tuple[str, ...]:
        """What the release is, where it matters to a reader."""
        return ()

    def _check_data(self, data: CountOfCounts) -> None:
        """Refusals that need the data (before noise)."""

    def post_process(self, data: CountOfCounts, noisy: np.ndarray, scales: Sequence[float] = ()
                     ) -> tuple[np.ndarray, dict[str, Any]]:
        """The released ``(K, n_regions)`` int64 histograms from the noisy vectors (``scales``: the
        geometric noise scale of each region level)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ shared post-processing
    def _solve(self, problem: Any, solver: Any = None) -> Any:
        """Solve through the registry (``verify``: every constraint checked independently of the
        plug-in, exactly for integer models)."""
        from hierdp.solvers import solve

        return solve(problem, solver=self.solver if solver is None else solver, time_limit=self.time_limit,
                     **(self.solver_options if solver is None else {}))

    def _add_region_totals_rows(self, problem: Any, data: CountOfCounts, dp: DynProgTree) -> None:
        """``sum_k c_{(k, r)} = G_r`` for every region (one CSR block)."""
        from scipy.sparse import csr_matrix

        n, K = data.n_regions, data.K
        cols = dp.node(np.tile(np.arange(1, K + 1), n), np.repeat(np.arange(n), K))
        mat = csr_matrix((np.ones(n * K), cols, np.arange(0, n * K + 1, K)), shape=(n, dp.n))
        g = data.group_totals.astype(float)
        problem.add_constraints(mat, g, g, name="region_total")


def _dynprog_solution(dp: DynProgTree, values: np.ndarray) -> np.ndarray:
    return np.asarray(dp.to_by_size(values), dtype=np.int64)


def _check_count_of_counts(data: Any, name: str) -> None:
    """A CountOfCounts, or an object exposing one's attributes (wrappers that restate the domain)."""
    if not (isinstance(data, CountOfCounts)
            or all(hasattr(data, a) for a in ("by_size", "regions", "dynprog_tree", "K"))):
        raise TypeError(f"{name} releases a CountOfCounts (hierdp.hierarchy.count_of_counts), got "
                        f"{type(data).__name__}")


def _probe_data() -> CountOfCounts:
    """A tiny public instance (a root and two leaf regions, ``K = 2``): the shape of every group-size
    model, for the solver check at construction."""
    from hierdp.hierarchy.core import Hierarchy

    regions = Hierarchy.from_arrays(["all", "a", "b"], [-1, 0, 0], level_names=["root", "leaf"])
    return CountOfCounts.from_histograms(regions, [[1, 1], [2, 0]], K=2)


def _placeholder_targets(problem: Any) -> Any:
    """``problem`` with every target replaced by a consistent point of its public fixed values (the
    door's probe: the same structure, size, bounds and rows, and no private count)."""
    from hierdp.models.arrays import consistent_point

    z = consistent_point(problem.with_target(np.full(problem.n, np.nan)))
    return problem.with_target(np.where(np.isnan(problem.target), np.nan, z))
