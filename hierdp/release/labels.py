"""Level columns of a tree's output: each node's value at every level above and at its own.

A plain tree's node names are paths (``"Europe/Italy/Lazio"``, :meth:`Hierarchy.from_frame
<hierdp.hierarchy.Hierarchy.from_frame>`); an agency's table wants one column per level
(``continent, country, region``) as the group-size layout has its parent by name. The values are read
off the names by removing the parent's name and the separator - never by splitting on ``/``, so
identifiers that contain it (Biel/Bienne, Bolzano/Bozen) stay whole. A name that does not start with
its parent's (a first level, a tree built from edges) is its own value.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = ["RESERVED_COLUMNS", "level_columns", "level_columns_names", "strip_parent"]

#: columns of a tree frame that a level column may not shadow (it is then named ``level_<name>``)
RESERVED_COLUMNS = frozenset({"level", "level_name", "node", "parent", "key", "value", "size", "cell"})
#: the separator of a plain tree's path names (``hierdp.hierarchy.builders.PATH_SEP``)
SEP = "/"


def level_columns_names(level_names: Sequence[str]) -> list[str]:
    """The level columns of a tree with these levels: one per level below the root, named after it
    (``level_<name>`` where the name is a column the frame has anyway)."""
    return [str(c) if str(c) not in RESERVED_COLUMNS else f"level_{c}" for c in list(level_names)[1:]]


def strip_parent(names: np.ndarray, parent_names: np.ndarray) -> np.ndarray:
    """Each node's own value: its name without the ``"<parent name>/"`` prefix a path name has
    (``"North/Turin"`` under ``"North"`` -> ``"Turin"``; ``"Bern/Biel/Bienne"`` under ``"Bern"`` ->
    ``"Biel/Bienne"``); a name without that prefix is kept whole. Vectorized per prefix length (a
    handful of distinct lengths per level)."""
    out = np.asarray(names, dtype=object).copy()
    if out.size == 0:
        return out
    s = pd.Series(out, dtype=object).astype(str)
    prefix = pd.Series(np.asarray(parent_names, dtype=object), dtype=object).astype(str) + SEP
    plen = prefix.str.len().to_numpy()
    lengths = s.str.len().to_numpy()
    for length in np.unique(plen):
        idx = np.flatnonzero(plen == length)
        sub = s.iloc[idx]
        ok = (sub.str.slice(0, int(length)).to_numpy() == prefix.iloc[idx].to_numpy()) & (lengths[idx] > length)
        out[idx[ok]] = sub.str.slice(int(length)).to_numpy(dtype=object)[ok]
    return out


def level_columns(names: np.ndarray, parent: np.ndarray, level: np.ndarray,
                  level_names: Sequence[str]) -> dict[str, np.ndarray]:
    """The level columns of nodes numbered level by level (every parent before its children):
    ``names``, ``parent`` (index, -1 for a root) and ``level`` per node. Column ``k`` holds the
    node's value at level ``k`` (its ancestor's), empty (``""``) below the node's own level."""
    names = np.asarray(names, dtype=object)
    parent = np.asarray(parent, dtype=np.int64)
    level = np.asarray(level, dtype=np.int64)
    n = names.size
    cols = level_columns_names(level_names)
    out = {c: np.full(n, "", dtype=object) for c in cols}
    has = parent >= 0
    own = np.full(n, None, dtype=object)
    own[has] = strip_parent(names[has], names[parent[has]])
    for lev in range(1, len(cols) + 1):  # a node's column at its own level, then copied down the levels
        idx = np.flatnonzero(level == lev)
        out[cols[lev - 1]][idx] = own[idx]
        for k in range(1, lev):
            out[cols[k - 1]][idx] = out[cols[k - 1]][parent[idx]]
    return out
