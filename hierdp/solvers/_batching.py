"""Run a general solver's independent batches serially or on an executor, with progress.

The general solvers (``highs``, ``ortools``) split a problem into batches of independent groups
(HiGHS and CP-SAT do not exploit block structure, so moderate batches beat one huge model). The
batches can be mapped over any :class:`concurrent.futures.Executor`: a ``ProcessPoolExecutor``
on one machine, or a Dask cluster through ``distributed.Client(...).get_executor()`` for users
who outgrow one. Work is sent in chunks of batches so the problem is pickled a few times per
worker, not once per batch.
"""

from __future__ import annotations

import math
from concurrent.futures import Executor, as_completed
from typing import Any, Callable, Sequence

import numpy as np

from hierdp.models.problem import Problem

#: ``chunk_fn(problem, batches) -> (status, [(node indices, values), ...], message)``: solves the
#: batches in order, stopping at the first that is not optimal.
ChunkFn = Callable[[Problem, Sequence[Any]], "tuple[str, list[tuple[np.ndarray, np.ndarray]], str]"]


def run_batches(
    chunk_fn: ChunkFn,
    problem: Problem,
    batches: Sequence[Any],
    *,
    executor: Executor | None = None,
    progress: bool = False,
    desc: str = "batches",
) -> tuple[str, list[tuple[np.ndarray, np.ndarray]], str]:
    """Solve every batch; return ``(status, parts, message)``.

    ``status`` is ``"optimal"`` when every batch was, else the first failing status (remaining
    work is cancelled); ``parts`` are the ``(nodes, values)`` of the batches solved.
    """
    from tqdm.auto import tqdm

    n = len(batches)
    if executor is None:
        chunks = [[b] for b in batches]
    else:
        workers = int(getattr(executor, "_max_workers", 0) or 4)
        size = max(1, math.ceil(n / (4 * workers)))  # ~4 chunks per worker: balance vs pickling
        chunks = [list(batches[i:i + size]) for i in range(0, n, size)]
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    with tqdm(total=n, desc=desc, unit="batch", disable=not progress, leave=False) as bar:
        if executor is None:
            for chunk in chunks:
                status, got, message = chunk_fn(problem, chunk)
                parts.extend(got)
                bar.update(len(chunk))
                if status != "optimal":
                    return status, parts, message
            return "optimal", parts, ""
        futures = {executor.submit(chunk_fn, problem, chunk): len(chunk) for chunk in chunks}
        try:
            for fut in as_completed(futures):
                status, got, message = fut.result()
                parts.extend(got)
                bar.update(futures[fut])
                if status != "optimal":
                    return status, parts, message
        finally:
            for fut in futures:
                fut.cancel()
    return "optimal", parts, ""
