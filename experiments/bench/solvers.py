"""Benchmark every solver plug-in on the same problems, in one run, and check they agree.

Sections (all seeded, all on 2 cores):

1. integer L∞ level problem, ``--groups`` groups (default 10,000), fanout b ∈ [2, 10], discrete
   Gaussian-like noise around Pareto counts: intopt, highs (direct highspy, batched), highs through
   Pyomo (batched), ortools (CP-SAT, batched);
2. integer L2 on the same groups: projection (exact integer rounding), costtable, highs (PWL MIP);
3. continuous L2: projection vs highs QP;
4. batch size for the general solvers: highs MIP on 2,000 integer L∞ groups in batches of
   5 / 20 / 100 / 500 (the default, 20, is the measured optimum; large batches grow superlinearly),
   and one Pyomo model per group on 200 groups, to show why batching;
5. whole trees: costtable vs highs exact-integer-L2 MIP on random 3-level trees;
6. scale: intopt and projection on 10^6 children.

Every section prints seconds and ratios and asserts that the objectives agree (within 1e-6
relative) — a benchmark that disagrees is a bug report, not a figure.

Run: ``python -m experiments.bench.solvers`` (``--quick`` for a 2-minute smoke run).
"""

from __future__ import annotations

import argparse

import numpy as np

import hierdp
from experiments.common import timed
from hierdp.models import Problem
from hierdp.solvers.intopt import intopt_batch
from hierdp.solvers.projection import integer_l2_batch, project_batch


def level_instance(n_groups: int, seed: int, bmin: int = 2, bmax: int = 10):
    """Noisy children, offsets and integer parent totals of a random TopDown level."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(bmin, bmax + 1, n_groups)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    true = np.floor(rng.pareto(3.0, offsets[-1]) * 20).astype(np.int64)
    true[rng.random(true.size) < 0.3] = 0  # sparse children, as in O/D data
    totals = np.add.reduceat(true, offsets[:-1])
    noisy = true + rng.normal(0, 3.0, true.size)
    return noisy, offsets, totals


def random_tree(rng: np.random.Generator, depth: int = 3, fanout: tuple[int, int] = (2, 6), scale: int = 1000):
    """Parent array, noisy targets and true root total of a random tree."""
    parent = [-1]
    frontier = [0]
    for _ in range(depth):
        nxt = []
        for node in frontier:
            for _ in range(int(rng.integers(fanout[0], fanout[1] + 1))):
                parent.append(node)
                nxt.append(len(parent) - 1)
        frontier = nxt
    parent = np.array(parent)
    n = parent.size
    counts = np.zeros(n)
    leaves = np.setdiff1d(np.arange(n), parent[parent >= 0])
    counts[leaves] = rng.integers(0, scale, leaves.size)
    for i in range(n - 1, 0, -1):  # children have larger indices than parents here
        counts[parent[i]] += counts[i]
    noisy = counts + rng.normal(0, 0.05 * scale, n)
    return parent, noisy, counts[0]


def report(title: str, rows: list[tuple[str, float, float]], reference: str) -> None:
    """Print seconds, ratio to the reference and objective; assert all objectives agree."""
    ref_t = dict((r[0], r[1]) for r in rows)[reference]
    ref_obj = dict((r[0], r[2]) for r in rows)[reference]
    print(f"\n== {title}")
    print(f"{'approach':<42} {'seconds':>10} {'× ' + reference:>16} {'objective':>16}")
    for name, secs, obj in rows:
        print(f"{name:<42} {secs:>10.3f} {secs / max(ref_t, 1e-9):>16.1f} {obj:>16.6f}")
    for name, _, obj in rows:
        assert abs(obj - ref_obj) <= 1e-6 * max(1.0, abs(ref_obj)), f"{name}: objective {obj} != {ref_obj}"
    print("objectives agree")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--quick", action="store_true", help="1,000 groups, smaller sweeps")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    n_groups = 1_000 if args.quick else args.groups

    noisy, offsets, totals = level_instance(n_groups, args.seed)
    print(f"level problem: {n_groups:,} groups, {noisy.size:,} children (b in [2, 10])")

    # 1. integer L∞
    p = Problem.from_groups(noisy, offsets, totals, objective="linf", integer=True)
    rows = []
    sol, t = timed(hierdp.solve, p, "intopt")
    rows.append(("intopt (Alg. 4, vectorized)", t, sol.objective))
    sol, t = timed(hierdp.solve, p, "highs")
    rows.append((f"highs direct MIP, batched ({sol.stats.get('batches', '?')} batches)", t, sol.objective))
    sol, t = timed(hierdp.solve, p, "highs", path="pyomo")
    rows.append((f"highs via Pyomo, batched ({sol.stats.get('batches', '?')} batches)", t, sol.objective))
    sol, t = timed(hierdp.solve, p, "ortools")
    rows.append(("ortools CP-SAT, batched", t, sol.objective))
    report("integer L-inf, one level", rows, "intopt (Alg. 4, vectorized)")

    # 2. integer L2
    p2 = Problem.from_groups(noisy, offsets, totals, objective="l2", integer=True)
    rows = []
    sol, t = timed(hierdp.solve, p2, "projection")
    rows.append(("projection + exact integer rounding", t, sol.objective))
    sol, t = timed(hierdp.solve, p2, "costtable")
    rows.append(("costtable DP", t, sol.objective))
    sol, t = timed(hierdp.solve, p2, "highs")
    rows.append(("highs PWL-epigraph MIP, batched", t, sol.objective))
    report("integer L2, one level", rows, "projection + exact integer rounding")

    # 3. continuous L2
    p3 = Problem.from_groups(noisy, offsets, totals, objective="l2", integer=False)
    rows = []
    sol, t = timed(hierdp.solve, p3, "projection")
    rows.append(("projection (sort-based)", t, sol.objective))
    sol, t = timed(hierdp.solve, p3, "highs")
    rows.append(("highs QP, batched", t, sol.objective))
    report("continuous L2, one level", rows, "projection (sort-based)")

    # 4. batch size of the general solver
    m = 500 if args.quick else 2_000
    sub = Problem.from_groups(noisy[: offsets[m]], offsets[: m + 1], totals[:m], objective="linf")
    rows = []
    sol, t = timed(hierdp.solve, sub, "intopt")
    rows.append(("intopt", t, sol.objective))
    for bs in ([5, 20, 100] if args.quick else [5, 20, 100, 500]):
        sol, t = timed(hierdp.solve, sub, "highs", batch_size=bs)
        rows.append((f"highs direct MIP, batch_size={bs}", t, sol.objective))
    k = 50 if args.quick else 200
    small = Problem.from_groups(noisy[: offsets[k]], offsets[: k + 1], totals[:k], objective="linf")
    sol, t = timed(hierdp.solve, small, "highs", path="pyomo", batch_size=1)
    per_group = t * m / k
    print(f"\n(one Pyomo model per group on {k} groups: {t:.2f} s -> {per_group:.1f} s extrapolated to {m:,})")
    report(f"batch size, integer L-inf, {m:,} groups", rows, "intopt")

    # 5. whole trees: costtable vs highs
    rng = np.random.default_rng(args.seed + 1)
    rows_ct, rows_hi, objs = 0.0, 0.0, []
    n_trees = 3 if args.quick else 10
    sizes = []
    for _ in range(n_trees):
        parent, target, root = random_tree(rng)
        fixed = np.full(parent.size, np.nan)
        fixed[0] = root
        tp = Problem(parent, target, fixed=fixed, objective="l2", integer=True)
        sizes.append(parent.size)
        a, t1 = timed(hierdp.solve, tp, "costtable")
        b, t2 = timed(hierdp.solve, tp, "highs")
        rows_ct += t1
        rows_hi += t2
        objs.append((a.objective, b.objective))
    report(f"whole trees (exact integer L2), {n_trees} random 3-level trees, {int(np.mean(sizes))} nodes on average",
           [("costtable DP", rows_ct, sum(o[0] for o in objs)), ("highs PWL MIP", rows_hi, sum(o[1] for o in objs))],
           "costtable DP")

    # 6. scale of the fast paths
    big_noisy, big_off, big_tot = level_instance(180_000, args.seed + 2)
    print(f"\n== scale: {big_noisy.size:,} children in {big_tot.size:,} groups")
    _, t = timed(intopt_batch, big_noisy, big_off, big_tot)
    print(f"intopt_batch (real noise)     {t:8.3f} s")
    _, t = timed(intopt_batch, np.rint(big_noisy), big_off, big_tot)
    print(f"intopt_batch (integer noise, as InfTDA's discrete Gaussian) {t:8.3f} s")
    _, t = timed(project_batch, big_noisy, big_off, big_tot)
    print(f"project_batch                 {t:8.3f} s")
    _, t = timed(integer_l2_batch, big_noisy, big_off, big_tot)
    print(f"integer_l2_batch              {t:8.3f} s")


if __name__ == "__main__":
    main()
