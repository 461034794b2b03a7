"""A private tree, level by level, with its accounting and timings (TopDown and the paper-000 baselines).

A :class:`TreeRelease` (old name :class:`Release`, kept) stores, per level, the released nodes'
int64 keys (as defined by the input tree, see :mod:`hierdp.hierarchy.topdown_tree`), the position of each node's parent in the
previous level's arrays, and the released integer values. TopDown mechanisms release the
non-zero nodes only (a node released as 0 has an all-zero subtree, paper 000 Alg. 1 line 9).
It keeps the tree's *namer* (public structure, no counts) to label rows in :meth:`to_frame`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from hierdp.release.base import BaseRelease

__all__ = ["ReleaseLevel", "TreeRelease"]


@dataclass
class ReleaseLevel:
    """Released nodes of one level.

    Attributes:
        keys: int64 node keys of the tree at this level.
        parent: int64 position of each node's parent in the previous level's arrays (-1 at
            level 0).
        values: int64 released values.
    """

    keys: np.ndarray
    parent: np.ndarray
    values: np.ndarray

    def __len__(self) -> int:
        return int(self.keys.size)


@dataclass
class TreeRelease(BaseRelease):
    """A private hierarchical release.

    Attributes:
        levels: one :class:`ReleaseLevel` per tree level (level 0 = root).
        level_names: names of the tree's levels.
        mechanism: e.g. ``"InfTDA"``.
        solver: the registered name of the post-processing solver (``None`` for baselines
            without one).
        accounting: a :class:`~hierdp.release.accounting.Accounting`.
        timings: seconds per level (index = level; level 0 covers the root).
        solver_stats: one dict per level (solver statistics, group counts, sizes, timings).
        namer: object with ``key_names(level, keys)`` / ``key_columns(level, keys)``.
        params: the mechanism's parameters.
        nonnegative: whether the release promises non-negative values (every TopDown release
            does; VanillaGauss' raw noisy sums do not), checked by :meth:`check_consistency`.
        partial: True for the levels released before a run was aborted
            (:class:`~hierdp.mechanisms.base.ReleaseAborted`); never publish it as complete.
    """

    levels: list[ReleaseLevel]
    level_names: list[str]
    mechanism: str
    solver: str | None
    accounting: Any
    timings: list[float]
    solver_stats: list[dict[str, Any]] = field(default_factory=list)
    namer: Any = None
    params: dict[str, Any] = field(default_factory=dict)
    nonnegative: bool = True
    partial: bool = False

    # ------------------------------------------------------------------ views
    @property
    def n_levels(self) -> int:
        """Number of levels."""
        return len(self.levels)

    @property
    def n_nodes(self) -> int:
        """Number of released nodes over all levels."""
        return int(sum(len(lv) for lv in self.levels))

    @property
    def total(self) -> int:
        """The released root value."""
        return int(self.levels[0].values.sum()) if self.levels and len(self.levels[0]) else 0

    def level(self, level: int) -> ReleaseLevel:
        """The released nodes of one level."""
        return self.levels[level]

    def level_frame(self, level: int) -> pd.DataFrame:
        """One row per released node of ``level``: labels, key, parent position, value."""
        lv = self.levels[level]
        data: dict[str, Any] = {"level": np.full(len(lv), level, np.int64),
                                "level_name": np.full(len(lv), self.level_names[level], dtype=object)}
        if self.namer is not None and hasattr(self.namer, "key_columns"):
            data.update(self.namer.key_columns(level, lv.keys))
        data["key"] = lv.keys
        data["parent"] = lv.parent
        data["value"] = lv.values
        return pd.DataFrame(data)

    def to_frame(self) -> pd.DataFrame:
        """One row per released node, all levels: ``level, level_name, <labels>, key, parent,
        value`` where ``parent`` is the global row number of the parent row (-1 for the root)."""
        frames = []
        start = 0
        prev_start = 0
        for lev in range(self.n_levels):
            f = self.level_frame(lev)
            f["parent"] = np.where(f["parent"].to_numpy() >= 0, f["parent"].to_numpy() + prev_start, -1)
            prev_start = start
            start += len(f)
            frames.append(f)
        out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        return out

    def to_hierarchy(self) -> Any:
        """The release as a :class:`~hierdp.hierarchy.Hierarchy` (plain trees with non-negative
        consistent values, e.g. any TopDown release of a Hierarchy); node names as in the input."""
        from hierdp.hierarchy import Hierarchy

        f = self.to_frame()
        if (f["value"] < 0).any():
            raise ValueError(f"{self.mechanism} released negative values; a Hierarchy needs non-negative counts")
        names = np.concatenate([np.asarray(self.namer.key_names(lev, self.levels[lev].keys), dtype=object)
                                for lev in range(self.n_levels)]) if self.namer is not None else f["key"].to_numpy()
        return Hierarchy.from_arrays(names, f["parent"].to_numpy(), f["value"].to_numpy(),
                                     level_names=self.level_names[: self.n_levels])

    def check_consistency(self) -> list[str]:
        """Problems with the release's invariants (empty: children sum to their parent, for every
        parent with released children, and - when the release promises it (:attr:`nonnegative`) -
        all values are non-negative)."""
        bad: list[str] = []
        for lev in range(1, self.n_levels):
            cur, prev = self.levels[lev], self.levels[lev - 1]
            if cur.keys.size == 0:
                continue
            sums = np.zeros(len(prev), np.int64)  # exact integer sums (floats lose units beyond 2**53)
            np.add.at(sums, cur.parent, cur.values.astype(np.int64))
            has_kids = np.bincount(cur.parent, minlength=len(prev)) > 0
            mism = has_kids & (sums != prev.values)
            if mism.any():
                i = int(np.flatnonzero(mism)[0])
                bad.append(f"level {lev - 1} node {int(prev.keys[i])}: value {int(prev.values[i])} "
                           f"but children sum to {int(sums[i])}")
        if self.nonnegative:
            for lev, lv in enumerate(self.levels):
                if np.any(lv.values < 0):
                    bad.append(f"level {lev}: negative values")
        return bad

    def __repr__(self) -> str:
        sizes = [len(lv) for lv in self.levels]
        return (f"{'Partial' if self.partial else ''}TreeRelease(mechanism={self.mechanism!r}, "
                f"solver={self.solver!r}, levels={self.n_levels}, "
                f"nodes per level={sizes}, guarantee={self.guarantee!r})")

