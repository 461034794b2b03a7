"""Paper 001's group-size mechanisms on the mechanism contract (pure ε-DP, geometric noise).

Every mechanism measures every region level (the national one included; only ``G`` is public) with
the geometric (discrete Laplace) mechanism, the budget split over the ``L`` region levels
(``level_split``: uniform, Theorem 1, or given proportions, split exactly) and composed in parallel
within a level (regions partition the groups). Scales are rounded up so that the exact ε delivered
never exceeds a level's part; each level's spend is recorded before its noise. Then:

================  =============================  =================================================
name              measures (L1 sensitivity)      post-processing
================  =============================  =================================================
``MH``            histograms (2, Lemma 4)        Model 1 (H1-H4) through a general solver: exact
                                                 (``highs`` PWL MIP / ``ortools`` CP-SAT), or
                                                 ``relaxed=True``: QP + round-half-up per cell
                                                 (the paper's OP baseline; consistency can break,
                                                 its violations are counted, #CV)
``MDP``           histograms (2)                 Model 1 exactly by the cost-table DP on the DP
                                                 hierarchy (``costtable``)
``MHC``           per-region cumulatives (1,     Model 2 (C1-C5) through a general solver: exact
                  Lemma 6)                       or relaxed + monotone rounding
``CumulativeDP``  per-region cumulatives (1)     §9.1: per-region isotonic projection (PAVA,
                                                 lower bound 0), monotone rounding, Γ⁻¹, then M_DP
``ChainDP``       per-region cumulatives (1),    Model 3 (C6-C10) by the ``chain`` plug-in
                  mapped to chain coordinates;
                  or ``measure="level_vector"``
                  (m_ℓ, decision A1)
``TopDown``       DP hierarchy level by level    integer L2 per (parent, size) group (the paper's
                  (2 per level)                  TopDown baseline, A14) via the TopDown engine
================  =============================  =================================================

Releases are :class:`~hierdp.release.histogram.NodeHistogramRelease` (a histogram per region).
Exact mechanisms promise consistency, non-negative integers and faithfulness (every level sums to
``G``); the relaxed baselines promise only non-negative integers.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any
from collections.abc import Sequence

import numpy as np

from hierdp.hierarchy.count_of_counts import CountOfCounts, DPTree
from hierdp.mechanisms.base import Mechanism, MechanismParameterError, ReleaseAborted, RunContext
from hierdp.mechanisms.pgsr.transforms import (
    chain_targets_from_region_cumulatives,
    chain_to_histograms,
    cumulative,
    inverse_cumulative,
    level_vectors,
    round_half_up,
)
from hierdp.mechanisms.pgsr.unit import CUMULATIVE_L1, HISTOGRAM_L1, GroupSizeUnit, level_vector_l1
from hierdp.privacy import samplers
from hierdp.privacy.budget import Accountant, Budget
from hierdp.privacy.calibration import delivered_epsilon, laplace_scale
from hierdp.privacy.domain import ObservedDomainError
from hierdp.release import Accounting
from hierdp.release.histogram import NodeHistogramRelease

__all__ = [
    "MDP",
    "MH",
    "MHC",
    "REGION_TOTALS_ASSUMPTION",
    "ChainDP",
    "CumulativeDP",
    "GroupSizeMechanism",
    "GroupSizeTopDown",
    "chain_target_variances",
]

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
    uses_solver = True
    #: which vector each level measures: "histogram", "cumulative" or "level_vector"
    measurement = "histogram"
    default_solver = "costtable"
    #: features the post-processing problem has (a solver lacking one is refused before noise)
    needed_features: frozenset[str] = frozenset()
    needs_integer = True
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

    # ------------------------------------------------------------------ options
    def _features(self) -> set[str]:
        f = set(self.needed_features)
        if self.region_totals_public:
            f.add("linear_constraints")
        return f

    def _check_solver(self, solver: Any) -> str:
        """Refuse, before any data, a solver that cannot honour this mechanism's problem."""
        from hierdp.solvers import get
        from hierdp.solvers.base import Solver

        if solver == "pdlp":
            if self.needs_integer:
                raise MechanismParameterError(f"solver 'pdlp' (a first-order QP method) only solves the relaxation "
                                              f"of the OP baselines, not {self.name}")
            return "pdlp"

        try:
            s = solver if isinstance(solver, Solver) else get(solver)
        except KeyError as exc:
            raise MechanismParameterError(f"solver: {exc.args[0]}") from None
        cap = s.capabilities
        why = []
        if "l2" not in cap.objectives:
            why.append("it does not solve L2 objectives")
        if self.needs_integer and not cap.integer:
            why.append("it does not solve integer problems")
        if not self.needs_integer and not cap.continuous:
            why.append("it does not solve continuous problems (the relaxation)")
        for feat in sorted(self._features() - set(cap.features)):
            why.append({"cumulative": "it cannot honour the cumulative (monotone chain) constraints",
                        "linear_constraints": "it cannot honour linear constraint rows"
                        + (" (region_totals_public couples the size subtrees)" if self.region_totals_public
                           else ""),
                        "query_terms": "it cannot honour query-term objectives"}.get(feat, f"it lacks {feat}"))
        why.extend(self._solver_structure_refusal(s.name))
        if why:
            raise MechanismParameterError(f"solver {s.name!r} cannot post-process {self.name}: " + "; ".join(why))
        return s.name if not isinstance(solver, Solver) else solver  # type: ignore[return-value]

    def _solver_structure_refusal(self, name: str) -> list[str]:
        # every problem but the chain mechanism's has tree consistency, which the chain plug-in refuses
        return ["the chain DP solves chains of difference constraints, not tree consistency"] if name == "chain" else []

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
                 sens: list[int]) -> tuple[np.ndarray, list[dict[str, Any]]]:
        """Noisy vectors, ``(K, n_regions)`` int64, one level at a time (spend before noise)."""
        true = self._true_vectors(data)
        noisy = np.empty(true.shape, np.int64)
        lp = data.regions.level_ptr
        names = data.regions.level_names
        per_level = []
        for lev in range(data.n_levels):
            a, b = int(lp[lev]), int(lp[lev + 1])
            eps = float(parts[lev].epsilon)
            ctx.spend(parts[lev], f"level {lev} ({names[lev]})", noise="geometric", scale=scales[lev],
                      l1_sensitivity=sens[lev], delivered=delivered_epsilon(scales[lev], sens[lev]),
                      measured=self.measurement)
            noise = samplers.discrete_laplace(scales[lev], (true.shape[0], b - a), ctx.rng)
            noisy[:, a:b] = true[:, a:b] + noise
            per_level.append({"level": lev, "name": names[lev], "epsilon": eps, "scale": scales[lev],
                              "l1_sensitivity": sens[lev], "regions": b - a,
                              "spend": f"epsilon={eps:.6g} scale={scales[lev]:.6g}"})
        return noisy, per_level

    # ------------------------------------------------------------------ the run
    def release(self, data: Any, *, seed: int | None = None, rng: Any = None, secure: bool | None = None,
                accountant: Accountant | None = None, progress: bool = False) -> NodeHistogramRelease:
        """Measure ``data`` (a :class:`CountOfCounts`) and post-process.

        Raises (before any noise): ``TypeError`` for other data, ``ObservedDomainError`` when the
        region domain or ``K`` came from the data and was not declared public,
        ``MechanismParameterError`` for options that do not fit the data, ``BudgetExceeded``.
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
        t0 = time.perf_counter()
        ctx = self.start(data, seed=seed, rng=rng, secure=secure, accountant=accountant)
        noisy, per_level = self._measure(ctx, data, parts, scales, sens)
        t1 = time.perf_counter()
        try:
            values, info = self.post_process(data, noisy, scales)
        except Exception as exc:
            raise self._aborted(ctx, exc) from exc
        t2 = time.perf_counter()
        assumptions = tuple(ctx.assumptions) + tuple(a for a in data.assumptions if a not in ctx.assumptions)
        if self.region_totals_public:
            assumptions += (REGION_TOTALS_ASSUMPTION,)
        acc = Accounting(mechanism=self.name, total=self.spec.budget, unit=self.unit, delta=self.spec.delta,
                         spends=tuple(ctx.spends), assumptions=assumptions, notes=self.notes(),
                         details={"per_level": per_level, "split": self.level_split, "noise": "geometric",
                                  "measurement": self.measurement, "ledger": ctx.ledger.summary(self.spec.delta)})
        regions = data.regions
        return NodeHistogramRelease(
            names=regions.names, parent=regions.parent, level=regions.level, level_names=list(regions.level_names),
            cells=data.sizes, values=values.T.copy(), accounting=acc, mechanism=self.name, solver=self.solver_name,
            params={**self.params(), "randomness": ctx.randomness, "K": data.K, "G": data.G, **info},
            timings={"measure_s": t1 - t0, "post_process_s": t2 - t1}, nonnegative=True, integer=True,
            level_totals=data.G if self.consistent else None, consistent=self.consistent, cell_name="size")

    def notes(self) -> tuple[str, ...]:
        """What the release is, where it matters to a reader."""
        return ()

    def _check_data(self, data: CountOfCounts) -> None:
        """Refusals that need the data (before noise)."""

    def _aborted(self, ctx: RunContext, exc: BaseException) -> ReleaseAborted:
        return ReleaseAborted(
            f"{self.name} aborted in post-processing after its budget was spent: {type(exc).__name__}: {exc}. "
            f"Spent {ctx.spent} of {self.spec.budget} (recorded in the ledger); nothing was released",
            partial=None, spends=tuple(ctx.spends), spent=ctx.spent, accountant=ctx.ledger,
            external_accountant=ctx.external, level=-1, level_name="post-processing", parents=None, cause=exc)

    def post_process(self, data: CountOfCounts, noisy: np.ndarray, scales: Sequence[float] = ()
                     ) -> tuple[np.ndarray, dict[str, Any]]:
        """The released ``(K, n_regions)`` int64 histograms from the noisy vectors (``scales``: the
        geometric noise scale of each region level)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ shared post-processing
    def _solve(self, problem: Any) -> Any:
        """Solve through the registry, then check feasibility independently of the plug-in
        (``Problem.violations``: every constraint, from the parent array and the rows). The
        registry's own ``verify`` adds L-inf group checks, irrelevant to these L2 problems and
        slow on millions of chain rows, so it is replaced by this check."""
        import hierdp
        from hierdp.solvers.base import Solution, SolverFailed, Status

        if self.solver == "pdlp":
            from hierdp.mechanisms.pgsr._pdlp import solve_relaxation

            x, st = solve_relaxation(problem, time_limit=self.time_limit, **self.solver_options)
            return Solution(values=x, objective=problem.objective_value(x), status=Status.OPTIMAL, solver="pdlp",
                            wall_time=st["seconds"], stats=st)
        sol = hierdp.solve(problem, solver=self.solver, time_limit=self.time_limit, verify=False,
                           **self.solver_options)
        bad = problem.violations(sol.values)
        if bad:
            raise SolverFailed(self.solver_name, Status.INFEASIBLE_RESULT, "; ".join(bad))
        return sol

    def _add_region_totals_rows(self, problem: Any, data: CountOfCounts, dp: DPTree) -> None:
        """``sum_k c_{(k, r)} = G_r`` for every region (one CSR block)."""
        from scipy.sparse import csr_matrix

        n, K = data.n_regions, data.K
        cols = dp.node(np.tile(np.arange(1, K + 1), n), np.repeat(np.arange(n), K))
        mat = csr_matrix((np.ones(n * K), cols, np.arange(0, n * K + 1, K)), shape=(n, dp.n))
        g = data.group_totals.astype(float)
        problem.add_constraints(mat, g, g, name="region_total")


def _dp_solution(dp: DPTree, values: np.ndarray) -> np.ndarray:
    return np.asarray(dp.to_by_size(values), dtype=np.int64)


class MH(GroupSizeMechanism):
    """M_H (§5): Model 1 through a general solver; ``relaxed=True`` is the paper's OP baseline
    M̃_H (continuous QP, then round-half-up per cell: consistency and faithfulness may break).

    ``solver``: ``"highs"`` (default; exact integer L2 as a PWL-epigraph MIP) or ``"ortools"``
    (CP-SAT); the relaxation needs a continuous QP solver: ``highs`` (small instances) or
    ``"pdlp"`` (OR-Tools' first-order QP method, relative tolerance 1e-8: census scale).
    """

    name = "M_H"
    default_solver = "highs"

    def __init__(self, epsilon: float | None = None, delta: float | None = None, *, relaxed: bool = False,
                 **kwargs: Any) -> None:
        if relaxed not in (True, False):
            raise MechanismParameterError(f"relaxed must be True or False, got {relaxed!r}")
        self.relaxed = bool(relaxed)
        self.needs_integer = not self.relaxed
        self.consistent = not self.relaxed
        if self.relaxed:
            self.name = "M_H relaxed"
        super().__init__(epsilon, delta, **kwargs)

    def params(self) -> dict[str, Any]:
        return {**super().params(), "relaxed": self.relaxed}

    def notes(self) -> tuple[str, ...]:
        if self.relaxed:
            return ("relaxation rounded per cell (paper 001's OP baseline): consistency and faithfulness are not "
                    "guaranteed; count_violations() gives #CV",)
        return ()

    def post_process(self, data: CountOfCounts, noisy: np.ndarray, scales: Sequence[float] = ()
                     ) -> tuple[np.ndarray, dict[str, Any]]:
        dp = data.dp_tree()
        problem = dp.problem(noisy, integer=not self.relaxed)
        if self.region_totals_public:
            self._add_region_totals_rows(problem, data, dp)
        sol = self._solve(problem)
        info = {"objective": float(sol.objective), "solver_seconds": float(sol.wall_time)}
        if self.relaxed:
            return np.maximum(round_half_up(dp.to_by_size(sol.values)), 0), info
        return _dp_solution(dp, sol.values), info


class MDP(GroupSizeMechanism):
    """M_DP (§6-7): Model 1 solved exactly by the cost-table DP on the DP hierarchy."""

    name = "M_DP"
    default_solver = "costtable"

    def __init__(self, epsilon: float | None = None, delta: float | None = None, **kwargs: Any) -> None:
        if kwargs.get("region_totals_public"):
            raise MechanismParameterError(
                "region_totals_public=True couples the K size subtrees (sum_k c_r^k = G_r), which the cost-table DP "
                "cannot honour; use MH (exact) with solver 'highs' or 'ortools'")
        super().__init__(epsilon, delta, **kwargs)

    def post_process(self, data: CountOfCounts, noisy: np.ndarray, scales: Sequence[float] = ()
                     ) -> tuple[np.ndarray, dict[str, Any]]:
        dp = data.dp_tree()
        sol = self._solve(dp.problem(noisy))
        return _dp_solution(dp, sol.values), {"objective": float(sol.objective),
                                              "solver_seconds": float(sol.wall_time)}


def cumulative_problem(data: CountOfCounts, noisy_cumulative: np.ndarray, *, integer: bool = True,
                       region_totals_public: bool = False) -> Any:
    """Model 2 (C1-C5) in cumulative variables: node ``(k, r)`` holds ``s_r^k`` (index
    ``(k-1) * n_regions + r``); consistency per size (C4) from the parent array, the national
    ``s^K`` fixed at ``G`` (C2; every ``s_r^K`` fixed at ``G_r`` with public region totals),
    monotone chains over sizes per region (C3), non-negativity and integrality (C5)."""
    from hierdp.models import Problem

    n, K = data.n_regions, data.K
    rp = np.asarray(data.regions.parent, dtype=np.int64)
    base = np.arange(K, dtype=np.int64)[:, None] * n
    parent = np.where(rp[None, :] < 0, -1, base + rp[None, :]).ravel()
    fixed = np.full(n * K, np.nan)
    if region_totals_public:
        fixed[(K - 1) * n + np.arange(n)] = data.group_totals
    else:
        fixed[(K - 1) * n + 0] = data.G
    # implied bounds s_r^k <= s_root^k <= G (G_r when region totals are public): they keep every
    # feasible point; general MIP solvers need a bounded domain for the exact integer-L2 epigraph.
    # (s_r^K <= G_r is *not* implied without public region totals: only the root total is fixed.)
    upper = np.tile(data.group_totals.astype(float), K) if region_totals_public else np.full(n * K, float(data.G))
    p = Problem(parent, np.asarray(noisy_cumulative, dtype=float).ravel(), fixed=fixed, objective="l2",
                integer=integer, upper=upper)
    chains = (np.arange(K, dtype=np.int64)[None, :] * n + np.arange(n, dtype=np.int64)[:, None])
    if K > 1:
        p.add_monotone_chains(chains, name="cumulative")
    return p


def prefix_problem(data: CountOfCounts, noisy_cumulative: np.ndarray, *, integer: bool = True) -> Any:
    """Model 2 in histogram variables: the DP hierarchy (root fixed at ``G``, C2-C5 as Model 1's
    constraints) with a query-term objective over prefix sums, ``sum (sum_{j<=k} c_r^j - s~_r^k)^2``.
    ``K (K+1) / 2`` non-zeros per region: for small instances and cross-checks."""
    from scipy.sparse import csr_matrix

    dp = data.dp_tree()
    n, K = data.n_regions, data.K
    p = dp.problem(np.full((K, n), np.nan), integer=integer)
    kk = np.arange(1, K + 1)
    per_region = K * (K + 1) // 2
    rows = np.repeat(np.arange(n * K), np.tile(kk, n))  # term (r, k) has k entries
    r_of = rows // K
    j_of = np.concatenate([np.arange(1, k + 1) for k in kk])
    cols = dp.node(np.tile(j_of, n), r_of)
    mat = csr_matrix((np.ones(n * per_region), (rows, cols)), shape=(n * K, dp.n))
    target = np.asarray(noisy_cumulative, dtype=float).T.ravel()  # term index r * K + (k - 1)
    p.add_query_terms(mat, target, name="prefix")
    return p


class MHC(GroupSizeMechanism):
    """M_HC (§8, Model 2): per-region cumulative counts measured with Lemma 6 (sensitivity 1),
    post-processed exactly by a general solver, or ``relaxed=True`` (the OP baseline M̃_HC:
    continuous QP, running maximum, round-half-up, Γ⁻¹).

    ``formulation``: ``"cumulative"`` (default: cumulative variables, monotone chains, the national
    ``s^K`` fixed at ``G``) or ``"prefix"`` (histogram variables with prefix-sum query terms; the
    same optimum, K(K+1)/2 terms per region: small instances).
    """

    name = "M_HC"
    measurement = "cumulative"
    default_solver = "highs"

    def __init__(self, epsilon: float | None = None, delta: float | None = None, *, relaxed: bool = False,
                 formulation: str = "cumulative", **kwargs: Any) -> None:
        if relaxed not in (True, False):
            raise MechanismParameterError(f"relaxed must be True or False, got {relaxed!r}")
        if formulation not in ("cumulative", "prefix"):
            raise MechanismParameterError(f"formulation must be 'cumulative' or 'prefix', got {formulation!r}")
        self.relaxed = bool(relaxed)
        self.formulation = formulation
        self.needs_integer = not self.relaxed
        self.consistent = not self.relaxed
        self.needed_features = frozenset({"cumulative"} if formulation == "cumulative" else {"query_terms"})
        if self.relaxed:
            self.name = "M_HC relaxed"
        if formulation == "prefix" and kwargs.get("region_totals_public"):
            raise MechanismParameterError("formulation='prefix' does not pose region totals; use 'cumulative'")
        super().__init__(epsilon, delta, **kwargs)

    def _features(self) -> set[str]:
        return set(self.needed_features)  # region totals are fixed nodes in cumulative variables

    def params(self) -> dict[str, Any]:
        return {**super().params(), "relaxed": self.relaxed, "formulation": self.formulation}

    def notes(self) -> tuple[str, ...]:
        if self.relaxed:
            return ("relaxation rounded per cumulative entry (paper 001's OP baseline): consistency and "
                    "faithfulness are not guaranteed; count_violations() gives #CV",)
        return ()

    def post_process(self, data: CountOfCounts, noisy: np.ndarray, scales: Sequence[float] = ()
                     ) -> tuple[np.ndarray, dict[str, Any]]:
        n, K = data.n_regions, data.K
        if self.formulation == "prefix":
            p = prefix_problem(data, noisy, integer=not self.relaxed)
            sol = self._solve(p)
            x = data.dp_tree().to_by_size(sol.values)
            s = np.cumsum(x, axis=0)
        else:
            p = cumulative_problem(data, noisy, integer=not self.relaxed,
                                   region_totals_public=self.region_totals_public)
            sol = self._solve(p)
            s = np.asarray(sol.values).reshape(K, n)
        info = {"objective": float(sol.objective), "solver_seconds": float(sol.wall_time)}
        if self.relaxed:
            s = round_half_up(np.maximum.accumulate(np.asarray(s, dtype=float), axis=0))
            return np.maximum(inverse_cumulative(s), 0), info
        return inverse_cumulative(np.asarray(s, dtype=np.int64)), info


class CumulativeDP(GroupSizeMechanism):
    """The approximate DP cumulative mechanism (§9.1, Alg. 2): per-region cumulative counts
    (Lemma 6), each region's vector projected onto ``0 <= s_1 <= ... <= s_K`` (PAVA, then the lower
    bound), rounded half up (monotone, so ``Γ⁻¹ >= 0``), mapped back by Γ⁻¹; then M_DP (the
    cost-table DP) makes the histograms consistent and faithful. Not Model 2's optimum: the
    cumulative consistency is restored region by region."""

    name = "approx DP cumulative"
    measurement = "cumulative"
    default_solver = "costtable"

    def __init__(self, epsilon: float | None = None, delta: float | None = None, **kwargs: Any) -> None:
        if kwargs.get("region_totals_public"):
            raise MechanismParameterError("region_totals_public=True couples the size subtrees; the cost-table DP "
                                          "of this mechanism cannot honour it (use MHC)")
        super().__init__(epsilon, delta, **kwargs)

    def post_process(self, data: CountOfCounts, noisy: np.ndarray, scales: Sequence[float] = ()
                     ) -> tuple[np.ndarray, dict[str, Any]]:
        from hierdp.solvers._isotonic import clip_isotonic

        proj = np.empty(noisy.shape)
        for r in range(noisy.shape[1]):  # one compiled PAVA per region (K values each)
            proj[:, r] = clip_isotonic(noisy[:, r].astype(float), lower=0.0)
        targets = inverse_cumulative(round_half_up(proj))
        dp = data.dp_tree()
        sol = self._solve(dp.problem(targets))
        return _dp_solution(dp, sol.values), {"objective": float(sol.objective),
                                              "solver_seconds": float(sol.wall_time)}


def chain_problem(data: CountOfCounts, chain_targets: np.ndarray, *, integer: bool = True,
                  weights: np.ndarray | None = None) -> tuple[Any, np.ndarray]:
    """Model 3 (C6-C10): one variable per position of the post-order chain of the DP hierarchy,
    the last (the dummy root) fixed at ``G`` (C7), "=" rows where the chain moves up to a parent
    (C8), monotone rows elsewhere (C9), non-negativity and integrality (C10).

    ``chain_targets`` is ``(K, n_regions)`` in DP-node layout. Returns ``(problem, order)`` with
    ``order[p]`` the DP node at chain position ``p``.
    """
    from scipy.sparse import csr_matrix

    from hierdp.models import Problem

    dp = data.dp_tree()
    order = dp.chain_order()
    N = order.size
    node_target = np.concatenate([[np.nan], np.asarray(chain_targets, dtype=float).ravel()])
    fixed = np.full(N, np.nan)
    fixed[-1] = data.G
    w = None
    if weights is not None:
        w = np.concatenate([[1.0], np.asarray(weights, dtype=float).ravel()])[order]
    p = Problem(np.full(N, -1, np.int64), node_target[order], fixed=fixed, objective="l2", integer=integer, weights=w)
    equal = dp.chain_equal_edges()
    pos = np.arange(1, N, dtype=np.int64)
    ge = pos[~equal]
    if ge.size:
        p.add_monotone_chains(np.stack([ge - 1, ge], axis=1), name="chain_ge")
    eq = pos[equal]
    if eq.size:
        m = eq.size
        mat = csr_matrix((np.tile([-1.0, 1.0], m), np.stack([eq - 1, eq], axis=1).ravel(), np.arange(0, 2 * m + 1, 2)),
                         shape=(m, N))
        p.add_constraints(mat, 0.0, 0.0, name="chain_eq")
    return p, order


def chain_target_variances(level_ptr: np.ndarray, K: int, scales: Sequence[float], measure: str) -> np.ndarray:
    """Variance of every chain target, ``(K, n_regions)``, for the chain mechanism's diagonal
    (inverse-variance) weights.

    ``measure="level_vector"``: each target is one measured value (one discrete-Laplace variance of
    its level's scale). ``"per_region"``: the target of node ``(k, j)`` (``j`` the region's position
    within its level of ``m`` regions) is the sum of ``m`` independent noisy cumulatives for
    ``k >= 2`` (``s[k-1, j']`` for ``j' > j`` and ``s[k, j']`` for ``j' <= j``) and of ``j + 1`` for
    ``k = 1``. (The targets are also correlated; the weights ignore that.)
    """
    lp = np.asarray(level_ptr, dtype=np.int64)
    var = np.empty((K, int(lp[-1])))
    for lev in range(lp.size - 1):
        a, b = int(lp[lev]), int(lp[lev + 1])
        alpha = np.exp(-1.0 / float(scales[lev]))
        one = 2 * alpha / (1 - alpha) ** 2  # variance of the discrete Laplace of this scale
        if measure == "level_vector":
            terms = np.ones((K, b - a))
        else:
            terms = np.full((K, b - a), float(b - a))
            terms[0] = np.arange(1, b - a + 1)
        var[:, a:b] = terms * one
    return var


class ChainDP(GroupSizeMechanism):
    """The chain-based cumulative DP (§9.2, Model 3) solved exactly by the ``chain`` plug-in.

    ``measure``:

    * ``"per_region"`` (default): per-region cumulative counts with Lemma 6's sensitivity 1 (ε_ℓ
      per level, parallel over regions), mapped linearly to chain coordinates (post-processing).
      The mapped targets' noise is correlated, so Model 3's unweighted L2 is not their likelihood.
    * ``"level_vector"``: the level-wide running sums of §9.2.1 measured directly, with their true
      sensitivity ``m_ℓ`` (the number of regions of the level; decision A1). The paper's text
      implies sensitivity 1 for this vector, which is not ε-DP; hierdp never uses it.
    """

    name = "chain DP"
    default_solver = "chain"
    needed_features = frozenset({"cumulative", "linear_constraints"})

    def __init__(self, epsilon: float | None = None, delta: float | None = None, *, measure: str = "per_region",
                 weighting: str = "uniform", **kwargs: Any) -> None:
        if measure not in ("per_region", "level_vector"):
            raise MechanismParameterError(f"measure must be 'per_region' or 'level_vector', got {measure!r}")
        if weighting not in ("uniform", "inverse_variance"):
            raise MechanismParameterError(f"weighting must be 'uniform' or 'inverse_variance', got {weighting!r}")
        self.weighting = weighting
        if kwargs.get("region_totals_public"):
            raise MechanismParameterError("region_totals_public=True is not a chain constraint; the chain DP cannot "
                                          "honour it (use MHC)")
        self.measure = measure
        self.measurement = "cumulative" if measure == "per_region" else "level_vector"
        super().__init__(epsilon, delta, **kwargs)

    def params(self) -> dict[str, Any]:
        return {**super().params(), "measure": self.measure, "weighting": self.weighting}

    def _solver_structure_refusal(self, name: str) -> list[str]:
        return []

    def notes(self) -> tuple[str, ...]:
        if self.measure == "level_vector":
            return ("level-wide cumulative vectors calibrated to their sensitivity m_l (regions per level), not 1",)
        return ()

    def post_process(self, data: CountOfCounts, noisy: np.ndarray, scales: Sequence[float] = ()
                     ) -> tuple[np.ndarray, dict[str, Any]]:
        lp = data.regions.level_ptr
        targets = chain_targets_from_region_cumulatives(noisy, lp) if self.measure == "per_region" else noisy
        weights = None
        if self.weighting == "inverse_variance":
            weights = 1.0 / chain_target_variances(lp, data.K, scales, self.measure)
        p, order = chain_problem(data, targets, weights=weights)
        sol = self._solve(p)
        s_nodes = np.empty(order.size, np.int64)
        s_nodes[order] = np.asarray(sol.values, dtype=np.int64)
        level_values = s_nodes[1:].reshape(data.K, data.n_regions)
        return chain_to_histograms(level_values, lp), {"objective": float(sol.objective),
                                                       "solver_seconds": float(sol.wall_time)}


class GroupSizeTopDown(GroupSizeMechanism):
    """TopDown on the DP hierarchy (the paper's baseline, decision A14) at equal privacy: geometric
    noise, pure ε-DP, ε/L per region level, L1 sensitivity 2 per level (a move changes two nodes of
    a level by one); every (parent, size) group post-processed by exact integer L2 (``projection``,
    through the TopDown engine and ``solve_groups``)."""

    name = "TopDown"
    default_solver = "projection"

    def __init__(self, epsilon: float | None = None, delta: float | None = None, **kwargs: Any) -> None:
        if kwargs.get("region_totals_public"):
            raise MechanismParameterError("region_totals_public=True couples the size subtrees; TopDown's per-group "
                                          "solves cannot honour it (use MHC or MH)")
        super().__init__(epsilon, delta, **kwargs)

    def release(self, data: Any, *, seed: int | None = None, rng: Any = None, secure: bool | None = None,
                accountant: Accountant | None = None, progress: bool = False) -> NodeHistogramRelease:
        from hierdp.mechanisms.pgsr.topdown_tree import DPTopDownTree
        from hierdp.mechanisms.topdown.mechanism import TopDownMechanism

        _check_count_of_counts(data, self.name)
        missing = getattr(data, "_missing_public", [])
        if missing:
            raise ObservedDomainError(f"refusing to release with {self.name}: " + " and ".join(missing)
                                      + " came from the private rows; declare it public input or state that it is "
                                      "public")
        plan = "uniform" if self.level_split == "uniform" else list(self.level_split)
        engine = TopDownMechanism(budget=self.spec.budget, delta=self.spec.delta, unit=self.unit, noise="geometric",
                                  plan=plan, objective="l2", solver=self.solver, time_limit=self.time_limit,
                                  solver_options=self.solver_options or None, secure=self.secure)
        engine.name = self.name
        tree = DPTopDownTree(data)
        t0 = time.perf_counter()
        rel = engine.release(tree, seed=seed, rng=rng, secure=secure, accountant=accountant, progress=progress)
        by_size = np.zeros((data.K, data.n_regions), np.int64)
        for lev in rel.levels[1:]:
            keys = lev.keys - 1
            by_size.ravel()[keys] = lev.values
        acc = dataclasses.replace(rel.accounting, assumptions=tuple(rel.accounting.assumptions)
                                  + tuple(a for a in data.assumptions if a not in rel.accounting.assumptions))
        regions = data.regions
        return NodeHistogramRelease(
            names=regions.names, parent=regions.parent, level=regions.level, level_names=list(regions.level_names),
            cells=data.sizes, values=by_size.T.copy(), accounting=acc, mechanism=self.name, solver=self.solver_name,
            params={**self.params(), "randomness": rel.params.get("randomness"), "K": data.K, "G": data.G},
            timings={"release_s": time.perf_counter() - t0}, level_totals=data.G, consistent=True, cell_name="size")


def _check_count_of_counts(data: Any, name: str) -> None:
    """A CountOfCounts, or an object exposing one's attributes (wrappers that restate the domain)."""
    if not (isinstance(data, CountOfCounts) or all(hasattr(data, a) for a in ("by_size", "regions", "dp_tree", "K"))):
        raise TypeError(f"{name} releases a CountOfCounts (hierdp.hierarchy.count_of_counts), got "
                        f"{type(data).__name__}")
