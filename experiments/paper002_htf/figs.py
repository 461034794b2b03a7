"""Paper 002, Figures 3-5: HTF against kd-trees (Fig. 3), AG / UG (Fig. 4) and QuadTree (Fig. 5).

Run: ``python -m experiments.paper002_htf.figs [--figures 3 4 5] [--dataset cities] [--seeds 3] [--quick]``.

Data: the paper used 3.5 M proprietary Veraset points in Los Angeles; the default here is its
public stand-in ``cities`` (GeoNames cities weighted by population / 1,000: 3.9 M records, heavy-
tailed, on a 1024 x 1024 world grid); ``--dataset gauss50`` runs the same figures on the Gaussian
cluster. 2,000 queries per workload (``--queries``), 3 seeds (``--seeds``); error bars min/max.

* Fig. 3 (vs kd-trees): (a-c) MRE against the kd-tree height for ε_tot = 0.1 / 0.3 / 0.5 on random
  queries; (d-f) squares of 2 / 6 / 10 % at ε_tot = 0.1. KdTree (geo) and (uniform): 15 % of ε for the
  medians, Hay's consistency. HTF with ε'_prt = 5e-4 and 1e-3 (its height is estimated: a flat line),
  ε_height = 1e-4, T = 3, stop at <= 100 points or <= 5 cells.
* Fig. 4 (vs AG / UG): (a-c) HTF with stop count 10 / 50 / 100 against ε_tot; (d-f) squares, HTF
  with stop count 50.
* Fig. 5 (vs QuadTree geo / uniform): (a-c) MRE against the height for ε_tot = 0.1 / 0.3 / 0.5 (a
  QuadTree of height k is drawn at 2k: its fanout is twice HTF's); (d-f) squares at ε_tot = 0.1.

Outputs: ``results/paper002_htf/fig{3,4,5}_<dataset>.csv`` (one row per run and workload),
``..._summary.csv`` and ``fig{3,4,5}_<dataset>.png``; each figure prints its table.
The measured outcome is in ``docs/spatial.md`` (what matched the paper and what did not).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from experiments.common import RESULTS, format_table
from experiments.paper002_htf.common import OUT, evaluate, line_panels, load, pivot, summarize, workloads

HTF_PAPER = {"eps_height": 1e-4, "T": 3, "stop_count": 100, "stop_cells": 5}
EPSILONS = (0.1, 0.3, 0.5)


def _htf(label: str, **kw) -> tuple[str, str, dict]:
    return (label, "htf", {**HTF_PAPER, **kw})


def fig3(grid, args) -> pd.DataFrame:
    heights = [4, 6, 8] if args.quick else [8, 10, 12, 14, 16, 18, 20]
    configs = [_htf("HTF ε'prt=5e-4", eps_prt_per_level=5e-4), _htf("HTF ε'prt=1e-3", eps_prt_per_level=1e-3)]
    for h in heights:
        configs += [(f"KdTree (geo)|{h}", "kdtree", {"height": h, "budgets": "geometric"}),
                    (f"KdTree (uniform)|{h}", "kdtree", {"height": h, "budgets": "uniform"})]
    return _run(grid, configs, args)


def fig4(grid, args) -> pd.DataFrame:
    configs = [_htf(f"HTF stop={c}", eps_prt_per_level=5e-4, stop_count=c) for c in (10, 50, 100)]
    configs += [("AG", "ag", {}), ("UG", "ug", {})]
    return _run(grid, configs, args)


def fig5(grid, args) -> pd.DataFrame:
    heights = [2, 3, 4] if args.quick else [3, 4, 5, 6, 7, 8, 9, 10]
    configs = [_htf("HTF", eps_prt_per_level=5e-4)]
    for k in heights:
        configs += [(f"QuadTree (geo)|{2 * k}", "quadtree", {"height": k, "budgets": "geometric"}),
                    (f"QuadTree (uniform)|{2 * k}", "quadtree", {"height": k, "budgets": "uniform"})]
    return _run(grid, configs, args)


def _run(grid, configs, args) -> pd.DataFrame:
    queries = workloads(grid.shape, args.queries, seed=100)
    runs = evaluate(grid, configs, args.epsilons, list(range(args.seeds)), queries, args.dataset,
                    progress=not args.quiet)
    split = runs["label"].str.split("|", n=1, expand=True)
    runs["label"] = split[0]
    # HTF estimates its own height: x = 0 marks "no x" (a flat line; the table's column 0)
    runs["x"] = pd.to_numeric(split[1]).fillna(0).astype(int) if split.shape[1] > 1 else 0
    return runs


def _report(fig: int, runs: pd.DataFrame, args) -> None:
    out = args.out / OUT
    out.mkdir(parents=True, exist_ok=True)
    stem = f"fig{fig}_{args.dataset}"
    runs.to_csv(out / f"{stem}.csv", index=False)
    summary = summarize(runs, ["label", "x", "epsilon", "workload"])
    summary.to_csv(out / f"{stem}_summary.csv", index=False)
    eps0 = min(args.epsilons)
    flat = [lab for lab in summary["label"].unique() if lab.startswith("HTF")]
    if fig in (3, 5):
        panels = [(f"({c}) ε={e:g}, random queries", {"epsilon": e, "workload": "random"})
                  for c, e in zip("abc", args.epsilons, strict=False)]
        panels += [(f"({c}) squares {w[6:]}%, ε={eps0:g}", {"epsilon": eps0, "workload": w})
                   for c, w in zip("def", ("square2", "square6", "square10"), strict=False)]
        what = "kd-tree height" if fig == 3 else "height (QuadTree k drawn at 2k)"
        line_panels(summary, panels, "x", out / f"{stem}.png", what, flat=flat,
                    title=f"Fig. {fig} on {args.dataset}")
        table = pivot(summary[summary["workload"].isin(["random", "square2", "square6", "square10"])],
                      ["workload", "epsilon", "label"], "x").rename(columns={0: "HTF"})
    else:
        s = summary.copy()
        s["x"] = s["epsilon"]
        panels = [(f"({c}) HTF stop count {k}, random queries", {"workload": "random", "keep": k})
                  for c, k in zip("abc", (10, 50, 100), strict=False)]
        panels += [(f"({c}) squares {w[6:]}%, HTF stop 50", {"workload": w, "keep": 50})
                   for c, w in zip("def", ("square2", "square6", "square10"), strict=False)]
        frames = []
        for _, filt in panels:
            keep = filt["keep"]
            part = s[(s["workload"] == filt["workload"]) & (~s["label"].str.startswith("HTF")
                                                            | (s["label"] == f"HTF stop={keep}"))].copy()
            part["keep"] = keep
            frames.append(part)
        line_panels(pd.concat(frames), panels, "x", out / f"{stem}.png", "ε_tot", title=f"Fig. 4 on {args.dataset}")
        table = pivot(summary[summary["workload"].isin(["random", "square2", "square6", "square10"])],
                      ["workload", "label"], "epsilon")
    print(f"\nFig. {fig} ({args.dataset}): MRE (%), mean over {args.seeds} seed(s), {args.queries} queries per workload"
          + ("; columns: height (HTF: its own estimated height)" if fig != 4 else "; columns: epsilon"))
    print(format_table(table, "{:,.1f}"))
    heights = runs[runs["label"].str.startswith("HTF")].groupby("epsilon")["height"].agg(lambda h: sorted(set(h)))
    print("HTF's estimated heights by ε: " + ", ".join(f"{e:g}: {list(map(int, h))}" for e, h in heights.items()))
    print(f"wrote {out / stem}.csv, {stem}_summary.csv, {stem}.png")


def main(argv: list[str] | None = None) -> int:
    """Run the figures; print their tables."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--figures", type=int, nargs="+", default=[3, 4, 5], choices=[3, 4, 5])
    ap.add_argument("--dataset", default="cities")
    ap.add_argument("--epsilons", type=float, nargs="+", default=list(EPSILONS))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--quick", action="store_true", help="256 x 256 grid, 1 seed, 200 queries, few heights")
    ap.add_argument("--quiet", action="store_true", help="no progress bars")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    if args.quick:
        args.seeds, args.queries = 1, 200
    grid = load(args.dataset, args.quick)
    print(f"dataset {args.dataset}: {grid}")
    for fig in args.figures:
        runs = {3: fig3, 4: fig4, 5: fig5}[fig](grid, args)
        _report(fig, runs, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
