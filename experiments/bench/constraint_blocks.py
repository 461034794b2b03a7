"""Benchmark: vectorized constraint blocks (issue 8, item 4).

Sections (seeded; figures are ratios inside one run, machines are noisy; every timing prints wall
and CPU seconds of this process, since on a shared machine wall time overstates the work):

1. pose ``--regions`` x ``--sizes`` monotone cumulative chains (paper 001's count-of-counts at
   census scale: 3,144 counties x 1,000 sizes = 3.1 million two-term rows) with
   ``Problem.add_monotone_chains``, materialize the CSR block, and build the solver-neutral arrays
   (``model_arrays``: what the HiGHS / OR-Tools matrix paths read); then the same rows one by one
   with ``add_linear`` on a slice, extrapolated (the old path was a Python list of row objects);
2. build an indexed Pyomo model with ``--pyomo-rows`` (default 10^5) chain rows over TopDown
   groups;
3. solve a smaller chained level with HiGHS (direct matrices, an LP) and check every chain holds.

Run: ``python experiments/bench/constraint_blocks.py`` (``--quick`` for a small run).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import hierdp
from hierdp.models import Problem
from hierdp.models.arrays import model_arrays
from hierdp.models.pyomo import build_pyomo_model


#: CPU seconds of this process per timed call (the machine may be shared: wall time then overstates)
CPU: dict[str, float] = {}


def timed(fn, *args, **kwargs):
    """``(result, wall seconds)``; the call's CPU seconds go to ``CPU["last"]``."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    CPU["last"] = time.process_time() - c0
    return out, time.perf_counter() - t0


def cpu() -> str:
    return f"(cpu {CPU['last']:.2f} s)"


def chained_level(groups: int, size: int, seed: int = 0, integer: bool = True) -> tuple[Problem, np.ndarray]:
    """A TopDown level whose every group is one cumulative chain of ``size`` children."""
    rng = np.random.default_rng(seed)
    offsets = np.arange(groups + 1) * size
    totals = rng.integers(size, 20 * size, groups).astype(float)
    # cumulative counts: noisy, so the chains are violated before post-processing
    x = np.repeat(totals / size, size) + rng.normal(0, 5, groups * size)
    p = Problem.from_groups(x, offsets, totals, objective="l1", integer=integer)
    chains = (groups + np.arange(groups * size)).reshape(groups, size)
    return p, chains


def section_pose(regions: int, sizes: int, slice_rows: int) -> None:
    n = regions * sizes
    print(f"\n== 1. pose {regions:,} chains of {sizes:,} cumulative counts: {regions * (sizes - 1):,} two-term rows")
    p, t_problem = timed(Problem, np.full(n, -1), np.zeros(n), objective="l1")
    c_problem = cpu()
    chains = np.arange(n).reshape(regions, sizes)
    _, t_add = timed(p.add_monotone_chains, chains)
    c_add = cpu()
    rows, t_csr = timed(lambda: p.constraints)
    c_csr = cpu()
    arr, t_arrays = timed(model_arrays, p)
    print(f"Problem with {n:,} nodes            {t_problem:8.2f} s {c_problem}")
    print(f"add_monotone_chains                 {t_add:8.2f} s {c_add}")
    print(f"materialize CSR ({rows.matrix.nnz:,} nnz)     {t_csr:8.2f} s {c_csr}")
    print(f"model_arrays (matrix-path input)    {t_arrays:8.2f} s {cpu()}  ({arr.lin_ids.size:,} rows)")
    total = t_add + t_csr + t_arrays
    # the one-row-at-a-time path on a slice, extrapolated
    q = Problem(np.full(n, -1), np.zeros(n), objective="l1")
    pairs = chains[:, :2][: slice_rows]
    t0, c0 = time.perf_counter(), time.process_time()
    for a, b in pairs:
        q.add_linear({int(b): 1.0, int(a): -1.0}, lower=0.0)
    _ = q.constraints
    t_slice = time.perf_counter() - t0
    CPU["last"] = time.process_time() - c0
    per_row = t_slice / len(pairs)
    rows_total = regions * (sizes - 1)
    print(f"add_linear, {len(pairs):,} rows one by one     {t_slice:8.2f} s {cpu()}  -> {per_row * rows_total:,.0f} s "
          f"extrapolated to {rows_total:,} rows ({per_row * rows_total / total:,.0f}x the vectorized path)")


def section_pyomo(rows: int) -> None:
    size = 101
    groups = max(1, rows // (size - 1))
    p, chains = chained_level(groups, size, seed=1)
    p.add_monotone_chains(chains)
    print(f"\n== 2. Pyomo model: {groups:,} groups x {size} children, {p.n_constraints:,} chain rows")
    m, t = timed(build_pyomo_model, p)
    print(f"build_pyomo_model                   {t:8.2f} s {cpu()}  ({len(m.linear):,} rows in model.linear, "
          f"{len(m.y):,} variables)")


def section_solve(groups: int) -> None:
    size = 21
    p, chains = chained_level(groups, size, seed=2, integer=False)
    p.add_monotone_chains(chains)
    print(f"\n== 3. HiGHS on a chained level: {groups} groups x {size} children, {p.n_constraints:,} chain rows "
          "(continuous l1: an LP)")
    sol, t = timed(hierdp.solve, p, "highs")
    v = sol.values[groups:].reshape(groups, size)
    ok = bool(np.all(np.diff(v, axis=1) >= -1e-9))  # an LP: chains hold to HiGHS's feasibility tolerance
    print(f"highs (direct matrices)             {t:8.2f} s {cpu()}  objective {sol.objective:,.2f}; every chain "
          f"non-decreasing: {ok}; batches {sol.stats['batches']}")
    assert ok and p.violations(sol.values) == []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--regions", type=int, default=3144)
    ap.add_argument("--sizes", type=int, default=1000)
    ap.add_argument("--pyomo-rows", type=int, default=100_000)
    ap.add_argument("--quick", action="store_true", help="300 x 100 chains, 10^4 Pyomo rows")
    args = ap.parse_args()
    if args.quick:
        args.regions, args.sizes, args.pyomo_rows = 300, 100, 10_000
    section_pose(args.regions, args.sizes, slice_rows=20_000)
    section_pyomo(args.pyomo_rows)
    section_solve(40 if args.quick else 200)


if __name__ == "__main__":
    main()
