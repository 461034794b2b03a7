"""Plan and run a general solver's independent batches, serially or on an executor, with progress.

The general solvers (``highs``, ``ortools``) split a problem into batches of independent groups
(HiGHS and CP-SAT do not exploit block structure, so moderate batches beat one huge model):
:func:`plan_batches` packs whole coupled components (groups linked by a user row or a query term)
into batches of about ``size`` groups. The batches can be mapped over any
:class:`concurrent.futures.Executor`: a ``ProcessPoolExecutor`` on one machine, or a Dask cluster
through ``distributed.Client(...).get_executor()`` for users who outgrow one. Work is sent in
chunks of batches so the problem is pickled a few times per worker, not once per batch.
"""

from __future__ import annotations

import math
import time
from concurrent.futures import Executor, as_completed
from concurrent.futures import TimeoutError as FuturesTimeout
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Callable, Sequence

import numpy as np

from hierdp.models.arrays import batch_components
from hierdp.models.problem import Problem
from hierdp.solvers.base import Status

__all__ = ["DEADLINE_GRACE", "BatchOutcome", "ChunkResult", "plan_batches", "run_batches"]

#: seconds past a deadline that :func:`run_batches` waits for an executor's results
DEADLINE_GRACE = 0.5


@dataclass
class ChunkResult:
    """What a chunk function returns: the parts solved, and how the first failure looked.

    Attributes:
        status: :attr:`Status.OPTIMAL` when every batch of the chunk was, else the failing status.
        parts: ``(node indices, values)`` of every optimal batch.
        message: details of the failure (the constraint or node, when the back end says).
        failed: group ids of the failing batch (None when every batch was optimal).
        incumbent: ``(node indices, values)`` of a feasible point of the failing batch, if any.
        bounds: proven lower bounds of the batches' objectives, in order (None where unknown).
    """

    status: Status = Status.OPTIMAL
    parts: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    message: str = ""
    failed: np.ndarray | None = None
    incumbent: tuple[np.ndarray, np.ndarray] | None = None
    bounds: list[float | None] = field(default_factory=list)


@dataclass
class BatchOutcome:
    """Every chunk merged: parts of the optimal batches, the first failure, batches not run."""

    status: Status
    parts: list[tuple[np.ndarray, np.ndarray]]
    message: str
    failed: np.ndarray | None
    incumbent: tuple[np.ndarray, np.ndarray] | None
    bounds: list[float | None]
    complete: bool  # every batch was attempted (so parts + incumbent may cover every group)


def plan_batches(problem: Problem, size: int) -> list[np.ndarray]:
    """Lists of group ids, each at most ``size`` groups unless one coupled component is larger."""
    ng = problem.n_groups
    if not problem.n_constraints and not problem.n_query_terms:
        return [np.arange(s, min(s + size, ng), dtype=np.int64) for s in range(0, ng, size)]
    comp = batch_components(problem)
    order = np.argsort(comp, kind="stable")
    _, starts, counts = np.unique(comp[order], return_index=True, return_counts=True)
    out: list[np.ndarray] = []
    cur: list[np.ndarray] = []
    cur_n = 0
    for s, c in zip(starts, counts, strict=True):  # loop over components (not nodes): greedy packing
        if cur and cur_n + c > size:
            out.append(np.concatenate(cur))
            cur, cur_n = [], 0
        cur.append(order[s:s + c])
        cur_n += int(c)
    if cur:
        out.append(np.concatenate(cur))
    return out


#: ``chunk_fn(problem, batches) -> ChunkResult``: solves the batches in order, stopping at the
#: first that is not optimal.
ChunkFn = Callable[[Problem, Sequence[Any]], ChunkResult]


def run_batches(
    chunk_fn: ChunkFn,
    problem: Problem,
    batches: Sequence[Any],
    *,
    executor: Executor | None = None,
    progress: bool = False,
    desc: str = "batches",
    deadline: float | None = None,
) -> BatchOutcome:
    """Solve every batch; stop at the first failure (remaining work is cancelled).

    With an executor and a ``deadline`` (a ``time.perf_counter()`` time), the wait for results
    ends at ``deadline + DEADLINE_GRACE``: chunks not yet started are cancelled, running ones are
    left to their own time limit, and the outcome is a time limit (a worker that overruns its
    back end's limit cannot make the caller overrun its own)."""
    from tqdm.auto import tqdm

    n = len(batches)
    if executor is None:
        chunks = [[b] for b in batches]
    else:
        workers = int(getattr(executor, "_max_workers", 0) or 4)
        size = max(1, math.ceil(n / (4 * workers)))  # ~4 chunks per worker: balance vs pickling
        chunks = [list(batches[i:i + size]) for i in range(0, n, size)]
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    bounds: list[float | None] = []
    done = 0

    def failure(res: ChunkResult) -> BatchOutcome:
        return BatchOutcome(Status.coerce(res.status), parts, res.message, res.failed, res.incumbent, bounds,
                            complete=done == n)

    with tqdm(total=n, desc=desc, unit="batch", disable=not progress, leave=False) as bar:
        if executor is None:
            for chunk in chunks:
                res = chunk_fn(problem, chunk)
                parts.extend(res.parts)
                bounds.extend(res.bounds)
                done += len(chunk)
                bar.update(len(chunk))
                if res.status != Status.OPTIMAL:
                    return failure(res)
            return BatchOutcome(Status.OPTIMAL, parts, "", None, None, bounds, complete=True)
        futures = {executor.submit(chunk_fn, problem, chunk): len(chunk) for chunk in chunks}
        wait = None if deadline is None else max(0.0, deadline + DEADLINE_GRACE - time.perf_counter())
        try:
            for fut in as_completed(futures, timeout=wait):
                res = fut.result()
                parts.extend(res.parts)
                bounds.extend(res.bounds)
                done += futures[fut]
                bar.update(futures[fut])
                if res.status != Status.OPTIMAL:
                    return failure(res)
        except FuturesTimeout:
            return failure(ChunkResult(status=Status.TIME_LIMIT,
                                       message=f"{n - done} batch(es) unfinished at the time limit"))
        finally:
            for fut in futures:
                fut.cancel()
    return BatchOutcome(Status.OPTIMAL, parts, "", None, None, bounds, complete=True)
