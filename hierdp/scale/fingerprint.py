"""A fingerprint of a release's input: what a checkpoint compares before it lets a run resume.

Two trees get the same fingerprint when they have the same structure, counts, node labels, level
names and domain statement; any change of a count, a node or a label changes it (SHA-256). Trees
that know how to fingerprint themselves (``tree.fingerprint()``, e.g.
:class:`~hierdp.scale.tree.LevelTree`) do; a :class:`~hierdp.hierarchy.Hierarchy` (or its TopDown
adapter) is hashed from its arrays; any other TopDown tree through the protocol: every level's size
and its non-zero nodes' keys, counts and labels, and for origin/destination trees the geographies.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["tree_fingerprint"]


def _hash_labels(h: Any, labels: Any) -> None:
    arr = np.asarray(labels, dtype=object)
    # pandas' hash of each label (fixed key: the same in every process), then the array's bytes
    h.update(pd.util.hash_array(arr.astype(str).astype(object)).tobytes())


def _hash_ints(h: Any, arr: Any) -> None:
    h.update(np.ascontiguousarray(np.asarray(arr), dtype=np.int64).tobytes())


def _hash_text(h: Any, *parts: Any) -> None:
    for p in parts:
        h.update(str(p).encode("utf-8") + b"\0")


def tree_fingerprint(tree: Any) -> str:
    """SHA-256 (hex) of a release's input tree (see the module docstring)."""
    method = getattr(tree, "fingerprint", None)
    if callable(method):
        return str(method())
    h = hashlib.sha256()
    hierarchy = tree if hasattr(tree, "child_ptr") and hasattr(tree, "names") else getattr(tree, "hierarchy", None)
    domain = (getattr(tree, "domain_source", None) or getattr(hierarchy, "domain_source", "declared"),
              getattr(tree, "domain_assumption", None) or getattr(hierarchy, "domain_assumption", None) or "")
    if hierarchy is not None and hasattr(hierarchy, "child_ptr"):
        _hash_text(h, "hierdp.Hierarchy/1", *hierarchy.level_names, *domain)
        for arr in (hierarchy.parent, hierarchy.counts, hierarchy.level_ptr):
            _hash_ints(h, arr)
        _hash_labels(h, hierarchy.names)
        return h.hexdigest()
    _hash_text(h, f"hierdp.{type(tree).__name__}/1", getattr(tree, "kind", ""), *tree.level_names, *domain)
    for geo in (getattr(tree, "origin_geo", None), getattr(tree, "destination_geo", None)):
        if geo is None:
            continue
        _hash_text(h, "geography", *geo.level_names)
        for names in geo.names:
            _hash_labels(h, names)
        for par in geo.parent[1:]:
            _hash_ints(h, par)
    for level in range(int(tree.n_levels)):
        keys, counts = tree.nonzero(level)
        _hash_ints(h, [tree.level_size(level), keys.size])
        _hash_ints(h, keys)
        _hash_ints(h, counts)
        if keys.size and hasattr(tree, "key_names"):
            _hash_labels(h, tree.key_names(level, keys))
    return h.hexdigest()
