"""Per-level quality metrics of a release against the true tree (paper 000 §2.2 eq. 2, §5).

Every metric compares, level by level, the released values with the true counts over the union
of the true non-zero nodes and the released nodes (a node in neither has error 0, so maxima and
rates over the whole level equal those over this union). Keys are matched with sorted arrays
and ``np.searchsorted``; nothing walks the tree node by node.

Rates follow the paper's definition and are in **percent**: the false discovery rate of level ℓ
is |{u: q̃(u) > 0 ∧ q(u) = 0}| / |{u: q̃(u) > 0}| · 100 (NaN when nothing positive is
released), the false negative rate |{u: q(u) > 0 ∧ q̃(u) ≤ 0}| / |{u: q(u) > 0}| · 100.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hierdp.hierarchy.topdown_tree import TopDownTree, as_topdown_tree
from hierdp.release import TreeRelease

__all__ = [
    "false_discovery_rate_by_level",
    "false_negative_rate_by_level",
    "level_errors",
    "level_report",
    "max_abs_error_by_level",
    "mean_abs_error_by_level",
    "runtime_by_level",
]


def _check_tree_release(release: Any) -> None:
    if not hasattr(release, "levels") or not hasattr(release, "n_levels"):
        raise TypeError(f"per-level tree metrics need a tree release (hierdp.release.TreeRelease), got "
                        f"{type(release).__name__}; table releases are compared through their to_frame()")


def level_errors(release: TreeRelease, tree: Any, level: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(keys, released, true)`` over the union of released and true non-zero nodes of a level."""
    _check_tree_release(release)
    tree = as_topdown_tree(tree)
    lv = release.levels[level]
    t_keys, t_counts = tree.nonzero(level)
    r_keys = np.asarray(lv.keys, np.int64)
    r_vals = np.asarray(lv.values, np.int64)
    order = np.argsort(r_keys, kind="stable")
    r_keys, r_vals = r_keys[order], r_vals[order]
    if r_keys.size and np.any(r_keys[1:] == r_keys[:-1]):
        raise ValueError(f"level {level}: the release holds a node twice")
    keys = np.union1d(r_keys, t_keys)
    rel = _lookup(r_keys, r_vals, keys)
    tru = _lookup(np.asarray(t_keys, np.int64), np.asarray(t_counts, np.int64), keys)
    return keys, rel, tru


def _lookup(sorted_keys: np.ndarray, values: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Values of ``query`` keys in a sorted key table (0 when absent)."""
    if sorted_keys.size == 0:
        return np.zeros(query.size, np.int64)
    pos = np.minimum(np.searchsorted(sorted_keys, query), sorted_keys.size - 1)
    return np.where(sorted_keys[pos] == query, values[pos], 0).astype(np.int64)


def _per_level(release: TreeRelease, tree: Any, fn: Any, name: str) -> pd.Series:
    tree = as_topdown_tree(tree)
    vals = [fn(*level_errors(release, tree, lev), lev, tree) for lev in range(release.n_levels)]
    return pd.Series(vals, index=pd.RangeIndex(release.n_levels, name="level"), name=name, dtype=float)


# one formula per metric, on a level's (keys, released, true) arrays; used by the *_by_level
# functions and by level_report alike
def _max_abs(k: np.ndarray, r: np.ndarray, t: np.ndarray) -> float:
    return float(np.abs(r - t).max()) if k.size else 0.0


def _mean_abs(k: np.ndarray, r: np.ndarray, t: np.ndarray) -> float:
    return float(np.abs(r - t).mean()) if k.size else 0.0


def _fdr_pct(k: np.ndarray, r: np.ndarray, t: np.ndarray) -> float:
    pos = r > 0
    return float(100.0 * np.sum(pos & (t == 0)) / pos.sum()) if pos.any() else float("nan")


def _fnr_pct(k: np.ndarray, r: np.ndarray, t: np.ndarray) -> float:
    pos = t > 0
    return float(100.0 * np.sum(pos & (r <= 0)) / pos.sum()) if pos.any() else float("nan")


def max_abs_error_by_level(release: TreeRelease, tree: Any) -> pd.Series:
    """max over the nodes of each level of |released − true| (paper 000 eq. 2)."""
    return _per_level(release, tree, lambda k, r, t, lev, tr: _max_abs(k, r, t), "max_abs_error")


def mean_abs_error_by_level(release: TreeRelease, tree: Any, *, over: str = "union") -> pd.Series:
    """Mean |released − true| per level.

    Args:
        over: ``"union"`` = mean over the union of true non-zero and released nodes;
            ``"universe"`` = sum of errors divided by the number of potential nodes of the level
            (the authors' artifact's normalisation).
    """
    if over not in ("union", "universe"):
        raise ValueError(f"over must be 'union' or 'universe', got {over!r}")

    def fn(k: np.ndarray, r: np.ndarray, t: np.ndarray, lev: int, tr: TopDownTree) -> float:
        if over == "union":
            return _mean_abs(k, r, t)
        denom = tr.level_size(lev)
        return float(np.abs(r - t).sum()) / denom if denom else 0.0

    return _per_level(release, tree, fn, "mean_abs_error")


def false_discovery_rate_by_level(release: TreeRelease, tree: Any) -> pd.Series:
    """Percent of released positive nodes whose true count is 0 (NaN if none released)."""
    return _per_level(release, tree, lambda k, r, t, lev, tr: _fdr_pct(k, r, t), "false_discovery_rate")


def false_negative_rate_by_level(release: TreeRelease, tree: Any) -> pd.Series:
    """Percent of true non-zero nodes not released as positive (NaN if the level is empty)."""
    return _per_level(release, tree, lambda k, r, t, lev, tr: _fnr_pct(k, r, t), "false_negative_rate")


def runtime_by_level(release: TreeRelease) -> pd.Series:
    """Seconds spent per level (as recorded by the mechanism)."""
    return pd.Series(np.asarray(release.timings, dtype=float), index=pd.RangeIndex(len(release.timings), name="level"),
                     name="seconds")


def level_report(release: TreeRelease, tree: Any) -> pd.DataFrame:
    """All metrics in one frame indexed by level (one key merge per level): level name, released
    nodes, true non-zero nodes, max / mean (over the union) absolute error, false discovery and
    false negative rates in percent, seconds."""
    _check_tree_release(release)
    tree = as_topdown_tree(tree)
    rows = []
    for lev in range(release.n_levels):
        k, r, t = level_errors(release, tree, lev)
        rows.append({
            "level": lev, "level_name": release.level_names[lev], "released_nodes": len(release.levels[lev]),
            "true_nonzero": int(np.sum(t > 0)),
            "max_abs_error": _max_abs(k, r, t),
            "mean_abs_error": _mean_abs(k, r, t),
            "false_discovery_rate_pct": _fdr_pct(k, r, t),
            "false_negative_rate_pct": _fnr_pct(k, r, t),
            "seconds": float(release.timings[lev]) if lev < len(release.timings) else float("nan"),
        })
    return pd.DataFrame(rows).set_index("level")
