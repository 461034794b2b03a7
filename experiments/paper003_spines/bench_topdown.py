"""Benchmark: the Census-style TopDown on a US-like spine with K = 24 cells (2 x 3 x 4: total, all
one- and two-way marginals, detailed), per-parent models batched by the highs plug-in.

Run: ``python -m experiments.paper003_spines.bench_topdown [--states RI] [--blocks-per-zip 4 40]``
The issue's target is ~100,000 blocks (e.g. ``--states CT MA --blocks-per-zip 60 100``); the
printed per-parent costs give the time at any size (the work is linear in the number of parents).
Prints seconds per geolevel (noise vs both solver stages), parents solved, seconds per parent.
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
from hierdp.spines import Spine, bypass


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--states", nargs="+", default=["RI"])
    ap.add_argument("--blocks-per-zip", type=int, nargs=2, default=(4, 40))
    ap.add_argument("--rho", type=float, default=1.0)
    ap.add_argument("--rounding", choices=["cells", "queries"], default="cells")
    args = ap.parse_args(argv)
    zips = load_zip_table(args.states)
    blocks = us_like_blocks(zips, blocks_per_zip=tuple(args.blocks_per_zip), seed=0)
    spine = Spine.from_frame(blocks, US_LEVELS, [Fraction(1, 7)] * 7, root="US")
    spine = bypass(spine, privacy="zcdp")
    strategy = QueryStrategy.marginals((2, 3, 4))
    counts = us_like_counts(spine.n_blocks, strategy.n_cells, seed=0)
    data = SpineHistograms(spine, counts)
    nch = spine.n_children
    solved = (nch > 1) & (spine.level < spine.block_level)
    print(f"{spine.n_blocks:,} blocks x {strategy.n_cells} cells, {spine.n:,} geounits, "
          f"{int(solved.sum()):,} parents with >= 2 children (+ the root), rounding={args.rounding}")
    t0 = time.perf_counter()
    rel = create("census_topdown", rho=args.rho, strategy=strategy, rounding=args.rounding).release(data, seed=0)
    total = time.perf_counter() - t0
    assert rel.check_consistency() == []
    rows = []
    for lev, name in enumerate(spine.level_names):
        parents = int((solved & (spine.level == lev - 1)).sum()) if lev else 1
        s = rel.timings.get(f"{name}_solve", 0.0)
        rows.append({"geolevel": name, "parents_solved": parents, "noise_s": rel.timings.get(f"{name}_noise", 0.0),
                     "solve_s": s, "s_per_parent": s / parents if parents else np.nan})
    frame = pd.DataFrame(rows)
    print(format_table(frame, "{:,.3f}"))
    per = frame.solve_s.sum() / max(frame.parents_solved.sum(), 1)
    print(f"total {total:.1f} s, peak memory {peak_rss_mb():.0f} MiB; {per * 1000:.0f} ms per parent "
          f"(at ~100,000 blocks with the same fanouts: ~{per * frame.parents_solved.sum() * 100000 / spine.n_blocks / 60:.0f} min)")
    RESULTS.mkdir(exist_ok=True)
    frame.to_csv(RESULTS / "paper003_bench_topdown.csv", index=False)


if __name__ == "__main__":
    main()
