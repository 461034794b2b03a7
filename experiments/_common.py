"""Shared helpers of the paper-000 experiment scripts (mechanism factory, per-level metrics, plots).

Not part of the library: the scripts in this folder import it by path (``experiments`` is put on
``sys.path`` by each script).
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hierdp.datasets import inftda_reference_dir

RESULTS = Path(__file__).resolve().parent.parent / "results"
REFERENCE = inftda_reference_dir()

#: The paper's five mechanisms, in its plotting order.
MECHANISMS = ("SH", "VanillaGauss", "TDA_l2", "TDA_linf", "InfTDA")
#: Names of the same mechanisms in the authors' result files.
REFERENCE_NAMES = {
    "SH": "SH (VanillaSH, Laplace stability histogram)",
    "VanillaGauss": "VanillaGauss",
    "TDA_l2": "TDA_L2 (CLARABEL+rounding)",
    "TDA_linf": "TDA_Linf (GLPK_MI)",
    "InfTDA": "InfTDA (fast_int_opt)",
}
COLORS = {
    "SH": "tab:gray",
    "VanillaGauss": "tab:purple",
    "TDA_l2": "tab:blue",
    "TDA_linf": "tab:orange",
    "InfTDA": "tab:red",
}


def build_mechanism(name: str, epsilon: float, delta: float, *, linf_solver: str = "highs",
                    contributions: int = 1) -> Any:
    """The hierdp mechanism object for one of :data:`MECHANISMS` at budget ``(epsilon, delta)``."""
    from hierdp.mechanisms.baselines import StabilityHistogram, VanillaGauss
    from hierdp.mechanisms.topdown import TDA, InfTDA

    if name == "InfTDA":
        return InfTDA(epsilon, delta, solver="intopt", contributions=contributions)
    if name == "TDA_l2":
        return TDA(objective="l2", rounding="paper", epsilon=epsilon, delta=delta,
                   contributions=contributions)
    if name == "TDA_linf":
        return TDA(objective="linf", solver=linf_solver, epsilon=epsilon, delta=delta,
                   contributions=contributions)
    if name == "VanillaGauss":
        return VanillaGauss(epsilon=epsilon, delta=delta, contributions=contributions)
    if name == "SH":
        return StabilityHistogram(epsilon=epsilon, delta=delta, contributions=contributions)
    raise ValueError(f"unknown mechanism {name!r}; choose from {MECHANISMS}")


def level_metrics(release: Any, tree: Any) -> pd.DataFrame:
    """Per-level max/mean absolute error, FDR and FNR (percent, like the paper's files) and seconds."""
    from hierdp import metrics

    rep = metrics.level_report(release, tree).reset_index()
    rep = rep.rename(columns={"false_discovery_rate_pct": "fdr_pct", "false_negative_rate_pct": "fnr_pct"})
    return rep[["level", "max_abs_error", "mean_abs_error", "fdr_pct", "fnr_pct", "seconds"]]


@dataclass
class RunLog:
    """What happened to one (dataset, mechanism, epsilon) cell: runs done and why it stopped."""

    runs_done: int
    seconds: list[float]
    note: str = ""


def run_cell(name: str, tree: Any, epsilon: float, delta: float, runs: int, *, seed: int = 0,
             time_budget: float | None = None, linf_solver: str = "highs",
             contributions: int = 1, progress: bool = False) -> tuple[pd.DataFrame, RunLog]:
    """Run one mechanism ``runs`` times on ``tree``; per-level metrics of every run.

    Stops early (keeping the runs done) when the cumulated time exceeds ``time_budget`` seconds, or
    when the mechanism refuses the input (e.g. VanillaGauss on a universe too large to materialize).
    """
    frames, secs, note = [], [], ""
    for run in range(runs):
        mech = build_mechanism(name, epsilon, delta, linf_solver=linf_solver,
                               contributions=contributions)
        t0 = time.perf_counter()
        try:
            release = mech.release(tree, seed=seed + 1000 * run, progress=progress)
        except (MemoryError, ValueError) as exc:
            note = f"refused: {type(exc).__name__}: {exc}"
            break
        secs.append(time.perf_counter() - t0)
        frame = level_metrics(release, tree)
        frame.insert(0, "run", run)
        frame["wall_seconds"] = secs[-1]
        frames.append(frame)
        if time_budget is not None and sum(secs) > time_budget and run + 1 < runs:
            note = f"time budget {time_budget:.0f}s reached after {run + 1} of {runs} runs"
            break
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return out, RunLog(len(secs), secs, note)


def run_grid(dataset: str, tree: Any, epsilons: Sequence[float], mechanisms: Sequence[str], delta: float,
             runs: int, *, seed: int, time_budget: float | None) -> tuple[list[pd.DataFrame], list[str]]:
    """Every (ε, mechanism) cell on one tree: per-run frames tagged with dataset/mechanism/ε, and
    the notes of cells that stopped early (printed as they finish)."""
    frames, notes = [], []
    for eps in epsilons:
        for mech in mechanisms:
            df, log = run_cell(mech, tree, eps, delta, runs, seed=seed, time_budget=time_budget)
            mean_s = np.mean(log.seconds) if log.seconds else float("nan")
            print(f"  ε={eps:<5g} {mech:<12} runs={log.runs_done:<3} {mean_s:8.3f} s/run {log.note}")
            if log.note:
                notes.append(f"{dataset} ε={eps:g} {mech}: {log.note}")
            if not df.empty:
                df.insert(0, "epsilon", eps)
                df.insert(0, "mechanism", mech)
                df.insert(0, "dataset", dataset)
                frames.append(df)
    return frames, notes


def summarize(df: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """Mean / min / max over runs of every per-level metric, grouped by ``keys`` + level."""
    metrics_cols = ["max_abs_error", "mean_abs_error", "fdr_pct", "fnr_pct"]
    g = df.groupby(list(keys) + ["level"])[metrics_cols]
    out = g.mean().add_suffix("_mean")
    out = out.join(g.min().add_suffix("_min")).join(g.max().add_suffix("_max"))
    out["runs"] = df.groupby(list(keys) + ["level"])["run"].nunique()
    return out.reset_index()


def plot_per_level(summary: pd.DataFrame, metric: str, path: Path, *, row_key: str,
                   col_key: str = "epsilon", ylabel: str | None = None, logy: bool = True,
                   rows: Iterable[Any] | None = None, title: str = "") -> Path:
    """Grid of per-level curves (rows = ``row_key`` values, columns = ε), one line per mechanism,
    error bars = min/max over runs, as in the paper's Figures 3–5."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = list(rows) if rows is not None else list(dict.fromkeys(summary[row_key]))
    cols = sorted(summary[col_key].unique())
    fig, axes = plt.subplots(len(rows), len(cols), figsize=(4.2 * len(cols), 3.0 * len(rows)),
                             squeeze=False, sharex="row")
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            ax = axes[i][j]
            cell = summary[(summary[row_key] == r) & (summary[col_key] == c)]
            for mech in MECHANISMS:
                m = cell[cell["mechanism"] == mech].sort_values("level")
                if m.empty:
                    continue
                mean = m[f"{metric}_mean"].to_numpy()
                err = np.vstack([mean - m[f"{metric}_min"].to_numpy(),
                                 m[f"{metric}_max"].to_numpy() - mean])
                ax.errorbar(m["level"], mean, yerr=err, label=mech, color=COLORS[mech],
                            marker="o", ms=3, lw=1, capsize=2)
            if logy:
                ax.set_yscale("symlog", linthresh=1.0)
            ax.set_title(f"{r}, ε={c:g}", fontsize=9)
            ax.set_xlabel("level")
            if j == 0:
                ax.set_ylabel(ylabel or metric)
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 1, 0.97) if title else None)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """Call ``fn()`` and return ``(result, seconds)``."""
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def format_table(df: pd.DataFrame, floatfmt: str = "{:,.2f}") -> str:
    """A plain-text table (no extra dependency) for printing results."""
    shown = df.copy()
    for c in shown.columns:
        if pd.api.types.is_float_dtype(shown[c]):
            shown[c] = shown[c].map(lambda v: "" if pd.isna(v) else floatfmt.format(v))
    return shown.to_string(index=False)


def print_notes(notes: Sequence[str]) -> None:
    """List the cells that stopped early or were refused (so no figure hides a shortened run)."""
    if notes:
        print("\nSkipped / shortened cells:")
        for n in notes:
            print("  " + n)
