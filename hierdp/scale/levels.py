"""What a level-wise engine runs and gets back, whatever the mechanism: chunks of a level.

Every TopDown mechanism (scalar counts, histograms over a spine, group sizes) releases a tree a
level at a time: the surviving nodes of level L are *parents*, their children at level L + 1 are
measured and post-processed, and the children released non-zero survive. The unit of work is a
**chunk**: some parents (rows of the released level L, their keys, their released values - one
count, or a histogram of K cells - and, for per-node budget plans, their path sums), expanded,
measured and solved by the mechanism's :meth:`LevelTask.run_chunk`. A chunk is pure given its
arguments (seeded noise is counter-based: :mod:`hierdp.privacy.counter_noise`), so the engines
(:mod:`hierdp.scale.executors`) may cut a level into chunks of any size, run them anywhere and
concatenate their results in order: the level is the same.

This module is the engine's side of that seam; it imports no mechanism. A mechanism hands the
engine a *task* (an object with ``run_chunk``, picklable for process and Dask workers) and, per
level, a *job* (an opaque, picklable object: the level's noise parameters, randomness,
constraint plan, ...), and gets a :class:`~hierdp.release.ReleaseLevel` back.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

__all__ = ["ChunkFailed", "ChunkResult", "LevelTask", "assemble_level", "merge_level_stats", "new_level_stats"]


class ChunkResult(NamedTuple):
    """What one chunk of a level produces: its children released non-zero."""

    keys: np.ndarray         #: child keys (level L + 1)
    parent_rows: np.ndarray  #: positions of their parents in the previous level's arrays
    values: np.ndarray       #: released values: int64, ``(n,)`` counts or ``(n, K)`` histograms
    paths: np.ndarray | None  #: per-node plans: each child's path sum of budget fractions
    stats: dict[str, Any]    #: counts, timings and the solver's statistics


class ChunkFailed(Exception):
    """A chunk failed after its noise was drawn; carries the cause and the parents (keys of level
    L) of the failing solve, so the release can name them."""

    def __init__(self, cause: BaseException, parent_keys: np.ndarray) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.parent_keys = parent_keys

    def __reduce__(self) -> tuple:  # travels back from process and Dask workers
        return (ChunkFailed, (self.cause, self.parent_keys))


@runtime_checkable
class LevelTask(Protocol):
    """What a level-wise mechanism gives an engine (see the module docstring)."""

    def run_chunk(self, tree: Any, job: Any, rows: np.ndarray, parent_keys: np.ndarray, parent_values: np.ndarray,
                  parent_paths: np.ndarray | None) -> ChunkResult:
        """Expand, measure and post-process the children of the given parents of a level.

        Args:
            tree: the run's input (sent to workers once per run).
            job: the level's job (sent with every chunk).
            rows: positions of the parents in the released level.
            parent_keys, parent_values, parent_paths: the parents' keys, released values and
                path sums (``None`` without a per-node plan).

        Raises:
            ChunkFailed: the post-processing failed after the noise was drawn.
        """
        ...


def new_level_stats() -> dict[str, Any]:
    """The counters every level reports (chunk statistics are added in)."""
    return {"parents": 0, "children": 0, "released": 0, "max_group": 0, "chunks": 0, "expand_s": 0.0,
            "noise_s": 0.0, "solve_s": 0.0}


def merge_level_stats(total: dict[str, Any], part: dict[str, Any]) -> None:
    """Add one chunk's statistics into a level's: counts and seconds add up, ``max_*`` keep the
    largest, lists are concatenated (e.g. rows relaxed in each chunk), other values (names) are
    kept as they are."""
    for k, v in part.items():
        if k.startswith("max_") and isinstance(v, (int, float, np.integer, np.floating)):
            total[k] = max(total.get(k, v), v)
        elif isinstance(v, list):
            total[k] = [*total.get(k, []), *v]
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and isinstance(total.get(k, 0), (int, float)):
            total[k] = total.get(k, 0) + v
        else:
            total[k] = v


def assemble_level(results: list[ChunkResult], *, per_node: bool, cells: int | None = None) -> tuple[Any, dict[str, Any], np.ndarray | None]:
    """The level from its chunks' results in order: ``(ReleaseLevel, stats, paths)``.

    ``cells``: the number of cells of a histogram level (values ``(n, K)``), ``None`` for counts.
    """
    from hierdp.release import ReleaseLevel

    st = new_level_stats()
    keys, parents, values, paths = [], [], [], []
    for res in results:
        keys.append(res.keys)
        parents.append(res.parent_rows)
        values.append(res.values)
        if res.paths is not None:
            paths.append(res.paths)
        merge_level_stats(st, res.stats)
    empty = np.zeros(0, np.int64)
    empty_values = empty if cells is None else np.zeros((0, cells), np.int64)
    level = ReleaseLevel(np.concatenate(keys) if keys else empty,
                         np.concatenate(parents) if parents else empty.copy(),
                         np.concatenate(values) if values else empty_values)
    new_paths = (np.concatenate(paths) if paths else np.zeros(0)) if per_node else None
    return level, st, new_paths
