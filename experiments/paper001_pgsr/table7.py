"""Paper 001, Table 7, Fig. 8 and Fig. 9: error per level, #CV and runtime of every mechanism.

Data (regenerated, seeded): the census-like hierarchy (nation → 52 states → 3,144 counties,
K = 1,000, about 117.6 M households and 310 M people, decision A9) and the taxi-like one
(NYC → 6 boroughs → 263 zones, 13,282 taxis, K = 13,282) from :mod:`hierdp.datasets.group_sizes`.
Budget: ε ∈ {0.1, 0.5, 1.0}, ε/3 per region level, geometric noise (pure ε-DP).

Rows (``common.LINEUP``): the OP baselines M̃_H and M̃_HC (relaxation by OR-Tools PDLP, rounded
half up per cell / per cumulative entry), M_DP (cost-table dynamic program), the approximate DP cumulative
mechanism, the chain dynamic program in three correct calibrations (per-region cumulatives mapped to the chain
with Model 3's unweighted objective; the same with inverse-variance weights; the level-wide vector
measured with its true sensitivity m_l), the chain dynamic program calibrated with sensitivity 1 (**not DP**,
shown only to explain the paper's chain rows), and TopDown on the dynamic-programming hierarchy at equal privacy.

Outputs (``results/``): ``pgsr_table7_runs.csv`` (one row per dataset × ε × mechanism × seed ×
level), ``pgsr_table7_summary.csv`` (means), ``pgsr_table7_vs_paper.csv``, ``pgsr_fig8_runtimes.png``,
``pgsr_fig9_errors.png``. Run: ``python -m experiments.paper001_pgsr.table7`` (``--seeds``,
``--eps``, ``--datasets``, ``--skip-op`` to leave out the slow relaxations).
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from experiments.common import RESULTS, format_table, print_notes
from experiments.paper001_pgsr.common import LINEUP, PAPER_ROW_OF, PAPER_TABLE7, run_row
from hierdp.datasets.group_sizes import census_like, taxi_like


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="census,taxi")
    ap.add_argument("--eps", default="0.1,0.5,1.0")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--skip-op", action="store_true", help="leave out the relaxed OP baselines (PDLP, minutes each)")
    ap.add_argument("--only-op", action="store_true", help="only the relaxed OP baselines (and M_DP for reference)")
    ap.add_argument("--op-seeds", type=int, default=None, help="seeds for the OP baselines (default: --seeds)")
    ap.add_argument("--tag", default="", help="suffix of the output files (e.g. _op)")
    ap.add_argument("--op-time-limit", type=float, default=1800.0)
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    eps_list = [float(e) for e in args.eps.split(",")]
    tag = args.tag
    out = __import__("pathlib").Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    frames, notes = [], []
    builders = {"census": lambda: census_like(0), "taxi": lambda: taxi_like(0)}
    for ds in args.datasets.split(","):
        data = builders[ds]()
        print(f"{ds}: {data}", flush=True)
        rows = [r for r in LINEUP if not (args.skip_op and r.op)]
        if args.only_op:
            rows = [r for r in LINEUP if r.op or r.name == "pgsr_mdp"]
        op_seeds = args.seeds if args.op_seeds is None else args.op_seeds
        jobs = [(e, r, s) for e in eps_list for r in rows for s in range(op_seeds if r.op else args.seeds)]
        for eps, row, seed in tqdm(jobs, desc=ds):
            try:
                df, _, _ = run_row(row, data, eps, seed, time_limit=args.op_time_limit if row.op else None)
            except Exception as exc:  # a baseline that fails is noted, never silently dropped
                notes.append(f"{ds} eps={eps} {row.label} seed {seed}: {type(exc).__name__}: {exc}"[:300])
                continue
            df.insert(0, "dataset", ds)
            frames.append(df)
            pd.concat(frames).to_csv(out / f"pgsr_table7_runs{tag}.csv", index=False)
    runs = pd.concat(frames, ignore_index=True)
    summary = (runs.groupby(["dataset", "epsilon", "mechanism", "level", "level_name"], sort=False)
               .agg(l1_total=("l1_total", "mean"), l1_per_cell=("l1_per_cell", "mean"),
                    l1_relative=("l1_relative", "mean"), cv=("cv", "mean"), seconds=("seconds", "mean"),
                    faithfulness_violations=("faithfulness_violations", "mean"),
                    all_consistent=("consistent_valid_faithful", "all"), runs=("seed", "nunique"))
               .reset_index())
    summary.to_csv(out / f"pgsr_table7_summary{tag}.csv", index=False)
    _print_table(summary)
    _vs_paper(summary).to_csv(out / f"pgsr_table7_vs_paper{tag}.csv", index=False)
    _figures(summary, out, tag)
    chain_figure(summary, out / f"pgsr_chain_calibration{tag}.png")
    print_notes(notes)
    print(f"\nwrote {out}/pgsr_table7_runs{tag}.csv, pgsr_table7_summary{tag}.csv, pgsr_table7_vs_paper{tag}.csv, "
          f"pgsr_fig8_runtimes{tag}.png, pgsr_fig9_errors{tag}.png, pgsr_chain_calibration{tag}.png")


def _print_table(summary: pd.DataFrame) -> None:
    """Table 7's layout: per ε and mechanism, mean |error| per cell at levels 1-3 and #CV, per dataset."""
    for ds, part in summary.groupby("dataset", sort=False):
        wide = part.pivot_table(index=["epsilon", "mechanism"], columns="level", values="l1_per_cell", sort=False)
        wide.columns = [f"L{c + 1} per cell" for c in wide.columns]
        rel = part.pivot_table(index=["epsilon", "mechanism"], columns="level", values="l1_relative", sort=False)
        rel.columns = [f"L{c + 1} rel." for c in rel.columns]
        cv = part.groupby(["epsilon", "mechanism"], sort=False)[["cv", "seconds", "all_consistent"]].first()
        cv["seconds"] = part.groupby(["epsilon", "mechanism"], sort=False)["seconds"].first()
        table = pd.concat([wide, rel, cv], axis=1).reset_index()
        print(f"\n=== {ds}: mean |error| per (region, size) cell per level, relative L1 (total / groups), "
              "#CV, seconds ===")
        print(format_table(table, "{:,.3f}"))


def _vs_paper(summary: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (ds, eps, mech), part in summary.groupby(["dataset", "epsilon", "mechanism"], sort=False):
        paper = PAPER_TABLE7.get((eps, PAPER_ROW_OF.get(mech, "")))
        off = 0 if ds == "taxi" else 4
        per_cell = part.sort_values("level")["l1_per_cell"].tolist()
        row = {"dataset": ds, "epsilon": eps, "mechanism": mech, "cv": float(part["cv"].iloc[0])}
        for lev in range(3):
            row[f"ours_L{lev + 1}_per_cell"] = per_cell[lev] if lev < len(per_cell) else np.nan
            row[f"paper_L{lev + 1}"] = paper[off + lev] if paper else np.nan
        row["paper_cv"] = paper[off + 3] if paper else np.nan
        rows.append(row)
    df = pd.DataFrame(rows)
    print("\n=== beside the paper's Table 7 (paper's normalization unknown, decision A6: compare patterns) ===")
    print(format_table(df, "{:,.2f}"))
    return df


def _figures(summary: pd.DataFrame, out, tag: str = "") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = list(summary.dataset.unique())
    fig, axes = plt.subplots(1, len(datasets), figsize=(7 * len(datasets), 4.5), squeeze=False)
    for ax, ds in zip(axes[0], datasets, strict=False):
        part = summary[(summary.dataset == ds) & (summary.level == 0)]
        wide = part.pivot_table(index="mechanism", columns="epsilon", values="seconds", sort=False)
        wide.plot.bar(ax=ax, logy=True)
        ax.set_title(f"Fig. 8 - runtime ({ds})")
        ax.set_ylabel("seconds per release (log)")
        ax.tick_params(axis="x", labelrotation=60, labelsize=7)
    fig.tight_layout()
    fig.savefig(out / f"pgsr_fig8_runtimes{tag}.png", dpi=110)
    plt.close(fig)
    levels = sorted(summary.level.unique())
    fig, axes = plt.subplots(len(datasets), len(levels), figsize=(4.5 * len(levels), 4 * len(datasets)), squeeze=False)
    for i, ds in enumerate(datasets):
        for j, lev in enumerate(levels):
            ax = axes[i][j]
            part = summary[(summary.dataset == ds) & (summary.level == lev)]
            for mech, m in part.groupby("mechanism", sort=False):
                ax.plot(m.epsilon, m.l1_per_cell, marker="o", label=mech, linestyle="--" if "NOT DP" in mech else "-")
            ax.set_yscale("log")
            ax.set_title(f"Fig. 9 - {ds}, level {lev + 1} ({part.level_name.iloc[0] if len(part) else ''})")
            ax.set_xlabel("epsilon")
            ax.set_ylabel("mean |error| per cell")
    axes[0][-1].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(out / f"pgsr_fig9_errors{tag}.png", dpi=110)
    plt.close(fig)


#: the rows of the calibration figure (DP mechanisms and the chain's calibrations), in drawing order
CHAIN_FIGURE_ROWS = ["M_DP", "approx DP cumulative", "TopDown", "chain dynamic program (per-region, Model 3)",
                     "chain dynamic program (per-region, inv-var)", "chain dynamic program (level vector, m_l)",
                     "chain dynamic program, sensitivity 1 [NOT DP]"]


def chain_figure(summary: pd.DataFrame, path) -> None:
    """Mean |error| per cell by level for the DP mechanisms and every chain calibration, one panel
    per (dataset, ε): what the sensitivity-1 calibration (not DP) buys, and what the correct ones
    cost. ``summary`` is ``pgsr_table7_summary*.csv``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    part = summary[summary.mechanism.isin(CHAIN_FIGURE_ROWS)]
    if part.empty:
        return
    datasets = list(dict.fromkeys(part.dataset))
    eps_list = sorted(part.epsilon.unique())
    fig, axes = plt.subplots(len(datasets), len(eps_list), figsize=(3.3 * len(eps_list), 2.6 * len(datasets) + 0.6),
                             squeeze=False)
    rows = [m for m in CHAIN_FIGURE_ROWS if m in set(part.mechanism)]
    width = 0.8 / len(rows)
    colors = plt.get_cmap("tab10")
    for (i, ds), (j, eps) in ((a, b) for a in enumerate(datasets) for b in enumerate(eps_list)):
        ax = axes[i][j]
        p = part[(part.dataset == ds) & (part.epsilon == eps)]
        if p.empty:
            ax.set_visible(False)
            continue
        levels = sorted(p.level.unique())
        for r, mech in enumerate(rows):
            m = p[p.mechanism == mech].set_index("level").reindex(levels)
            ax.bar(np.arange(len(levels)) + (r - (len(rows) - 1) / 2) * width, m.l1_per_cell, width,
                   color=colors(r), label=mech, hatch="//" if "NOT DP" in mech else None,
                   edgecolor="black" if "NOT DP" in mech else None, linewidth=0.4)
        names = p.drop_duplicates("level").set_index("level").reindex(levels).level_name
        ax.set_xticks(np.arange(len(levels)), [str(n) for n in names], fontsize=8)
        ax.set_yscale("log")
        ax.set_title(f"{ds}, eps = {eps:g}", fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
        if j == 0:
            ax.set_ylabel("mean |error| per cell", fontsize=8)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.11, 1, 1))
    fig.savefig(path, dpi=80)
    plt.close(fig)


if __name__ == "__main__":
    main()
