"""Benchmark: the PL 94-171-shaped Census TopDown (2,016 cells, the 2020 production strategy) on
spines of growing size, the structured per-parent solve against the dense one it replaced.

Run: ``python -m experiments.bench.census_pl94`` (default: 100, 1,000, 10,000 and 100,000 blocks;
``--blocks 100 1000 --dask-blocks 1000`` for a quick run). Every release runs in its own process
(so its peak memory is its own), with a 6 GB address-space cap (each Dask worker inherits it).

Data: :mod:`hierdp.datasets.pl94` (real state / county / ZIP geography of the ``zipcodes`` package,
synthetic blocks, persons, housing units and group quarters; ~42 persons per block, most of a block's
2,016 cells 0), spine US -> state -> county -> tract (ZIP) -> block group -> block with the
production geolevel proportions; strategy :func:`hierdp.mechanisms.census.pl94.pl94_strategy`
(``ProductionCandidate20210527US_mult8_add02_dsepJune3``), ρ = (542/339)², discrete Gaussian;
state totals invariant.

Prints:

1. per spine size, the structured path (``histogram_wls`` + ``histogram_cells``, the default):
   per geolevel wall seconds (start to end), CPU seconds, noise and solve seconds, parents per
   plug-in; whole-release wall and CPU seconds, CPU milliseconds per block, peak memory of the
   process;
2. the baseline: the dense per-parent WLS (``K x K`` matrices per child; today's path before this
   change) at 2,016 cells on ``--dense-blocks`` blocks, next to the structured path on the same
   spine (the issue measured 214 s and 9.9 GB for 60 blocks: 3.6 s per block; 60 blocks do not
   fit the 6 GB cap of this shared machine);
3. equality of the releases, structured vs dense, on the PL94 shape with CENRACE recoded to its
   7 major groups (224 cells: the dense oracle's size), same seed: identical integer releases;
4. serial vs a Dask LocalCluster (``--workers`` single-threaded worker processes, default 2, with
   ``--worker-memory`` each, default 2 GiB; hierdp's :func:`hierdp.scale.executors.local_cluster`)
   on ``--dask-blocks`` blocks (default 1,000 and 10,000; none: skipped): the structured release
   of 1. with the same data and seed, each run in its own process (the Dask run's being the
   driver); per geolevel wall seconds (start to end) and CPU seconds of its chunks (all workers',
   and the busiest worker's), the whole releases' wall, the CPU of the serial process, of the
   driver and of each worker process, the peak memory of each of them, and whether the two
   releases are identical (``np.array_equal`` of the integer values);
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
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from experiments.bench.scale import _warm_up, peak_mib
from experiments.common import format_table

US_BLOCKS = 8_132_968  # 2020 tabulation blocks (50 states, DC and Puerto Rico)
NAMES = {"US": "US", "State": "state", "County": "county", "Tract": "tract", "Block_Group": "block_group",
         "Block": "block"}
MEMORY_CAP = 6 * 1024 ** 3
WORKER_MEMORY = "2GiB"  # per Dask worker: with the driver's data, within the 6 GB a run may hold here


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


def _process_cpu_s() -> float:
    """CPU seconds (user + system, every thread) of the calling process so far: run on each Dask
    worker, before and after a release."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def one(n_blocks: int, path: str, seed: int, major_races: bool, save: str | None, engine: str = "serial",
        workers: int = 2, worker_memory: str = WORKER_MEMORY) -> dict[str, Any]:
    """One release in this process (``engine="dask"``: on a LocalCluster of ``workers`` processes
    started here, this process being the driver); returns its figures."""
    from hierdp.mechanisms.census import CensusTopDown
    from hierdp.mechanisms.census.pl94 import PL94_RHO

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))  # the Dask workers inherit it too
    t0 = time.perf_counter()
    data, S = _data(n_blocks, seed, major_races)
    t_data = time.perf_counter() - t0
    client = cluster = None
    dask_figures: dict[str, Any] = {}
    if engine == "dask":
        from distributed import Client

        from hierdp.scale.executors import local_cluster

        cluster = local_cluster(workers, memory_limit=worker_memory)  # the cluster engine="dask" makes
        client = Client(cluster)
        client.run(_warm_up)  # imports are not the release's time
        cpu_before = client.run(_process_cpu_s)
    if path == "structured":
        mech = CensusTopDown(rho=float(PL94_RHO), strategy=S, invariant_levels=["US", "state"], batch_children=2048,
                             engine=engine, executor=client)
    else:  # the dense WLS and the cell rounder, as before this change
        mech = CensusTopDown(rho=float(PL94_RHO), strategy=S, invariant_levels=["US", "state"], fast_path=False,
                             solver=_dense_any_size(), rounder=["histogram_cells", "highs"], batch_children=512,
                             engine=engine, executor=client)
    w0, c0 = time.perf_counter(), time.process_time()
    try:
        rel = mech.release(data, seed=seed)
    except MemoryError:
        return {"blocks": n_blocks, "path": path, "error": f"out of memory at the {MEMORY_CAP / 1024 ** 3:.0f} GB cap"}
    finally:
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        if client is not None and cluster is not None:
            try:
                cpu_after = client.run(_process_cpu_s)
                dask_figures = {"worker_cpu_s": {w: cpu_after[w] - cpu_before.get(w, 0.0) for w in cpu_after},
                                "worker_peak_mib": client.run(peak_mib)}
            finally:
                client.close()
                cluster.close()
    peak = peak_mib()  # before the checks below
    _check(data.spine, rel.values)
    if save:
        np.save(save, rel.values)
    levels = [{"geolevel": st["geolevel"], "parents": st["parents"],
               "wall_s": rel.timings.get(f"{st['geolevel']}_wall", 0.0),
               "cpu_s": rel.timings.get(f"{st['geolevel']}_cpu", 0.0),
               "busiest_worker_cpu_s": rel.timings.get(f"{st['geolevel']}_cpu_busiest_worker", 0.0),
               "partitions": st.get("partitions", 1),
               "noise_s": rel.timings.get(f"{st['geolevel']}_noise", 0.0),
               "solve_s": rel.timings.get(f"{st['geolevel']}_solve", 0.0),
               "WLS by": ", ".join(f"{k[4:]}={v}" for k, v in st.items()
                                   if k.startswith("wls_") and k not in ("wls_fast", "wls_general") and v),
               "rounding by": ", ".join(f"{k[9:]}={v}" for k, v in st.items()
                                        if k.startswith("rounding_") and k not in ("rounding_fast", "rounding_general")
                                        and v)}
              for st in rel.params["post_processing"]]
    return {"blocks": n_blocks, "path": path, "engine": engine, "geounits": int(data.spine.n), "cells": int(S.n_cells),
            "data_s": t_data, "wall_s": wall, "cpu_s": cpu, "peak_mib": peak, "levels": levels, **dask_figures}


def _run(n: int, path: str, seed: int, major: bool = False, save: str | None = None, engine: str = "serial",
         workers: int = 2, worker_memory: str = WORKER_MEMORY) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "experiments.bench.census_pl94", "--one", str(n), "--path", path, "--seed", str(seed)]
    if major:
        cmd.append("--major-races")
    if save:
        cmd += ["--save", save]
    if engine != "serial":
        cmd += ["--engine", engine, "--workers", str(workers), "--worker-memory", worker_memory]
    out = subprocess.run(cmd, capture_output=True, text=True)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode or not lines:
        return {"blocks": n, "path": path, "error": (out.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(lines[-1])


def dask_section(sizes: list[int], seed: int, workers: int = 2, worker_memory: str = WORKER_MEMORY,
                 out: Path | None = None) -> list[dict[str, Any]]:
    """Section 4: per size, the structured release serially and on a LocalCluster of ``workers``
    single-threaded processes (``worker_memory`` each), each run in its own process, same data and
    seed; prints per geolevel wall and CPU seconds, the whole releases' wall, the driver's and the
    workers' CPU, the peak memory of every process, and whether the two integer releases are equal.
    The releases are saved in ``out`` (a temporary folder if ``None``); returns the figures."""
    import pandas as pd

    print(f"\n4. Serial vs a {workers}-worker Dask LocalCluster (single-threaded worker processes, {worker_memory} "
          "each; each run its own process, the Dask run's process being the driver), same data and seed as 1.")
    figures = []
    with tempfile.TemporaryDirectory(prefix="census_pl94_") as tmp:
        folder = Path(out) if out is not None else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for n in sizes:
            paths = {e: str(folder / f"{e}_{n}.npy") for e in ("serial", "dask")}
            s = _run(n, "structured", seed, save=paths["serial"])
            d = _run(n, "structured", seed, save=paths["dask"], engine="dask", workers=workers,
                     worker_memory=worker_memory)
            if "error" in s or "error" in d:
                print(f"\n{n:,} blocks: {s.get('error') or d.get('error')}")
                figures.append({"blocks": n, "error": s.get("error") or d.get("error")})
                continue
            vs, vd = np.load(paths["serial"]), np.load(paths["dask"])
            identical = bool(vs.shape == vd.shape and np.array_equal(vs, vd))
            differing = int((vs != vd).sum()) if vs.shape == vd.shape else vs.size
            del vs, vd
            worker_cpu, worker_peak = list(d["worker_cpu_s"].values()), list(d["worker_peak_mib"].values())
            print(f"\n{n:,} blocks, {s['geounits']:,} geounits x {s['cells']:,} cells, per geolevel (wall: the "
                  "geolevel start to end; CPU: its chunks', all workers'; busiest: the worker with the most):")
            rows = [{"geolevel": a["geolevel"], "parents": a["parents"], "serial wall s": a["wall_s"],
                     "serial CPU s": a["cpu_s"], "Dask wall s": b["wall_s"], "Dask CPU s": b["cpu_s"],
                     "busiest worker CPU s": b["busiest_worker_cpu_s"], "Dask partitions": b["partitions"]}
                    for a, b in zip(s["levels"], d["levels"], strict=True)]
            print(format_table(pd.DataFrame(rows), "{:,.2f}"))
            print(f"serial: {s['wall_s']:.1f} s wall, {s['cpu_s']:.1f} s CPU, peak {s['peak_mib']:,.0f} MiB")
            print(f"Dask: {d['wall_s']:.1f} s wall, driver {d['cpu_s']:.1f} s CPU, workers "
                  f"{' + '.join(f'{c:.1f}' for c in worker_cpu)} s CPU (whole processes: tasks, transfers, heartbeats); "
                  f"peak driver {d['peak_mib']:,.0f} MiB, workers {', '.join(f'{m:,.0f}' for m in worker_peak)} MiB")
            print(f"serial and Dask releases identical (np.array_equal of the {s['geounits']:,} x {s['cells']:,} "
                  f"integer values): {identical}" + ("" if identical else f" ({differing:,} values differ)"))
            figures.append({"blocks": n, "identical": identical, "differing": differing, "serial": s, "dask": d})
    return figures


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, nargs="+", default=[100, 1000, 10_000, 100_000])
    ap.add_argument("--dense-blocks", type=int, default=12, help="blocks of the dense baseline at 2,016 cells")
    ap.add_argument("--equal-blocks", type=int, nargs="+", default=[60, 300],
                    help="blocks of the structured-vs-dense equality runs at 224 cells")
    ap.add_argument("--dask-blocks", type=int, nargs="*", default=[1000, 10_000],
                    help="blocks of the serial-vs-Dask runs (none: skip them)")
    ap.add_argument("--workers", type=int, default=2, help="Dask workers (default 2)")
    ap.add_argument("--worker-memory", default=WORKER_MEMORY, help=f"memory limit per Dask worker ({WORKER_MEMORY})")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--engine", default="serial", choices=["serial", "dask"], help=argparse.SUPPRESS)
    ap.add_argument("--path", default="structured", help=argparse.SUPPRESS)
    ap.add_argument("--major-races", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--save", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one is not None:
        print(json.dumps(one(args.one, args.path, args.seed, args.major_races, args.save, args.engine, args.workers,
                             args.worker_memory)))
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
        print(format_table(pd.DataFrame(r["levels"]).drop(columns=["busiest_worker_cpu_s", "partitions"]), "{:,.2f}"))
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
    tmp = tempfile.TemporaryDirectory(prefix="census_pl94_")
    for n in args.equal_blocks:
        sa, sb = f"{tmp.name}/structured.npy", f"{tmp.name}/dense.npy"
        a = _run(n, "structured", args.seed, True, sa)
        b = _run(n, "dense", args.seed, True, sb)
        if "error" in a or "error" in b:
            rows.append({"blocks": n, "error": a.get("error") or b.get("error")})
            continue
        va, vb = np.load(sa), np.load(sb)
        rows.append({"blocks": n, "cells": va.size, "differing cells": int((va != vb).sum()),
                     "identical": bool(np.array_equal(va, vb)), "structured_cpu_s": a["cpu_s"], "dense_cpu_s": b["cpu_s"]})
    tmp.cleanup()
    print(format_table(pd.DataFrame(rows), "{:,.2f}"))
    if args.dask_blocks:
        dask_section(args.dask_blocks, args.seed, args.workers, args.worker_memory)
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
