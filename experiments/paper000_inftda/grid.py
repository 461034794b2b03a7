"""The paper-000 experiment loop: its five mechanisms (built through the registry), per-level
metrics of every run, summaries and the per-level plots of Figures 3-5."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from experiments.common import inftda_reference_dir

REFERENCE = inftda_reference_dir()

#: The paper's five mechanisms, in its plotting order.
MECHANISMS = ("SH", "VanillaGauss", "TDA_l2", "TDA_linf", "InfTDA")
#: Their names in the mechanism registry (``hierdp.mechanisms.names()``).
REGISTRY_NAMES = {"SH": "sh", "VanillaGauss": "vanilla", "TDA_l2": "tda_l2", "TDA_linf": "tda_linf",
                  "InfTDA": "inftda"}
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
                    contributions: int = 1, solver_time_limit: float | None = None) -> Any:
    """The mechanism for one of :data:`MECHANISMS` at budget ``(epsilon, delta)``, from the registry.

    ``solver_time_limit``: seconds per solver call of TDA_linf's general solver; a level that hits
    it aborts the run (``ReleaseAborted``), which :func:`run_cell` records as a note."""
    from hierdp.mechanisms import create

    if name not in REGISTRY_NAMES:
        raise ValueError(f"unknown mechanism {name!r}; choose from {MECHANISMS}")
    extra = {"solver": linf_solver, "time_limit": solver_time_limit} if name == "TDA_linf" else {}
    return create(REGISTRY_NAMES[name], epsilon=epsilon, delta=delta, contributions=contributions, **extra)


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
             solver_time_limit: float | None = None,
             contributions: int = 1, progress: bool = False) -> tuple[pd.DataFrame, RunLog]:
    """Run one mechanism ``runs`` times on ``tree``; per-level metrics of every run.

    Stops early (keeping the runs done) when the cumulated time exceeds ``time_budget`` seconds, or
    when the mechanism refuses the input (e.g. VanillaGauss on a universe too large to materialize).
    """
    from hierdp.mechanisms import ReleaseAborted

    frames, secs, note = [], [], ""
    for run in range(runs):
        mech = build_mechanism(name, epsilon, delta, linf_solver=linf_solver, solver_time_limit=solver_time_limit,
                               contributions=contributions)
        t0 = time.perf_counter()
        try:
            release = mech.release(tree, seed=seed + 1000 * run, progress=progress)
        except (MemoryError, ValueError) as exc:
            note = f"refused: {type(exc).__name__}: {exc}"
            break
        except ReleaseAborted as exc:  # e.g. a general solver's time limit: say so, keep the runs done
            note = f"aborted: {exc}"
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
             runs: int, *, seed: int, time_budget: float | None,
             solver_time_limit: float | None = None) -> tuple[list[pd.DataFrame], list[str]]:
    """Every (ε, mechanism) cell on one tree: per-run frames tagged with dataset/mechanism/ε, and
    the notes of cells that stopped early (printed as they finish)."""
    frames, notes = [], []
    for eps in epsilons:
        for mech in mechanisms:
            df, log = run_cell(mech, tree, eps, delta, runs, seed=seed, time_budget=time_budget,
                               solver_time_limit=solver_time_limit)
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
    g = df.groupby([*list(keys), "level"])[metrics_cols]
    out = g.mean().add_suffix("_mean")
    out = out.join(g.min().add_suffix("_min")).join(g.max().add_suffix("_max"))
    out["runs"] = df.groupby([*list(keys), "level"])["run"].nunique()
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
