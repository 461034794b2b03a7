"""The spatial consistency step under public rows: the closed form with its correction vs a general QP.

Hay's consistency with rows (bounds and linear rows over rectangles) is a QP over the whole tree.
``consistency_solver="highs"`` hands it to HiGHS as it is; the default (``"twopass"``) solves it
exactly through the closed form (``m + 1`` two-pass solves and an ``m``-variable QP, see
:mod:`hierdp.mechanisms.spatial.consistency`). This script runs both on full quadtrees of growing
height over a 1024 x 1024 grid (Gaussian points), one run, the same noise for both, and prints per
height: nodes, seconds of each, the objectives and their relative difference, the largest row
violation, or the outcome when a solver stops.

Run: ``python -m experiments.constraints.spatial_rows [--heights 4,6,8,10] [--time-limit 60]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from hierdp.hierarchy.spatial import SpatialGrid, rect_sums
from hierdp.mechanisms.spatial.consistency import constrained_tree
from hierdp.mechanisms.spatial.constraints import SpatialConstraints
from hierdp.mechanisms.spatial.trees import build_tree, quad_split


def _constraints(side: int, counts: np.ndarray):
    import hierdp

    half, quarter = side // 2, side // 4
    total = int(counts.sum())
    ne = int(counts[:half, half:].sum())
    return (hierdp.Constraints()
            .add_zero({"r0": 0, "r1": quarter, "c0": 0, "c1": quarter}, name="lake")
            .add_bounds({"r0": 0, "r1": half, "c0": half, "c1": side}, upper=int(ne * 0.9), name="cap north-east")
            .add_linear([({"r0": half, "r1": side, "c0": 0, "c1": half}, 1),
                         ({"r0": half, "r1": side, "c0": half, "c1": side}, -1)], lower=0, name="south-west >= south-east")
            .add_invariant({"r0": 0, "r1": side, "c0": 0, "c1": side}, total, name="total"))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--heights", default="4,6,8,10")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    side = 1024
    pts = np.clip(rng.normal(side / 2, side / 6, size=(1_000_000, 2)), 0, side - 1e-9)
    grid = SpatialGrid.from_points(pts[:, 0], pts[:, 1], box=(0, side, 0, side), shape=(side, side))
    c = _constraints(side, grid.counts)
    bound = SpatialConstraints.bind(c, grid.domain)
    print(f"grid {side} x {side}, {int(grid.counts.sum()):,} points; {c.summary()}")
    print(f"{'height':>6} {'nodes':>10} {'twopass+rows s':>15} {'highs QP s':>12} {'objective':>16} "
          f"{'rel. diff':>10} {'max row viol.':>14}")
    for h in (int(x) for x in args.heights.split(",")):
        parent, rects, _ = build_tree(grid.domain.shape, h, quad_split)
        counts = rect_sums(grid.prefix, *rects.T).astype(float)
        var = np.full(parent.size, 8.0)
        noisy = counts + rng.laplace(0, 2.0, parent.size)
        tc = bound.on_tree(parent, rects)
        t0 = time.perf_counter()
        x1, s1 = constrained_tree(parent, noisy, var, tc)
        t1 = time.perf_counter() - t0
        viol = float(np.max(np.maximum(tc.lower - tc.matrix @ x1, 0) + np.maximum(tc.matrix @ x1 - tc.upper, 0)))
        t0 = time.perf_counter()
        try:
            _, s2 = constrained_tree(parent, noisy, var, tc, solver="highs", time_limit=args.time_limit)
            t2 = f"{time.perf_counter() - t0:12.2f}"
            diff = f"{abs(s2.objective - s1.objective) / max(1.0, abs(s1.objective)):10.1e}"
        except Exception as exc:  # a general QP that stops is what this script measures
            t2 = f"{'failed':>12}"
            diff = f"{'-':>10}"
            print(f"       highs at height {h}: {type(exc).__name__}: {str(exc)[:120]}")
        print(f"{h:>6} {parent.size:>10,} {t1:>15.2f} {t2} {s1.objective:>16.6g} {diff} {viol:>14.1e}")


if __name__ == "__main__":
    main()
