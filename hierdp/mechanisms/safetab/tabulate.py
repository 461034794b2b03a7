"""SafeTab's adaptive tabulation (paper 004, Alg. 2) for every group of one level, vectorized per
tabulation: TotalOnly counts, the Step-1 noisy totals that choose each group's Step-2 tabulation,
and the Step-2 cells, with their margins of error."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from hierdp.mechanisms.safetab.levels import SafeTabError, _LevelWork
from hierdp.privacy.moe import discrete_gaussian_moe, geometric_moe
from hierdp.privacy.noise import noise_model

__all__ = ["TABULATIONS"]

#: Step-2 tabulations in threshold order (index = number of thresholds the noisy total reaches).
TABULATIONS = ("total", "sex_age4", "sex_age9", "sex_age23")


def _scale(noise: str, param: Fraction) -> float:
    """The noise parameter for a count with per-count budget ``param`` (exact), rounded up:
    geometric scale ``1/eps``, discrete Gaussian ``sigma2 = 1/(2 rho)`` (sensitivity 1)."""
    return noise_model(noise).calibrate(param, 1, culprit="a level budget")


def _draw(noise: str, scale: float, size: tuple[int, ...], rng: Any) -> np.ndarray:
    """Integer noise with the (already safely rounded) parameter ``scale``."""
    return noise_model(noise).draw(scale, size, rng)


def _moe(noise: str, scale: float, level: float, method: str) -> int:
    """Margin of error of the noise actually added (its exact delivered parameter)."""
    delivered = float(noise_model(noise).delivered(scale, 1))
    if noise == "geometric":
        return int(geometric_moe(delivered, level, method))  # type: ignore[arg-type]
    return discrete_gaussian_moe(delivered, level, method)  # type: ignore[arg-type]


def _cells_frame(level: str, groups: np.ndarray, runs: np.ndarray, tab: str, cells: list[tuple[str, Any, Any]],
                 noisy: np.ndarray, true: np.ndarray, moe: int, param: float,
                 include_true: bool) -> pd.DataFrame:
    """Rows for ``len(groups)`` (run, group) pairs times ``len(cells)`` cells (row-major)."""
    k = len(cells)
    cell_names = np.array([c[0] for c in cells], dtype=object)
    out = {
        "run": np.repeat(runs, k),
        "level": np.full(groups.size * k, level, dtype=object),
        "group": np.repeat(groups, k),
        "tabulation": np.full(groups.size * k, tab, dtype=object),
        "cell": np.tile(cell_names, groups.size),
        "sex": np.tile(np.array([c[1] for c in cells], dtype=object), groups.size),
        "age": np.tile(np.array([c[2] for c in cells], dtype=object), groups.size),
        "noisy_count": noisy.ravel(),
        "moe": np.full(groups.size * k, moe, dtype=np.int64),
        "noise_parameter": np.full(groups.size * k, param),
    }
    if include_true:
        out["true_count"] = true.ravel()
    return pd.DataFrame(out)


def _run_level(w: _LevelWork, noise: str, scales: tuple[float, float, float], theta: tuple[float, float, float],
               reps: int, rng: Any, sexes: list, age_labels: dict[str, list[str]],
               moes: tuple[int, int], params: tuple[float, float],
               include_true: bool) -> list[pd.DataFrame]:
    """Alg. 2 for every group of one level and every run, vectorized per tabulation.

    ``scales``: the noise parameters (TotalOnly, Step 1, Step 2), already rounded up;
    ``params``: the per-count budgets (TotalOnly, Step 2) reported in ``noise_parameter``."""
    b, b2 = params
    out = []
    total_cell: list[tuple[str, Any, Any]] = [("total", None, None)]
    n_groups = w.groups.size
    to_idx = np.flatnonzero(w.total_only)
    ad_idx = np.flatnonzero(~w.total_only)
    if to_idx.size:  # TotalOnly: one count with the whole per-group budget
        true = np.broadcast_to(w.totals[to_idx], (reps, to_idx.size))
        noisy = true + _draw(noise, scales[0], (reps, to_idx.size), rng)
        runs = np.repeat(np.arange(reps), to_idx.size)
        out.append(_cells_frame(w.name, np.tile(w.groups[to_idx], reps), runs, "total_only",
                                total_cell, noisy, true, moes[0], b, include_true))
    if ad_idx.size:
        # Step 1: noisy totals with gamma * b choose the Step-2 tabulation
        step1 = w.totals[ad_idx][None, :] + _draw(noise, scales[1], (reps, ad_idx.size), rng)
        choice = np.searchsorted(np.asarray(theta), step1, side="right")  # 0..3
        for c, tab in enumerate(TABULATIONS):
            run_i, col_i = np.nonzero(choice == c)
            if run_i.size == 0:
                continue
            grp = ad_idx[col_i]
            if tab == "total":
                true = w.totals[grp][:, None]
                cells = total_cell
            else:
                key = tab.split("_", 1)[1]
                true = w.tables[tab][grp]
                cells = [(f"{s}|{a}", s, a) for s in sexes for a in age_labels[key]]
            noisy = true + _draw(noise, scales[2], true.shape, rng)
            out.append(_cells_frame(w.name, w.groups[grp], run_i, tab, cells, noisy, true,
                                    moes[1], b2, include_true))
    if not out:  # cannot happen (a level has groups), kept for clarity
        raise SafeTabError(f"level {w.name!r} produced no output ({n_groups} groups)")
    return out
