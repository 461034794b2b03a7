"""Accuracy of histogram-per-node releases (group sizes, paper 001): L1 error per level, #CV.

Paper 001 reports "the average L1 error per level" (Table 7) without its normalization (decision
A6 of the notes); hierdp reports three: the total L1 error of a level (``sum_r sum_k |ĉ - c|``),
the mean absolute error per (region, size) cell, and the total relative to the level's true
number of groups. #CV (:func:`constraint_violations`) counts the (non-leaf region, size) pairs
whose released value differs from the sum of the children's (§11); faithfulness violations
(levels whose released total is not ``G``) are counted separately.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["constraint_violations", "constraint_violations_by_level", "faithfulness_violations", "histogram_report",
           "l1_error_by_level"]


def _truth_values(truth: Any, shape: tuple[int, int]) -> np.ndarray:
    h = truth.h if hasattr(truth, "h") else np.asarray(truth)
    if h.shape != shape:
        raise ValueError(f"the truth has shape {h.shape}, the release {shape}")
    return np.asarray(h, dtype=np.int64)


def _release_values(release: Any) -> np.ndarray:
    if not hasattr(release, "values") or np.ndim(release.values) != 2 or not hasattr(release, "level"):
        raise TypeError(f"expected a histogram-per-node release (NodeHistogramRelease), got {type(release).__name__}")
    return np.asarray(release.values)


def l1_error_by_level(release: Any, truth: Any) -> pd.DataFrame:
    """One row per level: ``level, level_name, regions, cells, l1_total, l1_per_cell, l1_relative,
    max_abs_error`` (relative: total over the level's true number of groups)."""
    v = _release_values(release)
    h = _truth_values(truth, v.shape)
    err = np.abs(v.astype(np.int64) - h) if np.issubdtype(v.dtype, np.integer) else np.abs(v - h)
    rows = []
    for lev in range(int(release.level.max()) + 1):
        m = release.level == lev
        e = err[m]
        groups = int(h[m].sum())
        rows.append({"level": lev, "level_name": str(release.level_names[lev]), "regions": int(m.sum()),
                     "cells": int(e.size), "l1_total": float(e.sum()), "l1_per_cell": float(e.mean()),
                     "l1_relative": float(e.sum()) / groups if groups else float("nan"),
                     "max_abs_error": float(e.max()) if e.size else 0.0})
    return pd.DataFrame(rows)


def constraint_violations(release: Any) -> int:
    """#CV: (non-leaf node, cell) pairs that differ from the sum of their children (exact)."""
    if hasattr(release, "count_violations"):
        return int(release.count_violations())
    raise TypeError(f"expected a NodeHistogramRelease, got {type(release).__name__}")


def constraint_violations_by_level(release: Any) -> list[int]:
    """#CV per level: the (node of that level, cell) pairs that differ from the sum of their
    children (leaf levels have none)."""
    if not hasattr(release, "consistency_violations"):
        raise TypeError(f"expected a NodeHistogramRelease, got {type(release).__name__}")
    mask = np.asarray(release.consistency_violations())
    return [int(mask[release.level == lev].sum()) for lev in range(int(release.level.max()) + 1)]


def faithfulness_violations(release: Any, G: int) -> int:
    """Number of levels whose released total is not ``G``."""
    v = _release_values(release)
    return int(sum(int(v[release.level == lev].sum()) != int(G) for lev in range(int(release.level.max()) + 1)))


def histogram_report(release: Any, truth: Any) -> pd.DataFrame:
    """:func:`l1_error_by_level` plus ``cv`` (#CV of the whole release), ``faithfulness_violations``,
    ``negative`` (negative released cells) and the mechanism's name, one row per level."""
    df = l1_error_by_level(release, truth)
    G = int(truth.G) if hasattr(truth, "G") else int(_truth_values(truth, release.values.shape)[0].sum())
    df.insert(0, "mechanism", getattr(release, "mechanism", ""))
    df["cv"] = constraint_violations(release)
    df["faithfulness_violations"] = faithfulness_violations(release, G)
    df["negative"] = int((np.asarray(release.values) < 0).sum())
    return df
