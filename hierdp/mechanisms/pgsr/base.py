"""The shared flow of paper 001's group-size mechanisms: options, solver check, measurement, the
release (see :mod:`hierdp.mechanisms.pgsr.mechanisms` for the six mechanisms on it)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

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
        constraints: a public :class:`~hierdp.constraints.Constraints` (or the path of a constraint
            file) over regions and sizes, honoured by the post-processing solve
            (:mod:`hierdp.mechanisms.pgsr.constraints`, docs/constraints.md). Bound to the public
            structure and checked for feasibility before any noise; the noise and the ledger are
            those of the release without it.
        constraint_solver: the solver of the constrained problem when the mechanism's own solver
            cannot honour it (default: a ``solver=`` you named - kept, and refused before any
            noise if it cannot take the actual problem - else ``"auto"``, the first exact plug-in
            that accepts it).
    """

    name = "group sizes"
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
                 solver_options: dict[str, Any] | None = None, contributions: Any = 1, constraints: Any = None,
                 constraint_solver: Any = None) -> None:
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
        self._set_constraints(constraints, constraint_solver, solver is not None)

    def _set_constraints(self, constraints: Any, constraint_solver: Any, solver_given: bool) -> None:
        """Keep the constraint set (a file is read now) and check the constraint solver's name and
        capabilities (the actual problem is checked once the data's structure is known, before noise)."""
        from hierdp.constraints import ConstraintError, as_constraints

        try:
            self.constraints = as_constraints(constraints)
        except (TypeError, ConstraintError) as exc:
            raise MechanismParameterError(str(exc)) from None
        if self.constraints is None and constraint_solver is not None:
            raise MechanismParameterError("constraint_solver applies only with constraints=")
        if self.constraints is not None and not self.consistent:
            raise MechanismParameterError(f"{self.name} rounds per cell after its solve, which can break any row; "
                                          "constraints= needs an exact mechanism (relaxed=False)")
        if constraint_solver is None and self.constraints is not None:
            # a solver the user named is kept (and refused before noise if it cannot take the actual
            # problem); the mechanism's default gives way to the first exact plug-in that takes it
            constraint_solver = self.solver_name if solver_given else "auto"
        self.constraint_solver = constraint_solver
        if constraint_solver is not None and constraint_solver != "auto":
            from hierdp.solvers import get

            try:
                cap = get(constraint_solver).capabilities
            except KeyError as exc:
                raise MechanismParameterError(f"constraint_solver: {exc.args[0]}") from None
            if "linear_constraints" not in cap.features or "l2" not in cap.objectives or not cap.integer:
                raise MechanismParameterError(f"constraint_solver {constraint_solver!r} cannot honour constraint rows "
                                              "in an integer L2 problem; leave it unset (auto) or name a general "
                                              "solver ('highs', 'ortools')")
        self._bound_cache: tuple[Any, int, Any] | None = None

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
        if name == "chain":
            return ["the chain dynamic program solves chains of difference constraints, not tree consistency"]
        return []

    @property
    def solver_name(self) -> str:
        """The post-processing plug-in's name."""
        return self.solver if isinstance(self.solver, str) else self.solver.name

    def params(self) -> dict[str, Any]:
        out = {**super().params(), "solver": self.solver_name, "level_split": self.level_split,
               "measurement": self.measurement, "region_totals_public": self.region_totals_public,
               "time_limit": self.time_limit}
        constraints = getattr(self, "constraints", None)
        if constraints is not None:
            out["constraints"] = constraints.digest()
            out["constraint_solver"] = self.constraint_solver
        return out

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
        bound = self._bind_constraints(data, scales)  # public structure only, before any noise
        ctx = self.start(data, seed=seed, rng=rng, secure=secure, accountant=accountant)
        noisy = self._measure(ctx, data, parts, scales, sens)
        t1 = time.perf_counter()
        try:
            values, info = self.post_process(data, noisy, scales, bound=bound)
        except Exception as exc:
            raise ctx.aborted(exc, where="in post-processing", level_name="post-processing") from exc
        t2 = time.perf_counter()
        assumptions = tuple(data.assumptions) + ((REGION_TOTALS_ASSUMPTION,) if self.region_totals_public else ())
        details: dict[str, Any] = {"split": self.level_split, "noise": GEOMETRIC.name, "measurement": self.measurement}
        notes = self.notes()
        if bound is not None:
            from hierdp.constraints.report import accounting_parts

            details["constraints"], more = accounting_parts(bound.cells)
            notes = (*notes, *more)
        acc = ctx.accounting(assumptions=assumptions, notes=notes, details=details)
        regions = data.regions
        timings = {"measure_s": t1 - t0, "post_process_s": t2 - t1}
        if "solver_seconds" in info:  # a run diagnostic, not a parameter: never in the saved accounting
            timings["solver_s"] = float(info.pop("solver_seconds"))
        return NodeHistogramRelease(
            names=regions.names, parent=regions.parent, level=regions.level, level_names=list(regions.level_names),
            cells=data.sizes, values=values.T.copy(), accounting=acc, mechanism=self.name,
            solver=str(info.get("constraint_solver", self.solver_name)),  # with constraints: who solved them
            params=ctx.params(K=data.K, G=data.G, **info),
            timings=timings, nonnegative=True, integer=True,
            level_totals=data.G if self.consistent else None, consistent=self.consistent, cell_name="size")

    def notes(self) -> tuple[str, ...]:
        """What the release is, where it matters to a reader."""
        return ()

    def _check_data(self, data: CountOfCounts) -> None:
        """Refusals that need the data (before noise)."""

    def pose(self, data: CountOfCounts, noisy: np.ndarray, scales: Sequence[float], bound: Any
             ) -> tuple[Any, Callable[[Any], np.ndarray]]:
        """The post-processing problem of the noisy vectors (``scales``: the geometric noise scale of
        each region level; ``bound``: a :class:`~hierdp.mechanisms.pgsr.constraints.GroupSizeConstraints`
        or None) and the map from its solution to the released ``(K, n_regions)`` histograms."""
        raise NotImplementedError

    def post_process(self, data: CountOfCounts, noisy: np.ndarray, scales: Sequence[float] = (), *,
                     bound: Any = None) -> tuple[np.ndarray, dict[str, Any]]:
        """The released ``(K, n_regions)`` int64 histograms from the noisy vectors (``scales``: the
        geometric noise scale of each region level), and figures of the solve.

        With constraints, ``bound`` is their binding to ``data`` (bound here, from the public
        structure, when not given); the released histograms are checked against every entry
        exactly, in integers, before they are returned.
        """
        from hierdp.solvers.base import SolverFailed, Status

        if bound is None and self.constraints is not None:
            bound = self._bound_for(data)
        problem, decode = self.pose(data, noisy, scales, bound)
        solver, options = self._solver_for(problem, bound)
        sol = self._solve(problem, solver, options)
        values = np.asarray(decode(sol))
        info: dict[str, Any] = {"objective": float(sol.objective), "solver_seconds": float(sol.wall_time)}
        if bound is not None:
            info["constraint_solver"] = sol.solver
            bad = bound.check(values)
            if bad:  # never release a point that breaks a stated entry
                raise SolverFailed(sol.solver, Status.INFEASIBLE_RESULT, "; ".join(bad[:5]))
        return values, info

    # ------------------------------------------------------------------ constraints
    def _bound_for(self, data: CountOfCounts) -> Any:
        """The constraint set bound to ``data``'s public structure (kept for the same structure)."""
        from hierdp.mechanisms.pgsr.constraints import GroupSizeConstraints

        # kept for the same region tree object (held here, so its identity cannot be reused) and K
        cache = self._bound_cache
        if cache is None or cache[0] is not data.regions or cache[1] != data.K:
            bound = GroupSizeConstraints.bind(self.constraints, data, region_totals=self.region_totals_public,
                                              time_limit=max(60.0, float(self.time_limit or 0)))
            cache = self._bound_cache = (data.regions, data.K, bound)
        return cache[2]

    def _bind_constraints(self, data: CountOfCounts, scales: Sequence[float]) -> Any:
        """Before any noise: bind and check the constraint set, and the solver of the constrained
        problem on that problem itself (posed with zero targets: its structure is public).

        Raises:
            ConstraintError / ConstraintsInfeasible: the set does not fit the data or cannot hold.
            MechanismParameterError: no solver honours the constrained problem.
        """
        if self.constraints is None:
            return None
        from hierdp.solvers import UnsupportedProblem

        bound = self._bound_for(data)
        probe, _ = self.pose(data, np.zeros((data.K, data.n_regions), np.int64), scales, bound)  # public shape
        try:
            self._solver_for(probe, bound)
        except UnsupportedProblem as exc:
            raise MechanismParameterError(f"{self.name} with constraints: {exc}") from None
        return bound

    def _solver_for(self, problem: Any, bound: Any) -> tuple[Any, dict[str, Any]]:
        """``(solver, options)`` of ``problem``: the mechanism's own solver (with its options) when it
        honours the problem, else the constraint solver (``auto``: the first exact plug-in that does).

        Raises:
            UnsupportedProblem: no solver honours it (with the reasons).
        """
        if bound is None or self.solver == "pdlp":
            return self.solver, self.solver_options
        from hierdp.solvers import UnsupportedProblem, choose, get
        from hierdp.solvers.base import Solver

        own = self.solver if isinstance(self.solver, Solver) else get(self.solver)
        why = own.unsupported(problem)
        if not why:
            return self.solver, self.solver_options
        given = self.constraint_solver or "auto"
        if given == own.name:  # the user's general solver: kept, never swapped for another
            raise UnsupportedProblem(f"{own.name} cannot solve the constrained problem: {'; '.join(why)}")
        if given == "auto":
            try:
                return choose(problem).name, {}
            except UnsupportedProblem as exc:
                raise UnsupportedProblem(f"{own.name} cannot honour the constrained problem ({'; '.join(why)}), "
                                         f"and no exact plug-in does: {exc}") from None
        other = get(given)
        why2 = other.unsupported(problem)
        if why2:
            raise UnsupportedProblem(f"constraint_solver {other.name!r} cannot solve the constrained problem: "
                                     + "; ".join(why2))
        return other.name, {}

    # ------------------------------------------------------------------ shared post-processing
    def _solve(self, problem: Any, solver: Any = None, options: dict[str, Any] | None = None) -> Any:
        """Solve through the registry, then check feasibility independently of the plug-in
        (``Problem.violations``: every constraint, from the parent array and the rows). The
        registry's own ``verify`` adds L-inf group checks, irrelevant to these L2 problems and
        slow on millions of chain rows, so it is replaced by this check."""
        from hierdp.solvers import solve
        from hierdp.solvers.base import Solution, SolverFailed, Status

        solver = self.solver if solver is None else solver
        options = self.solver_options if options is None else options
        if solver == "pdlp":
            from hierdp.mechanisms.pgsr._pdlp import solve_relaxation

            x, st = solve_relaxation(problem, time_limit=self.time_limit, **options)
            return Solution(values=x, objective=problem.objective_value(x), status=Status.OPTIMAL, solver="pdlp",
                            wall_time=st["seconds"], stats=st)
        sol = solve(problem, solver=solver, time_limit=self.time_limit, verify=False, **options)
        bad = problem.violations(sol.values)
        if bad:
            raise SolverFailed(sol.solver, Status.INFEASIBLE_RESULT, "; ".join(bad))
        return sol

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
