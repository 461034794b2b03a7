"""Benchmark: HTF's time per phase on a 1024 x 1024 grid with 10^6 points, beside the baselines,
and the consistency solvers (twopass closed form vs the HiGHS QP) on one tree.

Run: ``python -m experiments.paper002_htf.bench [--runs 3] [--points 1000000] [--quick]``.

Phases of HTF (``release.timings``; ``tree_height`` is the estimated h): ``height`` (noisy |D| and
eq. 10), ``partition`` (Alg. 1 on every node of every level: the exact objective probes and their
noise), ``perturbation`` (Alg. 3's draws and stop tests), ``bookkeeping`` (restricting and reordering the level's cells), ``release``. Data:
one Gaussian cluster, σ = 50 (the paper's medium sparsity), ε_tot = 0.1 and 1.0 (more levels).
Timings on a shared machine are noisy: compare the rows of one run, not runs of different days.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from experiments.common import RESULTS, format_table, peak_rss_mb
from experiments.paper002_htf.common import OUT
from hierdp.datasets.points import gaussian_cluster
from hierdp.mechanisms import create
from hierdp.mechanisms.spatial.consistency import tree_problem
from hierdp.mechanisms.spatial.trees import build_tree, quad_split
from hierdp.solvers import registry

PHASES = ["height", "partition", "perturbation", "bookkeeping", "release"]


def main(argv: list[str] | None = None) -> int:
    """Time HTF per phase, the baselines, and twopass vs HiGHS; print the tables."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--points", type=int, default=1_000_000)
    ap.add_argument("--side", type=int, default=1024)
    ap.add_argument("--quick", action="store_true", help="256 x 256, 10^5 points, 1 run")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    if args.quick:
        args.runs, args.points, args.side = 1, 100_000, 256
    t0 = time.perf_counter()
    grid = gaussian_cluster(args.points, 50.0 * args.side / 1024, args.side, seed=0)
    print(f"data: {grid} (generated and binned in {time.perf_counter() - t0:.2f} s)")
    rows = []
    for eps in (0.1, 1.0):
        for run in range(args.runs):
            rel = create("htf", epsilon=eps).release(grid, seed=run)
            rows.append({"mechanism": "HTF", "epsilon": eps, "run": run, "tree_height": rel.details["height"],
                         "leaves": rel.n_leaves, **{p: rel.timings.get(p, 0.0) for p in PHASES},
                         "total": sum(rel.timings.values())})
    htf = pd.DataFrame(rows)
    per_phase = htf.groupby(["epsilon"])[["tree_height", "leaves", *PHASES, "total"]].mean().reset_index()
    print(f"\nHTF on {args.side} x {args.side}, {grid.n_points:,} points: seconds per phase (mean of {args.runs} runs)")
    print(format_table(per_phase, "{:,.3f}"))
    base = []
    for label, name, kw in [("UG", "ug", {}), ("AG", "ag", {}), ("QuadTree h=8", "quadtree", {"height": 8}),
                            ("KdTree h=12", "kdtree", {"height": 12}), ("Privelet", "privelet", {}),
                            ("Singular", "identity", {})]:
        t = time.perf_counter()
        rel = create(name, epsilon=0.1, **kw).release(grid, seed=0)
        base.append({"mechanism": label, "seconds": time.perf_counter() - t, "leaves": rel.n_leaves,
                     **{f"t_{k}": v for k, v in rel.timings.items()}})
    base_df = pd.DataFrame(base)
    print("\nBaselines at ε = 0.1 (one run): seconds")
    print(format_table(base_df, "{:,.3f}"))
    # consistency of one quadtree: the closed form against the HiGHS QP (same Problem)
    solv = []
    for height in ((3, 4) if args.quick else (4, 5, 10)):
        parent, rects, _depth = build_tree(grid.shape, height, quad_split)
        counts = grid.rect_count(*rects.T).astype(np.float64)
        noisy = counts + np.random.default_rng(0).laplace(0, 10, counts.size)
        problem = tree_problem(parent, noisy, np.full(counts.size, 200.0))
        for solver in ("twopass", "highs"):
            if solver == "highs" and parent.size > 30_000:
                continue  # HiGHS's QP on a million-node tree takes too long to include here
            t = time.perf_counter()
            sol = registry.solve(problem, solver)
            solv.append({"quadtree height": height, "nodes": parent.size, "solver": solver,
                         "seconds": time.perf_counter() - t, "objective": sol.objective})
    solv_df = pd.DataFrame(solv)
    print("\nHay's consistency as a Problem: twopass (closed form) vs HiGHS (QP)")
    print(format_table(solv_df, "{:,.4g}"))
    print(f"\npeak memory: {peak_rss_mb():,.0f} MiB")
    out = args.out / OUT
    out.mkdir(parents=True, exist_ok=True)
    htf.to_csv(out / "bench_htf.csv", index=False)
    base_df.to_csv(out / "bench_baselines.csv", index=False)
    solv_df.to_csv(out / "bench_consistency.csv", index=False)
    print(f"wrote {out}/bench_htf.csv, bench_baselines.csv, bench_consistency.csv")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
