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
from hierdp.release.labels import level_columns_names, strip_parent

__all__ = ["ReleaseLevel", "StoredNamer", "TreeRelease"]


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


@dataclass(eq=False)
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
        """One row per released node of ``level``: ``level, level_name``, the namer's label columns,
        ``node`` (its name), ``key``, ``parent`` (the position of its parent in the previous level's
        rows, -1 at the root) and ``value``."""
        lv = self.levels[level]
        data: dict[str, Any] = {"level": np.full(len(lv), level, np.int64),
                                "level_name": np.full(len(lv), self.level_names[level], dtype=object)}
        labels = self._label_columns(level, lv.keys)
        data.update(labels)
        data["node"] = self._names(level, lv.keys, labels)
        data["key"] = lv.keys
        data["parent"] = lv.parent
        data["value"] = lv.values
        return pd.DataFrame(data)

    def _label_columns(self, level: int, keys: np.ndarray) -> dict[str, np.ndarray]:
        if self.namer is None or not hasattr(self.namer, "key_columns"):
            return {}
        cols = dict(self.namer.key_columns(level, keys))
        cols.pop("node", None)  # a plain tree's namer labels nodes by name only: the node column
        return cols

    def _names(self, level: int, keys: np.ndarray, labels: dict[str, np.ndarray]) -> np.ndarray:
        if self.namer is None:
            return np.asarray(keys).astype(str).astype(object)
        return np.asarray(self.namer.key_names(level, keys), dtype=object)

    def to_frame(self) -> pd.DataFrame:
        """One row per released node, all levels, parents first.

        Columns: ``level, level_name``; the tree's label columns (O/D trees: ``origin_level, origin,
        destination_level, destination``; plain trees: one column per level below the root, named
        after it, holding the node's value at that level - empty (``""``) below the node's own level - read
        off the names, so identifiers containing ``/`` stay whole); ``node`` (the node's name),
        ``parent`` (the parent's name, empty for the root), ``key`` and ``value``.
        """
        frames = []
        prev_names = np.zeros(0, dtype=object)
        prev_levels: dict[str, np.ndarray] = {}
        plain = self.namer is None or not self._label_columns(0, self.levels[0].keys[:1]) if self.levels else True
        columns = level_columns_names(self.level_names) if plain else []
        for lev in range(self.n_levels):
            lv = self.levels[lev]
            labels = self._label_columns(lev, lv.keys)
            names = self._names(lev, lv.keys, labels)
            parent = lv.parent
            parent_names = prev_names[parent] if lev > 0 else np.full(len(lv), "", dtype=object)
            data: dict[str, Any] = {"level": np.full(len(lv), lev, np.int64),
                                    "level_name": np.full(len(lv), self.level_names[lev], dtype=object)}
            if plain:
                own = strip_parent(names, parent_names) if lev > 0 else None
                level_cols: dict[str, np.ndarray] = {}
                for k, col in enumerate(columns, start=1):
                    if k < lev:
                        level_cols[col] = prev_levels[col][parent]
                    elif k == lev:
                        level_cols[col] = own  # type: ignore[assignment]
                    else:
                        level_cols[col] = np.full(len(lv), "", dtype=object)
                data.update(level_cols)
                prev_levels = level_cols
            else:
                data.update({c: np.asarray(v, dtype=object) for c, v in labels.items()})
            data["node"] = names
            data["parent"] = parent_names
            data["key"] = lv.keys
            data["value"] = lv.values
            frames.append(pd.DataFrame(data))
            prev_names = names
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def with_domain(self, tree: Any) -> TreeRelease:
        """The same release over every node of ``tree``'s domain: a node the release does not list
        is released as 0 (a TopDown node under a zero parent, a leaf SH dropped below its
        threshold, ...), so the result lists every node, zeros included - what an agency publishes.
        Post-processing of the released values only: same accounting, same guarantee.

        ``tree``: the :class:`~hierdp.hierarchy.topdown_tree.TopDownTree` (or Hierarchy) released.

        Raises:
            ValueError: a released node is not in ``tree`` (another tree).
        """
        from hierdp.hierarchy.topdown_tree import as_topdown_tree

        t = as_topdown_tree(tree)
        if list(t.level_names[: self.n_levels]) != list(self.level_names):
            raise ValueError(f"with_domain: the tree's levels {list(t.level_names)} are not the release's "
                             f"{list(self.level_names)}")
        keys = np.array([t.root_key], np.int64)
        parent = np.full(1, -1, np.int64)
        levels: list[ReleaseLevel] = []
        for lev in range(self.n_levels):
            if lev > 0:
                kids, offsets, _ = t.expand(lev - 1, keys)
                parent = np.repeat(np.arange(keys.size, dtype=np.int64), np.diff(offsets))
                keys = np.asarray(kids, dtype=np.int64)
            rel = self.levels[lev]
            values = np.zeros(keys.size, dtype=rel.values.dtype if rel.values.size else np.int64)
            if rel.keys.size:
                pos = pd.Index(keys).get_indexer(rel.keys)
                if np.any(pos < 0):
                    raise ValueError(f"with_domain: released node {int(rel.keys[pos < 0][0])} of level {lev} is not in "
                                     "the tree")
                values[pos] = rel.values
            levels.append(ReleaseLevel(keys, parent, values))
        return TreeRelease(levels, list(self.level_names), self.mechanism, self.solver, self.accounting,
                           list(self.timings), list(self.solver_stats), namer=self.namer, params=dict(self.params),
                           nonnegative=self.nonnegative, partial=self.partial)

    def to_hierarchy(self) -> Any:
        """The release as a :class:`~hierdp.hierarchy.Hierarchy` (plain trees with non-negative
        consistent values, e.g. any TopDown release of a Hierarchy); node names as in the input."""
        from hierdp.hierarchy import Hierarchy

        values = np.concatenate([lv.values for lv in self.levels]) if self.levels else np.zeros(0, np.int64)
        if (values < 0).any():
            raise ValueError(f"{self.mechanism} released negative values; a Hierarchy needs non-negative counts")
        starts = np.cumsum([0] + [len(lv) for lv in self.levels[:-1]])
        parent = np.concatenate([np.where(lv.parent >= 0, lv.parent + (starts[k - 1] if k else 0), -1)
                                 for k, lv in enumerate(self.levels)])
        names = np.concatenate([np.asarray(self._names(lev, self.levels[lev].keys, {}), dtype=object)
                                for lev in range(self.n_levels)])
        return Hierarchy.from_arrays(names, parent, values, level_names=self.level_names[: self.n_levels])

    # -- saving and loading -------------------------------------------------------------------
    def _saved_structure(self) -> dict[str, Any]:
        labels = list(self._label_columns(0, self.levels[0].keys[:1])) if self.levels else []
        return {**super()._saved_structure(), "level_names": [str(x) for x in self.level_names],
                "nonnegative": bool(self.nonnegative), "partial": bool(self.partial), "label_columns": labels}

    @classmethod
    def _from_saved(cls, frame: pd.DataFrame, structure: dict[str, Any], *, accounting: Any,
                    params: dict[str, Any], tables: dict[str, pd.DataFrame]) -> TreeRelease:
        level_names = list(structure["level_names"])
        label_columns = list(structure["label_columns"])
        lev = frame["level"].to_numpy()
        levels: list[ReleaseLevel] = []
        stored: list[tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]] = []
        prev = pd.Index([], dtype=object)
        for L in range(len(level_names)):
            f = frame[lev == L]
            names = f["node"].to_numpy(dtype=object)
            if L == 0:
                parent = np.full(len(f), -1, np.int64)
            else:
                parent = prev.get_indexer(f["parent"].to_numpy(dtype=object)).astype(np.int64)
                if np.any(parent < 0):
                    raise ValueError(f"saved tree release: a node of level {L} names a parent that is not in level "
                                     f"{L - 1}")
            keys = f["key"].to_numpy(dtype=np.int64)
            levels.append(ReleaseLevel(keys, parent, f["value"].to_numpy()))
            stored.append((keys, names, {c: f[c].to_numpy() for c in label_columns}))
            prev = pd.Index(names, dtype=object)
        return cls(levels, level_names, structure["mechanism"], structure["solver"], accounting, [], [],
                   namer=StoredNamer(stored, plain=not label_columns), params=params,
                   nonnegative=structure["nonnegative"], partial=structure["partial"])

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


class StoredNamer:
    """The labels of a tree release read back from its saved table (the input tree is not needed):
    per level the keys, the node names and the label columns."""

    def __init__(self, levels: list[tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]], *, plain: bool) -> None:
        self._levels = levels
        self._index = [pd.Index(keys) for keys, _, _ in levels]
        self.plain = plain

    def _rows(self, level: int, keys: np.ndarray) -> np.ndarray:
        rows = self._index[level].get_indexer(np.asarray(keys, dtype=np.int64))
        if np.any(rows < 0):
            raise KeyError(f"level {level} has no saved label for key {int(np.asarray(keys)[rows < 0][0])}")
        return rows

    def key_names(self, level: int, keys: np.ndarray) -> np.ndarray:
        return self._levels[level][1][self._rows(level, keys)]

    def key_columns(self, level: int, keys: np.ndarray) -> dict[str, np.ndarray]:
        rows = self._rows(level, keys)
        if self.plain:
            return {"node": self._levels[level][1][rows]}
        return {c: v[rows] for c, v in self._levels[level][2].items()}
