"""Benchmark: the PL 94-171-shaped Census TopDown (2,016 cells, the 2020 production strategy) on
spines of growing size, the structured per-parent solve against the dense one it replaced.

Run: ``python -m experiments.bench.census_pl94`` (default: 100, 1,000, 10,000 and 100,000 blocks;
``--blocks 100 1000`` for a quick run). Every release runs in its own process (so its peak memory
is its own), with a 6 GB address-space cap.

Data: :mod:`hierdp.datasets.pl94` (real state / county / ZIP geography of the ``zipcodes`` package,
synthetic blocks, persons, housing units and group quarters; ~42 persons per block, most of a block's
2,016 cells 0), spine US -> state -> county -> tract (ZIP) -> block group -> block with the
production geolevel proportions; strategy :func:`hierdp.mechanisms.census.pl94.pl94_strategy`
(``ProductionCandidate20210527US_mult8_add02_dsepJune3``), ρ = (542/339)², discrete Gaussian;
state totals invariant.

Prints:

1. per spine size, the structured path (``histogram_wls`` + ``histogram_cells``, the default):
   per geolevel seconds (noise and solve, wall), parents per plug-in, whole-release wall and CPU
   seconds, CPU milliseconds per block, peak memory of the process;
2. the baseline: the dense per-parent WLS (``K x K`` matrices per child; today's path before this
   change) at 2,016 cells on ``--dense-blocks`` blocks, next to the structured path on the same
   spine (the issue measured 214 s and 9.9 GB for 60 blocks: 3.6 s per block; 60 blocks do not
   fit the 6 GB cap of this shared machine);
3. equality of the releases, structured vs dense, on the PL94 shape with CENRACE recoded to its
   7 major groups (224 cells: the dense oracle's size), same seed: identical integer releases;
4. serial vs a 2-worker Dask LocalCluster when the mechanism runs on the scale engines (not yet
   on this branch: said so);
5. the extrapolation to the 8.1 M blocks of the US from the largest run's CPU per block, beside
   the DAS's production cluster: 2-100 EMR nodes of 96 vCPUs (r5.24xlarge; DAS wiki, "DAS EMR
   Configuration", github.com/uscensusbureau/DAS_2020_Redistricting_Production_Code/wiki).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from typing import Any

import numpy as np

from experiments.common import format_table

US_BLOCKS = 8_132_968  # 2020 tabulation blocks (50 states, DC and Puerto Rico)
NAMES = {"US": "US", "State": "state", "County": "county", "Tract": "tract", "Block_Group": "block_group",
         "Block": "block"}
MEMORY_CAP = 6 * 1024 ** 3


def _data(n_blocks: int, seed: int, major_races: bool = False) -> tuple[Any, Any]:
    from hierdp.datasets.pl94 import PL94_LEVELS, pl94_blocks, pl94_histograms, pl94_persons, pl94_units
    from hierdp.mechanisms.census import QueryStrategy, SpineHistograms
    from hierdp.mechanisms.census.pl94 import pl94_geolevel_proportions, pl94_strategy
    from hierdp.spines import Spine

    blocks = pl94_blocks(n_blocks, seed=seed)
    h = pl94_histograms(pl94_persons(blocks, pl94_units(blocks, seed=seed), seed=seed), n_blocks)
    props = pl94_geolevel_proportions()
    spine = Spine.from_frame(blocks, PL94_LEVELS, [props[k] for k in NAMES], root="US")
    S = pl94_strategy(NAMES)
    if major_races:  # CENRACE -> its 7 major groups (6 single races, two or more): 224 cells
        major = np.minimum(np.arange(63), 6)
        h7 = np.zeros((n_blocks, 8, 2, 2, 7), np.int64)
        np.add.at(h7, (slice(None), slice(None), slice(None), slice(None), major), h.reshape(-1, 8, 2, 2, 63))
        h = h7.reshape(n_blocks, -1)
        S = QueryStrategy((8, 2, 2, 7), dict(S.groups), dict(S.shares), recodes=S.recodes,
                          level_shares=S.level_shares)
    return SpineHistograms(spine, h), S


def _check(spine: Any, values: np.ndarray) -> None:
    """Independent checks of a release, level by level (one sparse sum per level, no dense copy):
    children sum to their parent in every cell, non-negative integers."""
    from scipy import sparse

    assert np.issubdtype(values.dtype, np.integer) and values.min() >= 0
    ptr = spine.level_ptr
    for lev in range(1, spine.n_levels):
        lo, hi, plo = int(ptr[lev]), int(ptr[lev + 1]), int(ptr[lev - 1])
        par = spine.parent[lo:hi] - plo
        agg = sparse.csr_matrix((np.ones(hi - lo, np.int64), (par, np.arange(hi - lo))), shape=(lo - plo, hi - lo))
        assert np.array_equal(agg @ values[lo:hi], values[plo:lo]), spine.level_names[lev]


def _dense_any_size() -> Any:
    from hierdp.solvers.histogram_dense import DenseHistogramWLSSolver

    class DenseAnySize(DenseHistogramWLSSolver):
        """The dense oracle without its cell limit: the baseline, i.e. the path before this change."""

        name = "histogram_wls_dense_any_size"

        def unsupported(self, problem: Any) -> list[str]:
            return [r for r in super().unsupported(problem) if "cells:" not in r]

    return DenseAnySize()


def one(n_blocks: int, path: str, seed: int, major_races: bool, save: str | None) -> dict[str, Any]:
    """One release in this process; returns its figures."""
    from hierdp.mechanisms.census import CensusTopDown
    from hierdp.mechanisms.census.pl94 import PL94_RHO

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
    t0 = time.perf_counter()
    data, S = _data(n_blocks, seed, major_races)
    t_data = time.perf_counter() - t0
    if path == "structured":
        mech = CensusTopDown(rho=float(PL94_RHO), strategy=S, invariant_levels=["US", "state"], batch_children=2048)
    else:  # the dense WLS and the cell rounder, as before this change
        mech = CensusTopDown(rho=float(PL94_RHO), strategy=S, invariant_levels=["US", "state"], fast_path=False,
                             solver=_dense_any_size(), rounder=["histogram_cells", "highs"], batch_children=512)
    w0, c0 = time.perf_counter(), time.process_time()
    try:
        rel = mech.release(data, seed=seed)
    except MemoryError:
        return {"blocks": n_blocks, "path": path, "error": f"out of memory at the {MEMORY_CAP / 1024 ** 3:.0f} GB cap"}
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # before the checks below
    _check(data.spine, rel.values)
    if save:
        np.save(save, rel.values)
    levels = [{"geolevel": st["geolevel"], "parents": st["parents"],
               "noise_s": rel.timings.get(f"{st['geolevel']}_noise", 0.0),
               "solve_s": rel.timings.get(f"{st['geolevel']}_solve", 0.0),
               "WLS by": ", ".join(f"{k[4:]}={v}" for k, v in st.items()
                                   if k.startswith("wls_") and k not in ("wls_fast", "wls_general") and v),
               "rounding by": ", ".join(f"{k[9:]}={v}" for k, v in st.items()
                                        if k.startswith("rounding_") and k not in ("rounding_fast", "rounding_general")
                                        and v)}
              for st in rel.params["post_processing"]]
    return {"blocks": n_blocks, "path": path, "geounits": int(data.spine.n), "cells": int(S.n_cells),
            "data_s": t_data, "wall_s": wall, "cpu_s": cpu, "peak_mib": peak, "levels": levels}


def _run(n: int, path: str, seed: int, major: bool = False, save: str | None = None) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "experiments.bench.census_pl94", "--one", str(n), "--path", path, "--seed", str(seed)]
    if major:
        cmd.append("--major-races")
    if save:
        cmd += ["--save", save]
    out = subprocess.run(cmd, capture_output=True, text=True)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode or not lines:
        return {"blocks": n, "path": path, "error": (out.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(lines[-1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, nargs="+", default=[100, 1000, 10_000, 100_000])
    ap.add_argument("--dense-blocks", type=int, default=12, help="blocks of the dense baseline at 2,016 cells")
    ap.add_argument("--equal-blocks", type=int, nargs="+", default=[60, 300],
                    help="blocks of the structured-vs-dense equality runs at 224 cells")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--path", default="structured", help=argparse.SUPPRESS)
    ap.add_argument("--major-races", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--save", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one is not None:
        print(json.dumps(one(args.one, args.path, args.seed, args.major_races, args.save)))
        return
    import pandas as pd

    print("1. PL94-shaped release (2,016 cells, production strategy), structured per-parent solve; each run its "
          "own process (6 GB cap)")
    runs = []
    for n in args.blocks:
        r = _run(n, "structured", args.seed)
        runs.append(r)
        if "error" in r:
            print(f"\n{n:,} blocks: {r['error']}")
            continue
        print(f"\n{n:,} blocks, {r['geounits']:,} geounits: {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU "
              f"({1000 * r['cpu_s'] / n:.2f} ms CPU per block), peak memory {r['peak_mib']:,.0f} MiB "
              f"(data built in {r['data_s']:.1f} s)")
        print(format_table(pd.DataFrame(r["levels"]), "{:,.2f}"))
    print(f"\n2. Baseline: the dense per-parent WLS at 2,016 cells on {args.dense_blocks} blocks (the issue: 214 s, "
          "9.9 GB for 60 blocks = 3.6 s per block)")
    rows = []
    for path in ("dense", "structured"):
        r = _run(args.dense_blocks, path, args.seed)
        rows.append({"path": path, **({"error": r["error"]} if "error" in r else
                                      {"wall_s": r["wall_s"], "cpu_s": r["cpu_s"], "cpu_s_per_block": r["cpu_s"] /
                                       args.dense_blocks, "peak_mib": r["peak_mib"]})})
    print(format_table(pd.DataFrame(rows), "{:,.3f}"))
    ok = [r for r in rows if "cpu_s_per_block" in r]
    if len(ok) == 2:
        print(f"structured is {ok[0]['cpu_s_per_block'] / ok[1]['cpu_s_per_block']:,.0f}x cheaper per block (CPU); "
              f"vs the issue's 3.6 s per block: {3.6 / ok[1]['cpu_s_per_block']:,.0f}x")
    at60 = [r for r in runs if r.get("blocks") == 60] or [_run(60, "structured", args.seed)]
    if "error" not in at60[0]:
        print(f"structured at 60 blocks: {at60[0]['cpu_s'] / 60:.4f} s CPU per block "
              f"({at60[0]['wall_s'] / 60:.4f} s wall), {3.6 / (at60[0]['cpu_s'] / 60):,.0f}x below 3.6 s")
    print("\n3. Equality, structured vs dense, PL94 shape with CENRACE recoded to 7 major groups (224 cells), same seed")
    rows = []
    for n in args.equal_blocks:
        a = _run(n, "structured", args.seed, True, "/tmp/census_pl94_structured.npy")
        b = _run(n, "dense", args.seed, True, "/tmp/census_pl94_dense.npy")
        if "error" in a or "error" in b:
            rows.append({"blocks": n, "error": a.get("error") or b.get("error")})
            continue
        va, vb = np.load("/tmp/census_pl94_structured.npy"), np.load("/tmp/census_pl94_dense.npy")
        rows.append({"blocks": n, "cells": va.size, "differing cells": int((va != vb).sum()),
                     "identical": bool(np.array_equal(va, vb)), "structured_cpu_s": a["cpu_s"], "dense_cpu_s": b["cpu_s"]})
    print(format_table(pd.DataFrame(rows), "{:,.2f}"))
    print("\n4. Serial vs a 2-worker Dask LocalCluster: census_topdown does not run on the scale engines on this branch "
          "(engineer en's TopDown engine over histogram nodes); not measured")
    big = [r for r in runs if "error" not in r]
    if big:
        r = max(big, key=lambda r: r["blocks"])
        per_block = r["cpu_s"] / r["blocks"]
        total = per_block * US_BLOCKS
        print(f"\n5. Extrapolation to the US ({US_BLOCKS:,} blocks) from {r['blocks']:,} blocks: {per_block * 1000:.2f} ms "
              f"CPU per block -> {total / 3600:,.1f} CPU hours; on this machine's 2 cores ~{total / 2 / 3600:,.1f} h "
              "(memory aside); spread over the DAS's production cluster (2-100 EMR nodes of 96 vCPUs, parents of a "
              "geolevel being independent):")
        print(format_table(pd.DataFrame([{"nodes": k, "vCPUs": 96 * k, "hours": total / (96 * k) / 3600}
                                         for k in (2, 10, 25, 50, 100)]), "{:,.3f}"))


if __name__ == "__main__":
    main()
