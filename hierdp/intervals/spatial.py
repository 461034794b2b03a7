"""Intervals of spatial releases (paper 002): exact noise intervals and exact WLS variances.

* **HTF leaves** (``combine_pruned=False``, the default): a leaf's released value is one discrete
  Laplace draw on its true count - at height 0 the level's draw, above it the fresh draw with
  everything the path has left (Alg. 3), which is independent of the draw that stopped the split.
  *Given the released partition*, ``value ± m`` (m the exact margin of that law) therefore covers
  the leaf's true count with probability at least the level: an exact interval, conditional on
  the partition (which is itself a DP output). ``combine_pruned=True`` averages in the stopping
  draw, whose law given the stop is truncated: refused.
* **Tree baselines with Hay's consistency** (QuadTree, kd-tree; ``consistency="gls"``): the
  released leaves are the WLS estimates over the released tree, linear in the noise;
  :func:`~hierdp.intervals.wls.tree_wls_variance` gives their exact variances from the per-depth
  scales the accounting records, and ``value ± z σ`` is a normal-approximation estimate.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

import numpy as np

from hierdp.intervals.errors import IntervalsUnsupported
from hierdp.intervals.noise_law import NoiseLaw
from hierdp.intervals.wls import tree_wls_variance

__all__ = ["htf_leaf_laws", "spatial_intervals"]


def htf_leaf_laws(release: Any) -> list[NoiseLaw]:
    """The noise law of every released HTF leaf (exact parameters from the accounting)."""
    from hierdp.privacy.calibration import laplace_scale

    if release.params.get("combine_pruned"):
        raise IntervalsUnsupported("HTF with combine_pruned=True releases an average with the draw that stopped the "
                                   "split (a truncated law): no exact interval")
    heights = np.asarray(release.details.get("leaf_heights", []), dtype=np.int64)
    exact = release.details.get("exact", {})
    remain = exact.get("remainders")
    if heights.size != release.n_leaves or remain is None:
        raise IntervalsUnsupported("the HTF release records no leaf heights / remainders")
    data = {}
    for s in release.accounting.spends:
        m = re.fullmatch(r"data, height (\d+)", s.label)
        if m and "scale" in s.details:
            sens = s.details.get("l1_sensitivity", s.details.get("sensitivity", 1))
            data[int(m.group(1))] = (float(s.details["scale"]), int(sens))
    laws: dict[int, NoiseLaw] = {}
    for h in np.unique(heights):
        if h == 0:
            laws[0] = NoiseLaw("geometric", data[0][0])
        else:
            sens = data[int(h)][1]
            laws[int(h)] = NoiseLaw("geometric", laplace_scale(Fraction(remain[int(h)]), sens, culprit="HTF"))
    return [laws[int(h)] for h in heights]


def _depth_scales(release: Any) -> dict[int, float]:
    out = {}
    for s in release.accounting.spends:
        m = re.fullmatch(r"counts, depth (\d+)", s.label)
        if m and "scale" in s.details:
            out[int(m.group(1))] = float(s.details["scale"])
    return out


def spatial_intervals(release: Any, level: float, method: str) -> tuple[np.ndarray, np.ndarray, str, str]:
    """``(lower, upper, method, kind)`` for every released leaf.

    Raises:
        IntervalsUnsupported: a spatial mechanism whose output law is not one of the above.
    """
    from statistics import NormalDist

    v = np.asarray(release.values, dtype=np.float64)
    if (release.accounting.details or {}).get("constraints") is not None:
        raise IntervalsUnsupported(f"{release.mechanism}: the release was post-processed under public constraints; "
                                   "its values are no longer the draws' or the two-pass WLS law")
    if release.mechanism == "HTF" and release.solver is None and method in ("auto", "noise"):
        laws = htf_leaf_laws(release)
        margins = {law: law.margin(level) for law in set(laws)}
        m = np.array([margins[law] for law in laws], dtype=np.float64)
        return v - m, v + m, "noise law (exact, given the released partition)", "exact"
    if release.tree is not None and release.solver is not None and method in ("auto", "wls"):
        scales = _depth_scales(release)
        tree = release.tree
        depth = np.asarray(tree.level, dtype=np.int64)
        if not set(np.unique(depth).tolist()) <= set(scales):
            raise IntervalsUnsupported(f"{release.mechanism}: the accounting records no count scale for some depth")
        var = np.array([NoiseLaw("geometric", scales[int(d)]).variance for d in range(int(depth.max()) + 1)])[depth]
        sd = np.sqrt(tree_wls_variance(tree.parent, var, depth))[tree.is_leaf]
        z = NormalDist().inv_cdf(0.5 + float(level) / 2.0)
        return v - z * sd, v + z * sd, "WLS variance (two-pass, normal approximation)", "estimate"
    raise IntervalsUnsupported(f"{release.mechanism}: no interval method {method!r} for this spatial release (HTF "
                               "leaves: 'noise'; tree baselines with consistency='gls': 'wls')")
