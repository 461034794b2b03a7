"""A lean TopDown tree for large inputs: integer arrays only, node names built when asked for.

:class:`LevelTree` is what :meth:`Hierarchy.from_frame <hierdp.hierarchy.Hierarchy.from_frame>`
builds, minus the node-name strings and the networkx view: for 8 million blocks it holds a few
int64 arrays (about 40 bytes a node) instead of 8 million Python strings, pickles quickly to Dask
workers, and labels only the nodes a release prints. Its keys are the canonical node indices a
Hierarchy of the same frame would have, and its labels are the same ``"/"``-joined paths, so a
seeded release of either is the same release (the same keys draw the same counter-based noise).
"""

from __future__ import annotations

import hashlib
from typing import Any
from collections.abc import Sequence

import numpy as np
import pandas as pd

from hierdp.hierarchy.builders import FrameStructure, frame_structure
from hierdp.hierarchy.domain import DECLARED, OBSERVED, check_domain_attributes, observed_assumption
from hierdp.hierarchy.errors import HierarchyError
from hierdp._segments import gather_ranges

__all__ = ["LevelTree"]


class _LevelTreeNamer:
    """Labels of a LevelTree's nodes, built from the per-level values on demand."""

    def __init__(self, structure: FrameStructure) -> None:
        self.structure = structure

    def key_names(self, level: int, keys: np.ndarray) -> np.ndarray:
        return self.structure.names_of(level, np.asarray(keys, dtype=np.int64)).astype(str)

    def key_columns(self, level: int, keys: np.ndarray) -> dict[str, np.ndarray]:
        return {"node": self.key_names(level, keys)}


class LevelTree:
    """A :class:`~hierdp.hierarchy.topdown_tree.TopDownTree` over a frame's level columns.

    Build it with :meth:`from_frame` (a pandas frame) or :meth:`from_parquet` (a Parquet dataset,
    possibly larger than memory, aggregated with Dask). Keys are canonical node indices (level by
    level, children sorted by value within their parent), exactly those of the Hierarchy that
    ``Hierarchy.from_frame`` builds from the same frame.

    Attributes:
        n_levels, level_names, root_count, root_key, namer: the TopDownTree protocol.
        domain_source, domain_assumption: as for a Hierarchy (``"declared"`` with ``domain=``).
    """

    def __init__(self, structure: FrameStructure, *, domain_source: str = DECLARED,
                 domain_assumption: str | None = None) -> None:
        check_domain_attributes(domain_source, domain_assumption)
        self.structure = structure
        self._parent = np.asarray(structure.parent, dtype=np.int64)
        self._counts = np.asarray(structure.counts, dtype=np.int64)
        self._level_ptr = np.asarray(structure.level_ptr, dtype=np.int64)
        n = self._parent.size
        kids = np.bincount(self._parent[1:], minlength=n) if n > 1 else np.zeros(n, np.int64)
        self._child_ptr = np.empty(n + 1, np.int64)
        self._child_ptr[0] = 1  # canonical order: the root's children start right after it
        np.cumsum(kids, out=self._child_ptr[1:])
        self._child_ptr[1:] += 1
        self.n_levels = int(self._level_ptr.size - 1)
        self.level_names = [str(x) for x in structure.level_names]
        self.root_key = 0
        self.root_count = int(self._counts[0])
        self.namer = _LevelTreeNamer(structure)
        self.domain_source = domain_source
        self.domain_assumption = domain_assumption

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_frame(cls, df: pd.DataFrame, levels: Sequence[str], count: str | None = None, *,
                   domain: Any = None, observed_domain_public: bool = False,
                   root_name: str | None = None) -> LevelTree:
        """From a frame with one column per level (coarse to fine), as ``Hierarchy.from_frame``
        (same arguments, checks and errors; ``domain=`` declares the public domain)."""
        if domain is not None and observed_domain_public:
            raise HierarchyError("give either domain= (a declared public domain) or observed_domain_public=True, "
                                 "not both")
        assumption = observed_assumption(observed_domain_public)
        st = frame_structure(df, levels, count, root_name=root_name, domain=domain)
        if not st.names_are_unique():
            # two paths could spell one name (a value holds "/"): build the names once and let the
            # Hierarchy check name the culprit, exactly as Hierarchy.from_frame does
            from hierdp.hierarchy._tree import check_unique_names

            check_unique_names(st.all_names(), st.parent)
        if domain is not None:
            return cls(st, domain_source=DECLARED)
        return cls(st, domain_source=OBSERVED, domain_assumption=assumption)

    @classmethod
    def from_parquet(cls, path: Any, levels: Sequence[str], count: str | None = None, *, domain: Any = None,
                     observed_domain_public: bool = False, root_name: str | None = None,
                     client: Any = None, progress: bool = False) -> LevelTree:
        """From a Parquet dataset (a directory of files, a file, or a list of files), read and
        aggregated file by file with Dask (:func:`hierdp.scale.dataset.aggregate_parquet`), so the
        rows never need to fit in memory: only the distinct leaf paths do.

        Raises:
            DatasetSchemaError: the files disagree on a level or count column (or lack one).
            CountError, MissingValueError: as ``from_frame``, naming the file.
        """
        from hierdp.scale.dataset import aggregate_parquet

        agg = aggregate_parquet(path, levels, count, client=client, progress=progress)
        return cls.from_frame(agg, levels, "count", domain=domain, observed_domain_public=observed_domain_public,
                              root_name=root_name)

    def __getstate__(self) -> dict[str, Any]:
        # the child pointers are rebuilt on arrival: fewer bytes to send to workers
        state = dict(self.__dict__)
        state.pop("_child_ptr")
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        n = self._parent.size
        kids = np.bincount(self._parent[1:], minlength=n) if n > 1 else np.zeros(n, np.int64)
        self._child_ptr = np.empty(n + 1, np.int64)
        self._child_ptr[0] = 1
        np.cumsum(kids, out=self._child_ptr[1:])
        self._child_ptr[1:] += 1

    # ------------------------------------------------------------------ TopDownTree protocol
    def expand(self, level: int, parent_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """See :meth:`TopDownTree.expand <hierdp.hierarchy.topdown_tree.TopDownTree.expand>`."""
        pk = np.asarray(parent_keys, dtype=np.int64)
        starts = self._child_ptr[pk]
        kids, offsets = gather_ranges(starts, self._child_ptr[pk + 1] - starts)
        return kids, offsets, self._counts[kids]

    def child_counts(self, level: int, parent_keys: np.ndarray) -> np.ndarray:
        """Number of children of each given node (no expansion): for sizing partitions."""
        pk = np.asarray(parent_keys, dtype=np.int64)
        return self._child_ptr[pk + 1] - self._child_ptr[pk]

    def counts(self, level: int, keys: np.ndarray) -> np.ndarray:
        """True counts of the given keys."""
        return self._counts[np.asarray(keys, dtype=np.int64)]

    def nonzero(self, level: int) -> tuple[np.ndarray, np.ndarray]:
        """``(keys, counts)`` of the non-zero nodes of ``level``, sorted by key."""
        lo, hi = int(self._level_ptr[level]), int(self._level_ptr[level + 1])
        c = self._counts[lo:hi]
        m = c != 0
        return np.arange(lo, hi, dtype=np.int64)[m], c[m]

    def parent_of(self, level: int, keys: np.ndarray) -> np.ndarray:
        """Keys of the parents of the given keys."""
        return self._parent[np.asarray(keys, dtype=np.int64)]

    def level_size(self, level: int) -> int:
        """Number of nodes of ``level`` (zero-count domain nodes included)."""
        return int(self._level_ptr[level + 1] - self._level_ptr[level])

    def key_names(self, level: int, keys: np.ndarray) -> np.ndarray:
        """Path names of the given keys (built on demand)."""
        return self.namer.key_names(level, keys)

    # ------------------------------------------------------------------ identity and views
    def fingerprint(self) -> str:
        """SHA-256 of the structure, the counts, the labels and the domain statement (what a
        checkpoint compares before a run is resumed)."""
        h = hashlib.sha256(b"hierdp.LevelTree/1\0")
        st = self.structure
        for arr in (self._parent, self._counts, self._level_ptr, np.asarray(st.label_code, dtype=np.int64)):
            h.update(np.ascontiguousarray(arr, dtype=np.int64).tobytes())
        for part in [*self.level_names, st.root_name, self.domain_source, self.domain_assumption or ""]:
            h.update(str(part).encode("utf-8") + b"\0")
        for lab in st.labels:
            if lab.dtype == object:
                h.update(b"s" + "\0".join(lab.tolist()).encode("utf-8") + b"\1")
            else:
                h.update(b"i" + np.ascontiguousarray(lab, dtype=np.int64).tobytes() + b"\1")
        return h.hexdigest()

    def to_hierarchy(self) -> Any:
        """The same tree as a :class:`~hierdp.hierarchy.Hierarchy` (builds every name)."""
        from hierdp.hierarchy import Hierarchy

        st = self.structure
        h = Hierarchy._from_canonical(st.all_names(), self._parent, self._level_ptr, self.level_names, self._counts,
                                      check=False)
        h._set_domain(self.domain_source, self.domain_assumption)
        return h

    def __repr__(self) -> str:
        sizes = ", ".join(f"{nm}={int(k)}" for nm, k in zip(self.level_names, np.diff(self._level_ptr), strict=False))
        return f"LevelTree(n={self._parent.size}, total={self.root_count}, levels: {sizes})"
