"""What the paper-002 experiments share: datasets, workloads, one evaluation loop, tables, plots.

Datasets (every box declared, see :mod:`hierdp.datasets.points`):

* ``cities`` - the GeoNames cities weighted by population / 1,000 on the world box (3.9 M records),
  the stand-in for the paper's proprietary Los Angeles data (3.5 M points);
* ``gauss20`` / ``gauss50`` / ``gauss100`` - one Gaussian cluster, σ in cells, 1 M points;
  ``gauss20_3.5m`` ... - the same with 3.5 M points (the paper's "six synthetic datasets");
* ``storms``, ``zipcodes`` - real, sparse and anisotropic point sets (``real.py``).

Quick mode (``--quick``, used by the tests) uses a 256 x 256 grid, σ and point counts scaled down,
fewer seeds, heights and queries: it checks the scripts run end to end, not the paper's numbers.

Workloads (:mod:`hierdp.metrics.spatial`): ``random`` (random shape and size), ``square2`` /
``square6`` / ``square10`` (squares of 2 / 6 / 10 % of the domain); ``mixed`` is all four together.
Every mechanism comes from the registry; each (mechanism, parameters, seed) is released once and
answers every workload.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hierdp.datasets import points
from hierdp.mechanisms import create
from hierdp.metrics.spatial import mean_relative_error, random_rectangles, random_squares

__all__ = ["OUT", "SQUARES", "bar_panels", "evaluate", "line_panels", "load", "summarize", "workloads"]

#: where this paper's outputs go (git-ignored)
OUT = "paper002_htf"
SQUARES = {"square2": 0.02, "square6": 0.06, "square10": 0.10}


def load(name: str, quick: bool = False):
    """A dataset by name (see the module docstring) as a :class:`~hierdp.hierarchy.spatial.SpatialGrid`."""
    side = 256 if quick else 1024
    if name.startswith("gauss"):
        body = name[len("gauss"):]
        sigma_s, _, size = body.partition("_")
        n = 3_500_000 if size == "3.5m" else 1_000_000
        sigma = float(sigma_s)
        if quick:
            n, sigma = n // 20, sigma / 4
        return points.gaussian_cluster(n, sigma, side, seed=int(sigma_s) + (7 if size else 0))
    if name == "cities":
        return points.world_city_points((side, side), per=1000 if not quick else 20000)
    if name == "storms":
        return points.storm_points((128, 128) if quick else (256, 256))
    if name == "zipcodes":
        return points.zipcode_points((128, 256) if quick else (512, 1024))
    raise KeyError(f"unknown dataset {name!r}")


def workloads(shape: tuple[int, int], n: int, seed: int = 0,
              kinds: Iterable[str] = ("random", *SQUARES)) -> dict[str, np.ndarray]:
    """Named query workloads on ``shape`` (``mixed`` = all of them together)."""
    out: dict[str, np.ndarray] = {}
    for i, kind in enumerate(kinds):
        if kind == "random":
            out[kind] = random_rectangles(shape, n, seed + i)
        else:
            out[kind] = random_squares(shape, n, SQUARES[kind], seed + i)
    if len(out) > 1:
        out["mixed"] = np.concatenate(list(out.values()))
    return out


def evaluate(grid: Any, configs: Sequence[tuple[str, str, dict[str, Any]]], epsilons: Sequence[float],
             seeds: Sequence[int], queries: dict[str, np.ndarray], dataset: str, progress: bool = True,
             extra: dict[str, Any] | None = None) -> pd.DataFrame:
    """One row per (config, ε, seed, workload): ``label``, ``mechanism``, parameters, ``mre``,
    ``seconds`` (release), ``leaves``, ``height`` (HTF's estimated height, if any).

    ``configs`` are ``(label, registry name, parameters)``.
    """
    truth = {k: grid.query_counts(q) for k, q in queries.items()}
    rows = []
    todo = [(c, e, s) for c in configs for e in epsilons for s in seeds]
    it: Iterable[Any] = todo
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(todo, desc=dataset, leave=False)
    for (label, name, params), eps, seed in it:
        mech = create(name, epsilon=eps, **params)
        t0 = time.perf_counter()
        rel = mech.release(grid, seed=seed)
        secs = time.perf_counter() - t0
        for kind, q in queries.items():
            rows.append({"dataset": dataset, "label": label, "mechanism": name, "epsilon": eps, "seed": seed,
                         "workload": kind, "mre": mean_relative_error(rel.answer(q), truth[kind]), "seconds": secs,
                         "leaves": rel.n_leaves, "height": rel.details.get("height"),
                         **{f"param_{k}": v for k, v in params.items()}, **(extra or {})})
    return pd.DataFrame(rows)


def summarize(runs: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """Mean / min / max MRE over seeds per ``keys``, plus the mean seconds."""
    g = runs.groupby(list(keys), sort=False, dropna=False)
    out = g["mre"].agg(mre_mean="mean", mre_min="min", mre_max="max").reset_index()
    out["seconds"] = g["seconds"].mean().to_numpy()
    return out


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def line_panels(summary: pd.DataFrame, panels: Sequence[tuple[str, dict[str, Any]]], x: str, path: Path,
                xlabel: str, flat: Sequence[str] = (), title: str = "") -> Path:
    """A row of panels (title, row filter), MRE (log) against ``x``, one line per label; labels in
    ``flat`` have no ``x`` (e.g. HTF, whose height is estimated) and are drawn as horizontal lines."""
    plt = _plt()
    fig, axes = plt.subplots(1 if len(panels) <= 3 else 2, min(3, len(panels)),
                             figsize=(4.3 * min(3, len(panels)), 3.3 * (1 if len(panels) <= 3 else 2)), squeeze=False)
    for ax, (ptitle, filt) in zip(axes.ravel(), panels, strict=False):
        cell = summary
        for k, v in filt.items():
            cell = cell[cell[k] == v]
        for label in dict.fromkeys(cell["label"]):
            m = cell[cell["label"] == label]
            if label in flat:
                ax.axhline(float(m["mre_mean"].mean()), ls="--", lw=1.2, label=label, color="black" if "5e-4" in label
                           or label == "HTF" else "dimgray")
                continue
            m = m.sort_values(x)
            err = np.vstack([m["mre_mean"] - m["mre_min"], m["mre_max"] - m["mre_mean"]])
            ax.errorbar(m[x], m["mre_mean"], yerr=err, marker="o", ms=3, lw=1, capsize=2, label=label)
        ax.set_yscale("log")
        ax.set_title(ptitle, fontsize=9)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("MRE (%)")
        ax.grid(alpha=0.3)
    axes.ravel()[0].legend(fontsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def bar_panels(summary: pd.DataFrame, group: str, path: Path, title: str = "") -> Path:
    """Grouped bars: MRE (log) per label, one group per value of ``group`` (Fig. 6's layout)."""
    plt = _plt()
    groups = list(dict.fromkeys(summary[group]))
    labels = list(dict.fromkeys(summary["label"]))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(groups)), 3.8))
    width = 0.8 / len(labels)
    for j, label in enumerate(labels):
        vals = [float(summary[(summary[group] == g) & (summary["label"] == label)]["mre_mean"].mean()) for g in groups]
        ax.bar(np.arange(len(groups)) + j * width, vals, width, label=label)
    ax.set_xticks(np.arange(len(groups)) + 0.4 - width / 2)
    ax.set_xticklabels(groups, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("MRE (%)")
    ax.legend(fontsize=7, ncol=3)
    ax.grid(alpha=0.3, axis="y")
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def pivot(summary: pd.DataFrame, index: Sequence[str], columns: str) -> pd.DataFrame:
    """MRE means as a wide table for printing."""
    return summary.pivot_table(index=list(index), columns=columns, values="mre_mean", sort=False).reset_index()
