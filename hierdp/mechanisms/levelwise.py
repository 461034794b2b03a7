"""The level-wise engine every TopDown mechanism runs on: one loop, one accounting path, any engine.

A level-wise mechanism releases a tree a level at a time. Its nodes hold one count (paper 000's
TopDown over a :class:`~hierdp.hierarchy.topdown_tree.TopDownTree`) or a histogram of K cells (the
Census-style TopDown over a spine, the group-size TopDown over regions x sizes). At every level the
surviving nodes are the *parents*; their children are measured (noise on the answers of a query
strategy: one cell and one query for a count) and post-processed against the released parents by
the mechanism's level solver; children released non-zero survive. :class:`LevelwiseMechanism`
holds what every such mechanism shares:

* **the loop** (:meth:`LevelwiseMechanism._release_levels`): the root, then per level: the spend
  (recorded in the run's ledger through :class:`~hierdp.mechanisms.base.RunContext` before any of
  the level's noise is drawn), the level's constraint plan, the level's *job* and its chunks on the
  engine, the commit to the checkpoint, the progress bar; a failure after the noise becomes
  :class:`~hierdp.mechanisms.base.ReleaseAborted` with the partial release and the spends;
* **the randomness**: in seeded mode counter-based noise (:mod:`hierdp.privacy.counter_noise`), so
  a value's noise is a pure function of (seed, level, key) and a release is the same on every
  engine and after a resume; in secure mode the OS randomness and the exact samplers;
* **the engines** (``engine=`` / ``executor=``, :mod:`hierdp.scale.executors`): the mechanism is
  the engine's *task* (:class:`~hierdp.scale.levels.LevelTask`): ``run_chunk`` expands, measures
  and solves some parents' children, in this process or on process and Dask workers;
* **checkpoints** (``checkpoint=`` / ``resume=``, :mod:`hierdp.scale.checkpoint`).

A subclass says what is particular to it through the hooks below (the root, the spend of a
level, the job of a level, ``run_chunk``, the release it builds).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from hierdp.mechanisms.base import Mechanism, ReleaseAborted, RunContext
from hierdp.privacy.counter_noise import CounterRandom
from hierdp.privacy.budget import Accountant
from hierdp.scale.levels import ChunkFailed, ChunkResult

__all__ = ["LevelState", "LevelwiseMechanism", "coupled_order", "level_randomness"]


def level_randomness(source: Any, level: int, keys: np.ndarray) -> Any:
    """What a noise model draws a level's values with: their counter-based streams in seeded mode
    (:class:`~hierdp.privacy.counter_noise.CounterRandom`, one stream per key), the OS randomness
    in secure mode."""
    if isinstance(source, CounterRandom):
        return source.nodes(level, keys)
    return source


class LevelState:
    """What a run has produced so far (complete levels only)."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.levels: list[Any] = []  # ReleaseLevel per level: values (n,) counts or (n, K) histograms
        self.paths: list[np.ndarray | None] = []
        self.timings: list[float] = []
        self.stats: list[dict[str, Any]] = []
        self.constraints: Any = None  # the resolved constraint set, if any
        self.fixed_relaxations: list[dict[str, Any]] = []  # rows over fixed nodes relaxed at a level's start


def coupled_order(alive: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Parents reordered so that each coupled component is contiguous (placed at its first member),
    and the positions where a chunk may end (component boundaries, and the end)."""
    n = alive.size
    lab = np.where(labels >= 0, labels, -1 - np.arange(n))  # uncoupled parents: components of their own
    _, first, inv = np.unique(lab, return_index=True, return_inverse=True)
    order = np.lexsort((np.arange(n), first[inv.ravel()]))
    lab = lab[order]
    cuts = np.concatenate([np.flatnonzero(lab[1:] != lab[:-1]) + 1, [n]]).astype(np.int64)
    return alive[order], cuts


class LevelwiseMechanism(Mechanism):
    """Base of the level-wise mechanisms (see the module docstring).

    Subclasses implement :meth:`run_chunk` and the hooks ``_release_root``, ``_spend_level``,
    ``_level_job`` and ``_make_release``, and call :meth:`_release_levels` from ``release``.
    """

    #: target number of children per chunk on the serial engine: a level is processed in chunks of
    #: parents so that peak memory stays bounded on wide levels (parents are independent, so chunks
    #: are too)
    chunk_children: int = 1 << 21

    # -- engines --------------------------------------------------------------------------------
    def set_engine(self, engine: Any = None, executor: Any = None) -> LevelwiseMechanism:
        """Choose where levels run (``engine=`` / ``executor=``, :mod:`hierdp.scale.executors`);
        returns ``self``.

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

    def for_workers(self) -> LevelwiseMechanism:
        """The mechanism as process and Dask workers get it: without its engine (a cluster client
        does not travel)."""
        import copy

        from hierdp.scale.executors import SerialEngine

        clone = copy.copy(self)
        clone._engine = SerialEngine()
        return clone

    # -- what a subclass provides ---------------------------------------------------------------
    def run_chunk(self, tree: Any, job: Any, rows: np.ndarray, parent_keys: np.ndarray, parent_values: np.ndarray,
                  parent_paths: np.ndarray | None) -> ChunkResult:
        """One chunk of a level (:class:`~hierdp.scale.levels.LevelTask`)."""
        raise NotImplementedError

    def _release_root(self, tree: Any, ctx: RunContext, state: LevelState, source: Any, prep: Any) -> None:
        raise NotImplementedError

    def _spend_level(self, ctx: RunContext, L: int, state: LevelState, prep: Any) -> None:
        raise NotImplementedError

    def _level_job(self, L: int, state: LevelState, source: Any, plan: Any, prep: Any, rows: np.ndarray,
                   cuts: np.ndarray | None) -> Any:
        """Level L's job (what every chunk needs besides the tree; picklable): ``rows`` and ``cuts``
        are the parents to expand and where chunks may end (:meth:`_parents_to_expand`)."""
        raise NotImplementedError

    def _make_release(self, tree: Any, ctx: RunContext, state: LevelState, partial: bool, prep: Any) -> Any:
        raise NotImplementedError

    def _task(self, prep: Any) -> Any:
        """What the engine runs the chunks with (a :class:`~hierdp.scale.levels.LevelTask`, picklable):
        the mechanism itself by default."""
        return self

    def _resolve_constraints(self, tree: Any) -> Any:
        """The constraint set bound to ``tree`` (checked before any noise), or None."""
        return None

    def _level_plan(self, state: LevelState, L: int) -> Any:
        """Level L's constraints given the released levels 0 .. L - 1 (None without constraints)."""
        return None

    def _level_cells(self, tree: Any, L: int) -> int | None:
        """The number of cells of level L's histograms, ``None`` for counts."""
        return None

    def _parents_to_expand(self, tree: Any, state: LevelState, L: int, plan: Any
                           ) -> tuple[np.ndarray, np.ndarray | None]:
        """The parents of level L (rows of level L - 1) to expand, in the order level L is built,
        and where a chunk may end (``None``: anywhere). Default: the non-zero parents in order;
        parents a constraint row couples are made contiguous and kept in one chunk (the level is
        put back in the parents' order afterwards)."""
        prev = state.levels[-1]
        values = np.asarray(prev.values)
        alive = np.flatnonzero(values > 0 if values.ndim == 1 else (values > 0).any(axis=1))
        if plan is not None and plan.couples_parents:
            return coupled_order(alive, plan.coupling(prev.keys[alive]))
        return alive, None

    def _abort(self, tree: Any, ctx: RunContext, state: LevelState, L: int, cause: BaseException,
               parent_keys: np.ndarray | None, prep: Any, failure: ChunkFailed | None = None) -> ReleaseAborted:
        """The :class:`ReleaseAborted` of a level that failed after its noise (``parent_keys``: the
        parents of the failing solve, keys of level L - 1; ``failure``: the chunk's exception)."""
        partial = self._make_release(tree, ctx, state, True, prep)
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

    # -- the loop --------------------------------------------------------------------------------
    def _release_levels(self, tree: Any, data: Any, prep: Any, *, seed: Any, rng: Any, secure: bool | None,
                        accountant: Accountant | None, progress: bool, checkpoint: Any, resume: Any,
                        ) -> tuple[RunContext, LevelState]:
        """Run every level of ``tree`` (the loop of the module docstring). ``data`` is what the
        domain check reads; ``prep``: the subclass's pre-computed run plan, handed to its hooks.
        Returns the run's context and its state (every level released)."""
        T = int(tree.n_levels) - 1
        names = [str(x) for x in tree.level_names]
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
            session = self.engine.open(self._task(prep), tree)  # connects, sends the tree: before any noise
        except BaseException:
            if run is not None:
                run.discard_if_empty()
            raise
        try:
            given = seed is not None or rng is not None
            external = None
            if run is not None and run.resumed and accountant is not None:
                external = self._external_on_resume(run.spent_budget(self.spec.budget), accountant)
            ctx = self.start(data, seed=seed, rng=rng, secure=secure, accountant=accountant, external_total=external)
            # after the domain check (a node's existence may be private otherwise), before any noise
            resolved = self._resolve_constraints(tree)
            if run is not None and run.resumed and not given and ctx.randomness == "seeded":
                ctx.seed = run.manifest.get("seed")  # the checkpoint's seed, not one drawn for this call
            source = self._noise_source(ctx, run, given=given, seed=ctx.seed)
            state = LevelState(names)
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
                    self._release_root(tree, ctx, state, source, prep)
                    if run is not None:
                        run.commit_level(0, state, ctx)
                    first = 1
                for L in range(first, T + 1):
                    self._run_one_level(tree, ctx, state, source, prep, session, run, L)
                    if bar is not None:
                        bar.update(1)
                        bar.set_postfix(level=L, nodes=len(state.levels[-1]))
            finally:
                if bar is not None:
                    bar.close()
            if run is not None:
                run.finish()
            return ctx, state
        except BaseException:
            if run is not None:
                run.discard_if_empty()  # refused before its first level: leave no checkpoint behind
            raise
        finally:
            session.close()
            if run is not None:
                run.close()  # the checkpoint's lock

    def _run_one_level(self, tree: Any, ctx: RunContext, state: LevelState, source: Any, prep: Any, session: Any,
                       run: Any, L: int) -> None:
        t_start = time.perf_counter()
        self._spend_level(ctx, L, state, prep)
        if run is not None:  # the spend is on disk before the draw (a resume accounts it)
            run.begin_level(L, ctx)
        files = None
        try:
            plan = self._level_plan(state, L)
            rows, cuts = self._parents_to_expand(tree, state, L, plan)
            job = self._level_job(L, state, source, plan, prep, rows, cuts)
            reordered = bool(rows.size > 1 and np.any(np.diff(rows) < 0))
            # a checkpoint's parts are the level in the order it is built: only when that is the
            # release's order (parents not reordered) may the workers write them
            stage = run.staging(L) if run is not None and session.stages and not reordered else None
            level, st, paths, files = session.run_level(tree, job, L - 1, state.levels[-1], rows, cuts,
                                                        state.paths[-1], stage, self._level_cells(tree, L))
        except ChunkFailed as failed:
            raise self._abort(tree, ctx, state, L, failed.cause, failed.parent_keys, prep,
                              failure=failed) from failed.cause
        except Exception as exc:  # anything else after noise was drawn: never lose the spend
            raise self._abort(tree, ctx, state, L, exc, None, prep) from exc
        if reordered:  # back to the order of the parents (the release's canonical order)
            order = np.argsort(level.parent, kind="stable")
            level = type(level)(level.keys[order], level.parent[order], level.values[order])
            paths = paths[order] if paths is not None else None
        if state.fixed_relaxations:
            st.setdefault("relaxations", []).extend(state.fixed_relaxations)
            state.fixed_relaxations = []
        state.levels.append(level)
        state.paths.append(paths)
        state.timings.append(time.perf_counter() - t_start)
        state.stats.append(st)
        if run is not None:
            run.commit_level(L, state, ctx, files)

    def _external_on_resume(self, done: Any, accountant: Accountant) -> Any:
        """What a caller's accountant must still be able to pay when a run resumes a checkpoint
        whose spends came to ``done``: the rest of the budget."""
        return self.spec.budget._minus_clamped(done)

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
