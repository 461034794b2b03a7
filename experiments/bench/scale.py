"""A census-scale InfTDA release: serial against a 2-worker Dask LocalCluster (issue 12, item 5).

1. **Generate** a synthetic population of about 330 million persons over nation -> 52 states ->
   3,200 counties -> 85,000 tracts -> 8,000,000 blocks (``--scale`` multiplies every count below
   the states; the tests use a tiny one). Each level's units are spread over their parents with
   seeded Dirichlet shares (every parent gets at least one); block populations are Poisson with
   log-normal means, about a third of the blocks empty, as in a census. The geography (every
   block, empty or not: the public domain) goes to ``geo.parquet``; the persons - one row each,
   columns ``state, county, tract, block`` (int32 global ids) - are written in chunks of about
   ``--chunk-rows`` rows straight to ``persons/part-NNNNN.parquet``: never all in memory.
2. **Read and aggregate** the persons dataset with Dask on the cluster (one task per file, each
   file read in record batches; :func:`hierdp.scale.dataset.aggregate_parquet`) into a
   :class:`hierdp.scale.LevelTree` with the geography as its declared domain.
3. **Release** it with InfTDA (epsilon 1, delta 1e-8, seeded) twice, each checkpointing every
   level: serially, in a fresh process (its own peak memory), and on the cluster
   (``engine="dask"``, workers restarted first so their peak memory is the release's), where the
   workers write each level's partitions as Parquet parts.
4. **Print** per level: wall seconds of both runs, CPU seconds of the serial level, the Dask
   tasks' wall seconds (summed) and CPU seconds per worker (how the work was split: on free cores
   the level takes about the larger share); the peak memory of the serial process, of each worker
   and of this driver; and whether the two seeded releases are equal, node for node.

5. With ``--census-blocks N``: ``census_topdown`` (24-cell histograms, marginal strategy) over a
   synthetic spine of N blocks, serially and on the same cluster; per geolevel seconds, peak
   memory, and whether the seeded releases are equal (``--census-only`` skips 1-4).

Usage: ``python -m experiments.bench.scale [--scale 1.0] [--workers 2] [--out results/scale]
[--census-blocks 100000]``.
It needs about 12 GB of disk at full scale (the persons dataset compresses to a few GB; ``--keep``
keeps it) and runs on 2 cores / 24 GiB.
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing as mp
import pickle
import resource
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

LEVELS = ["state", "county", "tract", "block"]
FULL = {"state": 52, "county": 3_200, "tract": 85_000, "block": 8_000_000}
PLURAL = {"state": "states", "county": "counties", "tract": "tracts", "block": "blocks"}
PERSONS = 330_000_000
EPSILON, DELTA, SEED = 1.0, 1e-8, 2026


def peak_mib() -> float:
    """Peak resident memory of the calling process so far, in MiB: ``VmHWM`` of its own address
    space (``ru_maxrss`` is inherited through fork and exec on Linux, so a spawned worker would
    report at least its parent's peak)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# ---------------------------------------------------------------------------- 1. generation
def _spread(n_children: int, n_parents: int, rng: np.random.Generator) -> np.ndarray:
    """Parent index (sorted) of each of ``n_children`` units: one each, the rest by Dirichlet shares."""
    extra = rng.multinomial(n_children - n_parents, rng.dirichlet(np.full(n_parents, 2.0)))
    return np.repeat(np.arange(n_parents, dtype=np.int32), extra + 1)


def sizes_for(scale: float) -> dict[str, int]:
    """Level sizes at ``scale`` (every level at least as large as the one above)."""
    out, prev = {}, 1
    for name, full in FULL.items():
        n = full if name == "state" else max(prev, round(full * scale))
        out[name] = prev = n
    return out


def generate(out: Path, scale: float, chunk_rows: int, seed: int = SEED) -> dict[str, Any]:
    """Write ``geo.parquet`` and ``persons/`` (see the module docstring); returns figures."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    sizes = sizes_for(scale)
    county_state = _spread(sizes["county"], sizes["state"], rng)
    tract_county = _spread(sizes["tract"], sizes["county"], rng)
    block_tract = _spread(sizes["block"], sizes["tract"], rng)
    block = np.arange(sizes["block"], dtype=np.int32)
    tract = block_tract
    county = tract_county[tract]
    state = county_state[county]
    pq.write_table(pa.table({"state": state, "county": county, "tract": tract, "block": block}), out / "geo.parquet")
    # populations: log-normal means, a third of the blocks empty, Poisson counts summing to ~PERSONS * scale
    mean = rng.lognormal(0.0, 1.2, sizes["block"]) * (rng.random(sizes["block"]) > 1 / 3)
    lam = mean * (PERSONS * scale / mean.sum())
    pop = rng.poisson(lam).astype(np.int64)
    persons_dir = out / "persons"
    persons_dir.mkdir(parents=True, exist_ok=True)
    cum = np.cumsum(pop)
    bounds = np.searchsorted(cum, np.arange(chunk_rows, int(cum[-1]), chunk_rows), side="left") + 1
    lo, files = 0, 0
    for hi in np.unique(np.concatenate([bounds, [sizes["block"]]])):
        ids = np.repeat(block[lo:hi], pop[lo:hi])  # one row per person of blocks lo..hi-1
        pq.write_table(pa.table({"state": state[ids], "county": county[ids], "tract": tract[ids], "block": ids}),
                       persons_dir / f"part-{files:05d}.parquet")
        files += 1
        lo = hi
    return {"sizes": sizes, "persons": int(pop.sum()), "empty_blocks": int((pop == 0).sum()), "files": files,
            "seconds": time.perf_counter() - t0,
            "dataset_mib": sum(f.stat().st_size for f in persons_dir.glob("*.parquet")) / 2 ** 20}


# ---------------------------------------------------------------------------- 3. releases
def _levels_digest(levels: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> list[str]:
    return [hashlib.sha256(k.tobytes() + p.tobytes() + v.tobytes()).hexdigest() for k, p, v in levels]


def _serial_release(tree_path: str, result_path: str, checkpoint: str) -> None:
    """In a fresh process: load the tree, release serially (checkpointing, as the Dask run does),
    save the levels, timings and peak."""
    from hierdp.mechanisms import create

    with open(tree_path, "rb") as f:
        tree = pickle.load(f)
    base = peak_mib()
    t0 = time.perf_counter()
    rel = create("inftda", epsilon=EPSILON, delta=DELTA).release(tree, seed=SEED, checkpoint=checkpoint)
    seconds = time.perf_counter() - t0
    levels = [(lv.keys, lv.parent, lv.values) for lv in rel.levels]
    cpu = [float(st.get("cpu_s", 0.0)) for st in rel.solver_stats]
    with open(result_path, "wb") as f:
        pickle.dump({"levels": levels, "timings": list(rel.timings), "cpu": cpu, "seconds": seconds,
                     "peak_mib": peak_mib(),
                     "peak_before_mib": base, "released": [len(lv) for lv in rel.levels],
                     "consistent": rel.check_consistency() == []}, f)


def serial_release(tree: Any, work: Path, in_process: bool = False) -> dict[str, Any]:
    tree_path, result_path, checkpoint = work / "tree.pkl", work / "serial.pkl", work / "serial_checkpoint"
    with open(tree_path, "wb") as f:
        pickle.dump(tree, f, protocol=pickle.HIGHEST_PROTOCOL)
    if in_process:
        _serial_release(str(tree_path), str(result_path), str(checkpoint))
    else:
        proc = mp.get_context("spawn").Process(target=_serial_release,
                                               args=(str(tree_path), str(result_path), str(checkpoint)))
        proc.start()
        proc.join()
        if proc.exitcode != 0:
            raise RuntimeError(f"the serial release process failed (exit code {proc.exitcode})")
    with open(result_path, "rb") as f:
        out = pickle.load(f)
    tree_path.unlink()
    result_path.unlink()
    return out


def _warm_up() -> None:
    import hierdp.mechanisms
    import hierdp.scale  # noqa: F401


def _worker_peak() -> float:
    return peak_mib()


def dask_release(tree: Any, client: Any, checkpoint: Path, restart: bool = True) -> dict[str, Any]:
    from hierdp.mechanisms import create
    from hierdp.scale import DaskEngine

    if restart:
        client.restart()  # fresh worker processes: their peak memory is this release's
        client.run(_warm_up)  # imports are not the release's time
    mech = create("inftda", epsilon=EPSILON, delta=DELTA, engine=DaskEngine(client))
    t0 = time.perf_counter()
    rel = mech.release(tree, seed=SEED, checkpoint=checkpoint)
    seconds = time.perf_counter() - t0
    peaks = client.run(_worker_peak)
    return {"levels": [(lv.keys, lv.parent, lv.values) for lv in rel.levels], "timings": list(rel.timings),
            "seconds": seconds, "worker_peak_mib": peaks, "released": [len(lv) for lv in rel.levels],
            "partitions": [st.get("partitions", 1) for st in rel.solver_stats],
            # seconds the workers computed (expand + noise + solve of every partition), per level
            "work_s": [sum(float(st.get(k, 0.0)) for k in ("expand_s", "noise_s", "solve_s"))
                       for st in rel.solver_stats],
            # CPU seconds of each level's tasks, per worker (the split of the work)
            "cpu_by_worker": [dict(st.get("cpu_by_worker", {})) for st in rel.solver_stats],
            "consistent": rel.check_consistency() == [],
            "parquet_parts": sum(1 for _ in checkpoint.glob("level=*/*.parquet"))}


# ---------------------------------------------------------------------------- the run
def run(scale: float = 1.0, workers: int = 2, out: Path | None = None, chunk_rows: int = 10_000_000,
        client: Any = None, serial_in_process: bool = False, keep: bool = False) -> dict[str, Any]:
    """Generate, aggregate, release serially and on Dask, compare; returns every figure."""
    from hierdp.scale import LevelTree

    if out is None:
        from experiments.common import RESULTS

        out = RESULTS / "scale"
    out = Path(out)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    figures: dict[str, Any] = {"scale": scale}
    gen = generate(out, scale, chunk_rows)
    figures["generate"] = gen
    print(f"generated {gen['persons']:,} persons in {gen['files']} Parquet files ({gen['dataset_mib']:,.0f} MiB) over "
          + ", ".join(f"{v:,} {PLURAL[k]}" for k, v in gen["sizes"].items())
          + f" ({gen['empty_blocks']:,} empty blocks) in {gen['seconds']:.1f} s")
    own = client is None
    cluster = None
    if own:
        from distributed import Client

        from hierdp.scale.executors import local_cluster

        cluster = local_cluster(workers)  # the cluster engine="dask" makes for a release
        client = Client(cluster)
    try:
        t0 = time.perf_counter()
        geo = pd.read_parquet(out / "geo.parquet")
        tree = LevelTree.from_parquet(out / "persons", LEVELS, domain=geo, client=client)
        del geo
        figures["aggregate_s"] = time.perf_counter() - t0
        print(f"read and aggregated with Dask ({workers} workers) into {tree!r} in {figures['aggregate_s']:.1f} s; "
              f"driver peak so far {peak_mib():,.0f} MiB")
        serial = serial_release(tree, out, in_process=serial_in_process)
        dask = dask_release(tree, client, out / "dask_checkpoint", restart=own)
    finally:
        if own:
            client.close()
            cluster.close()
    equal = _levels_digest(serial["levels"]) == _levels_digest(dask["levels"])
    figures.update(serial={k: v for k, v in serial.items() if k != "levels"},
                   dask={k: v for k, v in dask.items() if k != "levels"}, equal=equal,
                   driver_peak_mib=peak_mib())
    rows = []
    for L, name in enumerate(["nation", *LEVELS]):
        per_worker = [*sorted(dask["cpu_by_worker"][L].values(), reverse=True), 0.0, 0.0]
        rows.append({"level": L, "name": name, "released": serial["released"][L],
                     "serial_s": serial["timings"][L], "serial_cpu_s": serial["cpu"][L],
                     "dask_s": dask["timings"][L], "dask_task_s": dask["work_s"][L],
                     "dask_cpu_w1": per_worker[0], "dask_cpu_w2": per_worker[1],
                     "dask_partitions": dask["partitions"][L]})
    table = pd.DataFrame(rows)
    print(f"\nInfTDA (epsilon 1, delta 1e-8, seed {SEED}), seconds per level:")
    print(table.to_string(index=False, float_format=lambda v: f"{v:,.2f}"))
    setup = dask["seconds"] - sum(dask["timings"])
    levels_serial, levels_dask = sum(serial["timings"]), sum(dask["timings"])
    print(f"total: serial {serial['seconds']:.1f} s, Dask {dask['seconds']:.1f} s ({setup:.1f} s of it sending the "
          f"tree to the workers and opening the checkpoint); levels {levels_serial:.1f} s serial vs "
          f"{levels_dask:.1f} s Dask ({levels_serial / max(levels_dask, 1e-9):.2f}x)")
    print(f"peak memory: serial process {serial['peak_mib']:,.0f} MiB (tree loaded: {serial['peak_before_mib']:,.0f} "
          f"MiB); Dask workers {', '.join(f'{v:,.0f}' for v in dask['worker_peak_mib'].values())} MiB; driver "
          f"{figures['driver_peak_mib']:,.0f} MiB")
    print(f"Dask wrote {dask['parquet_parts']} Parquet parts (checkpoint {out / 'dask_checkpoint'}); both releases "
          f"consistent: {serial['consistent'] and dask['consistent']}")
    print(f"seeded serial and Dask releases equal (every level's keys, parents, values): {equal}")
    table.to_csv(out / "levels.csv", index=False)
    if not keep:
        shutil.rmtree(out / "persons", ignore_errors=True)
    return figures


# ---------------------------------------------------------------------------- census_topdown
def census_data(blocks: int, seed: int = SEED) -> Any:
    """A spine of nation -> states -> counties -> tracts -> ``blocks`` blocks (the same Dirichlet
    spread as the persons above, at the census's proportions) with 24-cell histograms (2 x 3 x 4):
    log-normal block populations, a third of the blocks empty, Poisson cells."""
    from fractions import Fraction

    from hierdp.mechanisms.census import SpineHistograms
    from hierdp.spines import Spine, bypass

    rng = np.random.default_rng(seed)
    tracts = max(1, blocks * FULL["tract"] // FULL["block"])
    counties = max(1, tracts * FULL["county"] // FULL["tract"])
    states = min(counties, max(2, counties * FULL["state"] // FULL["county"]))
    county_state = _spread(counties, states, rng)
    tract_county = _spread(tracts, counties, rng)
    block_tract = _spread(blocks, tracts, rng)
    county = tract_county[block_tract]
    frame = pd.DataFrame({"state": county_state[county].astype(str), "county": county.astype(str),
                          "tract": block_tract.astype(str), "block": np.arange(blocks).astype(str)})
    levels = list(frame.columns)
    spine = bypass(Spine.from_frame(frame, levels, [Fraction(1, 5)] * 5, root="US"), privacy="zcdp")
    mean = rng.lognormal(0.0, 1.0, spine.n_blocks) * (rng.random(spine.n_blocks) > 1 / 3) * 40.0
    counts = rng.poisson(mean[:, None] / 24.0 * rng.dirichlet(np.ones(24), spine.n_blocks) * 24.0)
    return SpineHistograms(spine, counts)


def census_run(blocks: int, client: Any, restart: bool = True) -> dict[str, Any]:
    """census_topdown (rho 1, the total, one-way, two-way marginals and the detailed cells of 2 x 3 x
    4) serially in this process and on the Dask cluster: seconds and CPU per geolevel, peak memory,
    and whether the two seeded releases are equal."""
    from hierdp.mechanisms.census import CensusTopDown, QueryStrategy
    from hierdp.scale import DaskEngine

    data = census_data(blocks)
    strategy = QueryStrategy.marginals((2, 3, 4))
    print(f"\ncensus_topdown: {data.spine.n_blocks:,} blocks ({data.spine.n:,} geounits) x 24 cells, "
          f"{int(data.counts.sum()):,} persons")
    t0, c0 = time.perf_counter(), time.process_time()
    serial = CensusTopDown(rho=1.0, strategy=strategy).release(data, seed=SEED)
    serial_s, serial_cpu = time.perf_counter() - t0, time.process_time() - c0
    if restart:
        client.restart()
        client.run(_warm_up)
    t0 = time.perf_counter()
    dask = CensusTopDown(rho=1.0, strategy=strategy, engine=DaskEngine(client)).release(data, seed=SEED)
    dask_s = time.perf_counter() - t0
    peaks = client.run(_worker_peak)
    equal = bool(np.array_equal(serial.values, dask.values))
    rows = []
    for st_s, st_d in zip(serial.params["post_processing"], dask.params["post_processing"], strict=True):
        name = st_s["geolevel"]
        rows.append({"geolevel": name, "parents solved": st_s["parents"],
                     "serial s": serial.timings[f"{name}_noise"] + serial.timings[f"{name}_solve"],
                     "serial CPU s": serial.timings[f"{name}_cpu"],
                     "Dask tasks s": dask.timings[f"{name}_noise"] + dask.timings[f"{name}_solve"],
                     "Dask CPU s": dask.timings[f"{name}_cpu"],
                     "busiest worker CPU s": dask.timings.get(f"{name}_cpu_busiest_worker", 0.0),
                     "partitions": st_d.get("partitions", 1)})
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:,.2f}"))
    print(f"total: serial {serial_s:.1f} s ({serial_cpu:.1f} s CPU), Dask {dask_s:.1f} s; peak memory: this process "
          f"{peak_mib():,.0f} MiB, Dask workers {', '.join(f'{v:,.0f}' for v in peaks.values())} MiB")
    print(f"seeded serial and Dask census_topdown releases equal: {equal}")
    return {"blocks": blocks, "serial_s": serial_s, "serial_cpu_s": serial_cpu, "dask_s": dask_s, "equal": equal,
            "worker_peak_mib": peaks, "levels": rows}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of the census sizes (default 1: 330 M persons)")
    ap.add_argument("--workers", type=int, default=2, help="Dask workers (default 2)")
    ap.add_argument("--chunk-rows", type=int, default=10_000_000, help="persons per Parquet file")
    ap.add_argument("--out", type=Path, default=None, help="working folder (default results/scale)")
    ap.add_argument("--keep", action="store_true", help="keep the persons dataset")
    ap.add_argument("--census-blocks", type=int, default=0,
                    help="also release census_topdown over a synthetic spine of this many blocks, serial vs Dask")
    ap.add_argument("--census-only", action="store_true", help="only the census_topdown part")
    args = ap.parse_args(argv)
    if not 0 < args.scale <= 1:
        ap.error("--scale must be in (0, 1]")
    if not args.census_only:
        run(args.scale, args.workers, args.out, args.chunk_rows, keep=args.keep)
    if args.census_blocks > 0:
        from distributed import Client

        from hierdp.scale.executors import local_cluster

        cluster = local_cluster(args.workers)
        client = Client(cluster)
        try:
            census_run(args.census_blocks, client)
        finally:
            client.close()
            cluster.close()


if __name__ == "__main__":
    main()
