"""Figures of comparison frames (:func:`hierdp.compare`), drawn with matplotlib's Agg canvas.

``hierdp.plot.compare_figure(frame)`` returns a matplotlib ``Figure`` with four panels: three of
metrics per level, chosen by the frame's input (:data:`PANELS`), and the wall time of one release
per configuration (bar: median; whisker: min to max; dots: runs), with the configurations that
could not run and their status. Errors are drawn as one line per configuration - the median over
seeds - with a band from the smallest to the largest value over the seeds; rates and counts as
the mean over seeds.

* trees: maximum and mean absolute error per level; the false discovery rate (percent of released
  positive nodes that are truly 0) and the false negative rate (percent of truly positive nodes
  released as 0);
* group sizes: total and largest L1 error per region level; #CV (cells that differ from the sum of
  their children) per level;
* points: mean relative error and its 95th percentile per range workload; mean absolute error.

A frame made with ``intervals=0.9`` (:func:`hierdp.compare`) also gets **error bands**: in the
mean |error| panel, each configuration's intervals as a band from 0 to their mean half-width
(median over seeds, dotted edge), beside its measured mean error, and its measured coverage of the
truth (all levels, mean over seeds) in the legend.

``save_compare_figure(frame, "compare.png")`` writes it.

``hierdp.plot.interval_figure(frame)`` draws the error bands of a frame from
``release.intervals(...)`` (:mod:`hierdp.intervals`): released values with their intervals, per
level, the method and whether it is a bound or an estimate in the title; ``interval_bands(ax, x,
lower, upper)`` adds such a band to any axes (the compare figure's error bands reuse it). Figures are built on their own canvas
(``matplotlib.figure.Figure`` + Agg), never through pyplot, so nothing here changes the
backend or the state of an interactive session. matplotlib is imported only when a figure is
drawn (the ``plot`` extra).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["PANELS", "compare_figure", "interval_bands", "interval_figure", "save_compare_figure"]

#: per input kind: three panels of (columns, title, log scale (median and band) or linear (mean)),
#: then the y labels of the first and the third panel
PANELS: dict[str, tuple[list[tuple[tuple[str, ...], str, bool]], str, str]] = {
    "tree": ([(("max_abs_error",), "max |error| per level", True),
              (("mean_abs_error",), "mean |error| per level", True),
              (("false_discovery_rate_pct", "false_negative_rate_pct"),
               "false discovery / false negative rate per level (mean over seeds)", False)],
             "absolute error (counts, symlog scale)", "percent of nodes"),
    "group_sizes": ([(("l1_total",), "L1 error per level (sum over regions and sizes)", True),
                     (("max_abs_error",), "max |error| of a cell per level", True),
                     (("cv",), "#CV per level: cells differing from their children's sum (mean over seeds)",
                      False)],
                    "L1 error (groups, symlog scale)", "cells"),
    "points": ([(("mre_pct",), "mean relative error per workload (%)", True),
                (("p95_relative_error_pct",), "95th percentile of the relative error (%)", True),
                (("mean_abs_error",), "mean |error| of a query (mean over seeds)", False)],
               "relative error (%, symlog scale)", "points"),
}


def _labels(ok: pd.DataFrame) -> list[tuple[str, str]]:
    return list(dict.fromkeys(zip(ok["mechanism"], ok["solver"], strict=False)))


def _label(mech: str, solver: str) -> str:
    return mech if solver in ("-", "", None) else f"{mech} ({solver})"


def _num(x: float) -> str:
    """``1``, ``0.5``, ``1e-8`` (no zero-padded exponent)."""
    s = f"{float(x):g}"
    return s.replace("e-0", "e-").replace("e+0", "e+")


def _has_intervals(sub: pd.DataFrame) -> bool:
    return "interval_mean_width" in sub.columns and bool(sub["interval_mean_width"].notna().any())


def _pct(level: float) -> str:
    return f"{100 * float(level):g} %"


def compare_figure(frame: pd.DataFrame, *, title: str | None = None, data_label: str | None = None) -> Any:
    """The comparison figure of a :func:`hierdp.compare` frame (see the module docstring).

    Args:
        frame: the tidy frame (``status == "ok"`` rows are drawn; configurations that did not
            run are listed in the seconds panel with their status).
        title: the figure's title (default: data, budget and number of seeds).
        data_label: what was released, for the default title (e.g. ``"world cities"``).

    Returns:
        A ``matplotlib.figure.Figure`` (save it with ``fig.savefig(path, dpi=...)``).
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.ticker import FuncFormatter
    except ImportError:
        raise ImportError("hierdp.plot needs matplotlib: pip install 'hierdp[plot]'") from None

    ok = frame[frame["status"] == "ok"].copy()
    if ok.empty:
        raise ValueError("nothing to plot: no configuration ran successfully (see the status column)")
    kind = str(ok["input"].iloc[0]) if "input" in ok.columns else "tree"
    panels, ylabel_error, ylabel_rate = PANELS[kind]
    configs = _labels(ok)
    colors = {c: f"C{k % 10}" for k, c in enumerate(configs)}
    markers = "os^DvP*Xph"
    levels = sorted(int(x) for x in ok["level"].dropna().unique())
    names = ok.drop_duplicates("level").set_index("level")["level_name"].to_dict()

    fig = Figure(figsize=(13, 8.6), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, 2)
    # configurations side by side around each level (they often coincide: a dodge keeps each visible)
    dodge = {c: (k - (len(configs) - 1) / 2) * min(0.06, 0.5 / max(len(configs), 1)) for k, c in enumerate(configs)}
    handles = []
    for ax, panel in zip([axes[0, 0], axes[0, 1], axes[1, 0]], panels, strict=False):
        cols, what, log = panel
        for k, conf in enumerate(configs):
            sub = ok[(ok["mechanism"] == conf[0]) & (ok["solver"] == conf[1])]
            for col, style in zip(cols, ("-", "--"), strict=False):
                g = sub.groupby("level")[col]
                if log:  # errors: median and the min-max band over the seeds
                    mid, lo, hi = g.median(), g.min(), g.max()
                    x = np.asarray(mid.index, dtype=float) + dodge[conf]
                    ax.fill_between(x, lo.to_numpy(float), hi.to_numpy(float), color=colors[conf], lw=0, alpha=0.15)
                else:  # rates: the mean over the seeds (bands of two rates per configuration would blur)
                    mid = g.mean()
                    x = np.asarray(mid.index, dtype=float) + dodge[conf]
                line, = ax.plot(x, mid.to_numpy(float), color=colors[conf], ls=style,
                                marker=markers[k % len(markers)], ms=5, lw=1.6, label=_label(*conf))
                if ax is axes[0, 0]:
                    handles.append(line)
            if ax is axes[0, 1] and _has_intervals(sub):
                half = (sub.groupby("level")["interval_mean_width"].median() / 2.0).dropna()
                x = np.asarray(half.index, dtype=float) + dodge[conf]
                interval_bands(ax, x, np.zeros(x.size), half.to_numpy(float), color=colors[conf], alpha=0.12)
                ax.plot(x, half.to_numpy(float), color=colors[conf], ls=":", lw=1.2)
                cover = float((sub["interval_coverage_pct"] * sub["interval_nodes"]).sum() / sub["interval_nodes"].sum())
                handles[k].set_label(f"{_label(*conf)}; {_pct(sub['interval_level'].iloc[0])} intervals cover "
                                      f"{cover:.1f} %")
        ax.set_xticks(levels)
        ax.set_xticklabels([str(names.get(lv, lv)) for lv in levels], rotation=20 if len(levels) > 6 else 0,
                           ha="right" if len(levels) > 6 else "center")
        ax.set_title(what, fontsize=11)
        ax.grid(True, which="major", alpha=0.3)
        if log:
            ax.set_yscale("symlog", linthresh=1.0)  # zero error (a public root) stays on the axis
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.set_ylim(bottom=0)
        ax.set_xlabel("workload" if kind == "points" else "level")
    if _has_intervals(ok):
        axes[0, 1].set_title(f"{PANELS[kind][0][1][1]}; bands: mean half-width of the "
                             f"{_pct(ok['interval_level'].dropna().iloc[0])} intervals", fontsize=11)
    axes[0, 0].set_ylabel(ylabel_error)
    axes[1, 0].set_ylabel(ylabel_rate)
    if kind == "tree":
        axes[1, 0].plot([], [], "k-", label="false discovery rate")
        axes[1, 0].plot([], [], "k--", label="false negative rate")
        axes[1, 0].legend(fontsize=8, loc="upper left", handles=axes[1, 0].lines[-2:])

    ax = axes[1, 1]
    runs = ok.drop_duplicates(["mechanism", "solver", "seed"])
    failed = frame[frame["status"] != "ok"].drop_duplicates(["mechanism", "solver"])
    not_run = [(m, s, st) for m, s, st in zip(failed["mechanism"], failed["solver"], failed["status"], strict=False)
               if (m, s) not in colors]
    rows = configs + [(m, s) for m, s, _ in not_run]
    ypos = np.arange(len(rows))[::-1]
    spans = []
    for y, conf in zip(ypos, configs, strict=False):
        t = runs[(runs["mechanism"] == conf[0]) & (runs["solver"] == conf[1])]["run_seconds"].to_numpy(float)
        med = float(np.median(t))
        spans.append(t)
        ax.barh(y, med, color=colors[conf], alpha=0.75, height=0.6)
        ax.errorbar(med, y, xerr=[[med - t.min()], [t.max() - med]], color="black", capsize=3, lw=1)
        ax.plot(t, np.full(t.size, y), "k.", ms=3, alpha=0.6)
        ax.annotate(f"{med:.3g} s", (t.max(), y), xytext=(6, 0), textcoords="offset points", va="center",
                    fontsize=8)
    allt = np.concatenate(spans)
    if allt.min() > 0 and allt.max() / allt.min() > 20:
        ax.set_xscale("log")
        ax.set_xlabel("seconds (log scale)")
    else:
        ax.set_xlabel("seconds")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    ax.set_xlim(right=ax.get_xlim()[1] * (1.6 if ax.get_xscale() == "log" else 1.15))
    for y, (_, _, status) in zip(ypos[len(configs):], not_run, strict=False):  # configurations that could not run
        ax.annotate(f"not run: {status}", (ax.get_xlim()[0], y), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=8, color="dimgray", style="italic")
    ax.set_yticks(ypos)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_yticklabels([_label(*c) for c in rows], fontsize=9)
    ax.set_title("seconds per release (median, min to max, each run)", fontsize=11)
    ax.grid(True, axis="x", which="both", alpha=0.3)
    ncol = len(configs) if len(configs) <= 5 else -(-len(configs) // 2)
    fig.legend(handles=handles, loc="outside lower center", ncol=ncol, fontsize=9, frameon=False)

    n_seeds = int(ok["seed"].nunique())
    if title is None:
        first = ok.iloc[0]
        budget = (f"ε = {_num(first['epsilon'])}, δ = {_num(first['delta'])}" if pd.notna(first["epsilon"])
                  else f"ρ = {_num(first['rho'])}")
        on = f" on {data_label}" if data_label else ""
        title = (f"hierdp compare{on}: {budget}, {n_seeds} seed{'s' if n_seeds > 1 else ''} "
                 f"(lines: median over seeds, bands: min to max)")
    fig.suptitle(title, fontsize=12)
    return fig


def save_compare_figure(frame: pd.DataFrame, path: str | Path, *, dpi: int = 110, **kwargs: Any) -> Path:
    """Draw :func:`compare_figure` and write it (PNG, SVG or PDF, by the file name)."""
    fig = compare_figure(frame, **kwargs)
    path = Path(path)
    fig.savefig(path, dpi=dpi)
    return path


def interval_bands(ax: Any, x: Any, lower: Any, upper: Any, *, color: Any = None, alpha: float = 0.25,
                   label: str | None = None) -> Any:
    """Draw the intervals ``[lower, upper]`` at positions ``x`` on ``ax`` as vertical bars (one per
    node; a filled band when ``x`` is a continuous axis such as levels). Returns the artist."""
    x = np.asarray(x)
    lo, hi = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    if x.size > 1 and np.all(np.diff(x.astype(float)) > 0) and np.issubdtype(x.dtype, np.floating):
        return ax.fill_between(x, lo, hi, color=color, alpha=alpha, linewidth=0, label=label)
    return ax.vlines(x, lo, hi, colors=color, alpha=max(alpha, 0.6), linewidth=2.0, label=label)


def interval_figure(frame: pd.DataFrame, *, max_nodes: int = 30, log: bool | None = None,
                    title: str | None = None) -> Any:
    """Error bands of a ``release.intervals(...)`` frame: one panel per level (tree releases; one
    panel otherwise), the ``max_nodes`` largest released values of the level as points with their
    intervals as bars, the method and its kind (bound / exact / estimate) in the title.

    Returns:
        A ``matplotlib.figure.Figure``.

    Raises:
        ValueError: the frame has no ``lower`` / ``upper`` columns.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if not {"lower", "upper"} <= set(frame.columns):
        raise ValueError("the frame has no lower / upper columns: make it with release.intervals(level)")
    value = "value" if "value" in frame.columns else next(c for c in ("noisy_count",) if c in frame.columns)
    groups = list(frame.groupby("level", sort=True)) if "level" in frame.columns else [("all", frame)]
    fig = Figure(figsize=(4.2 * min(len(groups), 4), 4.0 * ((len(groups) + 3) // 4)), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots((len(groups) + 3) // 4, min(len(groups), 4), squeeze=False).ravel()
    for ax, (lev, part) in zip(axes, groups, strict=False):
        top = part.nlargest(max_nodes, value) if len(part) > max_nodes else part.sort_values(value, ascending=False)
        x = np.arange(len(top))
        interval_bands(ax, x, top["lower"], top["upper"], color="tab:blue", label="interval")
        ax.plot(x, top[value].to_numpy(dtype=float), "o", color="black", markersize=3, label="released")
        name = top["level_name"].iloc[0] if "level_name" in top.columns and len(top) else lev
        ax.set_title(f"level {lev} ({name})" if lev != "all" else "released counts", fontsize=10)
        ax.set_xticks([])
        use_log = log if log is not None else bool((top[value] > 0).all() and top[value].max() > 100 * max(
            top[value].min(), 1))
        if use_log:
            ax.set_yscale("symlog", linthresh=10)
    for ax in axes[len(groups):]:
        ax.set_visible(False)
    axes[0].legend(fontsize=8, frameon=False)
    info = frame.attrs.get("intervals", {})
    if title is None:
        level = info.get("level")
        title = (f"{round(100 * level)} % intervals: {info.get('method', '?')} ({info.get('kind', '?')}); "
                 "no privacy budget spent") if level is not None else "intervals"
    fig.suptitle(title, fontsize=11)
    return fig
