"""Paper 001's group-size mechanisms on the mechanism contract (pure ε-DP, geometric noise).

Every mechanism measures every region level (the national one included; only ``G`` is public) with
the geometric (discrete Laplace) mechanism, the budget split over the ``L`` region levels
(``level_split``: uniform, Theorem 1, or given proportions, split exactly) and composed in parallel
within a level (regions partition the groups). Scales are rounded up so that the exact ε delivered
never exceeds a level's part; each level's spend is recorded before its noise. Then:

=======================  =============================  ==========================================
name                     measures (L1 sensitivity)      post-processing
=======================  =============================  ==========================================
``MH``                   histograms (2, Lemma 4)        Model 1 (H1-H4) through a general solver:
                                                        exact (``highs`` PWL MIP / ``ortools``
                                                        CP-SAT), or ``relaxed=True``: QP +
                                                        round-half-up per cell (the paper's OP
                                                        baseline; consistency can break, its
                                                        violations are counted, #CV)
``MDynProg`` (M_DP)      histograms (2)                 Model 1 exactly by the cost-table dynamic
                                                        program on the dynamic-programming
                                                        hierarchy (``costtable``)
``MHC``                  per-region cumulatives (1,     Model 2 (C1-C5) through a general solver:
                         Lemma 6)                       exact or relaxed + monotone rounding
``CumulativeDynProg``    per-region cumulatives (1)     §9.1: per-region isotonic projection
                                                        (PAVA, lower bound 0), monotone rounding,
                                                        Γ⁻¹, then M_DP
``ChainDynProg``         per-region cumulatives (1),    Model 3 (C6-C10) by the ``chain`` plug-in
                         mapped to chain coordinates;
                         or ``measure="level_vector"``
                         (m_ℓ, decision A1)
``GroupSizeTopDown``     the dynamic-programming        integer L2 per (parent, size) group (the
                         hierarchy level by level (2    paper's TopDown baseline, A14) via the
                         per level)                     TopDown mechanism
=======================  =============================  ==========================================

"DP" in the paper's names (M_DP, the DP hierarchy) means *dynamic programming*; the classes spell
it ``DynProg`` so that it cannot be read as differential privacy.

Releases are :class:`~hierdp.release.histogram.NodeHistogramRelease` (a histogram per region).
Exact mechanisms promise consistency, non-negative integers and faithfulness (every level sums to
``G``); the relaxed baselines promise only non-negative integers.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hierdp.hierarchy.count_of_counts import CountOfCounts
from hierdp.mechanisms.base import MechanismParameterError
from hierdp.mechanisms.pgsr.base import GroupSizeMechanism, _check_count_of_counts, _dynprog_solution
from hierdp.mechanisms.pgsr.problems import (
    chain_problem,
    chain_target_variances,
    cumulative_problem,
    cumulative_projection_problem,
    histogram_problem,
    prefix_problem,
)
from hierdp.mechanisms.pgsr.transforms import (
    chain_targets_from_region_cumulatives,
    chain_to_histograms,
    inverse_cumulative,
    round_half_up,
)
from hierdp.privacy.budget import Accountant
from hierdp.privacy.domain import ObservedDomainError
from hierdp.release.histogram import NodeHistogramRelease

__all__ = ["MH", "MHC", "ChainDynProg", "CumulativeDynProg", "GroupSizeTopDown", "MDynProg"]


def _histogram_posed(dp: Any, targets: np.ndarray, bound: Any, *, integer: bool = True) -> Any:
    """Model 1 on the dynamic-programming tree, with the constraint set's bounds and rows when given."""
    def build(lower: Any, upper: Any) -> Any:
        return histogram_problem(dp, targets, integer=integer, lower=lower, upper=upper)

    return build(None, None) if bound is None else bound.pose(build, bound.histogram_map())


class MH(GroupSizeMechanism):
    """M_H (§5): Model 1 through a general solver; ``relaxed=True`` is the paper's OP baseline
    M̃_H (continuous QP, then round-half-up per cell: consistency and faithfulness may break).

    ``solver``: ``"highs"`` (default; exact integer L2 as a PWL-epigraph MIP) or ``"ortools"``
    (CP-SAT); the relaxation needs a continuous QP solver: ``highs`` (small instances) or
    ``"pdlp"`` (the registry's OR-Tools first-order QP plug-in, relative tolerance 1e-8: census
    scale).
    """

    name = "M_H"
    default_solver = "highs"

    def __init__(self, epsilon: float | None = None, delta: float | None = None, *, relaxed: bool = False,
                 **kwargs: Any) -> None:
        if relaxed not in (True, False):
            raise MechanismParameterError(f"relaxed must be True or False, got {relaxed!r}")
        self.relaxed = bool(relaxed)
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

    def pose(self, data: CountOfCounts, noisy: np.ndarray, scales: Sequence[float], bound: Any
             ) -> tuple[Any, Callable[[Any], np.ndarray]]:
        dp = data.dynprog_tree()
        problem = _histogram_posed(dp, noisy, bound, integer=not self.relaxed)
        if self.region_totals_public:
            self._add_region_totals_rows(problem, data, dp)
        if self.relaxed:
            return problem, lambda sol: np.maximum(round_half_up(dp.to_by_size(sol.values)), 0)
        return problem, lambda sol: _dynprog_solution(dp, sol.values)


class MDynProg(GroupSizeMechanism):
    """M_DP (§6-7): Model 1 solved exactly by the cost-table dynamic program on the dynamic-programming hierarchy."""

    name = "M_DynProg"
    default_solver = "costtable"

    def __init__(self, epsilon: float | None = None, delta: float | None = None, **kwargs: Any) -> None:
        if kwargs.get("region_totals_public"):
            raise MechanismParameterError(
                "region_totals_public=True couples the K size subtrees (sum_k c_r^k = G_r), which the cost-table "
                "dynamic program cannot honour; use MH (exact) with solver 'highs' or 'ortools'")
        super().__init__(epsilon, delta, **kwargs)

    def pose(self, data: CountOfCounts, noisy: np.ndarray, scales: Sequence[float], bound: Any
             ) -> tuple[Any, Callable[[Any], np.ndarray]]:
        dp = data.dynprog_tree()
        return _histogram_posed(dp, noisy, bound), lambda sol: _dynprog_solution(dp, sol.values)


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
        self.consistent = not self.relaxed
        if self.relaxed:
            self.name = "M_HC relaxed"
        if formulation == "prefix" and kwargs.get("region_totals_public"):
            raise MechanismParameterError("formulation='prefix' does not pose region totals; use 'cumulative'")
        super().__init__(epsilon, delta, **kwargs)

    def params(self) -> dict[str, Any]:
        return {**super().params(), "relaxed": self.relaxed, "formulation": self.formulation}

    def notes(self) -> tuple[str, ...]:
        if self.relaxed:
            return ("relaxation rounded per cumulative entry (paper 001's OP baseline): consistency and "
                    "faithfulness are not guaranteed; count_violations() gives #CV",)
        return ()

    def pose(self, data: CountOfCounts, noisy: np.ndarray, scales: Sequence[float], bound: Any
             ) -> tuple[Any, Callable[[Any], np.ndarray]]:
        n, K = data.n_regions, data.K
        integer = not self.relaxed
        if self.formulation == "prefix":
            dp = data.dynprog_tree()

            def build_prefix(lower: Any, upper: Any) -> Any:
                return prefix_problem(data, noisy, integer=integer, lower=lower, upper=upper)

            p = build_prefix(None, None) if bound is None else bound.pose(build_prefix, bound.histogram_map())
            return p, lambda sol: self._from_cumulative(np.cumsum(dp.to_by_size(sol.values), axis=0))

        def build(lower: Any, upper: Any) -> Any:
            return cumulative_problem(data, noisy, integer=integer, region_totals_public=self.region_totals_public,
                                      lower=lower, upper=upper)

        p = build(None, None) if bound is None else bound.pose(build, bound.cumulative_map())
        return p, lambda sol: self._from_cumulative(np.asarray(sol.values).reshape(K, n))

    def _from_cumulative(self, s: np.ndarray) -> np.ndarray:
        """Γ⁻¹ of the solved cumulatives (the relaxation: running maximum and rounding first)."""
        if self.relaxed:
            s = round_half_up(np.maximum.accumulate(np.asarray(s, dtype=float), axis=0))
            return np.maximum(inverse_cumulative(s), 0)
        return inverse_cumulative(np.rint(np.asarray(s, dtype=float)).astype(np.int64))


class CumulativeDynProg(GroupSizeMechanism):
    """The approximate DP cumulative mechanism (§9.1, Alg. 2): per-region cumulative counts
    (Lemma 6), each region's vector projected onto ``0 <= s_1 <= ... <= s_K`` (continuous L2 under
    monotone chains: the registry's ``chain`` plug-in, PAVA then the lower bound), rounded half up
    (monotone, so ``Γ⁻¹ >= 0``), mapped back by Γ⁻¹; then M_DP (the cost-table dynamic program)
    makes the histograms consistent and faithful. Not Model 2's optimum: the cumulative consistency
    is restored region by region. The release's ``solver`` names both plug-ins
    (``"chain+costtable"``)."""

    name = "approx cumulative dynamic program"
    measurement = "cumulative"
    default_solver = "costtable"

    def __init__(self, epsilon: float | None = None, delta: float | None = None, **kwargs: Any) -> None:
        if kwargs.get("region_totals_public"):
            raise MechanismParameterError("region_totals_public=True couples the size subtrees; the cost-table "
                                          "dynamic program of this mechanism cannot honour it (use MHC)")
        super().__init__(epsilon, delta, **kwargs)

    #: the plug-in of the per-region projection onto monotone cumulatives
    projection_solver = "chain"

    def _probes(self, data: CountOfCounts) -> list[tuple[Any, Any]]:
        zeros = np.zeros((data.K, data.n_regions), np.int64)
        return [(self.projection_solver, cumulative_projection_problem(zeros)),
                (self.solver, _histogram_posed(data.dynprog_tree(), zeros, None))]

    @property
    def solver_name(self) -> str:
        """Both registered plug-ins: ``"<projection>+<post-processing>"``."""
        return f"{self.projection_solver}+{super().solver_name}"

    def pose(self, data: CountOfCounts, noisy: np.ndarray, scales: Sequence[float], bound: Any
             ) -> tuple[Any, Callable[[Any], np.ndarray]]:
        projected = self._solve(cumulative_projection_problem(noisy), self.projection_solver, {})
        targets = inverse_cumulative(round_half_up(np.asarray(projected.values, dtype=float).reshape(noisy.shape)))
        dp = data.dynprog_tree()
        return _histogram_posed(dp, targets, bound), lambda sol: _dynprog_solution(dp, sol.values)


class ChainDynProg(GroupSizeMechanism):
    """The chain-based cumulative DP (§9.2, Model 3) solved exactly by the ``chain`` plug-in.

    ``measure``:

    * ``"per_region"`` (default): per-region cumulative counts with Lemma 6's sensitivity 1 (ε_ℓ
      per level, parallel over regions), mapped linearly to chain coordinates (post-processing).
      The mapped targets' noise is correlated, so Model 3's unweighted L2 is not their likelihood.
    * ``"level_vector"``: the level-wide running sums of §9.2.1 measured directly, with their true
      sensitivity ``m_ℓ`` (the number of regions of the level; decision A1). The paper's text
      implies sensitivity 1 for this vector, which is not ε-DP; hierdp never uses it.
    """

    name = "chain dynamic program"
    default_solver = "chain"

    def __init__(self, epsilon: float | None = None, delta: float | None = None, *, measure: str = "per_region",
                 weighting: str = "uniform", **kwargs: Any) -> None:
        if measure not in ("per_region", "level_vector"):
            raise MechanismParameterError(f"measure must be 'per_region' or 'level_vector', got {measure!r}")
        if weighting not in ("uniform", "inverse_variance"):
            raise MechanismParameterError(f"weighting must be 'uniform' or 'inverse_variance', got {weighting!r}")
        self.weighting = weighting
        if kwargs.get("region_totals_public"):
            raise MechanismParameterError("region_totals_public=True is not a chain constraint; the chain dynamic "
                                          "program cannot honour it (use MHC)")
        self.measure = measure
        self.measurement = "cumulative" if measure == "per_region" else "level_vector"
        super().__init__(epsilon, delta, **kwargs)

    def params(self) -> dict[str, Any]:
        return {**super().params(), "measure": self.measure, "weighting": self.weighting}

    def notes(self) -> tuple[str, ...]:
        if self.measure == "level_vector":
            return ("level-wide cumulative vectors calibrated to their sensitivity m_l (regions per level), not 1",)
        return ()

    def pose(self, data: CountOfCounts, noisy: np.ndarray, scales: Sequence[float], bound: Any
             ) -> tuple[Any, Callable[[Any], np.ndarray]]:
        lp = data.regions.level_ptr
        targets = chain_targets_from_region_cumulatives(noisy, lp) if self.measure == "per_region" else noisy
        weights = None
        if self.weighting == "inverse_variance":
            weights = 1.0 / chain_target_variances(lp, data.K, scales, self.measure)
        order = data.dynprog_tree().chain_order()

        def build(lower: Any, upper: Any) -> Any:
            if bound is not None:  # every chain value is a running sum of counts, at most G: a general
                implied = np.full(order.size, float(data.G))  # solver needs the bounded domain
                upper = implied if upper is None else np.minimum(upper, implied)
            return chain_problem(data, targets, weights=weights, lower=lower, upper=upper)[0]

        p = build(None, None) if bound is None else bound.pose(build, bound.chain_map(data, order))

        def decode(sol: Any) -> np.ndarray:
            s_nodes = np.empty(order.size, np.int64)
            s_nodes[order] = np.rint(np.asarray(sol.values, dtype=float)).astype(np.int64)
            return chain_to_histograms(s_nodes[1:].reshape(data.K, data.n_regions), lp)

        return p, decode


class GroupSizeTopDown(GroupSizeMechanism):
    """TopDown on the dynamic-programming hierarchy (the paper's baseline, decision A14) at equal privacy: geometric
    noise, pure ε-DP, ε/L per region level, L1 sensitivity 2 per level (a move changes two nodes of
    a level by one); every (parent, size) group post-processed by exact integer L2 (``projection``,
    through the TopDown engine and ``solve_groups``).

    It runs on the level-wise engine of every TopDown (:mod:`hierdp.mechanisms.levelwise`): the
    (region, size) cells are the nodes of the dynamic-programming tree, so ``engine=`` /
    ``executor=`` (serial, processes, Dask; a seeded release is the same on each) and
    ``release(..., checkpoint=DIR)`` / ``resume=DIR`` work as for InfTDA."""

    name = "TopDown"
    default_solver = "projection"

    def __init__(self, epsilon: float | None = None, delta: float | None = None, *, on_infeasible: str = "abort",
                 engine: Any = None, executor: Any = None, **kwargs: Any) -> None:
        from hierdp.scale.executors import resolve_engine

        self._engine = resolve_engine(engine, executor)
        if kwargs.get("region_totals_public"):
            raise MechanismParameterError("region_totals_public=True couples the size subtrees; TopDown's per-group "
                                          "solves cannot honour it (use MHC or MH)")
        super().__init__(epsilon, delta, **kwargs)
        if self.constraints is None and on_infeasible != "abort":
            raise MechanismParameterError("on_infeasible applies only with constraints=")
        self.on_infeasible = on_infeasible  # checked by the TopDown engine (a level's rows, after its noise)

    def _probes(self, data: CountOfCounts) -> list[tuple[Any, Any]]:
        from hierdp.mechanisms.topdown.level_solver import level_probe

        return [(self.solver, level_probe("l2", True))]  # every (parent, size) group: an integer L2 level

    def params(self) -> dict[str, Any]:
        out = super().params()
        if self.constraints is not None:
            out["on_infeasible"] = self.on_infeasible
        return out

    @property
    def engine(self) -> Any:
        """The engine levels run on."""
        return self._engine

    def release(self, data: Any, *, seed: int | None = None, rng: Any = None, secure: bool | None = None,
                accountant: Accountant | None = None, progress: bool = False, checkpoint: Any = None,
                resume: Any = None) -> NodeHistogramRelease:
        """As every group-size mechanism; ``checkpoint`` / ``resume``: a directory where every
        finished level is written / a checkpoint to continue (docs/scale.md)."""
        from hierdp.mechanisms.pgsr.topdown_tree import DynProgTopDownTree
        from hierdp.mechanisms.topdown.mechanism import TopDownMechanism

        _check_count_of_counts(data, self.name)
        missing = getattr(data, "_missing_public", [])
        if missing:
            raise ObservedDomainError(f"refusing to release with {self.name}: " + " and ".join(missing)
                                      + " came from the private rows; declare it public input or state that it is "
                                      "public")
        plan = "uniform" if self.level_split == "uniform" else list(self.level_split)
        extra: dict[str, Any] = {}
        if self.constraints is not None:  # the TopDown engine applies them level by level (its own resolution)
            extra = {"constraints": self.constraints, "constraint_solver": self.constraint_solver,
                     "on_infeasible": self.on_infeasible}
        engine = TopDownMechanism(budget=self.spec.budget, delta=self.spec.delta, unit=self.unit, noise="geometric",
                                  plan=plan, objective="l2", solver=self.solver, time_limit=self.time_limit,
                                  solver_options=self.solver_options or None, secure=self.secure,
                                  engine=self._engine, **extra)
        engine.name = self.name
        tree = DynProgTopDownTree(data)
        t0 = time.perf_counter()
        rel = engine.release(tree, seed=seed, rng=rng, secure=secure, accountant=accountant, progress=progress,
                             checkpoint=checkpoint, resume=resume)
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
            params={**self.params(), **{k: rel.params.get(k) for k in ("randomness", "seed", "versions")},
                    "K": data.K, "G": data.G},
            timings={"release_s": time.perf_counter() - t0}, level_totals=data.G, consistent=True, cell_name="size")
