"""Benchmark: the Census-style TopDown on a US-like spine with K = 24 cells (2 x 3 x 4: total, all
one- and two-way marginals, detailed), the structured plug-ins vs the HiGHS path on the same instance.

Run: ``python -m experiments.paper003_spines.bench_topdown`` (default: CT, MA, NH, VT with 60-100
blocks per ZIP = ~100,000 blocks; ``--states RI --blocks-per-zip 4 40`` for a quick run).

Prints:

1. the whole release with the default fast path (structured exact per-parent WLS + cell rounder,
   HiGHS only for parents the fast path cannot certify): seconds per geolevel, parents solved,
   how many went to the general solver, total time and peak memory;
2. on the same instance, the same per-parent models of the block level (the first
   ``--compare-parents`` parents with >= 2 children, their released histograms fixed, noisy
   children answers drawn as the mechanism draws them) solved both ways: CPU seconds per parent of
   each path, the speed-up, the largest difference of the continuous solutions, and whether the
   rounders' L1 objectives agree (their optima can differ only on ties); the HiGHS path's time
   for the whole release is extrapolated from its per-parent cost;
3. the two-pass WLS variance of every geounit's 24 cells on the same spine (seconds).
"""

from __future__ import annotations

import argparse
import time
from fractions import Fraction

import numpy as np
import pandas as pd

from experiments.common import RESULTS, format_table, peak_rss_mb
from hierdp.datasets.us_geography import US_LEVELS, load_zip_table, us_like_blocks, us_like_counts
from hierdp.mechanisms import create
from hierdp.mechanisms.census import QueryStrategy, SpineHistograms
from hierdp.mechanisms.census.problems import HistogramRounding, HistogramWLS
from hierdp.solvers.histogram_rounding import round_cells
from hierdp.solvers.histogram_wls import solve_structured
from hierdp.solvers.kinds import solve_parents
from hierdp.spines import Spine, bypass, geounit_query_variances


def compare_paths(data: SpineHistograms, rel, strategy: QueryStrategy, rho: float, rounding: str,
                  n_parents: int) -> dict:
    """Fast vs HiGHS on the same block-level per-parent models (see the module docstring)."""
    spine = data.spine
    hist = data.true_histograms()
    ptr, child = spine.children_csr()
    lev = spine.block_level
    lp = spine.level_ptr
    parents = np.arange(lp[lev - 1], lp[lev])
    parents = parents[(np.diff(ptr)[parents] > 1) & (rel.values[parents].sum(1) > 0)][:n_parents]
    cnt = np.diff(ptr)[parents]
    kids = child[np.repeat(ptr[parents] - np.concatenate([[0], np.cumsum(cnt)[:-1]]), cnt) + np.arange(cnt.sum())]
    fast = create("census_topdown", rho=rho, strategy=strategy, rounding=rounding)
    slow = create("census_topdown", rho=rho, strategy=strategy, rounding=rounding, fast_path=False)
    groups = list(strategy.groups)
    mats = {g: strategy.group_matrix(g) for g in groups}
    total = fast.spec.budget.exact_parameters["rho"]
    sens = fast.noise.sensitivity(fast.unit, finest=False)
    params = {(int(g), q): fast.noise.calibrate(total * Fraction(int(g), spine.gamma_den) * strategy.shares[q], sens,
                                                culprit="rho")
              for g in np.unique(spine.gamma_num[kids]) for q in groups}
    fast._strategy = strategy
    params = {(lev, g, q): p for (g, q), p in params.items()}
    noisy = fast._measure(hist, kids, spine, groups, mats, params, np.random.default_rng(7), lev)
    chunk = fast._chunk(rel.values[parents], np.repeat(np.arange(parents.size), cnt), kids, noisy, strategy.detailed,
                        groups, mats, None, spine.n)
    # CPU seconds: the machine may be shared, and both paths run in this one process
    t0 = time.process_time()
    res = solve_structured(chunk)
    y_fast, reason = round_cells(HistogramRounding(chunk, res.values))
    ok_round = reason == 0
    t_fast = time.process_time() - t0
    t0 = time.process_time()
    x_highs = solve_parents(HistogramWLS(chunk), ["highs"], max_parents=slow.chunk_parents).values
    y_highs = solve_parents(HistogramRounding(chunk, res.values), ["highs"], max_parents=slow.chunk_parents).values
    t_highs = time.process_time() - t0
    cert = res.certified[chunk.child_parent]
    l1 = lambda y: np.abs(y - np.maximum(res.values, 0)).sum()
    return {"parents": int(parents.size), "children": int(kids.size),
            "certified_wls": int(res.certified.sum()), "certified_rounding": int(ok_round.sum()),
            "fast_cpu_ms_per_parent": 1000 * t_fast / parents.size,
            "highs_cpu_ms_per_parent": 1000 * t_highs / parents.size,
            "speedup": t_highs / t_fast,
            "max_abs_diff_continuous": float(np.abs(res.values[cert] - x_highs[cert]).max()),
            "rounding_l1_fast": float(l1(y_fast)), "rounding_l1_highs": float(l1(y_highs)),
            "rounding_l1_diff": float(l1(y_fast) - l1(y_highs))}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--states", nargs="+", default=["CT", "MA", "NH", "VT"])
    ap.add_argument("--blocks-per-zip", type=int, nargs=2, default=(60, 100))
    ap.add_argument("--rho", type=float, default=1.0)
    ap.add_argument("--rounding", choices=["cells", "queries"], default="cells")
    ap.add_argument("--compare-parents", type=int, default=100,
                    help="block-level parents solved by both paths (0: skip the comparison)")
    args = ap.parse_args(argv)
    zips = load_zip_table(args.states)
    blocks = us_like_blocks(zips, blocks_per_zip=tuple(args.blocks_per_zip), seed=0)
    spine = Spine.from_frame(blocks, US_LEVELS, [Fraction(1, 7)] * 7, root="US")
    spine = bypass(spine, privacy="zcdp")
    strategy = QueryStrategy.marginals((2, 3, 4))
    counts = us_like_counts(spine.n_blocks, strategy.n_cells, seed=0)
    data = SpineHistograms(spine, counts)
    print(f"{spine.n_blocks:,} blocks x {strategy.n_cells} cells, {spine.n:,} geounits, rounding={args.rounding}")
    t0, c0 = time.perf_counter(), time.process_time()
    rel = create("census_topdown", rho=args.rho, strategy=strategy, rounding=args.rounding).release(data, seed=0)
    total, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert rel.check_consistency() == []
    rows = []
    for st in rel.params["post_processing"]:
        name = st["geolevel"]
        rows.append({**st, "noise_s": rel.timings.get(f"{name}_noise", 0.0),
                     "solve_s": rel.timings.get(f"{name}_solve", 0.0)})
    frame = pd.DataFrame(rows)
    print("\nFast path (default), whole release\n" + format_table(frame, "{:,.3f}"))
    n_parents = int(frame.parents.sum())
    print(f"total {total:.1f} s wall ({cpu:.1f} s CPU) for {n_parents:,} parents solved, peak memory "
          f"{peak_rss_mb():.0f} MiB; "
          f"parents sent to HiGHS: {int(frame.wls_general.sum())} (WLS), {int(frame.rounding_general.sum())} (rounding)")
    RESULTS.mkdir(exist_ok=True)
    frame.to_csv(RESULTS / "paper003_bench_topdown.csv", index=False)
    t0 = time.perf_counter()
    var = geounit_query_variances(spine, [strategy.group_matrix(g) for g in strategy.groups],
                                  [strategy.shares[g] for g in strategy.groups], np.eye(strategy.n_cells),
                                  budget=Fraction(str(args.rho)))
    print(f"two-pass WLS variance of all {spine.n:,} geounits x {strategy.n_cells} cells: "
          f"{time.perf_counter() - t0:.2f} s (block cells: mean {var[spine.blocks].mean():.2f})")
    if args.compare_parents:
        cmp = compare_paths(data, rel, strategy, args.rho, args.rounding, args.compare_parents)
        print("\nSame block-level models, fast path vs HiGHS (both stages)\n"
              + format_table(pd.DataFrame([cmp]), "{:,.3g}"))
        est = cmp["highs_cpu_ms_per_parent"] * n_parents / 1000
        print(f"HiGHS path for the whole release at that per-parent cost: ~{est / 60:.0f} CPU min "
              f"(fast path, whole release: {cpu / 60:.1f} CPU min, {total / 60:.1f} min wall)")
        pd.DataFrame([cmp]).to_csv(RESULTS / "paper003_bench_topdown_compare.csv", index=False)


if __name__ == "__main__":
    main()
