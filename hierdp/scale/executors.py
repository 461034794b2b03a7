"""Where a level of a level-wise mechanism runs: in this process, on a process pool, or on Dask.

Every TopDown (``InfTDA``, ``TDA``, ``TopDownMechanism``, ``CensusTopDown``, ``GroupSizeTopDown``,
``CensusPostProcess``) takes ``engine=`` / ``executor=``:

* ``engine="serial"`` (default): this process, the level in chunks of parents;
* ``engine="processes"``: a process pool; ``executor=`` an ``int`` (workers, default 2; the pool
  starts them from a fork server that has imported hierdp once) or a
  ``concurrent.futures.Executor`` you made (it is not shut down);
* ``engine="dask"``: a Dask cluster; ``executor=`` a ``distributed.Client``, a scheduler address
  (``"tcp://host:8786"``), a ``LocalCluster``, an ``int`` (workers of a ``LocalCluster`` made for
  the run, threads 1 each), or nothing (a 2-worker ``LocalCluster``);
* or an engine object (:class:`SerialEngine`, :class:`ProcessEngine`, :class:`DaskEngine`) for
  the options below.

An engine runs a mechanism's *task* (:class:`~hierdp.scale.levels.LevelTask`; this module imports
no mechanism): :meth:`Engine.open` sends it and the run's input once (Dask: ``scatter(...,
broadcast=True)``; processes: one pickle each worker loads once) and returns a :class:`Session`,
whose :meth:`Session.run_level` cuts a level's parents into chunks - contiguous partitions of
about ``partition_children`` children (at least one per worker when there are enough parents),
ending only where the mechanism allows (``cuts``: parents a constraint row couples, the census's
solve batches) - runs ``task.run_chunk`` on each with the level's *job*, and concatenates the
results in order, so the level is the serial one: a seeded release is the same bit for bit on
every engine (counter-based noise: a value's noise depends only on the seed, the level and its
key). With a checkpoint the workers write each partition as a Parquet part. Everything that can
fail is checked before any noise: an unknown engine, a scheduler that cannot be reached
(:class:`~hierdp.scale.errors.SchedulerUnreachable`), a task or input that cannot be pickled.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import copy
import multiprocessing as mp
import os
import pickle
import signal
import socket
import sys
import tempfile
import threading
import time
import weakref
from typing import Any

import numpy as np

from hierdp.scale.errors import EngineError, SchedulerUnreachable
from hierdp.scale.levels import assemble_level
from hierdp.scale.partition import child_counts, partition_rows

__all__ = ["ENGINES", "MAIN_GUARD_HINT", "DaskEngine", "Engine", "ProcessEngine", "SerialEngine", "make_pool",
           "resolve_engine", "terminate_pool", "terminate_pools"]

ENGINES = ("serial", "processes", "dask")
#: children per partition by default: a task's memory stays in the tens of MB
DEFAULT_PARTITION_CHILDREN = 1 << 20
#: how a pool made here starts its processes: "forkserver" (a clean server process that has
#: imported hierdp once; workers are forked from it - safe next to threads, and fast) where the
#: platform has it, else "spawn"
START_METHOD = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
#: what a forkserver imports before it forks workers
PRELOAD = ["hierdp.scale._forkserver", "hierdp.mechanisms.topdown.mechanism", "hierdp.mechanisms.census.mechanism",
           "hierdp.scale.executors", "hierdp.scale.checkpoint"]


def pool_context(method: str | None = None) -> Any:
    """The multiprocessing context of the pools made here (see :data:`START_METHOD`)."""
    ctx = mp.get_context(method or START_METHOD)
    if ctx.get_start_method() == "forkserver":
        ctx.set_forkserver_preload(PRELOAD)
    return ctx


# -- the lifecycle of a pool made here --------------------------------------------------------------
#: seconds between a worker's checks that the process that made its pool is alive
WATCHDOG_INTERVAL = 0.2
#: seconds a new pool's workers get to start (import hierdp, load the run) before the run is refused
POOL_START_TIMEOUT = 300.0
#: exit code of a worker that found the process that made its pool gone
ORPHAN_EXIT = 75
#: how to fix a script whose workers cannot start because it re-runs itself in them
MAIN_GUARD_HINT = (
    "every platform starts the workers of engine='processes' by importing the main script again (fork server on "
    "Linux, spawn on macOS and Windows), so a script must run its release only under "
    "`if __name__ == \"__main__\":` (see docs/scale.md)")
#: pools made by :func:`make_pool` and not yet shut down (ended by :func:`terminate_pools`)
_POOLS: weakref.WeakSet[cf.ProcessPoolExecutor] = weakref.WeakSet()


def _importing_main() -> bool:
    """True inside a worker that is still importing the main script (multiprocessing's bootstrap):
    a script without the ``__main__`` guard is running its release again there."""
    return bool(getattr(mp.current_process(), "_inheriting", False))


def _owner_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie - exited, not yet reaped - counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:  # no /proc (macOS): kill(0) answered
        return True
    return stat[stat.rindex(b")") + 2:stat.rindex(b")") + 3] != b"Z"


def _die_with_parent() -> None:
    """Linux: the kernel sends this worker SIGKILL when its parent (the fork server, which exits
    when the process that started it does; or that process itself under spawn) exits."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # no usable libc: the watchdog below still ends the worker
        pass


def _watch_owner(owner: int, parent: int) -> None:
    while True:
        time.sleep(WATCHDOG_INTERVAL)
        if os.getppid() != parent or not _owner_alive(owner):
            os._exit(ORPHAN_EXIT)


def _worker_init(owner: int, state: tuple[str, str] | None, started: Any) -> None:
    """Start of a worker of a pool made by :func:`make_pool`: end with the process that made the
    pool (whatever kills it, SIGKILL included), load the run's state, then wait until every worker
    of the pool has started."""
    _die_with_parent()
    parent = os.getppid()
    threading.Thread(target=_watch_owner, args=(owner, parent), name="hierdp-owner-watchdog", daemon=True).start()
    if not _owner_alive(owner):  # died before the watchdog started
        os._exit(ORPHAN_EXIT)
    if state is not None:
        _load_cached(state)
    started.wait(POOL_START_TIMEOUT)


def _started() -> int:
    return os.getpid()


def make_pool(workers: int, state: tuple[str, str] | None = None, *,
              timeout: float = POOL_START_TIMEOUT) -> cf.ProcessPoolExecutor:
    """A process pool of ``workers`` processes, started and checked now (before any noise).

    Every worker ends when the process that made the pool ends, however it ends (an exception,
    Ctrl-C, SIGTERM or SIGKILL): Linux's parent-death signal, and on every platform a watchdog
    thread that checks the owner every :data:`WATCHDOG_INTERVAL` seconds. Each worker loads
    ``state`` (``(path, token)`` of a pickle of ``(mechanism, tree)``) before the pool counts as
    started, so the caller can delete the file as soon as this returns.

    Raises:
        EngineError: the workers cannot start - a script without the ``__main__`` guard
            (:data:`MAIN_GUARD_HINT`), a broken environment, or not within ``timeout`` seconds.
    """
    if _importing_main():
        raise EngineError(f"engine='processes' was asked for a pool while a worker was still importing the main "
                          f"script: {MAIN_GUARD_HINT}")
    ctx = pool_context()
    started = ctx.Barrier(workers)
    pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init,
                                  initargs=(os.getpid(), state, started))
    _POOLS.add(pool)
    try:
        # one task per worker: each waits in its initializer until all have started (so the pool
        # spawns all of them now: it starts a process only when none is idle)
        for f in [pool.submit(_started) for _ in range(workers)]:
            f.result(timeout=timeout)
    except BaseException as exc:
        terminate_pool(pool)
        if isinstance(exc, cf.process.BrokenProcessPool):
            main_file = getattr(sys.modules.get("__main__"), "__file__", None)
            hint = (f"the main script {main_file!r} is not a file the workers can import (run the code from a "
                    "file, or use engine='serial')" if main_file is not None and not os.path.isfile(main_file)
                    else f"if this runs from a script: {MAIN_GUARD_HINT}")
            raise EngineError(f"engine='processes': the worker processes could not start ({exc}); nothing was "
                              f"released and no noise was drawn; {hint}") from None
        if isinstance(exc, cf.TimeoutError):
            raise EngineError(f"engine='processes': the {workers} worker processes did not start within "
                              f"{timeout:g} s; nothing was released and no noise was drawn") from None
        raise
    return pool


def terminate_pool(pool: cf.ProcessPoolExecutor, grace: float = 1.0) -> None:
    """End a pool now: cancel what is queued, SIGTERM its workers, SIGKILL those still alive after
    ``grace`` seconds (never waits for a running task to finish)."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    for p in procs:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            p.terminate()
    deadline = time.monotonic() + grace
    for p in procs:
        with contextlib.suppress(OSError, ValueError, AttributeError, AssertionError):
            p.join(max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join(1.0)
    with contextlib.suppress(Exception):  # the pool is broken now; only its bookkeeping is left
        pool.shutdown(wait=False, cancel_futures=True)
    _POOLS.discard(pool)


def terminate_pools() -> None:
    """End every pool :func:`make_pool` made in this process and not yet shut down (the command line
    calls it when it is interrupted or terminated, before it exits)."""
    for pool in list(_POOLS):
        terminate_pool(pool, grace=0.5)


def _dumps(obj: Any) -> bytes:
    """Pickle with cloudpickle when available (lambdas in a per-node plan), else pickle."""
    try:
        import cloudpickle

        return cloudpickle.dumps(obj)
    except ImportError:  # cloudpickle comes with dask; plain pickle otherwise
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def worker_copy(task: Any) -> Any:
    """The task as workers get it: ``task.for_workers()`` when it has one, else a shallow copy
    without its engine (a cluster client does not travel)."""
    method = getattr(task, "for_workers", None)
    if callable(method):
        return method()
    clone = copy.copy(task)
    if hasattr(clone, "_engine"):
        clone._engine = SerialEngine()
    return clone


class Engine:
    """Base of the engines: :meth:`open` returns a session for one release."""

    name = "serial"

    def open(self, task: Any, tree: Any) -> Session:
        """Prepare a release (connect, send the task and the tree) before any noise."""
        return _SerialSession(task)

    def describe(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class SerialEngine(Engine):
    """This process, a level in chunks of parents (``chunk_children`` of the mechanism)."""

    name = "serial"


class _PartitionedEngine(Engine):
    def __init__(self, partition_children: int = DEFAULT_PARTITION_CHILDREN) -> None:
        if isinstance(partition_children, bool) or not isinstance(partition_children, (int, np.integer)) \
                or partition_children < 1:
            raise EngineError(f"partition_children must be a positive integer, got {partition_children!r}")
        self.partition_children = int(partition_children)


class ProcessEngine(_PartitionedEngine):
    """A process pool.

    Args:
        executor: a ``concurrent.futures.Executor`` (used as is, not shut down), or ``None`` for
            a pool of ``workers`` processes made for each release (see :data:`START_METHOD`).
        workers: the pool's size when it is made here (default 2).
        partition_children: children per task (see the module docstring).
    """

    name = "processes"

    def __init__(self, executor: cf.Executor | None = None, *, workers: int = 2,
                 partition_children: int = DEFAULT_PARTITION_CHILDREN) -> None:
        super().__init__(partition_children)
        if executor is not None and not isinstance(executor, cf.Executor):
            raise EngineError(f"executor must be a concurrent.futures.Executor, got {type(executor).__name__}")
        if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 1:
            raise EngineError(f"workers must be a positive integer, got {workers!r}")
        self.executor = executor
        self.workers = int(workers)

    def open(self, task: Any, tree: Any) -> Session:
        return _ProcessSession(self, task, tree)

    def describe(self) -> str:
        return f"processes ({type(self.executor).__name__ if self.executor else f'{self.workers} workers'})"

    def __repr__(self) -> str:
        return f"ProcessEngine(executor={self.executor!r}, workers={self.workers})"


class DaskEngine(_PartitionedEngine):
    """A Dask cluster.

    Args:
        executor: a ``distributed.Client``; a scheduler address (``"tcp://10.0.0.5:8786"``); a
            ``distributed.LocalCluster``; or ``None`` for a ``LocalCluster`` of ``workers``
            single-threaded worker processes made for each release and closed after it.
        workers: the size of a LocalCluster made here (default 2).
        partition_children: children per task (see the module docstring).
        connect_timeout: seconds to reach a scheduler address before giving up.
    """

    name = "dask"

    def __init__(self, executor: Any = None, *, workers: int = 2, partition_children: int = DEFAULT_PARTITION_CHILDREN,
                 connect_timeout: float = 10.0) -> None:
        super().__init__(partition_children)
        if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 1:
            raise EngineError(f"workers must be a positive integer, got {workers!r}")
        if not (isinstance(connect_timeout, (int, float)) and connect_timeout > 0):
            raise EngineError(f"connect_timeout must be a positive number of seconds, got {connect_timeout!r}")
        if executor is not None and not isinstance(executor, str):
            kind = type(executor).__name__
            if not (hasattr(executor, "submit") and hasattr(executor, "scatter")) and not hasattr(executor,
                                                                                                  "scheduler_address"):
                raise EngineError(f"executor for engine='dask' must be a distributed.Client, a LocalCluster or a "
                                  f"scheduler address, got {kind}")
        import importlib.util

        if importlib.util.find_spec("distributed") is None:
            raise EngineError("engine='dask' needs dask.distributed: pip install 'hierdp[dask]'")
        self.executor = executor
        self.workers = int(workers)
        self.connect_timeout = float(connect_timeout)

    def open(self, task: Any, tree: Any) -> Session:
        return _DaskSession(self, task, tree)

    def describe(self) -> str:
        if isinstance(self.executor, str):
            return f"dask (scheduler {self.executor})"
        if self.executor is None:
            return f"dask (LocalCluster, {self.workers} workers)"
        return f"dask ({type(self.executor).__name__})"

    def __repr__(self) -> str:
        return f"DaskEngine(executor={self.executor!r}, workers={self.workers})"


def resolve_engine(engine: Any = None, executor: Any = None) -> Engine:
    """An :class:`Engine` from ``engine=`` / ``executor=`` (see the module docstring).

    Raises:
        EngineError: an unknown engine name, or an executor that does not fit the engine.
    """
    if isinstance(engine, Engine):
        if executor is not None:
            raise EngineError("give executor= to the engine object, not beside it")
        return engine
    if engine is None:
        engine = "serial"
        if executor is not None:
            raise EngineError("executor= needs engine='processes' or engine='dask'")
    if engine == "serial":
        if executor is not None:
            raise EngineError("the serial engine runs in this process and takes no executor; use "
                              "engine='processes' or engine='dask'")
        return SerialEngine()
    if engine == "processes":
        if isinstance(executor, (int, np.integer)) and not isinstance(executor, bool):
            return ProcessEngine(workers=int(executor))
        return ProcessEngine(executor)
    if engine == "dask":
        if isinstance(executor, (int, np.integer)) and not isinstance(executor, bool):
            return DaskEngine(workers=int(executor))
        return DaskEngine(executor)
    raise EngineError(f"engine must be one of {', '.join(map(repr, ENGINES))} or an Engine, got {engine!r}")


# ---------------------------------------------------------------------------- sessions
class Session:
    """One release on an engine: runs its levels (:meth:`run_level`), then :meth:`close`."""

    workers = 1
    partition_children = DEFAULT_PARTITION_CHILDREN
    engine_name = ""
    #: whether the chunks write their parts of a checkpoint themselves (``stage_dir``)
    stages = True
    #: children per parent seen at each level so far (sizes the next level's partitions)
    _fan_out: dict[int, float]

    def run_level(self, tree: Any, job: Any, L: int, prev: Any, rows: np.ndarray, cuts: np.ndarray | None,
                  prev_paths: np.ndarray | None, stage_dir: Any = None, cells: int | None = None
                  ) -> tuple[Any, dict[str, Any], Any, list | None]:
        """Level ``L + 1`` from the released level ``L`` (``prev``): ``(level, stats, paths, files)``.

        Args:
            tree, job: the run's input and the level's job (:mod:`hierdp.scale.levels`).
            rows: the parents to expand (positions in ``prev``), in the order the level is built.
            cuts: where a chunk may end (positions in ``rows``, increasing, the last ``rows.size``),
                or ``None``: anywhere. Parents that a constraint row couples stay in one chunk.
            prev_paths: the parents' path sums (per-node plans) or ``None``.
            stage_dir: a directory where each chunk writes its part of the level (checkpoints).
            cells: the number of cells of a histogram level, ``None`` for counts.
        """
        sizes = child_counts(tree, L, prev.keys[rows])
        fan = self._fan_out.get(L, 1.0)
        parts = partition_rows(rows, sizes, target_children=self.partition_children, min_parts=self.workers,
                               fan_out=fan, cuts=cuts)
        payloads = [(i, L, part, prev.keys[part], prev.values[part],
                     None if prev_paths is None else prev_paths[part], None if stage_dir is None else str(stage_dir))
                    for i, part in enumerate(parts)]
        results = self._map(job, payloads)
        level, st, new_paths = assemble_level([r for r, _, _ in results], per_node=prev_paths is not None,
                                              cells=cells)
        cpu_by_worker: dict[str, float] = {}
        for res, _, worker in results:
            cpu_by_worker[worker] = cpu_by_worker.get(worker, 0.0) + float(res.stats.get("cpu_s", 0.0))
        files = [info for _, info, _ in results if info is not None]
        st["partitions"] = len(parts)
        st["engine"] = self.engine_name
        st["cpu_by_worker"] = cpu_by_worker  # CPU seconds of this level's tasks, per worker process
        if st["parents"]:
            self._fan_out[L + 1] = max(1.0, st["children"] / st["parents"])
        return level, st, new_paths, (files if stage_dir is not None else None)

    def _map(self, job: Any, payloads: list[tuple]) -> list[tuple[Any, Any, str]]:
        raise NotImplementedError

    def close(self) -> None:
        """Release what the session holds (a cluster made for the run, a pool, temporary files)."""


class _SerialSession(Session):
    """This process: a level in chunks of about ``task.chunk_children`` children, each chunk sized
    from the fan-out seen so far in the level (memory stays bounded on wide levels)."""

    engine_name = "serial"
    stages = False

    def __init__(self, task: Any) -> None:
        self._task = task

    def run_level(self, tree: Any, job: Any, L: int, prev: Any, rows: np.ndarray, cuts: np.ndarray | None,
                  prev_paths: np.ndarray | None, stage_dir: Any = None, cells: int | None = None
                  ) -> tuple[Any, dict[str, Any], Any, list | None]:
        target = int(getattr(self._task, "chunk_children", DEFAULT_PARTITION_CHILDREN))
        results = []
        start, step, seen_parents, seen_children = 0, max(1, min(4096, target)), 0, 0
        while start < rows.size:
            end = start + step
            if cuts is not None and end < rows.size:  # extend to the end of a coupled component
                end = int(cuts[np.searchsorted(cuts, end)])
            chunk = rows[start:end]
            start += chunk.size
            res = self._task.run_chunk(tree, job, chunk, prev.keys[chunk], prev.values[chunk],
                                       None if prev_paths is None else prev_paths[chunk])
            results.append(res)
            # size the next chunk from the fan-out seen so far
            seen_parents += chunk.size
            seen_children += int(res.stats["children"])
            fan = max(1.0, seen_children / max(seen_parents, 1))
            step = max(1, int(target / fan))
        level, st, new_paths = assemble_level(results, per_node=prev_paths is not None, cells=cells)
        return level, st, new_paths, None


def run_partition(task: Any, tree: Any, job: Any, payload: tuple) -> tuple[Any, Any, str]:
    """One task: expand, measure, solve one partition; write its Parquet part when staging. Returns
    the partition's result, its part's file entry (or ``None``) and the worker that ran it."""
    from hierdp.scale.checkpoint import write_level_part

    index, _, rows, pkeys, pvalues, ppaths, stage = payload
    res = task.run_chunk(tree, job, rows, pkeys, pvalues, ppaths)
    info = None
    if stage is not None:
        info = write_level_part(os.path.join(stage, f"part-{index:05d}.parquet"), res.keys, res.parent_rows,
                                res.values, res.paths)
    return res, info, f"{socket.gethostname()}:{os.getpid()}"


# -- processes ------------------------------------------------------------------------------------
_WORKER_CACHE: dict[tuple[str, str], Any] = {}


def _load_cached(ref: tuple[str, str]) -> Any:
    obj = _WORKER_CACHE.get(ref)
    if obj is None:
        with open(ref[0], "rb") as f:
            obj = pickle.load(f)
        _WORKER_CACHE.clear()  # one run's objects at a time
        _WORKER_CACHE[ref] = obj
    return obj


def _process_task(ref: tuple[str, str], job: Any, payload: tuple) -> tuple[Any, Any, str]:
    task, tree = _load_cached(ref)
    return run_partition(task, tree, job, payload)


class _StateFile:
    """The run's ``(mechanism, tree)`` pickle - private counts - for the workers to load, never left
    behind: on Linux an unnamed file (no directory entry, gone with this process however it ends)
    that workers open through ``/proc/<pid>/fd``; elsewhere a file only this user can read, deleted
    once the workers have it or when the run ends.

    Attributes:
        ref: what a task names the state by: ``(path, token)``; the token keeps a worker of a
            long-lived pool from reusing another run's state under a recycled path.
    """

    def __init__(self, blob: bytes) -> None:
        self._handle: Any = None
        self._named: str | None = None
        token = os.urandom(8).hex()
        if os.path.isdir(f"/proc/{os.getpid()}/fd"):
            handle = tempfile.TemporaryFile(prefix="hierdp-run-")  # noqa: SIM115 (kept open for the run)
            try:
                handle.write(blob)
                handle.flush()
                path = f"/proc/{os.getpid()}/fd/{handle.fileno()}"
                with open(path, "rb") as check:  # readable through /proc (not on every kernel setup)
                    check.read(1)
            except OSError:
                handle.close()
            else:
                self._handle, self.ref = handle, (path, token)
                return
        fd, self._named = tempfile.mkstemp(prefix="hierdp-run-", suffix=".pkl")
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        self.ref = (self._named, token)

    def close(self) -> None:
        """Remove the state (idempotent)."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None
        if self._named is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._named)
            self._named = None


class _ProcessSession(Session):
    engine_name = "processes"

    def __init__(self, engine: ProcessEngine, task: Any, tree: Any) -> None:
        self._fan_out: dict[int, float] = {}
        self.partition_children = engine.partition_children
        try:
            blob = _dumps((worker_copy(task), tree))
        except Exception as exc:
            raise EngineError(f"engine='processes' sends the mechanism and the tree to worker processes, but they "
                              f"cannot be pickled: {type(exc).__name__}: {exc}") from exc
        self._own = engine.executor is None
        self._interrupted = False
        self._state = _StateFile(blob)
        del blob
        try:
            if self._own:  # started and checked now, before any noise; every worker loads the state
                self.executor: cf.Executor = make_pool(engine.workers, self._state.ref)
                self._state.close()
            else:
                self.executor = engine.executor  # type: ignore[assignment]
        except BaseException:
            self._state.close()
            raise
        self.workers = getattr(self.executor, "_max_workers", engine.workers)

    def _map(self, job: Any, payloads: list[tuple]) -> list[tuple[Any, Any, str]]:
        futures = [self.executor.submit(_process_task, self._state.ref, job, p) for p in payloads]
        try:
            return [f.result() for f in futures]
        except BaseException:
            self._interrupted = True
            for f in futures:
                f.cancel()
            raise

    def close(self) -> None:
        if self._own:
            if self._interrupted:  # a failed or interrupted level: do not wait for its running tasks
                terminate_pool(self.executor)  # type: ignore[arg-type]
            else:
                self.executor.shutdown(wait=True, cancel_futures=True)
                _POOLS.discard(self.executor)  # type: ignore[arg-type]
        self._state.close()


# -- dask -----------------------------------------------------------------------------------------
def _dask_task(task: Any, tree: Any, job: Any, payload: tuple) -> tuple[Any, Any, str]:
    return run_partition(task, tree, job, payload)


def local_cluster(workers: int, memory_limit: str | int = "auto") -> Any:
    """A ``distributed.LocalCluster`` of ``workers`` single-threaded worker processes, as hierdp
    makes one for a release: no dashboard, quiet logs, and two of distributed's defaults changed
    for compute-bound tasks on short-lived workers - glibc's memory trimming threshold is left
    dynamic (distributed pins it at 64 KiB, which made census chunks spend ~40% more CPU returning
    and re-faulting their temporaries, measured in docs/scale.md) and the sampling profiler is off.
    ``memory_limit`` is each worker's (distributed's format: bytes or ``"2GiB"``; ``"auto"``, the
    default, splits the machine's memory between the workers); its nanny restarts a worker that
    goes past it."""
    import logging

    import dask
    from distributed import LocalCluster

    environ = {k: v for k, v in dict(dask.config.get("distributed.nanny.pre-spawn-environ", {})).items()
               if k != "MALLOC_TRIM_THRESHOLD_"}
    with dask.config.set({"distributed.nanny.pre-spawn-environ": environ,
                          "distributed.worker.profile.enabled": False}):
        return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                            silence_logs=logging.ERROR, memory_limit=memory_limit)


class _DaskSession(Session):
    engine_name = "dask"

    def __init__(self, engine: DaskEngine, task: Any, tree: Any) -> None:
        from distributed import Client

        self._fan_out: dict[int, float] = {}
        self.partition_children = engine.partition_children
        self._cluster = None
        self._own_client = True
        ex = engine.executor
        if ex is None:
            self._cluster = local_cluster(engine.workers)
            self.client = Client(self._cluster)
        elif isinstance(ex, str):
            try:
                self.client = Client(ex, timeout=engine.connect_timeout)
            except (OSError, TimeoutError, ValueError) as exc:
                raise SchedulerUnreachable(f"cannot reach the Dask scheduler at {ex!r} within "
                                           f"{engine.connect_timeout:g} s ({type(exc).__name__}: {exc}); nothing was "
                                           "released and no noise was drawn") from None
        elif hasattr(ex, "scatter") and hasattr(ex, "submit"):
            self.client = ex
            self._own_client = False
        else:  # a cluster object
            self.client = Client(ex)
        try:
            info = self.client.scheduler_info()
            self.workers = max(1, len(info.get("workers", {})))
            try:
                self._task = worker_copy(task)
                _dumps(self._task)
            except Exception as exc:
                raise EngineError(f"engine='dask' sends the mechanism to workers, but it cannot be pickled: "
                                  f"{type(exc).__name__}: {exc}") from exc
            self._tree = self.client.scatter(tree, broadcast=True, hash=False)
        except BaseException:
            self.close()
            raise
        self._token = f"{id(self):x}-{time.monotonic_ns():x}"

    def _map(self, job: Any, payloads: list[tuple]) -> list[tuple[Any, Any, str]]:
        futures = [self.client.submit(_dask_task, self._task, self._tree, job, p, pure=False,
                                      key=f"hierdp-{self._token}-L{p[1]}-p{p[0]}") for p in payloads]
        try:
            return self.client.gather(futures)
        except BaseException:
            self.client.cancel(futures)
            raise

    def close(self) -> None:
        client = getattr(self, "client", None)
        if client is not None and self._own_client:
            client.close()
        if self._cluster is not None:
            self._cluster.close()

