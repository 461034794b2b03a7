"""How well a release's intervals (``release.intervals(level)``) cover the truth, per level.

Only an experiment that knows the true data can score intervals; :func:`hierdp.compare` does it
when asked (``intervals=0.9``). A node is covered when ``lower <= true <= upper``. Trees are
scored over the nodes the intervals frame lists (the released nodes), histogram releases over
every (node, cell) of the frame. Nothing here computes intervals (that is
:mod:`hierdp.intervals`); the frame is plain data.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hierdp.hierarchy.topdown_tree import as_topdown_tree

__all__ = ["INTERVAL_METRICS", "interval_coverage_by_level"]

#: the columns :func:`interval_coverage_by_level` returns besides ``level``
INTERVAL_METRICS = ["interval_nodes", "interval_coverage_pct", "interval_mean_width"]


def _truth_of_tree_frame(frame: pd.DataFrame, tree: Any) -> np.ndarray:
    tree = as_topdown_tree(tree)
    true = np.zeros(len(frame), np.int64)
    levels = frame["level"].to_numpy(np.int64)
    keys = frame["key"].to_numpy(np.int64)
    for lev in np.unique(levels):  # one vectorized lookup per level
        at = levels == lev
        true[at] = tree.counts(int(lev), keys[at])
    return true


def _truth_of_histogram_frame(frame: pd.DataFrame, release: Any, truth: Any) -> np.ndarray:
    h = np.asarray(truth.h if hasattr(truth, "h") else truth)
    if h.shape != np.shape(release.values):
        raise ValueError(f"the truth has shape {h.shape}, the release {np.shape(release.values)}")
    rows = pd.Index(np.asarray(release.names, dtype=object)).get_indexer(frame["node"].to_numpy(dtype=object))
    cols = pd.Index(np.asarray(release.cells)).get_indexer(frame[release.cell_name].to_numpy())
    if (rows < 0).any() or (cols < 0).any():
        raise ValueError("the intervals frame names nodes or cells the release does not have")
    return h[rows, cols]


def interval_coverage_by_level(frame: pd.DataFrame, release: Any, truth: Any) -> pd.DataFrame:
    """One row per level of ``frame`` (from ``release.intervals(...)``): ``level``, the number of
    scored nodes, the percentage whose interval holds the true value, and the mean width
    ``upper - lower``.

    Args:
        frame: the intervals frame (columns ``level``, ``lower``, ``upper`` and, for trees,
            ``key``; for histogram releases ``node`` and the release's cell column).
        release: the release the frame belongs to.
        truth: the true data (the tree, or the count-of-counts hierarchy / its ``h`` matrix).
    """
    if not {"lower", "upper", "level"} <= set(frame.columns):
        raise ValueError("not an intervals frame: it needs level, lower and upper columns")
    if "key" in frame.columns:
        true = _truth_of_tree_frame(frame, truth)
    else:
        true = _truth_of_histogram_frame(frame, release, truth)
    lo = frame["lower"].to_numpy(float)
    hi = frame["upper"].to_numpy(float)
    scored = pd.DataFrame({"level": frame["level"].to_numpy(np.int64), "covered": (lo <= true) & (true <= hi),
                           "width": hi - lo})
    g = scored.groupby("level", sort=True)
    return pd.DataFrame({"interval_nodes": g.size(), "interval_coverage_pct": 100.0 * g["covered"].mean(),
                         "interval_mean_width": g["width"].mean()}).reset_index()
