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
from hierdp.mechanisms.base import MechanismParameterError, RunContext
from hierdp.mechanisms.levelwise import LevelState, LevelwiseMechanism, level_randomness
from hierdp.mechanisms.topdown.level_solver import LevelSolver
from hierdp.mechanisms.topdown.plan import BudgetPlan, PerNodePlan, budget_plan, path_sums_up
from hierdp.privacy.budget import Accountant, Budget
from hierdp.privacy.calibration import exact
from hierdp.privacy.noise import NoiseModel, noise_model
from hierdp.privacy.unit import PrivacyUnit
from hierdp.release import Accounting, ReleaseLevel, TreeRelease
from hierdp.scale.levels import ChunkFailed, ChunkResult

__all__ = ["DEFAULT_SOLVERS", "TopDownMechanism"]

#: the default level solver per objective: the exact fast paths
DEFAULT_SOLVERS = {"linf": "intopt", "l2": "projection", "l1": "highs"}


class _Prep(NamedTuple):
    """What a TopDown run computes before any noise: per measured level its ledger part, its
    sensitivity and its noise parameter (None for a per-node plan, which calibrates per node)."""

    parts: dict[int, Budget]
    sens: dict[int, int]
    params: dict[int, float | None]


class _LevelJob(NamedTuple):
    """What every chunk of level L + 1 needs besides the tree (sent with each chunk)."""

    L: int                #: the parents' level
    param: float | None   #: the level's noise parameter (None: per-node plan)
    sens: int             #: the level's sensitivity
    source: Any           #: the run's randomness (counter-based streams in seeded mode)
    plan: Any             #: the level's constraints (LevelConstraints) or None


class TopDownMechanism(LevelwiseMechanism):
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

    # -- one chunk of a level (the engine's task) --------------------------------------------------
    def run_chunk(self, tree: TopDownTree, job: _LevelJob, rows: np.ndarray, parent_keys: np.ndarray,
                  parent_values: np.ndarray, parent_paths: np.ndarray | None) -> ChunkResult:
        """One chunk of level ``job.L + 1`` (:class:`~hierdp.scale.levels.LevelTask`)."""
        return self._process_chunk(tree, job.L, rows, parent_keys, parent_values,
                                   parent_paths if isinstance(self.plan, PerNodePlan) else None, job.param, job.sens,
                                   job.source, plan=job.plan)

    def _process_chunk(self, tree: TopDownTree, L: int, rows: np.ndarray, parent_keys: np.ndarray,
                       parent_values: np.ndarray, parent_paths: np.ndarray | None, param: float | None, sens: int,
                       rng: Any, plan: Any = None) -> ChunkResult:
        """One chunk of level L + 1: the children of the given parents (rows of level L, their keys,
        released values and path sums), noised, solved, the positive ones kept. Pure given its
        arguments (seeded noise is counter-based), so chunks may run anywhere, in any grouping
        (``plan``: the level's constraints; a chunk must then hold whole coupled components).

        Raises:
            ChunkFailed: the solve failed (with the parents of the failing groups).
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
                raise ChunkFailed(exc, failing) from exc
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
        # every level's noise scale is computed now, so a budget too small or too large for double
        # precision is refused before any noise (per-node plans calibrate per node as they go)
        sens = {L: self.noise.sensitivity(self.unit, finest=L == T, count=L == 0) for L in measured}
        per_node = isinstance(self.plan, PerNodePlan)
        params = {L: (None if per_node or parts[L].is_zero else
                      self.noise.calibrate(exact(parts[L], "budget"), sens[L], culprit=self._culprit))
                  for L in measured}
        if self.unit.bounded:  # the public root total bounds every count: a solver that cannot reach it
            self.level_solver.check_magnitude(float(tree.root_count))  # is refused now, before any noise
        prep = _Prep(parts, sens, params)
        ctx, state = self._release_levels(tree, data, prep, seed=seed, rng=rng, secure=secure, accountant=accountant,
                                          progress=progress, checkpoint=checkpoint, resume=resume)
        return self._make_release(tree, ctx, state, False, prep)

    def _external_on_resume(self, done: Budget, accountant: Accountant) -> Budget:
        """What a caller's accountant pays for the rest of a resumed run: the budget minus what the
        checkpoint recorded; for a pure per-node plan charged to a zCDP accountant, the increase of
        the pure composition's zCDP figure (see :meth:`RunContext.path_charge`)."""
        if (isinstance(self.plan, PerNodePlan) and self.spec.budget.calculus == "pure"
                and accountant.total.calculus == "zcdp"):
            eps, eps_done = self.spec.budget.exact_parameters["epsilon"], done.exact_parameters["epsilon"]
            return Budget("zcdp", rho=(eps * eps - eps_done * eps_done) / 2)
        return super()._external_on_resume(done, accountant)

    def _level_job(self, L: int, state: LevelState, source: Any, plan: Any, prep: _Prep, rows: np.ndarray,
                   cuts: np.ndarray | None) -> _LevelJob:
        return _LevelJob(L - 1, prep.params[L], prep.sens[L], source, plan)

    def _level_plan(self, state: LevelState, L: int) -> Any:
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

    def _release_root(self, tree: TopDownTree, ctx: RunContext, state: LevelState, source: Any, prep: _Prep) -> None:
        parts, params, sens = prep.parts, prep.params, prep.sens
        t0 = time.perf_counter()
        name = state.names[0]
        if self.unit.bounded:  # the root total is public under bounded neighbours: nothing is measured
            root_value = int(tree.root_count)
            root_path = 0.0
        else:
            if isinstance(self.plan, PerNodePlan):
                frac = float(self.plan.node_fractions(0, np.array([tree.root_key]))[0])
                root_path = frac
                param = self.noise.calibrate(exact(self.spec.budget, "budget") * self.plan.calibration_fraction(frac),
                                             sens[0], culprit=self._culprit) if frac > 0 else None
            else:
                param, root_path = params[0], 0.0
            self._spend(ctx, 0, name, parts[0], param, sens[0], label=f"level 0 ({name}) noisy root")
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

    def _spend_level(self, ctx: RunContext, L: int, state: LevelState, prep: _Prep) -> None:
        """Record level L's spend before its noise (drawn in :meth:`_process_chunk`)."""
        self._spend(ctx, L, state.names[L], prep.parts[L], prep.params[L], prep.sens[L])

    def _spend(self, ctx: RunContext, L: int, name: str, part: Budget, param: float | None, sens: int,
               label: str | None = None) -> None:
        label = label or f"level {L} ({name})"
        if param is None:  # a per-node plan: each node's parameter follows its own budget
            ctx.spend_noise(part, label, self.noise, None, sens, note=f"budget per node: {self.plan.describe(0)}",
                            external=ctx.path_charge(part))  # per-node parts are not independent mechanisms
        else:
            ctx.spend_noise(part, label, self.noise, param, sens)

    def _accounting(self, ctx: RunContext, state: LevelState, partial: bool) -> Accounting:
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

    def _make_release(self, tree: TopDownTree, ctx: RunContext, state: LevelState, partial: bool,
                      prep: Any = None) -> TreeRelease:
        n = len(state.levels)
        return TreeRelease(list(state.levels), list(state.names[:n]), self.name, self.solver_name,
                           self._accounting(ctx, state, partial), list(state.timings), list(state.stats),
                           namer=getattr(tree, "namer", None), params=ctx.params(), partial=partial)
