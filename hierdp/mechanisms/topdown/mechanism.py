"""The TopDown mechanism: plan the budget, then per level expand → measure → post-process.

Every TopDown mechanism walks a :class:`~hierdp.hierarchy.topdown_tree.TopDownTree` level by
level. At level L it takes the surviving (released, positive) nodes, asks the tree for *all* their
children at once (zero-count children included), adds noise to every child, and post-processes the
whole level as one batch of independent groups "children of parent g sum to the parent's released
value, non-negative integers". Children released as 0 are dropped: by consistency their subtrees
are all zero and are never expanded (paper 000 Alg. 1, line 9). The three seams:

* **budget plan** (:mod:`.plan`) - the ledger spend of each measured level and, optionally, a
  budget per node: uniform (paper 000), given proportions, geometric (HTF), per node (spines);
* **noise model** (:mod:`hierdp.privacy.noise`) - discrete Gaussian (ρ-zCDP) or geometric (pure ε-DP),
  calibrated to the privacy unit's sensitivity with the scale rounded in the safe direction;
* **level solver** (:mod:`.level_solver`) - any registered solver, by name or instance, with its
  options (``executor=``, ``time_limit=``), always through :func:`hierdp.solvers.solve_groups`.

Constraints (``constraints=``, :mod:`hierdp.constraints`, docs/constraints.md): the set is resolved
against the tree when the release starts (after the domain check, before any noise). Each level
asks it for the level's plan given the released coarser levels
(:meth:`~hierdp.constraints.ResolvedConstraints.at_level`), keeps the parents its rows couple in
one chunk (:meth:`~hierdp.constraints.LevelConstraints.coupling`), and hands each chunk's block
(:meth:`~hierdp.constraints.LevelConstraints.block`) to the level solver as ``rows=``. The noise
and the ledger do not change; the accounting states the set.

Budget (paper 000 §4.1, §5, App. B): bounded neighbours (Alg. 1) keep the root public and measure
the T levels below it; unbounded (Alg. 3) also measure the root as one count (sensitivity m).
Paper 000's App. B noises the root with the levels' σ² and states a larger guarantee; hierdp
instead spends exactly the granted budget (one part for the root), so the stated guarantee is the
delivered one. Each part is recorded in the run's ledger (and the caller's accountant) before its
noise is drawn. A failure after noise was drawn raises
:class:`~hierdp.mechanisms.base.ReleaseAborted` with the partial release and the spends.

Seeded noise is counter-based (:mod:`hierdp.privacy.counter_noise`): a node's noise is a pure
function of (seed, level, node key), so a release is the same whether a level runs in one chunk,
many chunks, a process pool or a Dask cluster (``engine=`` / ``executor=``, :mod:`hierdp.scale`),
and a run resumed from a checkpoint (``release(..., checkpoint=DIR)`` / ``resume=DIR``,
:mod:`hierdp.scale.checkpoint`) equals the uninterrupted one.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import numpy as np

from hierdp.hierarchy.topdown_tree import TopDownTree, as_topdown_tree
from hierdp.mechanisms.base import Mechanism, MechanismParameterError, ReleaseAborted, RunContext
from hierdp.mechanisms.topdown.level_solver import LevelSolver
from hierdp.privacy.noise import NoiseModel, noise_model
from hierdp.mechanisms.topdown.plan import BudgetPlan, PerNodePlan, budget_plan, path_sums_up
from hierdp.privacy.budget import Accountant, Budget
from hierdp.privacy.calibration import exact
from hierdp.privacy.counter_noise import CounterRandom
from hierdp.privacy.unit import PrivacyUnit
from hierdp.release import Accounting, ReleaseLevel, TreeRelease

__all__ = ["DEFAULT_SOLVERS", "ChunkResult", "TopDownMechanism", "level_randomness", "merge_level_stats"]

#: the default level solver per objective: the exact fast paths
DEFAULT_SOLVERS = {"linf": "intopt", "l2": "projection", "l1": "highs"}


class _ChunkFailed(Exception):
    """A level's chunk failed after its noise was drawn; carries the parents of the failing solve."""

    def __init__(self, cause: BaseException, parent_keys: np.ndarray) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.parent_keys = parent_keys

    def __reduce__(self) -> tuple:  # travels back from process and Dask workers
        return (_ChunkFailed, (self.cause, self.parent_keys))


class ChunkResult(NamedTuple):
    """What one chunk (a partition) of a level produces: its children released positive."""

    keys: np.ndarray         #: child keys (level L + 1)
    parent_rows: np.ndarray  #: positions of their parents in the previous level's arrays
    values: np.ndarray       #: released values (int64, > 0)
    paths: np.ndarray | None  #: per-node plans: each child's path sum of budget fractions
    stats: dict[str, Any]    #: counts, timings and the solver's statistics


def merge_level_stats(total: dict[str, Any], part: dict[str, Any]) -> None:
    """Add one chunk's statistics into a level's: counts and seconds add up, ``max_group`` is the
    largest, other values (names) are kept as they are."""
    for k, v in part.items():
        if k == "max_group":
            total[k] = max(int(total.get(k, 0)), int(v))
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and isinstance(total.get(k, 0), (int, float)):
            total[k] = total.get(k, 0) + v
        else:
            total[k] = v


def level_randomness(source: Any, level: int, keys: np.ndarray) -> Any:
    """What a noise model draws a level's nodes with: their counter-based streams in seeded mode
    (:class:`~hierdp.privacy.counter_noise.CounterRandom`), the OS randomness in secure mode."""
    if isinstance(source, CounterRandom):
        return source.nodes(level, keys)
    return source


class TopDownMechanism(Mechanism):
    """A TopDown mechanism with swappable budget plan, noise model and level solver.

    Args:
        epsilon, delta / rho / budget: the privacy spec (exactly one of them; see
            :class:`~hierdp.privacy.spec.PrivacySpec`). With discrete Gaussian noise an (ε, δ) target is
            converted to ρ by ``conversion``; with geometric noise give ε (pure DP).
        unit, bounded, contributions, distinct: the privacy unit
            (:class:`~hierdp.privacy.unit.PrivacyUnit`).
        noise: ``"discrete_gaussian"`` (default), ``"geometric"`` or a
            :class:`~hierdp.privacy.noise.NoiseModel`.
        plan: ``"uniform"`` (default), ``"geometric"``, a list of proportions (one per measured
            level), or a :class:`~hierdp.mechanisms.topdown.plan.BudgetPlan`.
        objective: the level objective, ``"linf"``, ``"l2"`` or ``"l1"``.
        solver: a registered solver name or a :class:`~hierdp.solvers.Solver` (default: the exact
            fast path for the objective, :data:`DEFAULT_SOLVERS`).
        solver_options: options for the solver (``executor``, ``batch_size``, ...).
        time_limit: seconds per solver call (a chunk of a level).
        secure: OS randomness and exact samplers (real releases).
        conversion: ``"analytic"`` (paper 000 Lemma 3) or ``"numeric"`` for an (ε, δ) target.
        engine: where levels run: ``"serial"`` (default, this process), ``"processes"`` or
            ``"dask"``, or an engine object (:mod:`hierdp.scale.executors`); seeded releases are
            identical on every engine.
        executor: for ``"processes"`` a ``concurrent.futures.Executor`` or a number of workers;
            for ``"dask"`` a ``distributed.Client``, a scheduler address, a ``LocalCluster`` or a
            number of workers of a LocalCluster made for each release (default 2).
        constraints: a :class:`~hierdp.constraints.Constraints` (or the path of a constraint file):
            public rows, bounds, zeros and invariants over node names, honoured by the
            post-processing of every level (docs/constraints.md). Resolved against the tree and
            checked for feasibility when the release starts, before any noise; the noise and the
            ledger are those of the release without them.
        constraint_solver: the solver of the groups that rows or node bounds reach (default: the
            level solver when it accepts rows, else ``"auto"``, an exact general solver).
        on_infeasible: ``"abort"`` (default: a level whose rows cannot hold after its noise stops
            the release, naming the rows) or ``"relax"`` (the minimal L1 relaxation of the rows,
            reported row by row in the release's accounting).
    """

    name = "TopDown"
    #: target number of children per batch: a level is processed in chunks of parents so that peak
    #: memory stays bounded on wide levels (groups are independent, so chunks are too)
    chunk_children: int = 1 << 21

    def __init__(self, epsilon: float | None = None, delta: float | None = None, *, rho: float | None = None,
                 budget: Budget | None = None, unit: PrivacyUnit | None = None, bounded: bool = True,
                 contributions: int = 1, distinct: bool = False, secure: bool = False, conversion: str = "analytic",
                 noise: str | NoiseModel = "discrete_gaussian", plan: Any = "uniform", objective: str = "linf",
                 solver: Any = None, solver_options: dict[str, Any] | None = None,
                 time_limit: float | None = None, integer: bool = True, engine: Any = None,
                 executor: Any = None, constraints: Any = None, constraint_solver: Any = None,
                 on_infeasible: str = "abort") -> None:
        self.set_engine(engine, executor)
        self._set_constraints(constraints, constraint_solver, on_infeasible)
        self.noise = noise_model(noise)
        self.resolve_privacy(epsilon, delta, rho, budget, unit=unit, bounded=bounded, contributions=contributions,
                             distinct=distinct, conversion=conversion, calculus=self.noise.calculus, secure=secure)
        self.plan: BudgetPlan = budget_plan(plan)
        if objective not in DEFAULT_SOLVERS:
            raise MechanismParameterError(f"objective must be 'linf', 'l2' or 'l1', got {objective!r}")
        self.objective = objective
        self.level_solver = self._make_level_solver(solver, solver_options, time_limit, integer)

    def set_engine(self, engine: Any = None, executor: Any = None) -> TopDownMechanism:
        """Choose where levels run (see ``engine=`` / ``executor=``); returns ``self``.

        Raises:
            EngineError: an unknown engine or an executor that does not fit it.
        """
        from hierdp.scale.executors import resolve_engine

        self._engine = resolve_engine(engine, executor)
        return self

    @property
    def engine(self) -> Any:
        """The engine levels run on (:class:`~hierdp.scale.executors.SerialEngine` by default)."""
        engine = getattr(self, "_engine", None)
        if engine is None:
            from hierdp.scale.executors import SerialEngine

            engine = self._engine = SerialEngine()
        return engine

    def _make_level_solver(self, solver: Any, solver_options: Any, time_limit: Any, integer: bool) -> LevelSolver:
        return LevelSolver(solver if solver is not None else DEFAULT_SOLVERS[self.objective],
                           objective=self.objective, integer=integer, options=solver_options,
                           time_limit=time_limit, missing_targets=isinstance(self.plan, PerNodePlan),
                           **self._constraint_kwargs())

    # -- constraints (docs/constraints.md) -------------------------------------------------------
    def _set_constraints(self, constraints: Any, constraint_solver: Any, on_infeasible: str) -> None:
        """Keep the constraint set (a file path is read now: a bad file is refused before any data)."""
        from hierdp.constraints import Constraints

        if constraints is not None and not isinstance(constraints, Constraints):
            import os

            if not isinstance(constraints, (str, os.PathLike)):
                raise MechanismParameterError(f"constraints must be a hierdp.Constraints or the path of a constraint "
                                              f"file, got {type(constraints).__name__}")
            constraints = Constraints.read(constraints)
        if constraints is None and (constraint_solver is not None or on_infeasible != "abort"):
            raise MechanismParameterError("constraint_solver and on_infeasible apply only with constraints=")
        self.constraints = constraints if constraints is not None and len(constraints) else None
        self._constraint_solver = constraint_solver
        self._on_infeasible = on_infeasible

    def _constraint_kwargs(self) -> dict[str, Any]:
        """What the level solver needs to know about the constraints (checked before any noise)."""
        if getattr(self, "constraints", None) is None:
            return {}
        return {"constraints": True, "constraint_solver": self._constraint_solver,
                "on_infeasible": self._on_infeasible}

    def _resolve_constraints(self, tree: TopDownTree) -> Any:
        """Bind the constraint set to ``tree`` and check it (public structure only, before any noise)."""
        if self.constraints is None:
            return None
        from hierdp.scale.executors import SerialEngine

        if not isinstance(self.engine, SerialEngine):
            raise MechanismParameterError(f"constraints= run on the serial engine in this version, not on "
                                          f"{self.engine.describe()} (a level's rows need the released coarser "
                                          "levels, which the workers do not receive yet)")
        return self.constraints.resolve(tree, root_public=self.unit.bounded,
                                        time_limit=max(60.0, float(self.time_limit or 0)))

    # -- names and parameters ------------------------------------------------------------------
    @property
    def solver_name(self) -> str:
        """The registered name of the level solver."""
        return self.level_solver.name

    @property
    def time_limit(self) -> float | None:
        """Seconds per solver call."""
        return self.level_solver.time_limit

    def params(self) -> dict[str, Any]:
        out = {**super().params(), **self.level_solver.params(), "noise": self.noise.name, "plan": self.plan.name}
        constraints = getattr(self, "constraints", None)
        if constraints is not None:
            out["constraints"] = constraints.digest()  # part of a checkpoint's identity
        return out

    @property
    def _culprit(self) -> str:
        s = self.spec
        if s.epsilon_target is not None:
            return f"epsilon={s.epsilon_target!r}"
        return ", ".join(f"{k}={v!r}" for k, v in s.budget.parameters.items())

    def _solve_level(self, noisy: np.ndarray, offsets: np.ndarray, totals: np.ndarray,
                     rows: Any = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Post-process one batch of groups (override to change how a level is solved); ``rows``: the
        chunk's :class:`~hierdp.constraints.LevelRows`, or None."""
        if rows is None:
            return self.level_solver.solve(noisy, offsets, totals)
        return self.level_solver.solve(noisy, offsets, totals, rows=rows)

    # -- one level -------------------------------------------------------------------------------
    def _run_level(self, tree: TopDownTree, L: int, prev: ReleaseLevel, param: float | None, sens: int, rng: Any,
                   prev_paths: np.ndarray | None, plan: Any = None) -> tuple[ReleaseLevel, dict[str, Any],
                                                                           np.ndarray | None]:
        """Expand the positive nodes of level L, noise their children, solve, keep positives
        (this process, in chunks of about :attr:`chunk_children` children).

        ``plan``: the constraints of level L + 1 (:class:`~hierdp.constraints.LevelConstraints`):
        chunks then never split the parents a row couples, and each chunk's solve gets its rows.
        """
        alive = np.flatnonzero(prev.values > 0)
        cuts = None
        if plan is not None and plan.couples_parents:
            alive, cuts = _coupled_order(alive, plan.coupling(prev.keys[alive]))
        out_keys, out_par, out_val, out_path = [], [], [], []
        st: dict[str, Any] = {"parents": 0, "children": 0, "released": 0, "max_group": 0, "chunks": 0,
                              "expand_s": 0.0, "noise_s": 0.0, "solve_s": 0.0}
        start, step, seen_parents, seen_children = 0, max(1, min(4096, self.chunk_children)), 0, 0
        per_node = isinstance(self.plan, PerNodePlan)
        while start < alive.size:
            end = start + step
            if cuts is not None and end < alive.size:  # extend to the end of a coupled component
                end = int(cuts[np.searchsorted(cuts, end)])
            chunk = alive[start:end]
            start += chunk.size
            res = self._process_chunk(tree, L, chunk, prev.keys[chunk], prev.values[chunk],
                                      prev_paths[chunk] if per_node and prev_paths is not None else None, param, sens,
                                      rng, plan=plan)
            out_keys.append(res.keys)
            out_par.append(res.parent_rows)
            out_val.append(res.values)
            if res.paths is not None:
                out_path.append(res.paths)
            merge_level_stats(st, res.stats)
            # size the next chunk from the fan-out seen so far
            seen_parents += chunk.size
            seen_children += int(res.stats["children"])
            fan = max(1.0, seen_children / max(seen_parents, 1))
            step = max(1, int(self.chunk_children / fan))
        empty = np.zeros(0, np.int64)
        level = ReleaseLevel(np.concatenate(out_keys) if out_keys else empty,
                             np.concatenate(out_par) if out_par else empty.copy(),
                             np.concatenate(out_val) if out_val else empty.copy())
        new_paths = (np.concatenate(out_path) if out_path else np.zeros(0)) if per_node else None
        if cuts is not None:  # back to the order of the parents (the release's canonical order)
            order = np.argsort(level.parent, kind="stable")
            level = ReleaseLevel(level.keys[order], level.parent[order], level.values[order])
            new_paths = new_paths[order] if new_paths is not None else None
        return level, st, new_paths

    def _process_chunk(self, tree: TopDownTree, L: int, rows: np.ndarray, parent_keys: np.ndarray,
                       parent_values: np.ndarray, parent_paths: np.ndarray | None, param: float | None, sens: int,
                       rng: Any, plan: Any = None) -> ChunkResult:
        """One chunk of level L + 1: the children of the given parents (rows of level L, their keys,
        released values and path sums), noised, solved, the positive ones kept. Pure given its
        arguments (seeded noise is counter-based), so chunks may run anywhere, in any grouping
        (``plan``: the level's constraints; a chunk must then hold whole coupled components).

        Raises:
            _ChunkFailed: the solve failed (with the parents of the failing groups).
        """
        t0, cpu0 = time.perf_counter(), time.process_time()
        child_keys, offsets, true = tree.expand(L, parent_keys)
        sizes = np.diff(offsets)
        t1 = time.perf_counter()
        has = sizes > 0  # parents without children (leaves above the last level) pose no problem
        rows_has = rows[has]
        offs = np.concatenate([[0], offsets[1:][has]]).astype(np.int64)
        totals = parent_values[has]
        paths = None
        if parent_paths is not None:
            noisy, paths = self._per_node_noise(L + 1, child_keys, true, sens, np.repeat(parent_paths, sizes), rng)
        elif child_keys.size and param is not None:  # (a level of a per-node plan has no single parameter)
            noisy = true + self.noise.draw(param, child_keys.size, level_randomness(rng, L + 1, child_keys))
        else:
            noisy = true
        t2 = time.perf_counter()
        sstats: dict[str, Any] = {}
        if child_keys.size:
            try:
                block = plan.block(child_keys) if plan is not None else None
                sol, sstats = (self._solve_level(noisy, offs, totals) if block is None
                               else self._solve_level(noisy, offs, totals, rows=block))
            except Exception as exc:
                groups = getattr(exc, "groups", None)
                keys_has = parent_keys[has]
                failing = keys_has if groups is None else keys_has[np.asarray(groups, dtype=np.int64)]
                raise _ChunkFailed(exc, failing) from exc
        else:
            sol = np.zeros(0, np.int64)
        sol = np.asarray(sol, dtype=np.int64)
        t3 = time.perf_counter()
        keep = sol > 0
        st = {"parents": int(rows_has.size), "children": int(child_keys.size), "released": int(keep.sum()),
              "max_group": int(sizes.max()) if sizes.size else 0, "chunks": 1, "expand_s": t1 - t0,
              "noise_s": t2 - t1, "solve_s": t3 - t2, "cpu_s": time.process_time() - cpu0, **sstats}
        return ChunkResult(child_keys[keep], np.repeat(rows_has, sizes[has])[keep], sol[keep],
                           paths[keep] if paths is not None else None, st)

    def _per_node_noise(self, level: int, keys: np.ndarray, true: np.ndarray, sens: int, parent_paths: np.ndarray,
                        rng: Any) -> tuple[np.ndarray, np.ndarray]:
        """Noise with a budget per node (a :class:`PerNodePlan`): unmeasured nodes get NaN targets."""
        plan: PerNodePlan = self.plan  # type: ignore[assignment]
        frac = plan.node_fractions(level, keys)
        paths = path_sums_up(parent_paths, frac)  # upper bounds of the exact sums: an exact check
        plan.check_paths(level, paths)  # before this chunk's noise
        noisy = true.astype(np.float64)
        measured = frac > 0
        if measured.any():
            total = exact(self.spec.budget, "budget")
            uniq, inv = np.unique(frac[measured], return_inverse=True)
            params = np.array([self.noise.calibrate(total * plan.calibration_fraction(float(u)), sens,
                                                    culprit=self._culprit)
                               for u in uniq])
            noisy[measured] += self.noise.draw(params[inv.ravel()], int(measured.sum()),
                                               level_randomness(rng, level, keys[measured]))
        noisy[~measured] = np.nan
        return noisy, paths

    # -- the run -----------------------------------------------------------------------------------
    def release(self, data: Any, *, seed: int | None = None, rng: Any = None, secure: bool | None = None,
                accountant: Accountant | None = None, progress: bool = False, checkpoint: Any = None,
                resume: Any = None) -> TreeRelease:
        """Run the mechanism on ``data`` (a TopDownTree such as an ODTree, or a Hierarchy).

        Args:
            seed: seed of a reproducible numpy generator (experiments).
            rng: an explicit generator (``make_rng(...)``); overrides ``seed``.
            secure: OS randomness and exact samplers (default: as built).
            accountant: a caller's :class:`~hierdp.privacy.budget.Accountant` charged part by part
                before each part's noise (refused up front if it cannot pay the whole release).
            progress: show a tqdm bar over levels.
            checkpoint: a directory (new or empty) where every finished level is written with the
                accounting so far, the parameters and the input's fingerprint
                (:mod:`hierdp.scale.checkpoint`).
            resume: a checkpoint directory to continue: the finished levels are read back (never
                redrawn), their spends enter the accounting as recorded, and the run goes on from
                the next level, still checkpointing there. Without ``seed``/``rng`` a seeded run
                uses the checkpoint's; a caller's ``accountant`` is charged only for the levels this
                run measures.

        Raises:
            ObservedDomainError: the tree's nodes were read from the data and not declared public.
            UnsupportedProblem: under bounded neighbours, the solver cannot post-process levels whose
                counts reach the public root total (e.g. beyond its float64 range); before any noise.
            BudgetExceeded: the accountant cannot pay; nothing is spent.
            CheckpointError: no checkpoint to resume, or one of another input, other parameters,
                another seed or randomness (before any noise).
            SchedulerUnreachable: ``engine="dask"`` with a scheduler that cannot be reached.
            ReleaseAborted: a level failed after noise was drawn (partial release and spends attached).
        """
        tree = as_topdown_tree(data)
        T = int(tree.n_levels) - 1
        if T < 1:
            raise MechanismParameterError("the tree has no level below the root: nothing to release")
        measured = list(range(1 if self.unit.bounded else 0, T + 1))
        parts = dict(zip(measured, self.plan.level_parts(self.spec.budget, measured), strict=False))
        names = list(tree.level_names)
        # every level's noise scale is computed now, so a budget too small or too large for double
        # precision is refused before any noise (per-node plans calibrate per node as they go)
        sens = {L: self.noise.sensitivity(self.unit, finest=L == T, count=L == 0) for L in measured}
        per_node = isinstance(self.plan, PerNodePlan)
        params = {L: (None if per_node or parts[L].is_zero else
                      self.noise.calibrate(exact(parts[L], "budget"), sens[L], culprit=self._culprit))
                  for L in measured}
        if self.unit.bounded:  # the public root total bounds every count: a solver that cannot reach it
            self.level_solver.check_magnitude(float(tree.root_count))  # is refused now, before any noise
        run = None
        if checkpoint is not None or resume is not None:
            from hierdp.scale.checkpoint import CheckpointRun

            if resume is not None and secure is None and seed is None and rng is None and not self.secure:
                from hierdp.scale.checkpoint import recorded_randomness

                recorded = recorded_randomness(resume)  # a resume without randomness follows the checkpoint's
                secure = None if recorded is None else recorded == "secure"
            run = CheckpointRun.open(self, tree, checkpoint=checkpoint, resume=resume,
                                     secure=self._secure_for(secure, seed=seed, rng=rng), accountant=accountant)
        try:
            session = self.engine.open(self, tree)  # connects to a cluster, sends the tree: before any noise
        except BaseException:
            if run is not None:
                run.discard_if_empty()
            raise
        try:
            external = None
            if run is not None and run.resumed and accountant is not None:
                done = run.spent_budget(self.spec.budget)
                external = self.spec.budget._minus_clamped(done)
                if per_node and self.spec.budget.calculus == "pure" and accountant.total.calculus == "zcdp":
                    eps, eps_done = self.spec.budget.exact_parameters["epsilon"], done.exact_parameters["epsilon"]
                    external = Budget("zcdp", rho=(eps * eps - eps_done * eps_done) / 2)  # see RunContext.path_charge
            ctx = self.start(data, seed=seed, rng=rng, secure=secure, accountant=accountant, external_total=external)
            # after the domain check (a node's existence may be private otherwise), before any noise
            resolved = self._resolve_constraints(tree)
            given = seed is not None or rng is not None
            if run is not None and run.resumed and not given and ctx.randomness == "seeded":
                ctx.seed = run.manifest.get("seed")  # the checkpoint's seed, not one drawn for this call
            source = self._noise_source(ctx, run, given=given, seed=ctx.seed)
            state = _RunState(names)
            state.constraints = resolved
            bar = None
            if progress:
                from tqdm.auto import tqdm

                bar = tqdm(total=T, desc=self.name, unit="level")
            try:
                if run is not None and run.resumed:
                    first = run.restore(ctx, state)
                    if bar is not None:
                        bar.update(max(0, first - 1))
                else:
                    self._release_root(tree, ctx, parts, params, sens, state, source)
                    if run is not None:
                        run.commit_level(0, state, ctx)
                    first = 1
                for L in range(first, T + 1):
                    t_start = time.perf_counter()
                    self._spend_level(ctx, L, names[L], parts[L], params[L], sens[L], state)
                    if run is not None:  # the spend is on disk before the draw (a resume accounts it)
                        run.begin_level(L, ctx)
                    files = None
                    try:
                        plan = self._level_plan(state, L)
                        if session is None:
                            level, st, paths = self._run_level(tree, L - 1, state.levels[-1], params[L], sens[L],
                                                               source, state.paths[-1], plan=plan)
                        else:
                            stage = run.staging(L) if run is not None else None
                            level, st, paths, files = session.run_level(self, tree, L - 1, state.levels[-1],
                                                                        params[L], sens[L], source,
                                                                        state.paths[-1], stage)
                    except _ChunkFailed as failed:
                        raise self._aborted(tree, ctx, state, L, failed.cause, failed.parent_keys) from failed.cause
                    except Exception as exc:  # anything else after noise was drawn: never lose the spend
                        raise self._aborted(tree, ctx, state, L, exc, None) from exc
                    if state.fixed_relaxations:
                        st.setdefault("relaxations", []).extend(state.fixed_relaxations)
                        state.fixed_relaxations = []
                    state.levels.append(level)
                    state.paths.append(paths)
                    state.timings.append(time.perf_counter() - t_start)
                    state.stats.append(st)
                    if run is not None:
                        run.commit_level(L, state, ctx, files)
                    if bar is not None:
                        bar.update(1)
                        bar.set_postfix(level=L, nodes=len(level))
            finally:
                if bar is not None:
                    bar.close()
            release = self._make_release(tree, ctx, state, partial=False)
            if run is not None:
                run.finish()
            return release
        except BaseException:
            if run is not None:
                run.discard_if_empty()  # refused before its first level: leave no checkpoint behind
            raise
        finally:
            if session is not None:
                session.close()
            if run is not None:
                run.close()  # the checkpoint's lock

    def _level_plan(self, state: _RunState, L: int) -> Any:
        """Level L's constraints given the released levels 0 .. L - 1 (None without constraints).

        Rows whose every node is already fixed are checked here: one that does not hold stops the
        release (naming it), or with ``on_infeasible="relax"`` is reported relaxed.

        Raises:
            ConstraintsInfeasible: a row over fixed nodes only does not hold.
        """
        resolved = state.constraints
        if resolved is None:
            return None
        plan = resolved.at_level(L, state.levels)
        if plan.fixed_violations:
            from hierdp.constraints import ConstraintsInfeasible

            if self._on_infeasible != "relax":
                shown = "; ".join(f"{plan.rows.name[r]!r} reads {act:,.0f}" for r, act in plan.fixed_violations[:5])
                raise ConstraintsInfeasible(f"rows whose nodes are all fixed once the levels above {state.names[L]} "
                                            f"were released do not hold: {shown} (pass on_infeasible='relax' to "
                                            "release with them relaxed)",
                                            entries=[str(plan.rows.name[r]) for r, _ in plan.fixed_violations],
                                            level=L)
            for r, act in plan.fixed_violations:
                lo, hi = plan.rows.lo[r], plan.rows.hi[r]
                # the fixed activity is what the row now reads: widen the violated side to it
                lower_by = float(lo - act) if act < lo else 0.0
                upper_by = float(act - hi) if act > hi else 0.0
                state.fixed_relaxations.append({"row": str(plan.rows.name[r]), "level": L, "lower_by": lower_by,
                                                "upper_by": upper_by})
        return plan if plan.has_work else None

    def _noise_source(self, ctx: RunContext, run: Any, *, given: bool, seed: Any) -> Any:
        """The run's randomness: OS randomness (secure), or the counter-based source keyed from the
        seed / generator (seeded). A resumed seeded run takes the checkpoint's key, and refuses a
        seed that gives another one."""
        from hierdp.privacy.rng import SecureRandom

        if isinstance(ctx.rng, SecureRandom):
            return ctx.rng
        if run is not None and run.resumed and run.noise_key is not None:
            if not given:
                return CounterRandom(run.noise_key)
            source = CounterRandom.from_generator(ctx.rng)
            if source.key != run.noise_key:
                from hierdp.scale.errors import CheckpointError

                seed_then = run.manifest.get("seed")
                raise CheckpointError(f"checkpoint {run.directory} was made with another seed"
                                      + (f" ({seed_then})" if seed_then is not None else "")
                                      + "; resume without a seed (the checkpoint's is used) or with the same one")
            return source
        source = CounterRandom.from_generator(ctx.rng)
        if run is not None:
            run.set_noise_key(source.key, seed)
        return source

    def _release_root(self, tree: TopDownTree, ctx: RunContext, parts: dict[int, Budget],
                      params: dict[int, Any], sens: dict[int, int], state: _RunState, source: Any = None) -> None:
        t0 = time.perf_counter()
        name = state.names[0]
        if self.unit.bounded:  # the root total is public under bounded neighbours: nothing is measured
            root_value = int(tree.root_count)
            root_path = 0.0
        else:
            if isinstance(self.plan, PerNodePlan):
                frac = float(self.plan.node_fractions(0, np.array([tree.root_key]))[0])
                root_path = frac
                param = self.noise.calibrate(exact(self.spec.budget, "budget") * self.plan.calibration_fraction(frac), sens[0],
                                             culprit=self._culprit) if frac > 0 else None
            else:
                param, root_path = params[0], 0.0
            self._spend_level(ctx, 0, name, parts[0], param, sens[0], state, label=f"level 0 ({name}) noisy root")
            if param is None:
                raise MechanismParameterError("the unbounded root must be measured (its budget fraction is 0)")
            source = ctx.rng if source is None else source
            root = np.array([tree.root_key], np.int64)
            noisy = int(tree.root_count) + int(self.noise.draw(param, 1, level_randomness(source, 0, root))[0])
            root_value = max(noisy, 0)  # post-processing: a count cannot be negative
            if state.constraints is not None:  # and must fit the interval the constraints imply
                root_value = state.constraints.clip_root(root_value)
        state.levels.append(ReleaseLevel(np.array([tree.root_key], np.int64), np.array([-1], np.int64),
                                         np.array([root_value], np.int64)))
        state.paths.append(np.array([root_path]) if isinstance(self.plan, PerNodePlan) else None)
        state.timings.append(time.perf_counter() - t0)
        state.stats.append({"released": 1})

    def _spend_level(self, ctx: RunContext, L: int, name: str, part: Budget, param: float | None, sens: int,
                     state: _RunState, label: str | None = None) -> None:
        """Record level L's spend before its noise (drawn in :meth:`_process_chunk`)."""
        label = label or f"level {L} ({name})"
        if param is None:  # a per-node plan: each node's parameter follows its own budget
            ctx.spend_noise(part, label, self.noise, None, sens, note=f"budget per node: {self.plan.describe(0)}",
                            external=ctx.path_charge(part))  # per-node parts are not independent mechanisms
        else:
            ctx.spend_noise(part, label, self.noise, param, sens)

    def _accounting(self, ctx: RunContext, state: _RunState, partial: bool) -> Accounting:
        key = self.noise.sensitivity_name
        sens_values = [s.details[key] for s in ctx.spends if key in s.details]
        details: dict[str, Any] = {"split": self.plan.describe(len(sens_values)), "noise": self.noise.name,
                                   "plan": self.plan.name, key: max(sens_values) if sens_values else None}
        notes: tuple[str, ...] = ()
        resolved = getattr(state, "constraints", None)
        if resolved is not None:
            from hierdp.constraints.report import accounting_parts

            details["constraints"], notes = accounting_parts(
                resolved, on_infeasible=self._on_infeasible, level_names=state.names,
                relaxations=[r for st in state.stats for r in st.get("relaxations", ())])
        return ctx.accounting(details=details, notes=notes, partial=partial)

    def _make_release(self, tree: TopDownTree, ctx: RunContext, state: _RunState, partial: bool) -> TreeRelease:
        n = len(state.levels)
        return TreeRelease(list(state.levels), list(state.names[:n]), self.name, self.solver_name,
                           self._accounting(ctx, state, partial), list(state.timings), list(state.stats),
                           namer=getattr(tree, "namer", None), params=ctx.params(), partial=partial)

    def _aborted(self, tree: TopDownTree, ctx: RunContext, state: _RunState, L: int, cause: BaseException,
                 parent_keys: np.ndarray | None) -> ReleaseAborted:
        partial = self._make_release(tree, ctx, state, partial=True)
        where = ""
        if parent_keys is not None and len(parent_keys):
            shown = parent_keys[:5]
            namer = getattr(tree, "namer", None)
            try:
                labels = [str(x) for x in (namer.key_names(L - 1, shown) if namer is not None else shown)]
            except Exception:  # a namer that cannot label these keys must not hide the real error
                labels = [str(k) for k in shown]
            more = f" and {len(parent_keys) - len(shown)} more" if len(parent_keys) > len(shown) else ""
            where = f", parent {', '.join(labels)}{more}"
        return ctx.aborted(cause, where=f"at level {L} ({state.names[L]}){where}", partial=partial, level=L,
                           level_name=state.names[L], parents=parent_keys)


class _RunState:
    """What a run has produced so far (complete levels only)."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.levels: list[ReleaseLevel] = []
        self.paths: list[np.ndarray | None] = []
        self.timings: list[float] = []
        self.stats: list[dict[str, Any]] = []
        self.constraints: Any = None  # the resolved constraint set (hierdp.constraints), if any
        self.fixed_relaxations: list[dict[str, Any]] = []  # rows over fixed nodes relaxed at a level's start


def _coupled_order(alive: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Parents reordered so that each coupled component is contiguous (placed at its first member),
    and the positions where a chunk may end (component boundaries, and the end)."""
    n = alive.size
    lab = np.where(labels >= 0, labels, -1 - np.arange(n))  # uncoupled parents: components of their own
    _, first, inv = np.unique(lab, return_index=True, return_inverse=True)
    order = np.lexsort((np.arange(n), first[inv.ravel()]))
    lab = lab[order]
    cuts = np.concatenate([np.flatnonzero(lab[1:] != lab[:-1]) + 1, [n]]).astype(np.int64)
    return alive[order], cuts

